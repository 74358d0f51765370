"""``torchrl.testing`` helpers: device lists, ``dtype_fixture``, ``retry``, ``rand_reset``."""
from __future__ import annotations

import pytest
import torch

from torchrl.testing import (
    CountingEnv,
    MultiKeyCountingEnv,
    NestedCountingEnv,
    dtype_fixture,  # noqa: F401  (used as a fixture below)
    get_available_devices,
    get_default_devices,
    rand_reset,
    retry,
)


class TestDevices:
    def test_available_devices_start_with_cpu_then_every_cuda_device(self):
        devices = get_available_devices()
        assert devices[0] == torch.device("cpu")
        assert devices[1:] == [torch.device(f"cuda:{i}") for i in range(torch.cuda.device_count())]
        assert all(isinstance(d, torch.device) for d in devices)

    def test_default_devices_is_one_preferred_device(self):
        expected = torch.device("cuda:0") if torch.cuda.is_available() else torch.device("cpu")
        assert get_default_devices() == [expected]


class TestDtypeFixture:
    def test_default_dtype_is_double_inside_the_test(self, dtype_fixture):
        assert dtype_fixture == torch.float32
        assert torch.get_default_dtype() == torch.float64
        assert torch.zeros(1).dtype == torch.float64

    def test_previous_default_is_restored_after_the_test(self):
        gen = dtype_fixture.__wrapped__()
        assert next(gen) == torch.float32
        assert torch.get_default_dtype() == torch.float64
        with pytest.raises(StopIteration):
            next(gen)
        assert torch.get_default_dtype() == torch.float32


class TestRetry:
    def test_returns_once_an_attempt_succeeds(self):
        calls = []

        @retry(ValueError, tries=3, delay=0)
        def flaky(x):
            calls.append(x)
            if len(calls) < 3:
                raise ValueError("not yet")
            return x * 2

        assert flaky(21) == 42
        assert calls == [21, 21, 21]

    def test_reraises_after_the_last_attempt(self):
        calls = []

        @retry(ValueError, tries=2, delay=0)
        def always_fails():
            calls.append(1)
            raise ValueError("boom")

        with pytest.raises(ValueError, match="boom"):
            always_fails()
        assert len(calls) == 2

    def test_skips_after_retries_when_asked(self):
        @retry(ValueError, tries=2, delay=0, skip_after_retries=True)
        def always_fails():
            raise ValueError("flaky service")

        with pytest.raises(pytest.skip.Exception, match="failed 2 times with ValueError: flaky service"):
            always_fails()

    def test_other_exceptions_are_not_retried(self):
        calls = []

        @retry(ValueError, tries=5, delay=0)
        def wrong_kind():
            calls.append(1)
            raise KeyError("k")

        with pytest.raises(KeyError):
            wrong_kind()
        assert calls == [1]

    def test_waits_delay_seconds_between_attempts(self, monkeypatch):
        sleeps = []
        monkeypatch.setattr("torchrl.testing._helpers.time.sleep", sleeps.append)

        @retry(RuntimeError, tries=3, delay=7)
        def always_fails():
            raise RuntimeError("x")

        with pytest.raises(RuntimeError):
            always_fails()
        assert sleeps == [7, 7]

    def test_tries_must_be_positive(self):
        with pytest.raises(ValueError, match="tries must be >= 1, got 0"):
            retry(ValueError, tries=0)

    def test_keeps_the_function_name(self):
        @retry(ValueError, delay=0)
        def named():
            return 1

        assert named.__name__ == "named"


class TestRandReset:
    @pytest.mark.parametrize(
        "env, shapes",
        [
            (CountingEnv(batch_size=[4]), {"_reset": (4, 1)}),
            (NestedCountingEnv(batch_size=[2], has_root_done=True), {"_reset": (2, 1), ("data", "_reset"): (2, 3, 1)}),
            (
                MultiKeyCountingEnv(batch_size=[5]),
                {"_reset": (5, 1), ("nested_1", "_reset"): (5, 3, 1), ("nested_2", "_reset"): (5, 2, 1)},
            ),
        ],
    )
    def test_one_mask_per_done_group_with_a_true_entry(self, env, shapes):
        torch.manual_seed(0)
        for _ in range(20):
            masks = rand_reset(env)
            assert masks.batch_size == env.batch_size
            assert set(masks.keys(True, True)) == set(shapes)
            for key, shape in shapes.items():
                assert masks[key].shape == shape
                assert masks[key].dtype == torch.bool
                assert masks[key].any()

    def test_masks_are_random(self):
        torch.manual_seed(0)
        env = CountingEnv(batch_size=[16])
        draws = {tuple(rand_reset(env)["_reset"].view(-1).tolist()) for _ in range(10)}
        assert len(draws) > 1

    def test_masks_are_accepted_by_reset_and_reset_only_masked_envs(self):
        torch.manual_seed(1)
        env = CountingEnv(batch_size=[8], max_steps=100)
        td = env.reset()
        for _ in range(3):
            td["action"] = torch.ones(8, 1, dtype=torch.int8)
            td = env.step_mdp(env.step(td))
        masks = rand_reset(env)
        mask = masks["_reset"].clone()
        assert 0 < mask.sum() < 8
        out = env.reset(td.update(masks))
        expected = torch.where(mask, 0, 3)
        assert out["observation"].tolist() == expected.tolist()
        assert env.count.tolist() == expected.tolist()
