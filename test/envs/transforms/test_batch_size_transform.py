import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.envs import Compose, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import BatchSizeTransform
from torchrl.envs.transforms import _batch_size_transform as module

from test.envs.transforms.contract import TransformContract


def unsqueeze_last(td):
    return td.unsqueeze(-1)


class TestBatchSizeTransform(TransformContract):
    def make_transform(self):
        return BatchSizeTransform(reshape_fn=unsqueeze_last)

    def test_contract_in_compose(self):
        # as in TorchRL, a reshape goes before the transforms that read the step input (StepCounter reads the
        # reshaped input it wrote itself); placed after them, their input and output shapes disagree
        env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0), Compose(self.make_transform(), StepCounter()))
        check_env_specs(env, seed=0)
        assert env.rollout(3)["next", "step_count"][:, 0, :, 0].tolist() == [[1, 2, 3]] * 2

    def test_contract_replay_buffer(self):
        # the transform reshapes the sampled batch: [3] -> [3, 1]
        data = self.replay_buffer_data()
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(data.numel()), batch_size=3)
        rb.append_transform(self.make_transform())
        rb.extend(data.reshape(-1))
        assert rb.sample().batch_size == (3, 1)

    def test_batch_size_on_stateless_env(self):
        env = TransformedEnv(PendulumEnv(seed=0), BatchSizeTransform(batch_size=[3]))
        assert env.batch_size == (3,)
        assert env.observation_spec["th"].shape == (3,) and env.action_spec.shape == (3, 1)
        assert env.full_done_spec["done"].shape == (3, 1) and env.full_state_spec.shape == (3,)
        reset = env.reset()
        assert reset.batch_size == (3,)
        # as TorchRL: one base reset, expanded
        assert torch.equal(reset["th"], reset["th"][:1].expand(3))
        data = env.rollout(4)
        assert data.batch_size == (3, 4) and data["next", "reward"].shape == (3, 4, 1)
        check_env_specs(env, seed=0)

    def test_batch_size_expands_trailing_dims(self):
        env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0), BatchSizeTransform(batch_size=[3, 2]))
        assert env.batch_size == (3, 2) and env.rollout(2).batch_size == (3, 2, 2)
        with pytest.raises(ValueError, match=r"batch size \(2,\) does not expand to batch_size \(3,\)"):
            TransformedEnv(PendulumEnv(batch_size=[2]), BatchSizeTransform(batch_size=[3])).observation_spec

    def test_reshape_fn_round_trip(self):
        base = PendulumEnv(batch_size=[2, 3], seed=0)
        env = TransformedEnv(base, BatchSizeTransform(reshape_fn=lambda td: td.reshape(6)))
        assert env.batch_size == (6,) and env.action_spec.shape == (6, 1)
        torch.manual_seed(0)
        data = env.rollout(3)
        assert data.batch_size == (6, 3) and data["next", "th"].shape == (6, 3)
        # inverse: inputs go back to the base batch size
        t = env.transform
        assert t.inv(TensorDict(action=torch.zeros(6, 1), batch_size=[6])).batch_size == (2, 3)
        check_env_specs(env, seed=0)

    def test_reset_func(self):
        calls = []

        def reset_func(td, td_reset, env=None):
            calls.append((td.batch_size, td_reset.batch_size, env))
            return td_reset.set("th", torch.full_like(td_reset["th"], 0.5))

        t = BatchSizeTransform(batch_size=[4], reset_func=reset_func, env_kwarg=True)
        env = TransformedEnv(PendulumEnv(seed=0), t)
        out = env.reset()
        assert out.batch_size == (4,) and out["th"].tolist() == [0.5] * 4
        assert calls[0][2] is t.parent

    def test_forward_outside_env(self):
        td = TensorDict(a=torch.zeros(2, 3), batch_size=[2])
        assert BatchSizeTransform(reshape_fn=unsqueeze_last)(td).batch_size == (2, 1)
        assert BatchSizeTransform(batch_size=[5])(td).batch_size == (2,)  # as TorchRL: unchanged

    def test_errors(self):
        with pytest.raises(ValueError, match="one and only one of batch_size OR reshape_fn"):
            BatchSizeTransform()
        with pytest.raises(ValueError, match="one and only one of batch_size OR reshape_fn"):
            BatchSizeTransform(batch_size=[2], reshape_fn=unsqueeze_last)
        with pytest.raises(TypeError):
            BatchSizeTransform([2])  # keyword-only, as TorchRL
        BatchSizeTransform(batch_size=[2], env_kwarg=True)  # accepted (ignored) without reset_func, as TorchRL


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
