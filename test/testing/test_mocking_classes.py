"""The mock environments of ``torchrl.testing.mocking_classes``: specs, known dynamics, partial resets."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

import torchrl.testing
from torchrl.data import Binary, Bounded, Categorical, OneHot, StackedComposite
from torchrl.envs import EnvBase, check_env_specs
from torchrl.testing.mocking_classes import (
    ContinuousActionVecMockEnv,
    CountingEnv,
    CountingEnvCountModule,
    CountingEnvCountPolicy,
    DiscreteActionConvMockEnv,
    DiscreteActionVecMockEnv,
    HeterogeneousCountingEnv,
    HeterogeneousCountingEnvPolicy,
    MockBatchedLockedEnv,
    MockBatchedUnLockedEnv,
    MockSerialEnv,
    MultiKeyCountingEnv,
    MultiKeyCountingEnvPolicy,
    NestedCountingEnv,
)

FAKE_TD_BUG = (
    "EnvBase.fake_tensordict (torchrl/envs/common.py) builds the root with state.update(obs).update(done)"
    ".update(action): update() inserts obs's nested sub-TensorDicts by reference, so nested actions/dones are "
    "written into obs, whose clone becomes 'next' -> ('next', <group>, 'action') is declared"
)
STEP_MDP_SHARING_BUG = (
    "EnvBase.step_mdp (torchrl/envs/common.py, non-flat path: nxt.exclude(...)) keeps nested sub-TensorDicts of "
    "'next' by reference when nothing under them is excluded, so writing the next action into ('data', 'action') "
    "also writes it into the previous step's ('next', 'data'); the final stack then fails on exclusive keys"
)
HETERO_BUG = (
    "EnvBase cannot step heterogeneous lazy stacks: _check_actions / rand_action / step_mdp (torchrl/envs/common.py, "
    "_step_mdp.merge_missing) read ('lazy', 'action') as one dense tensor, which tensordict refuses for shapes "
    "[1], [2], [3]"
)


def test_public_names():
    expected = {
        "CountingEnv", "NestedCountingEnv", "CountingEnvCountPolicy", "ContinuousActionVecMockEnv",
        "DiscreteActionVecMockEnv", "DiscreteActionConvMockEnv", "MultiKeyCountingEnv", "HeterogeneousCountingEnv",
        "MockSerialEnv", "MockBatchedLockedEnv", "MockBatchedUnLockedEnv", "get_default_devices",
        "get_available_devices", "dtype_fixture", "retry", "rand_reset",
    }
    assert expected <= set(torchrl.testing.__all__)
    for name in expected:
        assert getattr(torchrl.testing, name) is not None
    for name in torchrl.testing.mocking_classes.__all__:
        assert getattr(torchrl.testing, name) is getattr(torchrl.testing.mocking_classes, name)
    assert issubclass(DiscreteActionConvMockEnv, DiscreteActionVecMockEnv)
    assert issubclass(MockBatchedUnLockedEnv, MockBatchedLockedEnv)
    assert issubclass(NestedCountingEnv, CountingEnv)


# ---------------------------------------------------------------------------------------------- CountingEnv
class TestCountingEnv:
    def test_specs(self):
        env = CountingEnv(batch_size=[3])
        assert env.observation_spec["observation"].shape == (3, 1)
        assert env.observation_spec["observation"].dtype == torch.int32
        assert isinstance(env.action_spec, Binary) and env.action_spec.shape == (3, 1)
        assert env.action_spec.dtype == torch.int8
        assert env.reward_spec.shape == (3, 1) and env.reward_spec.dtype == torch.float32
        assert env.done_keys == ["done", "terminated"]
        assert env.full_done_spec["done"].dtype == torch.bool

    def test_counts_with_the_count_policy_until_done(self):
        env = CountingEnv(max_steps=3)
        data = env.rollout(10, CountingEnvCountPolicy(env.action_spec))
        assert data["observation"].squeeze(-1).tolist() == [0, 1, 2, 3]
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 2, 3, 4]
        assert data["next", "done"].squeeze(-1).tolist() == [False, False, False, True]
        assert data["next", "terminated"].squeeze(-1).tolist() == [False, False, False, True]
        assert (data["next", "reward"] == 0).all()

    def test_action_zero_does_not_count(self):
        env = CountingEnv(start_val=2)
        td = env.reset()
        assert td["observation"].item() == 2
        td["action"] = torch.zeros(1, dtype=torch.int8)
        assert env.step(td)["next", "observation"].item() == 2

    def test_observation_is_running_sum_of_random_actions(self):
        torch.manual_seed(0)
        env = CountingEnv(max_steps=1000, batch_size=[4])
        data = env.rollout(20)
        expected = data["action"].to(torch.int32).cumsum(-2)
        assert (data["next", "observation"] == expected).all()

    def test_partial_reset_keeps_other_counters(self):
        env = CountingEnv(max_steps=100, batch_size=[3])
        td = env.reset()
        td["action"] = torch.tensor([[1], [1], [0]], dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        td["action"] = torch.ones(3, 1, dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        assert td["observation"].squeeze(-1).tolist() == [2, 2, 1]
        td["_reset"] = torch.tensor([[False], [True], [False]])
        out = env.reset(td)
        assert out["observation"].squeeze(-1).tolist() == [2, 0, 1]
        assert env.count.squeeze(-1).tolist() == [2, 0, 1]
        assert "_reset" not in out.keys()

    def test_done_after_reset_raises_unless_allowed(self):
        with pytest.raises(RuntimeError, match="'done' is True right after reset"):
            CountingEnv(max_steps=2, start_val=3).reset()
        env = CountingEnv(max_steps=2, start_val=3, allow_done_after_reset=True)
        assert env.reset()["done"].item() is True

    def test_check_env_specs(self):
        check_env_specs(CountingEnv())
        check_env_specs(CountingEnv(batch_size=[2, 3]))

    def test_count_policy_on_batched_data(self):
        env = CountingEnv()
        policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
        out = policy(TensorDict(batch_size=[4]))
        assert out["action"].shape == (4, 1) and out["action"].dtype == torch.int8
        assert (out["action"] == 1).all()
        assert policy.out_keys == ["action"]

    def test_count_module(self):
        module = CountingEnvCountModule(CountingEnv(batch_size=[2]).action_spec)
        assert module(torch.zeros(5)).tolist() == [[1], [1]]


# ---------------------------------------------------------------------------------------- NestedCountingEnv
class TestNestedCountingEnv:
    def test_default_keys_and_shapes(self):
        env = NestedCountingEnv(nested_dim=2, batch_size=[4])
        assert env.observation_keys == [("data", "states")]
        assert env.action_keys == [("data", "action")]
        assert env.reward_keys == [("data", "reward")]
        assert env.done_keys == [("data", "done"), ("data", "terminated")]
        assert env.reset_keys == [("data", "_reset")]
        assert env.full_observation_spec["data"].shape == (4, 2)
        assert env.full_action_spec["data", "action"].shape == (4, 2, 1)
        td = env.reset()
        assert td["data"].batch_size == (4, 2)
        assert td["data", "states"].shape == (4, 2, 1)

    @pytest.mark.parametrize(
        "kwargs, obs, action, reward, done",
        [
            (dict(nest_obs_action=False), ["observation"], ["action"], [("data", "reward")], [("data", "done"), ("data", "terminated")]),
            (dict(nest_done=False), [("data", "states")], [("data", "action")], [("data", "reward")], ["done", "terminated"]),
            (dict(nest_reward=False), [("data", "states")], [("data", "action")], ["reward"], [("data", "done"), ("data", "terminated")]),
            (
                dict(has_root_done=True),
                [("data", "states")],
                [("data", "action")],
                [("data", "reward")],
                ["done", "terminated", ("data", "done"), ("data", "terminated")],
            ),
        ],
    )
    def test_nesting_options(self, kwargs, obs, action, reward, done):
        env = NestedCountingEnv(batch_size=[2], **kwargs)
        assert env.observation_keys == obs
        assert env.action_keys == action
        assert env.reward_keys == reward
        assert sorted(map(str, env.done_keys)) == sorted(map(str, done))

    def test_each_nested_counter_follows_its_action(self):
        env = NestedCountingEnv(nested_dim=3)
        td = env.reset()
        td["data", "action"] = torch.tensor([[1], [0], [1]], dtype=torch.int8)
        out = env.step(td)
        assert out["next", "data", "states"].squeeze(-1).tolist() == [1, 0, 1]
        assert out["next", "data", "reward"].shape == (3, 1)

    def test_root_action_drives_every_counter(self):
        env = NestedCountingEnv(nested_dim=3, nest_obs_action=False)
        td = env.reset()
        td["action"] = torch.ones(1, dtype=torch.int8)
        out = env.step(td)
        assert out["next", "observation"].tolist() == [1]
        assert env.count.squeeze(-1).tolist() == [1, 1, 1]

    def test_nested_partial_reset_restarts_only_masked_counters(self):
        env = NestedCountingEnv(nested_dim=3, max_steps=100, batch_size=[2])
        td = env.reset()
        for _ in range(2):
            td["data", "action"] = torch.ones(2, 3, 1, dtype=torch.int8)
            td = env.step_mdp(env.step(td))
        mask = torch.tensor([[True, False, False], [False, False, True]]).unsqueeze(-1)
        td["data", "_reset"] = mask
        out = env.reset(td)
        assert out["data", "states"].squeeze(-1).tolist() == [[0, 2, 2], [2, 2, 0]]
        assert ("data", "_reset") not in out.keys(True)

    def test_root_reset_restarts_all_counters_of_that_env(self):
        env = NestedCountingEnv(nested_dim=2, max_steps=100, batch_size=[2], has_root_done=True)
        td = env.reset()
        td["data", "action"] = torch.ones(2, 2, 1, dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        td["_reset"] = torch.tensor([[True], [False]])
        out = env.reset(td)
        assert out["data", "states"].squeeze(-1).tolist() == [[0, 0], [1, 1]]

    def test_root_done_when_every_counter_is_done(self):
        env = NestedCountingEnv(nested_dim=2, max_steps=0, has_root_done=True)
        td = env.reset()
        td["data", "action"] = torch.tensor([[1], [0]], dtype=torch.int8)
        out = env.step(td)
        assert out["next", "data", "done"].squeeze(-1).tolist() == [True, False]
        assert out["next", "done"].tolist() == [False]
        td = env.step_mdp(out)
        td["data", "action"] = torch.tensor([[0], [1]], dtype=torch.int8)
        assert env.step(td)["next", "done"].tolist() == [True]

    def test_rollout_consistency_with_partial_resets(self):
        torch.manual_seed(0)
        env = NestedCountingEnv(nested_dim=3, max_steps=2, batch_size=[2])
        data = env.rollout(40, break_when_any_done=False)
        states, nxt = data["data", "states"], data["next", "data", "states"]
        action, done = data["data", "action"].to(torch.int32), data["next", "data", "done"]
        assert (nxt == states + action).all()
        # a finished counter starts the next step from 0, the others carry on
        assert (states[:, 1:] == torch.where(done[:, :-1], 0, nxt[:, :-1])).all()
        assert done.any() and not done.all()

    def test_check_env_specs(self):
        check_env_specs(NestedCountingEnv(batch_size=[2]))

    def test_rollout_with_root_reward(self):
        data = NestedCountingEnv(nest_reward=False, batch_size=[2]).rollout(4)
        assert ("data", "action") not in data["next"].keys(True)


# --------------------------------------------------------------------------------------- MultiKeyCountingEnv
class TestMultiKeyCountingEnv:
    def test_keys(self):
        env = MultiKeyCountingEnv(batch_size=[2])
        assert env.reset_keys == ["_reset", ("nested_1", "_reset"), ("nested_2", "_reset")]
        assert set(env.action_keys) == {"action", ("nested_1", "action"), ("nested_2", "azione")}
        assert isinstance(env.full_action_spec["action"], OneHot)
        assert isinstance(env.full_action_spec["nested_1", "action"], Categorical)
        assert isinstance(env.full_action_spec["nested_2", "azione"], Binary)
        assert env.done_keys_groups[2] == [("nested_2", "done"), ("nested_2", "terminated"), ("nested_2", "truncated")]
        assert env.full_observation_spec["nested_1", "observation"].shape == (2, 3, 1)

    def test_deterministic_policy_finishes_every_group_together(self):
        env = MultiKeyCountingEnv(max_steps=4, batch_size=[2])
        policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
        data = env.rollout(10, policy)
        assert data.shape == (2, 5)
        assert data["next", "observation"][0].squeeze(-1).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
        last = data["next"][:, -1]
        assert last["done"].all() and last["terminated"].all()
        assert last["nested_1", "done"].all() and last["nested_1", "terminated"].all()
        # nested_2 ends by truncation: done but not terminated
        assert last["nested_2", "done"].all() and last["nested_2", "truncated"].all()
        assert not last["nested_2", "terminated"].any()
        assert not data["next", "nested_2", "done"][:, :-1].any()
        assert (data["next", "reward"] == 1).all() and (data["next", "nested_1", "reward"] == 1).all()

    def test_count_false_never_counts(self):
        env = MultiKeyCountingEnv(batch_size=[2])
        data = env.rollout(7, MultiKeyCountingEnvPolicy(env.full_action_spec, count=False))
        assert data.shape == (2, 7)
        assert (data["next", "nested_1", "observation"] == 0).all()
        assert (data["next", "nested_2", "reward"] == 0).all()

    def test_groups_reset_independently(self):
        torch.manual_seed(0)
        env = MultiKeyCountingEnv(max_steps=2, batch_size=[3])
        data = env.rollout(30, MultiKeyCountingEnvPolicy(env.full_action_spec), break_when_any_done=False)
        for group, action_key in (((), "action"), (("nested_1",), "action"), (("nested_2",), "azione")):
            obs = data[group + ("observation",)]
            nxt = data[("next",) + group + ("observation",)]
            action = data[group + (action_key,)]
            inc = action[..., 1:2] if action_key == "action" and not group else action
            done = data[("next",) + group + ("done",)]
            assert (nxt == obs + inc.float()).all(), group
            time_dim = len(env.batch_size)
            later = obs.narrow(time_dim, 1, obs.shape[time_dim] - 1)
            earlier_next = nxt.narrow(time_dim, 0, obs.shape[time_dim] - 1)
            earlier_done = done.narrow(time_dim, 0, obs.shape[time_dim] - 1)
            assert (later == torch.where(earlier_done, 0.0, earlier_next)).all(), group
            assert done.any() and not done.all()

    def test_partial_reset_of_one_group(self):
        env = MultiKeyCountingEnv(max_steps=10, batch_size=[2])
        policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
        td = env.reset()
        td = env.step_mdp(env.step(policy(td)))
        td["nested_1", "_reset"] = torch.tensor([[True, False, True], [False, False, False]]).unsqueeze(-1)
        out = env.reset(td)
        assert out["nested_1", "observation"].squeeze(-1).tolist() == [[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
        assert out["observation"].squeeze(-1).tolist() == [1.0, 1.0]
        assert out["nested_2", "observation"].squeeze(-1).tolist() == [[1.0, 1.0], [1.0, 1.0]]

    def test_check_env_specs(self):
        check_env_specs(MultiKeyCountingEnv(batch_size=[2]))


# ---------------------------------------------------------------------------------- HeterogeneousCountingEnv
class TestHeterogeneousCountingEnv:
    def test_specs_are_lazy_stacks(self):
        env = HeterogeneousCountingEnv(batch_size=[2])
        obs = env.full_observation_spec["lazy"]
        assert isinstance(obs, StackedComposite)
        assert obs.shape == (2, 3)
        assert [obs[:, i]["observation"].shape for i in range(3)] == [(2, 1), (2, 2), (2, 3)]
        assert isinstance(env.full_action_spec["lazy"], StackedComposite)
        assert env.get_agent_action_spec(2)["action"].shape == (2, 3)
        assert env.get_agent_obs_spec(1)["observation"].shape == (2, 2)
        assert env.full_done_spec["lazy", "done"].shape == (2, 3, 1)
        assert env.reset_keys == ["_reset", ("lazy", "_reset")]

    def test_reset_observations_have_per_agent_shapes(self):
        env = HeterogeneousCountingEnv(start_val=1, max_steps=5)
        td = env.reset()
        assert [td["lazy"][i]["observation"].tolist() for i in range(3)] == [[1.0], [1.0, 1.0], [1.0, 1.0, 1.0]]
        assert td["lazy", "done"].shape == (3, 1)

    def test_step_contract_counts_agents_with_any_bit_set(self):
        env = HeterogeneousCountingEnv()
        td = env.reset()
        actions = [torch.tensor([1], dtype=torch.int8), torch.tensor([0, 0], dtype=torch.int8), torch.tensor([0, 1, 0], dtype=torch.int8)]
        for i, a in enumerate(actions):
            td["lazy"][i].set("action", a)
        out = env._step(td)
        assert [out["lazy"][i]["observation"].tolist() for i in range(3)] == [[1.0], [0.0, 0.0], [1.0, 1.0, 1.0]]
        assert out["lazy", "reward"].squeeze(-1).tolist() == [1.0, 0.0, 1.0]
        assert out["done"].tolist() == [False]

    def test_agent_and_root_resets(self):
        env = HeterogeneousCountingEnv(batch_size=[2], max_steps=10)
        td = env.reset()
        env.count.fill_(4)
        td["lazy", "_reset"] = torch.tensor([[True, False, False], [False, False, False]]).unsqueeze(-1)
        td["_reset"] = torch.tensor([[False], [True]])
        env.reset(td)
        assert env.count.squeeze(-1).tolist() == [[0, 4, 4], [0, 0, 0]]

    def test_policy_writes_every_agent_action(self):
        env = HeterogeneousCountingEnv()
        td = HeterogeneousCountingEnvPolicy(env.full_action_spec)(env.reset())
        assert [td["lazy"][i]["action"].tolist() for i in range(3)] == [[1], [1, 1], [1, 1, 1]]
        td = HeterogeneousCountingEnvPolicy(env.full_action_spec, count=False)(env.reset())
        assert [td["lazy"][i]["action"].sum().item() for i in range(3)] == [0, 0, 0]

    def test_rollout(self):
        env = HeterogeneousCountingEnv(max_steps=3)
        data = env.rollout(10, HeterogeneousCountingEnvPolicy(env.full_action_spec))
        assert data["next", "done"].squeeze(-1).tolist() == [False, False, False, True]

    def test_random_rollout(self):
        data = HeterogeneousCountingEnv(batch_size=[2]).rollout(5, break_when_any_done=False)
        assert data.shape == (2, 5)


# ------------------------------------------------------------------------------------------- vector / conv
class TestMockEnvs:
    @pytest.mark.parametrize("cls", [ContinuousActionVecMockEnv, DiscreteActionVecMockEnv, DiscreteActionConvMockEnv])
    @pytest.mark.parametrize("batch_size", [[], [3]])
    def test_check_env_specs_and_truncation(self, cls, batch_size):
        env = cls(batch_size=batch_size, max_steps=4)
        check_env_specs(env)
        data = env.rollout(10)
        assert data.shape == (*batch_size, 4)
        assert env.done_keys == ["done", "terminated", "truncated"]
        last = data["next"][..., -1]
        assert last["done"].all() and last["truncated"].all() and not last["terminated"].any()
        assert not data["next", "done"][..., :-1].any()

    def test_specs(self):
        assert isinstance(ContinuousActionVecMockEnv().action_spec, Bounded)
        assert ContinuousActionVecMockEnv().observation_spec["observation"].shape == (7,)
        assert isinstance(DiscreteActionVecMockEnv().action_spec, OneHot)
        assert isinstance(DiscreteActionVecMockEnv(categorical_action_encoding=True).action_spec, Categorical)
        assert DiscreteActionConvMockEnv(batch_size=[2]).observation_spec["pixels"].shape == (2, 1, 7, 7)

    def test_continuous_action_is_added_and_reward_is_mean(self):
        env = ContinuousActionVecMockEnv()
        td = env.reset()
        obs = td["observation"].clone()
        action = torch.linspace(-1, 1, 7)
        td["action"] = action
        nxt = env.step(td)["next"]
        torch.testing.assert_close(nxt["observation"], obs + action)
        torch.testing.assert_close(nxt["reward"], (obs + action).mean(-1, keepdim=True))

    @pytest.mark.parametrize("categorical", [False, True])
    def test_discrete_action_adds_one_to_its_entry(self, categorical):
        env = DiscreteActionVecMockEnv(categorical_action_encoding=categorical, batch_size=[2])
        td = env.reset()
        obs = td["observation"].clone()
        index = torch.tensor([2, 5])
        td["action"] = index if categorical else torch.nn.functional.one_hot(index, 7).bool()
        delta = env.step(td)["next", "observation"] - obs
        assert delta.round().tolist() == torch.nn.functional.one_hot(index, 7).float().tolist()

    def test_conv_action_adds_one_to_its_column(self):
        env = DiscreteActionConvMockEnv(categorical_action_encoding=True)
        td = env.reset()
        pixels = td["pixels"].clone()
        td["action"] = torch.tensor(4)
        delta = (env.step(td)["next", "pixels"] - pixels).round()
        assert (delta[0, :, 4] == 1).all() and delta.sum() == 7

    def test_seed_makes_resets_reproducible(self):
        env = ContinuousActionVecMockEnv(seed=3)
        first = env.reset()["observation"]
        env.set_seed(3)
        assert torch.equal(env.reset()["observation"], first)
        assert torch.equal(ContinuousActionVecMockEnv(seed=3).reset()["observation"], first)
        assert not torch.equal(ContinuousActionVecMockEnv(seed=4).reset()["observation"], first)
        assert ((first >= 0) & (first < 1)).all()

    def test_partial_reset_redraws_only_masked_envs(self):
        env = ContinuousActionVecMockEnv(batch_size=[3], max_steps=100)
        td = env.reset()
        td["action"] = torch.ones(3, 7)
        td = env.step_mdp(env.step(td))
        before = td["observation"].clone()
        td["_reset"] = torch.tensor([[False], [True], [False]])
        after = env.reset(td)["observation"]
        assert torch.equal(after[0], before[0]) and torch.equal(after[2], before[2])
        assert ((after[1] >= 0) & (after[1] < 1)).all()
        assert env.step_count.squeeze(-1).tolist() == [1, 0, 1]


class TestCounterMocks:
    def test_serial_counter_carries_across_rollouts(self):
        env = MockSerialEnv()
        first = env.rollout(3)
        assert first["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
        assert first["next", "reward"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
        second = env.rollout(2)
        assert second["observation"].squeeze(-1).tolist() == [3.0, 4.0]

    def test_serial_episode_ends_at_max_val(self):
        env = MockSerialEnv()
        env.counter = 150  # the next reset sets the end at max(250, 300) = 300
        data = env.rollout(200)
        assert data.shape == (150,)
        assert data["next", "observation"][-1].item() == 300.0
        assert data["next", "done"].squeeze(-1).nonzero().view(-1).tolist() == [149]

    def test_rand_step(self):
        env = MockSerialEnv()
        out = env.rand_step()
        assert out["action"].shape == (1,)
        assert out["next", "observation"].item() == 1.0

    def test_batched_locked_env(self):
        env = MockBatchedLockedEnv(batch_size=[3])
        assert env.batch_locked
        out = env.rand_step()
        assert out["next", "observation"].squeeze(-1).tolist() == [1.0, 1.0, 1.0]
        with pytest.raises(RuntimeError, match=r"batch_size torch.Size\(\[5\]\) but the env's batch_size is torch.Size\(\[3\]\)"):
            env.rand_step(TensorDict(batch_size=[5]))
        check_env_specs(env)

    def test_batched_unlocked_env_takes_any_batch(self):
        env = MockBatchedUnLockedEnv()
        assert not env.batch_locked
        out = env.rand_step(TensorDict(batch_size=[5]))
        assert out["next", "reward"].shape == (5, 1)
        assert out["next", "observation"].squeeze(-1).tolist() == [1.0] * 5
        reset = env.reset(TensorDict(batch_size=[2, 4]))
        assert reset["observation"].shape == (2, 4, 1)

    @pytest.mark.parametrize("cls", [MockSerialEnv, MockBatchedLockedEnv, MockBatchedUnLockedEnv, CountingEnv])
    def test_are_env_base(self, cls):
        assert isinstance(cls(), EnvBase)
