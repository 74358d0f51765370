"""``EnvBase.rollout``: every option, the time layout, and step_mdp consistency across steps."""
from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, PendulumEnv, step_mdp
from torchrl.testing import (
    ContinuousActionVecMockEnv,
    CountingEnv,
    CountingEnvCountPolicy,
    MultiKeyCountingEnv,
    MultiKeyCountingEnvPolicy,
)


class AlternatingPolicy:
    """Counts every step in env 0 and every other step in env 1 (so env 1 finishes later)."""

    def __init__(self):
        self.t = 0

    def __call__(self, td):
        second = 1 if self.t % 2 == 0 else 0
        td["action"] = torch.tensor([[1], [second]], dtype=torch.int8)
        self.t += 1
        return td


class TestLength:
    def test_max_steps(self):
        env = CountingEnv(max_steps=100)
        data = env.rollout(7)
        assert data.batch_size == (7,)

    def test_time_is_the_last_batch_dim(self):
        env = CountingEnv(max_steps=100, batch_size=[2, 3])
        data = env.rollout(4)
        assert data.batch_size == (2, 3, 4)
        assert data["next", "observation"].shape == (2, 3, 4, 1)

    def test_max_steps_must_be_positive(self):
        with pytest.raises(ValueError, match="max_steps must be >= 1, got 0"):
            CountingEnv().rollout(0)

    def test_consecutive_steps_are_linked_by_step_mdp(self):
        torch.manual_seed(0)
        env = PendulumEnv(batch_size=[2])
        data = env.rollout(6)
        assert torch.equal(data["observation"][:, 1:], data["next", "observation"][:, :-1])
        assert torch.equal(data["th"][:, 1:], data["next", "th"][:, :-1])
        assert "action" not in data["next"].keys() and "reward" not in data.keys()


