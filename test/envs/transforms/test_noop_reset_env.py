import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Composite, Unbounded
from torchrl.envs import Compose, EnvBase, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _noop_reset_env as noop_reset_env
from torchrl.envs.transforms._noop_reset_env import NoopResetEnv

from test.envs.transforms.contract import TransformContract


class TickEnv(EnvBase):
    """Stateful and batch-locked: ``ticks`` counts steps since reset; episode ``k`` ends after ``ends[k]`` steps."""

    def __init__(self, ends=(100,), batch_size=()):
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.ends = list(ends)
        self.observation_spec = Composite(ticks=Unbounded((*shape, 1), dtype=torch.int64), shape=shape)
        self.action_spec = Unbounded((*shape, 1))
        self.reward_spec = Unbounded((*shape, 1))
        self.ticks = torch.zeros(*shape, 1, dtype=torch.int64)
        self.resets = 0

    def _end(self):
        return self.ends[min(self.resets - 1, len(self.ends) - 1)]

    def _reset(self, td=None, **kwargs):
        self.resets += 1
        mask = td.get("_reset", None) if td is not None else None
        if mask is None:
            self.ticks.zero_()
        else:
            self.ticks[mask] = 0
        return TensorDict(ticks=self.ticks.clone(), batch_size=self.batch_size)

    def _step(self, td):
        self.ticks += 1
        return TensorDict(
            ticks=self.ticks.clone(), reward=torch.zeros(*self.batch_size, 1), done=self.ticks >= self._end(),
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


class TestNoopResetEnv(TransformContract):
    env_only = True

    def make_env(self, batch_size=()):
        # Not Pendulum: its "th" leaves the [-pi, pi] bound of its spec after a few (here extra) steps.
        return TickEnv(batch_size=batch_size)

    def make_transform(self):
        return NoopResetEnv(noops=3)

    def test_fixed_number_of_noops(self):
        env = TransformedEnv(TickEnv(), NoopResetEnv(noops=3, random=False))
        check_env_specs(env)
        assert env.reset()["ticks"].item() == 3
        assert env.reset()["ticks"].item() == 3

    def test_random_number_of_noops(self):
        torch.manual_seed(0)
        env = TransformedEnv(TickEnv(), NoopResetEnv(noops=4))
        ticks = {env.reset()["ticks"].item() for _ in range(40)}
        assert ticks <= {0, 1, 2, 3, 4}
        assert len(ticks) >= 3

    def test_noops_are_not_counted_by_later_transforms(self):
        env = TransformedEnv(TickEnv(), StepCounter())
        env.insert_transform(0, NoopResetEnv(noops=5, random=False))
        td = env.reset()
        assert td["ticks"].item() == 5 and td["step_count"].item() == 0
        env = TransformedEnv(TickEnv(), Compose(StepCounter(), NoopResetEnv(noops=5, random=False)))
        assert env.reset()["step_count"].item() == 5

    def test_done_during_noops_resets_and_retries(self):
        env = TransformedEnv(TickEnv(ends=(2, 100)), NoopResetEnv(noops=3, random=False))
        td = env.reset()
        assert td["ticks"].item() == 3
        assert not td["done"].any()
        assert env.base_env.resets == 2

    def test_gives_up_after_repeated_dones(self):
        env = TransformedEnv(TickEnv(ends=(2,)), NoopResetEnv(noops=5, random=False))
        with pytest.raises(RuntimeError, match="done state during the 5 random steps after reset in 10 successive trials"):
            env.reset()

    def test_batched_full_reset(self):
        env = TransformedEnv(TickEnv(batch_size=(3,)), NoopResetEnv(noops=2, random=False))
        assert env.reset()["ticks"].squeeze(-1).tolist() == [2, 2, 2]

    def test_partial_reset_batch_unlocked(self):
        env = TransformedEnv(PendulumEnv(batch_size=[3], seed=0), Compose(StepCounter(), NoopResetEnv(noops=4, random=False)))
        td = env.reset()
        assert td["step_count"].squeeze(-1).tolist() == [4, 4, 4]
        td = env.step_mdp(env.rand_step(td))
        before = td.clone()
        td["_reset"] = torch.tensor([[False], [True], [False]])
        out = env.reset(td)
        assert out["step_count"].squeeze(-1).tolist() == [5, 4, 5]
        torch.testing.assert_close(out["th"][[0, 2]], before["th"][[0, 2]])
        assert out["th"][1] != before["th"][1]

    def test_partial_reset_batch_locked_raises(self):
        env = TransformedEnv(TickEnv(batch_size=(2,)), NoopResetEnv(noops=2, random=False))
        td = env.reset()
        td["_reset"] = torch.tensor([[True], [False]])
        with pytest.raises(RuntimeError, match="partial reset of a batch-locked env"):
            env.reset(td)

    def test_base_env_is_the_parent(self):
        base = TickEnv()
        env = TransformedEnv(base, Compose(StepCounter(), NoopResetEnv()))
        parent = env.transform[1].base_env
        assert parent.base_env is base
        assert "step_count" in parent.observation_spec.keys()

    def test_errors(self):
        with pytest.raises(ValueError, match="noops must be a non-negative integer, got -1"):
            NoopResetEnv(noops=-1)
        with pytest.raises(RuntimeError, match="acts at environment resets"):
            NoopResetEnv()(TensorDict())


def test_doctests():
    result = doctest.testmod(noop_reset_env, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed


def test_random_count_is_below_noops():
    # as TorchRL: uniform over 0 .. noops - 1 (noops=1 never steps)
    env = TransformedEnv(PendulumEnv(seed=0), Compose(NoopResetEnv(noops=3, random=True), StepCounter()))
    inner = env.transform[0]
    seen = {inner._count() for _ in range(200)}
    assert seen == {0, 1, 2}
    assert {NoopResetEnv(noops=1)._count() for _ in range(20)} == {0}
    assert NoopResetEnv(noops=3, random=False)._count() == 3
