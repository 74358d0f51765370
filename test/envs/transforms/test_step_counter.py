import pytest
import torch
from tensordict import TensorDict

from torchrl._fast import set_fast_paths
from torchrl.envs import Compose, InitTracker, PendulumEnv, RewardSum, StepCounter, TransformedEnv
from torchrl.envs.utils import step_mdp

from test.envs.transforms.contract import TransformContract


class TestStepCounter(TransformContract):
    env_only = True

    def make_transform(self):
        return StepCounter(max_steps=4)

    def test_truncates_not_terminates(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=3))
        data = env.rollout(10)
        assert data.shape == (3,)
        assert data["next", "truncated"].squeeze(-1).tolist() == [False, False, True]
        assert data["next", "done"].squeeze(-1).tolist() == [False, False, True]
        assert not data["next", "terminated"].any()

    def test_counts_restart_after_partial_reset(self):
        env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0), StepCounter(max_steps=3))
        data = env.rollout(7, break_when_any_done=False)
        assert data["next", "step_count"][0].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1]
        assert data["step_count"][0].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0]

    @pytest.mark.parametrize("limit", [5, 12])
    def test_env_truncation_and_limit_combine(self, limit):
        # the env truncates every 8 steps by itself (a StepCounter inside); the outer limit adds its own
        inner = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=8, step_count_key="inner_count"))
        env = TransformedEnv(inner, StepCounter(max_steps=limit))
        data = env.rollout(20, break_when_any_done=False)
        count = data["next", "step_count"].squeeze(-1)
        truncated = data["next", "truncated"].squeeze(-1)
        done = data["next", "done"].squeeze(-1)
        expected = [min(limit, 8) == c or c == 8 for c in count.tolist()]
        assert truncated.tolist() == expected and done.tolist() == expected
        assert not data["next", "terminated"].any()
        # the steps that end an episode restart both counts
        assert data["step_count"][1:][truncated[:-1]].eq(0).all()

    def test_batched_partial_limits(self):
        env = TransformedEnv(PendulumEnv(batch_size=[3], seed=0), StepCounter(max_steps=4))
        td = env.reset()
        td["step_count"] = torch.tensor([[0], [2], [3]])  # three episodes at different points
        data = env.rollout(3, auto_reset=False, tensordict=td, break_when_any_done=False)
        assert data["next", "truncated"].squeeze(-1).tolist() == [
            [False, False, False], [False, True, False], [True, False, False]
        ]

    def test_changing_max_steps_takes_effect(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=3))
        assert env.rollout(10).shape == (3,)
        env.transform.max_steps = 5
        assert env.rollout(10).shape == (5,)

    def test_counter_edited_in_place_between_steps(self):
        # the transform remembers the largest count it wrote; an in-place edit must not be missed
        env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0), StepCounter(max_steps=10))
        td = env.step_mdp(env.step(env.rand_action(env.reset())))
        td = env.step_mdp(env.step(env.rand_action(td)))
        assert td["step_count"].squeeze(-1).tolist() == [2, 2]
        td["step_count"][1] = 9  # in place: same tensor object, new version
        td = env.step(env.rand_action(td))
        assert td["next", "truncated"].squeeze(-1).tolist() == [False, True]
        assert td["next", "done"].squeeze(-1).tolist() == [False, True]

    def test_lowered_max_steps_truncates_running_episode(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=50))
        td = env.reset()
        for _ in range(4):
            td = env.step_mdp(env.step(env.rand_action(td)))
        env.transform.max_steps = 3  # the running episode is already past the new limit
        td = env.step(env.rand_action(td))
        assert td["next", "step_count"].item() == 5
        assert td["next", "truncated"].item() and td["next", "done"].item()

    def test_rejects_bad_max_steps(self):
        with pytest.raises(ValueError, match="max_steps"):
            StepCounter(max_steps=0)

    def test_no_max_steps_only_counts(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter())
        data = env.rollout(5)
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 4, 5]
        assert "truncated" not in env.full_done_spec.keys()


