import doctest
import math

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import NextStateReconstructor
from torchrl.envs.transforms import _next_state_reconstructor as module
from torchrl.testing import CountingEnv

nan = float("nan")


def batch():
    # the example of TorchRL's docs: two trajectories of 4 steps, the first cut by a done at row 2
    return TensorDict({
        "observation": torch.arange(8, dtype=torch.float32).view(8, 1),
        ("next", "reward"): torch.zeros(8, 1),
        ("next", "done"): torch.tensor([[False]] * 2 + [[True]] + [[False]] * 5),
        ("collector", "traj_ids"): torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]),
    }, batch_size=[8])


def as_list(t):
    return [None if math.isnan(v) else v for v in t.reshape(-1).tolist()]


class TestNextStateReconstructor(TransformContract):
    full_transitions = True

    def make_transform(self):
        return NextStateReconstructor(["observation"], traj_key=None)

    def test_known_answer(self):
        # TorchRL 0.14.1 gives the same on this batch
        out = NextStateReconstructor()(batch())
        assert as_list(out["next", "observation"]) == [1, 2, None, None, 5, 6, 7, None]

    def test_checks_disabled(self):
        out = NextStateReconstructor(traj_key=None, done_key=None)(batch())
        assert as_list(out["next", "observation"]) == [1, 2, 3, 4, 5, 6, 7, None]

    def test_step_count_check(self):
        data = batch()
        data["step_count"] = torch.tensor([0, 1, 2, 4, 0, 1, 2, 3]).unsqueeze(-1)
        out = NextStateReconstructor(traj_key=None, done_key=None, step_count_key="step_count")(data)
        assert as_list(out["next", "observation"]) == [1, 2, None, None, 5, 6, 7, None]

    def test_strict_missing_markers(self):
        with pytest.raises(KeyError, match="step-count key 'step_count' is not present"):
            NextStateReconstructor(step_count_key="step_count")(batch())
        with pytest.raises(KeyError, match=r"trajectory key \('collector', 'traj_ids'\) is not present"):
            NextStateReconstructor()(batch().exclude(("collector", "traj_ids")))
        out = NextStateReconstructor(step_count_key="step_count", strict=False)(batch())
        assert as_list(out["next", "observation"]) == [1, 2, None, None, 5, 6, 7, None]

    def test_integer_entries_need_a_fill_value(self):
        data = batch()
        data["observation"] = data["observation"].long()
        with pytest.raises(TypeError, match="'observation' has non-floating dtype torch.int64"):
            NextStateReconstructor()(data)
        out = NextStateReconstructor(fill_value=-1)(data)
        assert out["next", "observation"].dtype == torch.int64
        assert out["next", "observation"].reshape(-1).tolist() == [1, 2, -1, -1, 5, 6, 7, -1]

    def test_fill_value_and_dtype(self):
        data = batch()
        data["observation"] = data["observation"].half()
        out = NextStateReconstructor(fill_value=0.5)(data)
        assert out["next", "observation"].dtype == torch.float16
        assert out["next", "observation"].reshape(-1).tolist() == [1, 2, 0.5, 0.5, 5, 6, 7, 0.5]

    def test_nested_keys_and_trailing_dims(self):
        data = TensorDict({
            ("agents", "pos"): torch.arange(4.0).view(4, 1, 1).expand(4, 2, 3),
            ("next", "done"): torch.tensor([False, True, False, False]),
            ("collector", "traj_ids"): torch.tensor([[0], [0], [0], [0]]),
        }, [4])
        out = NextStateReconstructor([("agents", "pos")])(data)["next", "agents", "pos"]
        assert out.shape == (4, 2, 3)
        assert as_list(out[:, 0, 0]) == [1, None, 3, None] and as_list(out[:, 1, 2]) == [1, None, 3, None]

    def test_overwrites_and_small_batches(self):
        data = batch()
        data["next", "observation"] = torch.full((8, 1), 100.0)
        assert as_list(NextStateReconstructor()(data)["next", "observation"]) == [1, 2, None, None, 5, 6, 7, None]
        one = NextStateReconstructor()(batch()[:1])
        assert as_list(one["next", "observation"]) == [None]
        assert NextStateReconstructor()(batch()[:0])["next", "observation"].shape == (0, 1)

    def test_round_trip_on_rollout(self):
        env = CountingEnv(max_steps=2)
        data = env.rollout(9, lambda td: td.set("action", torch.ones(1, dtype=torch.int8)), break_when_any_done=False)
        # episodes of 3 steps: trajectory ids as a collector writes them
        data["collector", "traj_ids"] = torch.arange(9) // 3
        expected = data["next", "observation"].float()
        compact = data.exclude(("next", "observation"))
        compact["observation"] = compact["observation"].float()
        out = NextStateReconstructor()(compact)["next", "observation"]
        ends = torch.tensor([2, 5, 8])
        keep = torch.ones(9, dtype=torch.bool)
        keep[ends] = False
        torch.testing.assert_close(out[keep], expected[keep])
        assert out[ends].isnan().all()

    def test_in_replay_buffer(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=NextStateReconstructor(), batch_size=8)
        rb.extend(batch())
        sample = rb.sample()
        assert ("next", "observation") in sample.keys(True, True)
        assert ("next", "observation") not in rb.storage[:].keys(True, True)

    def test_errors(self):
        with pytest.raises(ValueError, match=r"flat \(B,\) sample, got batch_size=\(2, 4\)"):
            NextStateReconstructor()(batch().reshape(2, 4))
        with pytest.raises(KeyError, match="key .*pixels.* not found in the sampled batch"):
            NextStateReconstructor(["pixels"])(batch())

    def test_no_op_in_env(self):
        env = TransformedEnv(CountingEnv(), NextStateReconstructor())
        data = env.rollout(3, lambda td: td.set("action", torch.ones(1, dtype=torch.int8)))
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
