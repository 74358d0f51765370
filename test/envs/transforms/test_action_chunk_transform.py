import doctest

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.envs import Compose, PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import ActionChunkTransform as ExportedActionChunkTransform
from torchrl.envs.transforms import CatFrames, UnsqueezeTransform
from torchrl.envs.transforms import _action_chunk_transform as act_module
from torchrl.envs.transforms._action_chunk_transform import ActionChunkTransform

# TorchRL 0.14.1, ActionChunkTransform(3) on actions 0..3 (one window of 4 steps)
CHUNKS = [[0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 3.0], [3.0, 3.0, 3.0]]
PADS = [[False, False, False], [False, False, False], [False, False, True], [False, True, True]]
# the same with a done after step 1
CHUNKS_DONE = [[0.0, 1.0, 1.0], [1.0, 1.0, 1.0], [2.0, 3.0, 3.0], [3.0, 3.0, 3.0]]
PADS_DONE = [[False, False, True], [False, True, True], [False, False, True], [False, True, True]]


class TestActionChunkTransform(TransformContract):
    def make_transform(self):
        return ActionChunkTransform(3)

    def test_exported(self):
        assert ExportedActionChunkTransform is ActionChunkTransform
        t = ActionChunkTransform(3)
        assert isinstance(t, Compose)
        unsqueeze, frames = list(t.transforms)
        assert isinstance(unsqueeze, UnsqueezeTransform) and isinstance(frames, CatFrames)
        assert frames.N == 3 and frames.out_keys == [("vla_action", "chunk")]

    def test_known_answer(self):
        td = TensorDict(action=torch.arange(4.0).view(1, 4, 1), batch_size=[1, 4])
        out = ActionChunkTransform(3)(td)
        assert out is td
        assert out["vla_action", "chunk"].shape == (1, 4, 3, 1)
        assert out["vla_action", "chunk"][0, ..., 0].tolist() == CHUNKS
        assert out["action_is_pad"].dtype == torch.bool and out["action_is_pad"][0].tolist() == PADS
        assert out["action"].shape == (1, 4, 1)  # the per-step action is kept

    @pytest.mark.parametrize("singleton", [True, False])
    def test_done_cuts_chunks(self, singleton):
        done = torch.tensor([False, True, False, False]).view(1, 4)
        done = done.unsqueeze(-1) if singleton else done
        td = TensorDict({"action": torch.arange(4.0).view(1, 4, 1), ("next", "done"): done}, batch_size=[1, 4])
        out = ActionChunkTransform(3)(td)
        assert out["vla_action", "chunk"][0, ..., 0].tolist() == CHUNKS_DONE
        assert out["action_is_pad"][0].tolist() == PADS_DONE
        out = ActionChunkTransform(3, done_key=None)(td)  # the done state ignored
        assert out["vla_action", "chunk"][0, ..., 0].tolist() == CHUNKS

    def test_time_outside_batch(self):
        # windows stored one per item: batch [2], action [2, T=4, 1]; the 2nd row is 4..7 (TorchRL 0.14.1)
        td = TensorDict(action=torch.arange(8.0).view(2, 4, 1), batch_size=[2])
        out = ActionChunkTransform(3)(td)
        assert out.batch_size == (2,) and out["action_is_pad"].shape == (2, 4, 3)
        assert out["vla_action", "chunk"][1, ..., 0].tolist() == [[4, 5, 6], [5, 6, 7], [6, 7, 7], [7, 7, 7]]
        out = ActionChunkTransform(3)(TensorDict(action=torch.arange(4.0).view(4, 1)))  # no batch at all
        assert out["vla_action", "chunk"][..., 0].tolist() == CHUNKS

    def test_horizons(self):
        a = torch.arange(4.0).view(4, 1)
        out = ActionChunkTransform(1)(TensorDict(action=a))
        assert out["vla_action", "chunk"].shape == (4, 1, 1) and not out["action_is_pad"].any()
        out = ActionChunkTransform(6)(TensorDict(action=a))
        assert out["vla_action", "chunk"][0, :, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 3.0, 3.0]
        assert out["action_is_pad"].sum(-1).tolist() == [2, 3, 4, 5]

    def test_custom_keys_and_multi_dim_action(self):
        t = ActionChunkTransform(2, action_key=("agent", "act"), chunk_key="chunk", pad_key=("agent", "pad"))
        assert (t.action_key, t.chunk_key, t.pad_key, t.done_key) == (("agent", "act"), "chunk", ("agent", "pad"), "done")
        a = torch.arange(6.0).view(3, 2)
        out = t(TensorDict({("agent", "act"): a}))
        assert out["chunk"].tolist() == [[[0, 1], [2, 3]], [[2, 3], [4, 5]], [[4, 5], [4, 5]]]
        assert out["agent", "pad"].tolist() == [[False, False], [False, False], [False, True]]
        # time_dim may be positive (counted on the action tensor)
        out = ActionChunkTransform(2, time_dim=1)(TensorDict(action=torch.arange(8.0).view(2, 4, 1), batch_size=[2]))
        assert out["vla_action", "chunk"].shape == (2, 4, 2, 1)

    def test_replay_buffer_chunks_on_sample(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), transform=ActionChunkTransform(3), batch_size=2)
        rb.extend(TensorDict({"action": torch.randn(8, 4, 1)}, batch_size=[8]))
        assert list(rb.storage[:].keys()) == ["action"]  # extend stores the raw steps
        sample = rb.sample()
        assert sample["vla_action", "chunk"].shape == (2, 4, 3, 1)
        torch.testing.assert_close(sample["vla_action", "chunk"][:, :, 0], sample["action"])

    def test_env_unchanged(self):
        env = TransformedEnv(PendulumEnv(seed=0), ActionChunkTransform(3))
        base = PendulumEnv(seed=0)
        assert env.full_action_spec == base.full_action_spec
        assert env.full_observation_spec == base.full_observation_spec
        check_env_specs(env)
        data = env.rollout(3)
        assert ("vla_action", "chunk") not in data.keys(True) and "action_is_pad" not in data

    def test_clone(self):
        t = ActionChunkTransform(4, chunk_key="c", pad_key="p", time_dim=-2, done_key=None)
        c = t.clone()
        assert type(c) is ActionChunkTransform and c is not t
        assert (c.chunk_size, c.chunk_key, c.pad_key, c.done_key, c.time_dim) == (4, "c", "p", None, -2)

    def test_errors(self):
        with pytest.raises(ValueError, match="chunk_size must be an integer >= 1, got 0"):
            ActionChunkTransform(0)
        t = ActionChunkTransform(2)
        with pytest.raises(KeyError, match="action 'action' not found; available keys: \\['obs'\\]"):
            t(TensorDict(obs=torch.zeros(3)))
        with pytest.raises(ValueError, match="action dim to follow the time dim.*shape \\(1, 3, 2, 2\\) with time_dim=-3"):
            ActionChunkTransform(2, time_dim=-3)(TensorDict(action=torch.zeros(1, 3, 2, 2), batch_size=[1, 3]))
        with pytest.raises(ValueError, match="done entry \\('next', 'done'\\) has shape \\(5, 1\\)"):
            t(TensorDict({"action": torch.zeros(4, 1), ("next", "done"): torch.zeros(5, 1, dtype=torch.bool)}))

    def test_repr(self):
        assert repr(ActionChunkTransform(3)).startswith("ActionChunkTransform(\n    UnsqueezeTransform(")

    def test_doctest(self):
        assert doctest.testmod(act_module, raise_on_error=True).attempted > 0
