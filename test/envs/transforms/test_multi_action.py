import doctest

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import (
    Compose,
    EnvBase,
    ParallelEnv,
    SerialEnv,
    StepCounter,
    TransformedEnv,
    check_env_specs,
)
from torchrl.envs.transforms import MultiAction as ExportedMultiAction
from torchrl.envs.transforms import _multi_action as ma_module
from torchrl.envs.transforms._action_discretizer import ActionDiscretizer
from torchrl.envs.transforms._action_scaling import ActionScaling
from torchrl.envs.transforms._multi_action import MultiAction


class SumEnv(EnvBase):
    """observation = running sum of the actions, reward = 10 * action, done once the sum reaches ``max_sum``."""

    def __init__(self, max_sum: float = 5.0, batch_size=()) -> None:
        super().__init__(batch_size=batch_size)
        b = self.batch_size
        self.max_sum = max_sum
        self.observation_spec = Composite(observation=Unbounded((*b, 1)), shape=b)
        self.action_spec = Bounded(low=0.0, high=2.0, shape=(*b, 1))
        self.reward_spec = Unbounded((*b, 1))
        self.total = torch.zeros(*b, 1)
        self.calls = 0

    def _reset(self, tensordict=None, **kwargs):
        if tensordict is not None and "_reset" in tensordict:
            self.total = torch.where(tensordict["_reset"], 0.0, self.total)
        else:
            self.total = torch.zeros(*self.batch_size, 1)
        done = self.total >= self.max_sum
        return TensorDict(observation=self.total.clone(), done=done, terminated=done.clone(), batch_size=self.batch_size)

    def _step(self, tensordict):
        self.calls += 1
        action = tensordict["action"]
        self.total = self.total + action
        done = self.total >= self.max_sum
        return TensorDict(
            observation=self.total.clone(), reward=action * 10, done=done, terminated=done.clone(),
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


def _make_sum_multi(max_sum: float = 5.0):
    return TransformedEnv(SumEnv(max_sum), MultiAction())


def step(env, actions):
    td = env.reset() if not isinstance(actions, tuple) else actions[0]
    actions = actions if not isinstance(actions, tuple) else actions[1]
    return env.step(td.set("action", torch.tensor(actions).unsqueeze(-1)))


class TestMultiAction(TransformContract):
    env_only = True

    def make_transform(self):
        return MultiAction()

    def test_exported(self):
        assert ExportedMultiAction is MultiAction

    def test_contract_state_survives_worker_restart(self):
        # MultiAction holds no state; inside batched-env workers its dynamic (-1) chunk dims are kept by the
        # batched specs, and a closed-then-restarted env steps chunks as before
        assert MultiAction().state_dict() == {}
        env = SerialEnv(2, lambda: TransformedEnv(SumEnv(), MultiAction()))
        try:
            assert env.action_spec.shape == (2, -1, 1)
            for _ in range(2):
                td = env.reset().set("action", torch.tensor([[1.0, 1.0], [2.0, 0.5]]).unsqueeze(-1))
                out = env.step(td)
                assert out["next", "reward"].squeeze(-1).tolist() == [[10.0, 10.0], [20.0, 5.0]]
                env.close()
        finally:
            env.close(raise_if_closed=False)

    @pytest.mark.parametrize("parallel", [False, True], ids=["serial", "parallel"])
    def test_inside_batched_env_partial_resets(self, parallel):
        # TorchRL 0.14.1 gives the same numbers (SerialEnv and ParallelEnv): worker 0 ends at step 1, worker 1 at 2
        cls = ParallelEnv if parallel else SerialEnv
        env = cls(2, _make_sum_multi, create_env_kwargs=[{"max_sum": 3.0}, {"max_sum": 6.0}])
        try:
            assert env.action_spec.shape == (2, -1, 1)
            assert env.full_reward_spec["reward"].shape == (2, -1, 1)
            assert env.full_observation_spec["observation"].shape == (2, 1)
            td = env.reset()
            got = []
            for _ in range(3):
                td["action"] = torch.tensor([[1.0, 1.0], [2.0, 0.5]]).unsqueeze(-1)
                td, td_next = env.step_and_maybe_reset(td)
                got.append((td["next", "observation"].squeeze(-1).tolist(), td["next", "reward"].squeeze(-1).tolist(),
                            td["next", "done"].squeeze(-1).tolist(), td_next["observation"].squeeze(-1).tolist()))
                td = td_next
            assert got == [
                ([2.0, 2.5], [[10.0, 10.0], [20.0, 5.0]], [False, False], [2.0, 2.5]),
                ([3.0, 5.0], [[10.0, 0.0], [20.0, 5.0]], [True, False], [0.0, 5.0]),
                ([2.0, 7.0], [[10.0, 10.0], [20.0, 0.0]], [False, True], [2.0, 0.0]),
            ]
        finally:
            env.close(raise_if_closed=False)

    def test_parallel_env_refuses_shared_buffers(self):
        with pytest.raises(ValueError, match=r"use_buffers=True is not possible with the dynamic \(-1\) dim of spec .*'full_reward_spec', 'reward'.*use use_buffers=False"):
            ParallelEnv(2, _make_sum_multi, use_buffers=True)

    def test_known_answers(self):
        # TorchRL 0.14.1 gives the same observations and rewards
        base = SumEnv(5.0)
        env = TransformedEnv(base, MultiAction())
        out = step(env, [1.0, 0.5, 2.0])
        assert base.calls == 3
        assert out["next", "observation"].tolist() == [3.5]
        assert out["next", "reward"].squeeze(-1).tolist() == [10.0, 5.0, 20.0]
        assert out["next", "done"].tolist() == [False]
        assert out["action"].shape == (3, 1)  # the policy's actions stay on the root

    def test_stops_on_done(self):
        # the sum reaches 5 at the 3rd of 5 actions: the rest is skipped, one zero slot pads the rewards
        base = SumEnv(5.0)
        env = TransformedEnv(base, MultiAction(stack_observations=True))
        out = step(env, [2.0, 2.0, 2.0, 1.0, 1.0])
        assert base.calls == 3
        assert out["next", "reward"].squeeze(-1).tolist() == [20.0, 20.0, 20.0, 0.0]
        assert out["next", "observation"].squeeze(-1).tolist() == [2.0, 4.0, 6.0, 6.0]
        assert out["next", "done"].tolist() == [True]

    def test_last_reward(self):
        env = TransformedEnv(SumEnv(5.0), MultiAction(stack_rewards=False))
        assert env.full_reward_spec["reward"].shape == (1,)
        out = step(env, [1.0, 0.5, 2.0])
        assert out["next", "reward"].tolist() == [20.0] and out["next", "observation"].tolist() == [3.5]
        # done at the 3rd action: the reward of that (last executed) step (TorchRL 0.14.1 returns 0 here)
        out = step(env, [2.0, 2.0, 2.0, 1.0])
        assert out["next", "reward"].tolist() == [20.0] and out["next", "done"].tolist() == [True]

    def test_specs(self):
        env = TransformedEnv(SumEnv(5.0, batch_size=(2,)), MultiAction(stack_observations=True))
        assert env.action_spec.shape == (2, -1, 1)
        assert env.full_reward_spec["reward"].shape == (2, -1, 1)
        assert env.full_observation_spec["observation"].shape == (2, -1, 1)
        assert env.full_done_spec["done"].shape == (2, 1)
        assert env.rand_action()["action"].shape == (2, 1, 1)
        check_env_specs(env)
        env = TransformedEnv(SumEnv(5.0), MultiAction())
        assert env.full_observation_spec["observation"].shape == (1,)
        check_env_specs(env)

    @pytest.mark.parametrize("serial", [False, True])
    def test_batched_partial_done(self, serial):
        # row 0 is done after its 3rd action: its outputs are frozen (reward 0 afterwards), row 1 runs on
        base = SerialEnv(2, lambda: SumEnv(5.0)) if serial else SumEnv(5.0, batch_size=(2,))
        env = TransformedEnv(base, MultiAction(stack_observations=True))
        td = env.reset().set("action", torch.tensor([[2.0, 2.0, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0]]).unsqueeze(-1))
        out = env.step(td)
        assert out["next", "reward"].squeeze(-1).tolist() == [[20.0, 20.0, 20.0, 0.0], [10.0, 10.0, 10.0, 10.0]]
        assert out["next", "observation"].squeeze(-1).tolist() == [[2.0, 4.0, 6.0, 6.0], [1.0, 2.0, 3.0, 4.0]]
        assert out["next", "done"].squeeze(-1).tolist() == [True, False]
        env.close(raise_if_closed=False)

    def test_transforms_before_run_per_action(self):
        env = TransformedEnv(SumEnv(50.0), Compose(StepCounter(), MultiAction()))
        assert step(env, [1.0, 1.0, 1.0])["next", "step_count"].tolist() == [3]
        env = TransformedEnv(SumEnv(50.0), Compose(MultiAction(), StepCounter()))
        assert step(env, [1.0, 1.0, 1.0])["next", "step_count"].tolist() == [1]
        # an action transform before MultiAction maps each action: env actions are [1, 1.5, 0]
        env = TransformedEnv(SumEnv(50.0), Compose(ActionScaling(loc=1.0, scale=1.0), MultiAction()))
        out = step(env, [0.0, 0.5, -1.0])
        assert out["next", "observation"].tolist() == [2.5]
        assert out["next", "reward"].squeeze(-1).tolist() == [10.0, 15.0, 0.0]

    def test_later_inverse_maps_every_action(self):
        # ActionDiscretizer after MultiAction: the chunk holds interval indices, each one mapped before its step
        # (bounds [0, 2], 5 intervals: medians 0.2, 0.6, 1.0, 1.4, 1.8)
        env = TransformedEnv(SumEnv(50.0), Compose(MultiAction(), ActionDiscretizer(5)))
        assert env.action_spec.shape == (-1, 1) and env.rand_action()["action"].shape == (1, 1)
        check_env_specs(env)
        out = env.step(env.reset().set("action", torch.tensor([[0], [4], [2]])))
        torch.testing.assert_close(out["next", "observation"], torch.tensor([3.0]))
        torch.testing.assert_close(out["next", "reward"].squeeze(-1), torch.tensor([2.0, 18.0, 10.0]))

    def test_rollout_with_chunk_policy(self):
        env = TransformedEnv(SumEnv(5.0), Compose(MultiAction(), StepCounter()))

        def policy(td):
            return td.set("action", torch.ones(2, 1))

        data = env.rollout(10, policy)
        # 2 per macro step: sums 2, 4, then 5 (done at the 1st action of the 3rd macro step: one pad slot)
        assert data["next", "observation"].squeeze(-1).tolist() == [2.0, 4.0, 5.0]
        assert data["next", "reward"].squeeze(-1).tolist() == [[10.0, 10.0], [10.0, 10.0], [10.0, 0.0]]
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]

    def test_chunk_key_and_from_vla(self):
        t = MultiAction.from_vla(stack_rewards=False)
        assert t.in_keys_inv == ["action"] and t.out_keys_inv == [("vla_action", "chunk")]
        env = TransformedEnv(SumEnv(50.0), t)
        assert list(env.full_action_spec.keys(True, True)) == [("vla_action", "chunk")]
        assert env.full_action_spec["vla_action", "chunk"].shape == (-1, 1)
        check_env_specs(env)
        td = env.reset().set(("vla_action", "chunk"), torch.tensor([[1.0], [2.0]]))
        out = env.step(td)
        assert out["next", "observation"].tolist() == [3.0] and out["next", "reward"].tolist() == [20.0]
        assert MultiAction().in_keys_inv == [] and MultiAction().out_keys_inv == []

    def test_errors(self):
        with pytest.raises(ValueError, match="dim must be an integer greater than 0"):
            MultiAction(dim=0)
        with pytest.raises(ValueError, match="chunk_key needs an action_key"):
            MultiAction(chunk_key="chunk")
        with pytest.raises(KeyError, match="action key 'foo' not in the env's action spec"):
            _ = TransformedEnv(SumEnv(), MultiAction(action_key="foo")).action_spec
        env = TransformedEnv(SumEnv(), MultiAction())
        with pytest.raises(ValueError, match=r"'action' have shape \(\); expected the actions stacked along dim 0"):
            env.step(env.reset().set("action", torch.tensor(1.0)))
        with pytest.raises(RuntimeError, match="cannot be applied to stored data"):
            MultiAction()(TensorDict(action=torch.ones(2, 1)))

    def test_repr(self):
        assert repr(MultiAction()) == "MultiAction(dim=1, stack_rewards=True, stack_observations=False)"

    def test_doctest(self):
        assert doctest.testmod(ma_module, raise_on_error=True).attempted > 0