class TestRewardSum(TransformContract):
    def make_transform(self):
        return RewardSum()

    def test_sum_matches_rewards_and_restarts(self):
        env = TransformedEnv(PendulumEnv(seed=0), Compose(StepCounter(max_steps=4), RewardSum()))
        data = env.rollout(8, break_when_any_done=False)
        reward = data["next", "reward"].squeeze(-1)
        total = data["next", "episode_reward"].squeeze(-1)
        torch.testing.assert_close(total[3], reward[:4].sum())
        torch.testing.assert_close(total[4], reward[4])
        torch.testing.assert_close(total[7], reward[4:8].sum())

    def test_in_specs(self):
        env = TransformedEnv(PendulumEnv(), RewardSum(reward_spec=True))
        # as TorchRL: a reward entry instead of an observation (and a state entry, read back at the next step)
        assert "episode_reward" not in env.full_observation_spec.keys()
        assert "episode_reward" in env.full_reward_spec.keys() and "episode_reward" in env.state_spec.keys()


class TestInitTracker(TransformContract):
    full_transitions = True

    def make_transform(self):
        return InitTracker()

    def test_flags_episode_starts(self):
        env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0), Compose(StepCounter(max_steps=2), InitTracker()))
        data = env.rollout(5, break_when_any_done=False)
        assert data["is_init"][0].squeeze(-1).tolist() == [True, False, True, False, True]
        assert not data["next", "is_init"].any()


def test_restart_where_reset_aligns_done_shaped_masks():
    from torchrl.envs.transforms._groups import restart_where_reset
    from tensordict import TensorDict

    td = TensorDict({"_reset": torch.tensor([[True], [False]])}, [2])
    out = restart_where_reset(td, "_reset", torch.tensor([5, 7]), torch.zeros(2, dtype=torch.long))
    assert out.tolist() == [0, 7]
    out = restart_where_reset(td, "_reset", torch.ones(2, 3), torch.zeros(2, 3))
    assert out.tolist() == [[0, 0, 0], [1, 1, 1]]


def test_step_counter_after_its_short_path_accepts_a_lazily_stacked_root():
    # the short path for plain TensorDicts must not be taken for other TensorDict types
    from tensordict import LazyStackedTensorDict

    from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv

    env = TransformedEnv(PendulumEnv(seed=0), StepCounter(50))
    start = env.reset(env.gen_params(batch_size=[2]))
    env.rollout(3, auto_reset=False, tensordict=start)  # enables the short path
    root = LazyStackedTensorDict.lazy_stack([start[0], start[1]], 0)
    root.set("action", torch.zeros(2, 1))
    out = env.step(root)["next"]
    assert out["step_count"].flatten().tolist() == [1, 1]
    assert out["truncated"].flatten().tolist() == [False, False]


@pytest.mark.parametrize("flag", [True, False])
def test_restart_where_reset_one_element_mask_picks_a_side(flag):
    from tensordict import TensorDict

    from torchrl.envs.transforms._groups import restart_where_reset

    td = TensorDict({"_reset": torch.tensor([flag])}, [])
    fresh, previous = torch.zeros(1, dtype=torch.long), torch.tensor([9])
    out = restart_where_reset(td, "_reset", previous, fresh)
    assert out is (fresh if flag else previous)
    # shapes or dtypes that differ go through torch.where (broadcasting, promotion) as before
    wide = restart_where_reset(td, "_reset", torch.tensor([9.5, 1.5]), fresh)
    assert torch.equal(wide, torch.where(torch.tensor([flag]), fresh, torch.tensor([9.5, 1.5])))


