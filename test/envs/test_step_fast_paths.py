"""EnvBase's step, step_mdp and done completion give the same result with the fast paths on and off.

The fast branches (``torchrl/envs/common.py``, ``_step_mdp.py``, ``_done.py``, ``custom/pendulum.py``) read
plain TensorDicts' entry dicts through :mod:`torchrl._fast`; with ``set_fast_paths(False)`` the same code
takes tensordict's public API. Each test runs both and compares.
"""
from __future__ import annotations

import torch
from tensordict import TensorDict

from torchrl._fast import set_fast_paths
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase, PendulumEnv
from torchrl.envs._done import DoneStructure
from torchrl.envs._step_loop import StepPlan
from torchrl.testing import NestedCountingEnv


def _same(a: TensorDict, b: TensorDict) -> None:
    assert type(a) is type(b)
    assert a.batch_size == b.batch_size
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        torch.testing.assert_close(a.get(key), b.get(key), msg=f"entry {key}")


def _both(fn):
    """``(fn() with the fast paths on, fn() with them off)``."""
    with set_fast_paths(True):
        fast = fn()
    with set_fast_paths(False):
        general = fn()
    return fast, general


class _Nested(EnvBase):
    """A nested observation and state, a nested extra root entry: step_mdp's sub-TensorDict merging."""

    def __init__(self):
        super().__init__(batch_size=[2])
        self.observation_spec = Composite(
            obs=Unbounded((2, 3)), inner=Composite(x=Unbounded((2, 1)), shape=(2,)), shape=(2,)
        )
        self.action_spec = Unbounded((2, 1))

    def _reset(self, td, **kwargs):
        inner = TensorDict(x=torch.zeros(2, 1), batch_size=[2])
        return TensorDict(obs=torch.zeros(2, 3), inner=inner, batch_size=[2])

    def _step(self, td):
        inner = TensorDict(x=td["inner", "x"] + td["action"], batch_size=[2])
        return TensorDict(obs=td["obs"] + 1, inner=inner, reward=torch.ones(2), done=torch.zeros(2, dtype=torch.bool),
                          batch_size=[2])

    def _set_seed(self, seed):
        pass


def _nested_step():
    env = _Nested()
    td = env.reset()
    td["action"] = torch.ones(2, 1)
    td["inner", "h"] = torch.full((2, 4), 3.0)  # a root-only entry inside a nested observation
    td = env.step(td)
    return td, env.step_mdp(td)


def test_step_and_step_mdp_same_both_ways():
    (step_a, next_a), (step_b, next_b) = _both(_nested_step)
    _same(step_a, step_b)
    _same(next_a, next_b)
    assert set(next_a.keys(True, True)) >= {"obs", ("inner", "x"), ("inner", "h"), "action", "done", "terminated"}


def test_step_mdp_builds_fresh_structures_both_ways():
    for enabled in (True, False):
        with set_fast_paths(enabled):
            td, nxt = _nested_step()
            nxt["inner", "new"] = torch.zeros(2)
            assert "new" not in td["next", "inner"].keys() and "new" not in td["inner"].keys()


def test_done_completion_same_both_ways():
    flag = Categorical(2, (3, 1), dtype=torch.bool)
    structure = DoneStructure(Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(3,)))

    def complete():
        data = TensorDict(done=torch.tensor([[True], [False], [False]]), batch_size=[3])
        return structure.complete(data)

    fast, general = _both(complete)
    _same(fast, general)
    assert fast["terminated"].tolist() == [[True], [False], [False]] and not fast["truncated"].any()


def test_pendulum_rollout_same_both_ways():
    def run():
        env = PendulumEnv(seed=0)
        torch.manual_seed(0)
        return env.rollout(30, break_when_any_done=False)

    fast, general = _both(run)
    _same(fast, general)


def test_nested_counting_env_rollout_same_both_ways():
    def run():
        torch.manual_seed(0)
        return NestedCountingEnv().rollout(5)

    fast, general = _both(run)
    _same(fast, general)


def test_hot_returns_a_named_step_plan():
    env = PendulumEnv(seed=0)
    plan = env._hot()
    assert isinstance(plan, StepPlan)
    assert plan.action_shapes == [("action", torch.Size([1]))]
    assert dict(plan.reward_done_shapes)["reward"] == torch.Size([1])
    assert plan.done_structure is env.done_structure
    assert env._hot() is plan  # cached while the specs are locked
    batched = env._hot_for(torch.Size([4]))
    assert batched.action_shapes == [("action", torch.Size([4, 1]))]
