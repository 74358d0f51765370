import doctest

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from test.envs.transforms.test_conditional_policy_switch import StatelessCountingEnv
from torchrl.envs import Compose, StepCounter, TransformedEnv
from torchrl.envs.transforms import ConditionalSkip
from torchrl.envs.transforms import _conditional_skip as module
from torchrl.testing import CountingEnv


def ones(td):
    return td.set("action", torch.ones(td.shape + (1,), dtype=torch.int8))


def skip_idle(td):
    return ~td["action"].bool()


def odd(td):
    return td["observation"] % 2 == 1


class TestConditionalSkip(TransformContract):
    env_only = True

    def make_env(self, batch_size=()):
        return CountingEnv(max_steps=20, batch_size=batch_size)

    def make_transform(self):
        # reads the action only: inside ParallelEnv workers the step input holds just the actions
        return ConditionalSkip(skip_idle)

    def test_docs_counters(self):
        # TorchRL 0.14.1 gives the same numbers on this env
        base = TransformedEnv(CountingEnv(max_steps=20), StepCounter(step_count_key="inner"))
        middle = TransformedEnv(base, Compose(
            StepCounter(step_count_key="middle"), ConditionalSkip(cond=lambda td: td["step_count"] % 2 == 1),
        ), auto_unwrap=False)
        env = TransformedEnv(middle, StepCounter(step_count_key="step_count"), auto_unwrap=False)
        data = env.rollout(6, ones)
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 1, 2, 2, 3, 3]
        assert data["next", "inner"].squeeze(-1).tolist() == [1, 1, 2, 2, 3, 3]
        assert data["next", "middle"].squeeze(-1).tolist() == [1, 1, 2, 2, 3, 3]
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 4, 5, 6]
        assert not data["next", "reward"].any()

    def test_skipped_rows_repeat_input(self):
        env = TransformedEnv(self.make_env(), ConditionalSkip(odd))
        data = env.rollout(4, ones)
        assert data["observation"].squeeze(-1).tolist() == [0, 1, 1, 1]
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 1, 1, 1]

    def test_partial_rows_unlocked_env(self):
        env = TransformedEnv(StatelessCountingEnv(batch_size=[2]), ConditionalSkip(lambda td: td["observation"] >= torch.tensor([[2], [100]])))
        data = env.rollout(4, ones)
        assert data["next", "observation"].squeeze(-1).tolist() == [[1, 2, 2, 2], [1, 2, 3, 4]]
        assert data["next", "reward"].squeeze(-1).tolist() == [[1.0, 2.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]]

    def test_inverse_writes_step_mask(self):
        out = ConditionalSkip(lambda td: td["observation"] > 0).inv(TensorDict(observation=torch.tensor([[1.0], [-1.0]]), batch_size=[2]))
        assert out["_step"].tolist() == [False, True]

    def test_bad_cond(self):
        with pytest.raises(TypeError, match="cond must be callable, got int"):
            ConditionalSkip(3)
        env = TransformedEnv(self.make_env(batch_size=(2,)), ConditionalSkip(lambda td: torch.ones(3, dtype=torch.bool)))
        with pytest.raises(RuntimeError, match=r"shape \(3,\); expected one element or the batch shape \(2,\)"):
            env.rollout(2, ones)

    def test_standalone_call(self):
        with pytest.raises(NotImplementedError, match="cannot be executed without a parent environment"):
            self.make_transform()(TensorDict(observation=torch.ones(1)))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
