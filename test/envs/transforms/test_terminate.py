import doctest

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import StepCounter, TerminateTransform
from torchrl.envs.transforms import _terminate as module
from torchrl.testing import CountingEnv, NestedCountingEnv


def ones(td):
    return td.set("action", torch.ones(td.shape + (1,), dtype=torch.int8))


def reached_two(td):
    return td["observation"] >= 2


class TestTerminateTransform(TransformContract):
    env_only = True

    def make_env(self, batch_size=()):
        return CountingEnv(max_steps=10, batch_size=batch_size)

    def make_transform(self):
        return TerminateTransform(reached_two)

    def test_known_answer(self):
        # same as TorchRL 0.14.1: the rollout stops at the step where the counter reaches 2
        env = TransformedEnv(self.make_env(), self.make_transform())
        data = env.rollout(10, ones)
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 2]
        assert data["next", "done"].squeeze(-1).tolist() == [False, True]
        assert data["next", "terminated"].squeeze(-1).tolist() == [False, True]

    def test_write_done_false(self):
        env = TransformedEnv(self.make_env(), TerminateTransform(reached_two, write_done=False))
        data = env.rollout(2, ones)
        assert data["next", "done"].squeeze(-1).tolist() == [False, False]
        assert data["next", "terminated"].squeeze(-1).tolist() == [False, True]

    def test_batched_rows_reset_separately(self):
        # row i terminates once its counter reaches i + 1 (TorchRL 0.14.1 gives the same flags)
        stop = lambda td: td["observation"].squeeze(-1) >= torch.tensor([1, 2, 3])
        env = TransformedEnv(self.make_env(batch_size=(3,)), TerminateTransform(stop))
        data = env.rollout(4, ones, break_when_any_done=False)
        assert data["next", "observation"].squeeze(-1).tolist() == [[1, 1, 1, 1], [1, 2, 1, 2], [1, 2, 3, 1]]
        assert data["next", "done"].squeeze(-1).tolist() == [
            [True, True, True, True], [False, True, False, True], [False, False, True, False]
        ]

    def test_python_bool_and_scalars(self):
        env = TransformedEnv(self.make_env(batch_size=(3,)), TerminateTransform(lambda td: 3))
        data = env.rollout(2, ones)
        assert data["next", "done"].squeeze(-1).tolist() == [[True], [True], [True]]
        env = TransformedEnv(self.make_env(), TerminateTransform(lambda td: False))
        assert env.rollout(4, ones).shape == (4,)

    def test_truncated_untouched(self):
        env = TransformedEnv(self.make_env(), StepCounter(max_steps=10))
        env.append_transform(TerminateTransform(reached_two))
        data = env.rollout(10, ones)
        assert not data["next", "truncated"].any()
        assert data["next", "terminated"][-1].item()

    def test_nested_done_entries(self):
        env = TransformedEnv(NestedCountingEnv(has_root_done=True), TerminateTransform(lambda td: True))
        data = env.rollout(3)
        assert data.shape == (1,)
        assert data["next", "data", "done"].all() and data["next", "data", "terminated"].all()
        assert data["next", "done"].all() and data["next", "terminated"].all()

    def test_reset_not_affected(self):
        env = TransformedEnv(self.make_env(), TerminateTransform(lambda td: True))
        assert not env.reset()["done"].any()

    def test_env_flags_not_modified_in_place(self):
        env = TransformedEnv(self.make_env(), TerminateTransform(lambda td: True))
        td = ones(env.reset())
        base_out = env.base_env._step(td.clone())
        done = base_out["done"]
        env.transform._step(td, base_out)
        assert not done.any() and base_out["done"].all()

    def test_not_callable(self):
        with pytest.raises(ValueError, match="`stop` must be a callable, got int"):
            TerminateTransform(3)

    def test_bad_output_type(self):
        env = TransformedEnv(self.make_env(), TerminateTransform(lambda td: "yes"))
        with pytest.raises(TypeError, match="stop returned str"):
            env.rollout(2, ones)

    def test_bad_output_shape(self):
        env = TransformedEnv(self.make_env(batch_size=(3,)), TerminateTransform(lambda td: torch.zeros(4, 2)))
        with pytest.raises(RuntimeError, match=r"shape \(4, 2\).*done entry 'done' of shape \(3, 1\)"):
            env.rollout(2, ones)

    def test_no_parent(self):
        with pytest.raises(RuntimeError, match="cannot be applied to stored data"):
            TerminateTransform(reached_two)(TensorDict(observation=torch.ones(1)))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
