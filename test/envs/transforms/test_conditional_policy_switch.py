import doctest

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data import Binary, Categorical, Composite, Unbounded
from torchrl.envs import Compose, EnvBase, StepCounter, TransformedEnv
from torchrl.envs.transforms import ConditionalPolicySwitch
from torchrl.envs.transforms import _conditional_policy_switch as module
from torchrl.testing import CountingEnv


def act(value):
    def policy(td):
        return td.set("action", torch.full((*td.shape, 1), value, dtype=torch.int8))

    return policy


def odd(td):
    return (td["observation"] % 2 == 1).all()


def odd_rows(td):
    return td["observation"] % 2 == 1  # (*batch, 1)


class StatelessCountingEnv(EnvBase):
    """Not batch-locked: the next count is the input count plus the action, for any batch of rows."""

    _batch_locked = False

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        batch = self.batch_size
        self.observation_spec = Composite(observation=Unbounded((*batch, 1), dtype=torch.int32), shape=batch)
        self.action_spec = Binary(n=1, shape=(*batch, 1))
        self.reward_spec = Unbounded((*batch, 1))
        self.done_spec = Categorical(2, (*batch, 1), dtype=torch.bool)

    def _reset(self, tensordict, **kwargs):
        batch = self.batch_size if tensordict is None else tensordict.batch_size
        zeros = torch.zeros((*batch, 1), dtype=torch.bool)
        return TensorDict(observation=torch.zeros((*batch, 1), dtype=torch.int32), done=zeros, terminated=zeros.clone(),
                          batch_size=batch)

    def _step(self, tensordict):
        obs = tensordict["observation"] + tensordict["action"].to(torch.int32)
        done = obs > 10
        return TensorDict(observation=obs, reward=obs.float(), done=done, terminated=done.clone(),
                          batch_size=tensordict.batch_size)

    def _set_seed(self, seed):
        pass


class TestConditionalPolicySwitch(TransformContract):
    env_only = True

    def make_env(self, batch_size=()):
        return CountingEnv(max_steps=7, batch_size=batch_size)

    def make_transform(self):
        return ConditionalPolicySwitch(policy=act(1), condition=odd)

    def test_known_answer_turns(self):
        # the docs' two counters; TorchRL 0.14.1 gives the same numbers on this env
        env = TransformedEnv(self.make_env(), Compose(
            StepCounter(step_count_key="total"),
            ConditionalPolicySwitch(policy=act(1), condition=odd),
            StepCounter(step_count_key="main"),
        ))
        data = env.rollout(10, act(1))
        assert data["observation"].squeeze(-1).tolist() == [0, 2, 4, 6]
        assert data["next", "observation"].squeeze(-1).tolist() == [2, 4, 6, 8]
        assert data["next", "total"].squeeze(-1).tolist() == [2, 4, 6, 8]
        assert data["next", "main"].squeeze(-1).tolist() == [1, 2, 3, 4]
        assert data["next", "done"].squeeze(-1).tolist() == [False, False, False, True]

    def test_one_extra_step_per_step(self):
        # the opponent passes (action 0): the count stays odd, yet control comes back after one move
        env = TransformedEnv(self.make_env(), ConditionalPolicySwitch(policy=act(0), condition=odd))
        data = env.rollout(4, act(1))
        assert data["observation"].squeeze(-1).tolist() == [0, 1, 2, 3]
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 2, 3, 4]

    def test_opponent_moves_first_after_reset(self):
        env = TransformedEnv(CountingEnv(max_steps=7, start_val=1), ConditionalPolicySwitch(policy=act(1), condition=odd))
        reset = env.reset()
        assert reset["observation"].tolist() == [2]
        assert set(reset.keys()) == {"observation", "done", "terminated"}
        data = env.rollout(3, act(1))
        assert data["next", "observation"].squeeze(-1).tolist() == [4, 6, 8]

    def test_no_extra_step_when_done(self):
        env = TransformedEnv(CountingEnv(max_steps=2), ConditionalPolicySwitch(policy=act(1), condition=lambda td: True))
        data = env.rollout(4, act(1))
        assert data["observation"].squeeze(-1).tolist() == [1]
        assert data["next", "observation"].squeeze(-1).tolist() == [3]
        assert data["next", "done"].squeeze(-1).tolist() == [True]

    def test_batched_all_rows(self):
        env = TransformedEnv(self.make_env(batch_size=(2,)), ConditionalPolicySwitch(policy=act(1), condition=odd_rows))
        data = env.rollout(3, act(1))
        assert data["next", "observation"].squeeze(-1).tolist() == [[2, 4, 6], [2, 4, 6]]

    def test_partial_rows_batch_locked(self):
        env = TransformedEnv(self.make_env(batch_size=(2,)), ConditionalPolicySwitch(policy=act(1), condition=odd_rows))
        rows = lambda td: td.set("action", torch.tensor([[1], [0]], dtype=torch.int8))
        with pytest.raises(RuntimeError, match="Cannot run partial steps in a batched locked environment"):
            env.rollout(3, rows)

    def test_partial_rows_unlocked_env(self):
        env = TransformedEnv(StatelessCountingEnv(batch_size=[2]), ConditionalPolicySwitch(policy=act(1), condition=odd_rows))
        rows = lambda td: td.set("action", torch.tensor([[1], [0]], dtype=torch.int8))
        data = env.rollout(3, rows)
        # row 0: 0 -> 1, the opponent plays -> 2, ...; row 1 never moves and the opponent never plays
        assert data["next", "observation"].squeeze(-1).tolist() == [[2, 4, 6], [0, 0, 0]]
        assert data["next", "reward"].squeeze(-1).tolist() == [[2.0, 4.0, 6.0], [0.0, 0.0, 0.0]]

    def test_bad_condition_outputs(self):
        env = TransformedEnv(self.make_env(), ConditionalPolicySwitch(policy=act(1), condition=lambda td: "x"))
        with pytest.raises(RuntimeError, match="should return a boolean or a tensor, got str"):
            env.rollout(2, act(1))
        env = TransformedEnv(self.make_env(batch_size=(2,)),
                             ConditionalPolicySwitch(policy=act(1), condition=lambda td: torch.ones(3, dtype=torch.bool)))
        with pytest.raises(RuntimeError, match=r"shape \(3,\); tensor outputs must have the shape of the tensordict \(2,\)"):
            env.rollout(2, act(1))

    def test_not_callable_fails_when_used(self):
        t = ConditionalPolicySwitch(policy=3, condition=odd)  # accepted at construction, as TorchRL
        env = TransformedEnv(CountingEnv(start_val=1), t)
        with pytest.raises(TypeError, match="policy must be callable, got int"):
            env.reset()

    def test_standalone_call(self):
        with pytest.raises(RuntimeError, match="cannot be called independently"):
            self.make_transform()(TensorDict())


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_counters_after_opening_move():
    # TorchRL 0.14.1 gives the same: the counter before the switch counts the opening move at reset
    env = TransformedEnv(CountingEnv(max_steps=7, start_val=1), Compose(
        StepCounter(step_count_key="total"),
        ConditionalPolicySwitch(policy=act(1), condition=odd),
        StepCounter(step_count_key="main"),
    ))
    reset = env.reset()
    assert reset["observation"].tolist() == [2] and reset["total"].tolist() == [1] and reset["main"].tolist() == [0]
    data = env.rollout(3, act(1))
    assert data["total"].squeeze(-1).tolist() == [1, 3, 5]
    assert data["next", "total"].squeeze(-1).tolist() == [3, 5, 7]
    assert data["main"].squeeze(-1).tolist() == [0, 1, 2]