class TestPolicy:
    def test_policy_is_used(self):
        env = CountingEnv(max_steps=3)
        data = env.rollout(10, CountingEnvCountPolicy(env.action_spec))
        assert (data["action"] == 1).all()
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 2, 3, 4]

    def test_no_policy_draws_random_actions_from_the_spec(self):
        torch.manual_seed(0)
        env = PendulumEnv()
        data = env.rollout(50)
        action = data["action"]
        assert ((action >= -2) & (action <= 2)).all()
        assert action.std() > 0.5

    def test_policy_returning_none_edits_in_place(self):
        env = CountingEnv(max_steps=2)

        def policy(td):
            td["action"] = torch.ones(1, dtype=torch.int8)

        assert env.rollout(10, policy).shape == (3,)

    def test_nn_policy_on_observation(self):
        torch.manual_seed(0)
        env = PendulumEnv()
        policy = TensorDictModule(nn.Sequential(nn.Linear(3, 1), nn.Tanh()), in_keys=["observation"], out_keys=["action"])
        data = env.rollout(5, policy)
        expected = policy.module(data["observation"])
        torch.testing.assert_close(data["action"], expected)

    def test_trust_policy_gives_the_same_data(self):
        env = CountingEnv(max_steps=3)
        policy = CountingEnvCountPolicy(env.action_spec)
        a = env.rollout(10, policy)
        b = env.rollout(10, policy, trust_policy=True)
        assert (a == b).all()

    def test_auto_cast_to_device_moves_data_to_the_policy_device(self):
        seen = []

        class Recorder(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(torch.zeros(1))

            def forward(self, td):
                seen.append(td.device)
                td["action"] = torch.ones(td.batch_size + (1,), dtype=torch.int8, device=self.weight.device)
                return td

        env = CountingEnv(max_steps=100)  # device-less env
        env.rollout(2, Recorder(), auto_cast_to_device=True)
        assert seen == [torch.device("cpu")] * 2
        seen.clear()
        env.rollout(2, Recorder())
        assert seen == [None, None]

    def test_actions_are_replayed(self):
        env = CountingEnv(max_steps=100)
        actions = [torch.tensor([1], dtype=torch.int8), torch.tensor([0], dtype=torch.int8), torch.tensor([1], dtype=torch.int8)]
        data = env.rollout(3, actions=actions)
        assert data["next", "observation"].squeeze(-1).tolist() == [1, 1, 2]
        with pytest.raises(ValueError, match="`actions` ran out before max_steps"):
            env.rollout(5, actions=actions)
        with pytest.raises(ValueError, match="pass either a policy or actions, not both"):
            env.rollout(3, CountingEnvCountPolicy(env.action_spec), actions=actions)


class TestCallback:
    """As TorchRL: the callback gets the env and the data between steps, never after the last step."""

    def test_breaking_rollout_passes_the_next_root(self):
        env = CountingEnv(max_steps=100, batch_size=[2])
        calls = []
        env.rollout(4, CountingEnvCountPolicy(env.action_spec),
                    callback=lambda e, td: calls.append((e, "next" in td.keys(), td["observation"].clone())))
        assert [c[0] for c in calls] == [env] * 3 and not any(c[1] for c in calls)
        assert [c[2].squeeze(-1).tolist() for c in calls] == [[1, 1], [2, 2], [3, 3]]

    def test_non_breaking_rollout_passes_the_step(self):
        env = CountingEnv(max_steps=100)
        calls = []
        env.rollout(4, CountingEnvCountPolicy(env.action_spec), break_when_any_done=False,
                    callback=lambda e, td: calls.append(td["next", "observation"].item()))
        assert calls == [1, 2, 3]


def test_policy_returning_another_tensordict_is_merged():
    # as TorchRL: the policy's output joins the step's data (the root observation and done entries stay)
    env = CountingEnv(max_steps=100)
    r = env.rollout(3, lambda td: TensorDict({"action": env.action_spec.one()}, []))
    assert r["observation"].squeeze(-1).tolist() == [0, 1, 2] and r["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]


class TestDoneHandling:
    def test_break_when_any_done_is_the_default(self):
        env = CountingEnv(max_steps=2, batch_size=[2])
        data = env.rollout(10, AlternatingPolicy())
        assert data.shape == (2, 3)
        assert data["next", "done"][:, -1].squeeze(-1).tolist() == [True, False]

    def test_no_break_resets_finished_envs_and_goes_on(self):
        env = CountingEnv(max_steps=2, batch_size=[2])
        data = env.rollout(10, AlternatingPolicy(), break_when_any_done=False)
        assert data.shape == (2, 10)
        assert data["next", "observation"][0].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
        assert data["observation"][0].squeeze(-1).tolist() == [0, 1, 2, 0, 1, 2, 0, 1, 2, 0]
        assert data["next", "observation"][1].squeeze(-1).tolist() == [1, 1, 2, 2, 3, 0, 1, 1, 2, 2]

    def test_break_when_all_done(self):
        env = CountingEnv(max_steps=2, batch_size=[2])
        data = env.rollout(20, AlternatingPolicy(), break_when_all_done=True)
        # env 1 needs 5 steps to count to 3 (steps 0, 2, 4); env 0 finished at step 2 and restarted
        assert data.shape == (2, 5)
        assert data["next", "done"].squeeze(-1).tolist() == [[False, False, True, False, False], [False, False, False, False, True]]
        assert data["observation"][0].squeeze(-1).tolist() == [0, 1, 2, 0, 1]

    def test_both_breaks_is_an_error(self):
        with pytest.raises(ValueError, match="break_when_any_done and break_when_all_done cannot both be True"):
            CountingEnv().rollout(3, break_when_any_done=True, break_when_all_done=True)

    def test_nested_done_groups_break_and_reset(self):
        torch.manual_seed(0)
        env = MultiKeyCountingEnv(max_steps=2, batch_size=[2])
        policy = MultiKeyCountingEnvPolicy(env.full_action_spec)
        data = env.rollout(50, policy)
        last = data["next"][:, -1]
        assert any(last[k].any() for k in env.done_keys)
        earlier = data["next"][:, :-1]
        assert not any(earlier[k].any() for k in env.done_keys)

    def test_set_truncated_marks_the_last_step(self):
        env = CountingEnv(max_steps=100).add_truncated_keys()
        data = env.rollout(3, CountingEnvCountPolicy(env.action_spec), set_truncated=True)
        assert data["next", "truncated"].squeeze(-1).tolist() == [False, False, True]
        assert data["next", "done"].squeeze(-1).tolist() == [False, False, True]
        assert data["next", "terminated"].squeeze(-1).tolist() == [False, False, False]

    def test_set_truncated_keeps_a_real_termination(self):
        env = CountingEnv(max_steps=1).add_truncated_keys()
        data = env.rollout(10, CountingEnvCountPolicy(env.action_spec), set_truncated=True)
        assert data.shape == (2,)
        assert data["next", "terminated"][-1].item() is True
        assert data["next", "truncated"][-1].item() is False

    def test_set_truncated_needs_truncated_keys(self):
        with pytest.raises(RuntimeError, match=r"rollout\(set_truncated=True\): the env has no 'truncated' entry next to \['done'\]; call env.add_truncated_keys\(\)"):
            CountingEnv().rollout(3, set_truncated=True)

    def test_truncated_episodes_of_a_mock_env(self):
        env = ContinuousActionVecMockEnv(max_steps=3, batch_size=[2])
        data = env.rollout(7, break_when_any_done=False)
        assert data["next", "truncated"][0].squeeze(-1).tolist() == [False, False, True] * 2 + [False]
        assert not data["next", "terminated"].any()
        assert torch.equal(data["next", "done"], data["next", "truncated"])


class TestInputOutput:
    def test_tensordict_entries_are_carried_through(self):
        env = CountingEnv(max_steps=100, batch_size=[2])
        start = TensorDict(hidden=torch.tensor([[5.0], [6.0]]), batch_size=[2])
        data = env.rollout(3, tensordict=start)
        assert data["hidden"].squeeze(-1).tolist() == [[5.0] * 3, [6.0] * 3]

    def test_tensordict_with_reset_mask_resets_only_masked_envs(self):
        env = CountingEnv(max_steps=100, batch_size=[2])
        env.rollout(3, CountingEnvCountPolicy(env.action_spec))
        start = TensorDict(_reset=torch.tensor([[True], [False]]), batch_size=[2])
        data = env.rollout(2, CountingEnvCountPolicy(env.action_spec), tensordict=start)
        # as TorchRL: the env continues from 3 where not reset, but the input has no observation to keep there,
        # so the first root observation of that row is zero
        assert data["observation"].squeeze(-1).tolist() == [[0, 1], [0, 4]]
        assert data["next", "observation"].squeeze(-1).tolist() == [[1, 2], [4, 5]]

    def test_no_auto_reset_continues_from_the_tensordict(self):
        env = CountingEnv(max_steps=100)
        policy = CountingEnvCountPolicy(env.action_spec)
        first = env.rollout(2, policy)
        start = env.step_mdp(first[-1])
        second = env.rollout(2, policy, auto_reset=False, tensordict=start)
        assert second["observation"].squeeze(-1).tolist() == [2, 3]

    def test_no_auto_reset_needs_a_tensordict(self):
        # TorchRL raises RuntimeError; ours is also a ValueError
        for error in (ValueError, RuntimeError):
            with pytest.raises(error, match="auto_reset=False requires an initial `tensordict`"):
                CountingEnv().rollout(2, auto_reset=False)

    def test_bad_arguments_raise_torchrl_types(self):
        env = CountingEnv()
        with pytest.raises(RuntimeError, match="max_steps must be >= 1, got 0"):
            env.rollout(0)
        with pytest.raises(TypeError, match="cannot both be True"):
            env.rollout(2, break_when_any_done=True, break_when_all_done=True)

    def test_return_contiguous(self):
        # as TorchRL: return_contiguous=False still gives a dense TensorDict when the steps stack
        env = CountingEnv(max_steps=100)
        policy = CountingEnvCountPolicy(env.action_spec)
        for contiguous in (False, True, None):
            out = env.rollout(3, policy, return_contiguous=contiguous)
            assert type(out) is TensorDict and out["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]

    def test_out_is_filled_and_returned(self):
        env = CountingEnv(max_steps=100, batch_size=[2])
        policy = CountingEnvCountPolicy(env.action_spec)
        out = env.rollout(3, policy).zero_()
        result = env.rollout(3, policy, out=out)
        assert result is out
        assert out["next", "observation"].squeeze(-1).tolist() == [[1, 2, 3], [1, 2, 3]]

    def test_storing_device(self):
        data = CountingEnv().rollout(2, storing_device="cpu")
        assert data.device == torch.device("cpu")


class TestGarbageCollector:
    """Rollouts leave Python's cyclic GC alone (no process-wide side effects from library code)."""

    @pytest.mark.parametrize("enabled", [True, False])
    def test_rollout_leaves_the_gc_switch_alone(self, enabled):
        import gc

        was = gc.isenabled()
        (gc.enable if enabled else gc.disable)()
        try:
            seen = []
            PendulumEnv(seed=0).rollout(100, callback=lambda env, td: seen.append(gc.isenabled()))
            assert seen and all(s is enabled for s in seen) and gc.isenabled() is enabled
        finally:
            (gc.enable if was else gc.disable)()


class GrowingEnv(EnvBase):
    """The observation gains one row per step (a dynamic ``-1`` dim in its spec); done after 3 steps."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(observation=Unbounded(shape=(-1, 3)))
        self.action_spec = Unbounded(shape=(1,))
        self.reward_spec = Unbounded(shape=(1,))

    def _reset(self, td):
        self.count = 1
        return TensorDict({"observation": torch.ones(1, 3)}, [])

    def _step(self, td):
        self.count += 1
        return TensorDict({"observation": torch.full((self.count, 3), float(self.count)),
                           "reward": torch.ones(1), "done": torch.tensor([self.count >= 4])}, [])

    def _set_seed(self, seed):
        return seed


class TestHeterogeneousShapes:
    """Entries whose shape changes between steps roll out into lazy stacks, as in TorchRL."""

    def test_rollout_is_a_lazy_stack_of_the_steps(self):
        r = GrowingEnv().rollout(5, break_when_any_done=False)
        assert isinstance(r, LazyStackedTensorDict) and r.batch_size == (5,)
        assert [r[i]["observation"].shape[0] for i in range(5)] == [1, 2, 3, 1, 2]  # reset after step 3
        assert [r[i]["next", "observation"].shape[0] for i in range(5)] == [2, 3, 4, 2, 3]
        assert r["next", "reward"].shape == (5, 1)  # same-shape entries still read as dense tensors
        assert (r[2]["next", "observation"] == 4).all()

    def test_rollout_stops_at_done_and_step_mdp_keeps_shapes(self):
        r = GrowingEnv().rollout(10)
        assert r.batch_size == (3,)
        nxt = step_mdp(r[1])
        assert nxt["observation"].shape == (3, 3) and "next" not in nxt.keys()

    def test_same_shapes_stay_dense(self):
        r = PendulumEnv().rollout(4)
        assert type(r) is TensorDict

    def test_check_env_specs_accepts_dynamic_dims_only(self):
        from torchrl.envs import check_env_specs

        check_env_specs(GrowingEnv())

        class Wrong(GrowingEnv):  # the fixed dim (3) is violated
            def _step(self, td):
                out = super()._step(td)
                return out.set("observation", torch.zeros(self.count, 4))

        with pytest.raises(AssertionError, match=r"key \('next', 'observation'\): spec shape \(1, 3\), data shape \(2, 4\)"):
            check_env_specs(Wrong())

    def test_collector_batches(self):
        from torchrl.collectors import Collector

        collector = Collector(GrowingEnv(), None, frames_per_batch=5, total_frames=10)
        batches = list(collector)
        assert all(isinstance(b, LazyStackedTensorDict) and b.batch_size == (5,) for b in batches)
        assert [b[i]["observation"].shape[0] for b in batches for i in range(5)] == [1, 2, 3, 1, 2, 3, 1, 2, 3, 1]
        assert batches[0]["collector", "traj_ids"].tolist() == [0, 0, 0, 1, 1]


# ------------------------------------------------------------------------------------------ the "time" name
@pytest.mark.parametrize("batch_size", [[], [2]])
@pytest.mark.parametrize("kwargs", [{}, {"break_when_any_done": False}, {"return_contiguous": False}])
def test_rollout_names_its_time_dim(batch_size, kwargs):
    # as TorchRL: the rollout's last dim is named "time", the env's batch dims stay unnamed
    data = CountingEnv(max_steps=10, batch_size=batch_size).rollout(3, **kwargs)
    assert data.names == [None] * len(batch_size) + ["time"]
    assert data["next"].names == data.names
    if batch_size:
        assert data[0].names == ["time"] and data[:, 0].names == [None]


# ------------------------------------------------------------------------------------ plain-function policies
class _TwoObs(EnvBase):
    def __init__(self):
        super().__init__(batch_size=[])
        self.observation_spec = Composite(b=Unbounded((1,)), a=Unbounded((1,)))
        self.action_spec = Unbounded((1,))
        self.reward_spec = Unbounded((1,))

    def _reset(self, td):
        return TensorDict(a=torch.ones(1), b=torch.full((1,), 10.0))

    def _step(self, td):
        return TensorDict(a=td["a"] + td["action"], b=td["b"], reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool))

    def _set_seed(self, seed):
        return seed


def test_function_policy_gets_the_observations_positionally():
    # as TorchRL: a function that does not take a `tensordict`/`td` argument gets the observations (in the
    # spec's order) and returns the action
    data = _TwoObs().rollout(2, lambda x, y: x - y)
    assert data["action"].squeeze(-1).tolist() == [9.0, 0.0]
    data = CountingEnv(max_steps=100).rollout(3, lambda observation: torch.ones_like(observation, dtype=torch.int8))
    assert data["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]


def test_function_policy_taking_a_tensordict_gets_it():
    data = CountingEnv(max_steps=100).rollout(2, lambda td: td.set("action", torch.ones(1, dtype=torch.int8)))
    assert data["action"].squeeze(-1).tolist() == [1, 1]
    with pytest.raises(AttributeError, match="has no attribute 'set'"):  # any other name: observations, as TorchRL
        CountingEnv(max_steps=100).rollout(2, lambda t: t.set("action", torch.ones(1, dtype=torch.int8)))


class TestStepChunks:
    """Long rollouts stack every ``_CHUNK`` steps (bounding the GC's work); the result is the one-stack result."""

    @pytest.mark.parametrize("n", [1, 5, 8, 13])
    def test_chunked_stack_matches_one_stack(self, n):
        from torchrl._fast import stack_tds
        from torchrl.envs._rollout import _StepChunks
        from torchrl.envs._step_loop import run_steps

        env = CountingEnv(max_steps=3, batch_size=[2])
        steps, _ = run_steps(env, env.reset(), env.rand_action, n)
        sink = _StepChunks(1, 4)
        for td in steps:
            sink.append(td)
        ours, ref = sink.stack(None), stack_tds(steps, 1)
        assert ours.batch_size == ref.batch_size == (2, n) and (ours == ref).all()

    def test_structure_change_between_chunks_stacks_lazily(self):
        from tensordict import LazyStackedTensorDict
        from torchrl.envs._rollout import _StepChunks

        steps = [TensorDict({"obs": torch.zeros(t // 4 + 1)}, []) for t in range(8)]  # grows every 4 steps
        sink = _StepChunks(0, 4)
        for td in steps:
            sink.append(td)
        ours, ref = sink.stack(None), LazyStackedTensorDict.maybe_dense_stack(steps, 0)
        assert type(ours) is type(ref) and ours.batch_size == ref.batch_size
        assert all(torch.equal(ours[i]["obs"], ref[i]["obs"]) for i in range(8))

    def test_long_rollout_is_one_continuous_trajectory(self):
        data = PendulumEnv(seed=0).rollout(1100)  # chunks of 128 steps
        assert type(data) is TensorDict and data.batch_size == (1100,)
        assert torch.equal(data["observation"][1:], data["next", "observation"][:-1])