class TestHostSideTop:
    """StepCounter tracks the largest count on the host while its counter tensor comes back unchanged (same
    tensor, same version), so that the usual step decides "no episode reached max_steps" without reading the
    tensor: results must equal the plain computation, follow changes of the settings, and never be shared
    by copies."""

    @staticmethod
    def _env(max_steps=50):
        return TransformedEnv(PendulumEnv(seed=0), Compose(StepCounter(max_steps), RewardSum()))

    def test_usual_steps_give_the_plain_results(self):
        env = self._env(7)
        data = env.rollout(20, break_when_any_done=False)
        counts = data["next", "step_count"].squeeze(-1).tolist()
        assert counts == [1, 2, 3, 4, 5, 6, 7] * 2 + [1, 2, 3, 4, 5, 6]
        assert data["next", "truncated"].squeeze(-1).tolist() == [c == 7 for c in counts]
        assert data["next", "done"].squeeze(-1).tolist() == [c == 7 for c in counts]
        rewards = data["next", "reward"].squeeze(-1)
        expected = torch.cat([rewards[:7].cumsum(0), rewards[7:14].cumsum(0), rewards[14:].cumsum(0)])
        torch.testing.assert_close(data["next", "episode_reward"].squeeze(-1), expected)

    def test_fast_paths_off_give_the_same_rollout(self):
        torch.manual_seed(0)
        fast = self._env(7).rollout(20, break_when_any_done=False)
        torch.manual_seed(0)
        with set_fast_paths(False):
            general = self._env(7).rollout(20, break_when_any_done=False)
        assert set(fast.keys(True, True)) == set(general.keys(True, True))
        for key in fast.keys(True, True):
            torch.testing.assert_close(fast[key], general[key])

    def test_a_counter_edited_in_place_is_read_again(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter(10))
        td = step_mdp(env.step(env.rand_action(env.reset())))
        td["step_count"].fill_(8)  # the same tensor, a new version: its top is not known any more
        out = env.step(env.rand_action(td))
        assert out["next", "step_count"].item() == 9 and not out["next", "truncated"].any()
        out = env.step(env.rand_action(step_mdp(out)))
        assert out["next", "step_count"].item() == 10 and out["next", "truncated"].all() and out["next", "done"].all()

    def test_changing_max_steps_takes_effect(self):
        env = self._env(50)
        env.rollout(10)
        env.transform[0].max_steps = 3
        data = env.rollout(10)
        assert data.shape[0] == 3 and bool(data["next", "truncated"][-1])

    def test_update_done_off(self):
        env = self._env(4)
        env.rollout(3)
        env.transform[0].update_done = False
        data = env.rollout(6, break_when_any_done=False)
        # truncation no longer sets done: the episode goes on, and stays truncated past the limit
        assert data["next", "truncated"].squeeze(-1).tolist() == [False, False, False, True, True, True]
        assert data["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 4, 5, 6]
        assert not data["next", "done"].any()

    def test_copies_keep_their_own_counter_state(self):
        import copy

        env = self._env(50)
        env.rollout(5)
        group = env.transform[0]._groups[0]
        last, top = group.last, group.top
        twin = TransformedEnv(PendulumEnv(seed=0), copy.deepcopy(env.transform))
        twin.rollout(20)
        # the copy's steps never touched the original's counter state
        assert group.last is last and group.top == top == 5


def test_step_count_spec_spans_int64_whatever_max_steps():
    # as TorchRL: the counter's spec is Bounded(0, int64 max), not Bounded(0, max_steps)
    env = TransformedEnv(PendulumEnv(), StepCounter(3))
    for spec in (env.observation_spec["step_count"], env.state_spec["step_count"]):
        assert spec.space.low.tolist() == [0] and spec.space.high.tolist() == [torch.iinfo(torch.int64).max]


def test_truncated_restarts_false_after_an_automatic_reset():
    env = TransformedEnv(PendulumEnv(seed=0), StepCounter(3))
    data = env.rollout(7, break_when_any_done=False)
    assert data["next", "truncated"].squeeze(-1).tolist() == [False, False, True, False, False, True, False]
    assert not data["truncated"].any()  # the roots after each reset
    assert data["step_count"].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0]


def test_keys_must_be_strings_and_no_offline_use():
    with pytest.raises(ValueError, match="truncated_key must be a string"):
        StepCounter(2, truncated_key=None)
    with pytest.raises(ValueError, match="step_count_key must be a string"):
        StepCounter(2, step_count_key=("a", "b"))
    with pytest.raises(NotImplementedError, match="cannot be applied to stored data"):
        StepCounter(3)(TensorDict(done=torch.zeros(1, dtype=torch.bool)))
