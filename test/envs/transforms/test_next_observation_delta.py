import doctest

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import NextObservationDelta
from torchrl.envs.transforms import _next_observation_delta as module
from torchrl.testing import CountingEnv


def transition():
    return TensorDict({
        "observation": torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
        ("next", "delta", "observation"): torch.tensor([[0.5, -0.25], [1.0, 0.125]], dtype=torch.float16),
        ("next", "reward"): torch.zeros(2, 1),
    }, batch_size=[2])


class TestNextObservationDelta(TransformContract):
    full_transitions = True

    def make_transform(self):
        return NextObservationDelta(["observation"])

    def test_env_writes_deltas(self):
        env = TransformedEnv(PendulumEnv(seed=0), NextObservationDelta(["observation"]))
        data = env.rollout(4)
        delta = data["next", "delta", "observation"]
        assert delta.dtype == torch.float16 and delta.shape == data["observation"].shape
        expected = (data["next", "observation"] - data["observation"]).half()
        torch.testing.assert_close(delta, expected)

    def test_inferred_keys_skip_integers(self):
        t = NextObservationDelta()
        assert t.in_keys == []  # no env: nothing to infer
        env = TransformedEnv(PendulumEnv(seed=0), t)
        assert set(t.in_keys) >= {"observation", "th", "thdot"}
        t2 = NextObservationDelta()
        TransformedEnv(CountingEnv(), t2)  # int32 observation: excluded
        assert t2.in_keys == []
        t3 = NextObservationDelta(excluded_dtypes=(torch.float32,))
        TransformedEnv(PendulumEnv(seed=0), t3)
        assert t3.in_keys == []
        assert ("next", "delta", "th") in env.rollout(2).keys(True, True)

    def test_rb_known_answer(self):
        out = NextObservationDelta(["observation"])(transition())
        assert out["next", "observation"].dtype == torch.float32
        assert out["next", "observation"].tolist() == [[1.5, 1.75], [4.0, 4.125]]
        assert "delta" not in out["next"]

    def test_rb_restore_dtype_and_keep_delta(self):
        t = NextObservationDelta(["observation"], restore_dtype=torch.float64, drop_delta=False)
        out = t(transition())
        assert out["next", "observation"].dtype == torch.float64
        assert out["next", "observation"].tolist() == [[1.5, 1.75], [4.0, 4.125]]
        assert ("next", "delta", "observation") in out.keys(True, True)

    def test_rb_missing_entries_pass(self):
        data = transition().exclude(("next", "delta", "observation"))
        out = NextObservationDelta(["observation", "pixels"])(data)
        assert ("next", "observation") not in out.keys(True, True)

    def test_round_trip(self):
        t = NextObservationDelta()  # keys inferred from the env; its clone keeps them on the buffer
        env = TransformedEnv(PendulumEnv(seed=0), t)
        data = env.rollout(6, break_when_any_done=False)
        rb = ReplayBuffer(storage=LazyTensorStorage(6), transform=t.clone(), batch_size=6)
        rb.extend(data.exclude(("next", "observation")))
        sample = rb[:]
        torch.testing.assert_close(sample["next", "observation"], data["next", "observation"], atol=2e-3, rtol=1e-3)
        assert ("next", "delta") not in sample.keys(True)

    def test_nested_keys(self):
        data = TensorDict({
            ("agents", "pos"): torch.ones(2, 3),
            ("next", "delta", "agents", "pos"): torch.full((2, 3), 0.5, dtype=torch.bfloat16),
        }, [2])
        out = NextObservationDelta([("agents", "pos")], delta_dtype=torch.bfloat16)(data)
        assert out["next", "agents", "pos"].tolist() == [[1.5] * 3] * 2
        assert "delta" not in out["next"]

    def test_bfloat16_env(self):
        env = TransformedEnv(PendulumEnv(seed=0), NextObservationDelta(["th"], delta_dtype=torch.bfloat16))
        check_env_specs(env, seed=0)
        assert env.rollout(2)["next", "delta", "th"].dtype == torch.bfloat16

    def test_fake_tensordict(self):
        env = TransformedEnv(PendulumEnv(seed=0), NextObservationDelta(["observation"]))
        fake = env.fake_tensordict()
        assert fake["next", "delta", "observation"].dtype == torch.float16
        assert fake["next", "delta", "observation"].shape == fake["next", "observation"].shape

    def test_bad_arguments(self):
        with pytest.raises(ValueError, match="delta_dtype must be a floating-point dtype, got torch.int32"):
            NextObservationDelta(["observation"], delta_dtype=torch.int32)
        with pytest.raises(ValueError, match="restore_dtype must be a torch.dtype or 'root', got 'leaf'"):
            NextObservationDelta(["observation"], restore_dtype="leaf")


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
