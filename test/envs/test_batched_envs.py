"""``SerialEnv`` and ``ParallelEnv``: specs, rollouts against hand-stepped sub-envs, partial resets, seeding,
lifetime, remote attributes, start methods."""
from __future__ import annotations

import math
import multiprocessing as mp
import pickle

import pytest
import torch
from tensordict import LazyStackedTensorDict

from torchrl.data import Bounded
from torchrl.envs import PendulumEnv, RewardClipping, StepCounter, TransformedEnv
from torchrl.envs.batched_envs import BatchedEnvBase, ParallelEnv, SerialEnv
from torchrl.testing import CountingEnv, CountingEnvCountPolicy, HeterogeneousCountingEnv, NestedCountingEnv

BATCHED = [SerialEnv, ParallelEnv]


class ResetCountingEnv(CountingEnv):
    """A CountingEnv that counts its own resets (read back through remote attribute access)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.resets = 0

    def _reset(self, tensordict, **kwargs):
        self.resets += 1
        return super()._reset(tensordict, **kwargs)

    def times(self, k):
        return self.max_steps * k


def make_counter(max_steps=5):
    return ResetCountingEnv(max_steps=max_steps)


@pytest.fixture(params=BATCHED, ids=["serial", "parallel"])
def batched(request):
    made = []

    def make(*args, **kwargs):
        env = request.param(*args, **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close(raise_if_closed=False)


class TestSpecs:
    def test_batch_size_and_specs(self, batched):
        env = batched(3, PendulumEnv)
        assert isinstance(env, BatchedEnvBase)
        assert env.batch_size == (3,)
        assert env.full_observation_spec["observation"].shape == (3, 3)
        assert env.action_spec.shape == (3, 1)
        assert env.full_done_spec["done"].shape == (3, 1)
        assert env.batch_locked
        td = env.reset()
        assert td.batch_size == (3,)
        assert env.observation_spec.is_in(td.select(*env.observation_spec.keys(True, True)))

    def test_sub_batched_envs(self, batched):
        env = batched(2, CountingEnv, create_env_kwargs={"batch_size": [3], "max_steps": 2})
        assert env.batch_size == (2, 3)
        data = env.rollout(5, CountingEnvCountPolicy(env.action_spec), break_when_any_done=False)
        assert data.batch_size == (2, 3, 5)
        # every counter restarts after exceeding max_steps=2: 1, 2, 3, then reset -> 1, 2
        assert data["next", "observation"][1, 2].squeeze(-1).tolist() == [1, 2, 3, 1, 2]

    def test_nested_keys(self, batched):
        env = batched(2, NestedCountingEnv, create_env_kwargs={"nested_dim": 2, "max_steps": 2})
        assert env.done_keys == [("data", "done"), ("data", "terminated")]
        assert env.reset_keys == [("data", "_reset")]
        data = env.rollout(4, break_when_any_done=False)
        assert data["next", "data", "states"].shape == (2, 4, 2, 1)
        assert data["data", "action"].shape == (2, 4, 2, 1)

    def test_per_worker_bounds_are_stacked(self, batched):
        env = batched(
            2, lambda low: TransformedEnv(PendulumEnv(), RewardClipping(clamp_min=low, clamp_max=0.0)),
            create_env_kwargs=[{"low": -3.0}, {"low": -7.0}],
        )
        spec = env.full_reward_spec["reward"]
        assert isinstance(spec, Bounded)
        assert spec.shape == (2, 1)
        assert spec.space.low.squeeze(-1).tolist() == [-3.0, -7.0]

    def test_different_specs_raise_at_construction(self, batched):
        with pytest.raises(
            ValueError,
            match=r"worker 1's env has different specs from worker 0's: key 'observation' of the observation spec: "
            r"UnboundedDiscrete\(shape=\(1,\), dtype=torch.int32\) vs BoundedContinuous\(shape=\(3,\)",
        ):
            batched(2, [lambda: CountingEnv(), lambda: PendulumEnv()])

    def test_different_shapes_name_the_key(self, batched):
        with pytest.raises(ValueError, match=r"worker 2's env .*: batch size: shape \(\) vs \(4,\)"):
            batched(3, CountingEnv, create_env_kwargs=[{}, {}, {"batch_size": [4]}])
        with pytest.raises(ValueError, match=r"worker 1's env .*: key 'data' of the observation spec: shape \(2,\) vs \(3,\)"):
            batched(2, NestedCountingEnv, create_env_kwargs=[{"nested_dim": 2}, {"nested_dim": 3}])

    def test_heterogeneous_specs_are_rejected(self, batched):
        with pytest.raises(ValueError, match=r"spec .*'observation'.* varies within the env"):
            batched(2, HeterogeneousCountingEnv)

    def test_env_instance_is_rejected(self, batched):
        with pytest.raises(TypeError, match="is an env instance.*pass a function that builds a new env"):
            batched(2, PendulumEnv())

    def test_argument_checks(self, batched):
        # TorchRL's types (IndexError, TypeError, RuntimeError); ours are ValueErrors too
        with pytest.raises(IndexError, match="num_workers must be a positive int, got 0"):
            batched(0, PendulumEnv)
        with pytest.raises(TypeError, match="num_workers must be a positive int, got 1.5"):
            batched(1.5, PendulumEnv)
        with pytest.raises(RuntimeError, match="list of 3 callables but num_workers=2"):
            batched(2, [PendulumEnv] * 3)
        with pytest.raises(RuntimeError, match="list of 1 dicts but num_workers=2"):
            batched(2, PendulumEnv, create_env_kwargs=[{}])
        with pytest.raises(ValueError, match="num_workers must be a positive int, got -1"):
            batched(-1, PendulumEnv)

    def test_repr_and_spec_devices(self, batched):
        env = batched(2, CountingEnv)
        assert repr(env) == f"{type(env).__name__}(\n\tenv=CountingEnv(), \n\tbatch_size=torch.Size([2]))"
        # as TorchRL: without a device, the spec parts are on the leaves' device (CPU), the env has none
        assert env.device is None and env.full_observation_spec.device == torch.device("cpu")
        assert env.full_state_spec.device == torch.device("cpu") and env.output_spec.device is None
        with pytest.raises(ValueError, match="mutually exclusive"):
            batched(2, PendulumEnv, memmap=True)


class TestRollout:
    @staticmethod
    def _by_hand(seed, actions, n):
        out, nxt = [], seed
        for i in range(n):
            env = PendulumEnv()
            nxt = env.set_seed(nxt)
            out.append(env.rollout(actions.shape[0], actions=[a[i] for a in actions]))
        return out, nxt

    def test_rollout_equals_sub_envs_stepped_by_hand(self, batched):
        torch.manual_seed(0)
        actions = torch.rand(6, 3, 1) * 4 - 2
        env = batched(3, PendulumEnv)
        next_seed = env.set_seed(7)
        data = env.rollout(6, actions=list(actions))
        expected, expected_next = self._by_hand(7, actions, 3)
        assert next_seed == expected_next
        for i in range(3):
            for key in ["observation", ("next", "observation"), ("next", "reward"), ("next", "th"), "action"]:
                torch.testing.assert_close(data[i][key], expected[i][key])

    def test_step_writes_next(self, batched):
        env = batched(2, CountingEnv)
        td = env.reset()
        td["action"] = torch.ones(2, 1, dtype=torch.int8)
        out = env.step(td)
        assert out is td
        assert td["next", "observation"].squeeze(-1).tolist() == [1, 1]
        assert td["next", "reward"].shape == (2, 1)

    def test_outputs_are_fresh_tensors(self, batched):
        env = batched(2, CountingEnv, create_env_kwargs={"max_steps": 100})
        data = env.rollout(4, CountingEnvCountPolicy(env.action_spec))
        # each step keeps its own values (no step aliases a buffer overwritten later)
        assert data["next", "observation"][0].squeeze(-1).tolist() == [1, 2, 3, 4]

    def test_break_when_any_done(self, batched):
        env = batched(2, CountingEnv, create_env_kwargs=[{"max_steps": 1}, {"max_steps": 5}])
        data = env.rollout(10, CountingEnvCountPolicy(env.action_spec))
        assert data.batch_size == (2, 2)

    def test_share_individual_td(self, batched):
        env = batched(2, CountingEnv, share_individual_td=True)
        td = env.rand_step(env.reset())
        assert isinstance(td["next"], LazyStackedTensorDict)
        assert td["next", "observation"].shape == (2, 1)

    def test_policy_outputs_are_kept(self, batched):
        env = batched(2, PendulumEnv)

        def policy(td):
            td["action"] = torch.zeros(2, 1)
            td["hidden"] = torch.ones(2, 4)
            return td

        data = env.rollout(3, policy)
        assert data["hidden"].shape == (2, 3, 4)


class TestPartialReset:
    @pytest.mark.parametrize("break_when_all_done", [False, True])
    def test_only_finished_workers_reset(self, batched, break_when_all_done):
        env = batched(2, make_counter, create_env_kwargs=[{"max_steps": 1}, {"max_steps": 3}])
        kwargs = {"break_when_all_done": True} if break_when_all_done else {"break_when_any_done": False}
        data = env.rollout(6, CountingEnvCountPolicy(env.action_spec), **kwargs)
        obs = data["next", "observation"].squeeze(-1)
        assert obs[0].tolist() == [1, 2, 1, 2, 1, 2][: obs.shape[1]]
        assert obs[1].tolist() == [1, 2, 3, 4, 1, 2][: obs.shape[1]]
        # the root observation after a reset is the restarted counter
        assert data["observation"][0].squeeze(-1).tolist() == [0, 1, 0, 1, 0, 1][: obs.shape[1]]
        if not break_when_all_done:
            # one initial reset each, then worker 0 restarts after steps 2, 4 and 6, worker 1 after step 4
            assert env.resets == [4, 2]

    def test_reset_mask_keeps_other_rows(self, batched):
        env = batched(3, make_counter, create_env_kwargs={"max_steps": 10})
        td = env.reset()
        for _ in range(2):
            td["action"] = torch.ones(3, 1, dtype=torch.int8)
            td = env.step_mdp(env.step(td))
        td["_reset"] = torch.tensor([[False], [True], [False]])
        out = env.reset(td)
        assert out["observation"].squeeze(-1).tolist() == [2, 0, 2]
        assert env.resets == [1, 2, 1]
        assert "_reset" not in out.keys()

    def test_reset_mask_without_trailing_dim(self, batched):
        env = batched(2, make_counter, create_env_kwargs={"max_steps": 10})
        td = env.reset()
        td["_reset"] = torch.tensor([True, False])
        env.reset(td)
        assert env.resets == [2, 1]

    def test_nested_reset_mask(self, batched):
        env = batched(2, NestedCountingEnv, create_env_kwargs={"nested_dim": 2, "max_steps": 10})
        td = env.reset()
        td["data", "action"] = torch.ones(2, 2, 1, dtype=torch.int8)
        td = env.step_mdp(env.step(td))
        td["data", "_reset"] = torch.tensor([[[False], [True]], [[False], [False]]])
        out = env.reset(td)
        assert out["data", "states"].squeeze(-1).tolist() == [[1, 0], [1, 1]]


class ForgetfulEnv(CountingEnv):
    """Declares an observation that its step does not return."""

    def _step(self, tensordict):
        return super()._step(tensordict).exclude("observation")


class TestWithOtherEnvs:
    def test_missing_step_output_is_reported(self, batched):
        env = batched(2, ForgetfulEnv)
        with pytest.raises((KeyError, RuntimeError), match="did not return .*'observation'"):
            env.rand_step(env.reset())

    def test_transformed_batched_env(self, batched):
        env = TransformedEnv(batched(2, CountingEnv, create_env_kwargs={"max_steps": 100}), StepCounter(3))
        env.base_env.start()
        data = env.rollout(5, CountingEnvCountPolicy(env.action_spec), break_when_any_done=False)
        assert data["next", "step_count"].squeeze(-1).tolist() == [[1, 2, 3, 1, 2]] * 2
        assert data["next", "observation"][0].squeeze(-1).tolist() == [1, 2, 3, 1, 2]

    @pytest.mark.parametrize(
        "name, steps, seed, action",
        [
            ("CartPole-v1", 60, 11, lambda t: torch.nn.functional.one_hot(torch.tensor([t % 2, (t // 3) % 2]), 2)),
            # float actions and truncation at 200 steps
            ("Pendulum-v1", 230, 5, lambda t: torch.tensor([[math.sin(t / 7.0)], [math.cos(t / 5.0)]]) * 2),
        ],
    )
    def test_gym_envs_serial_and_parallel_agree(self, name, steps, seed, action):
        # ParallelEnv's workers step gym envs straight into the shared rows; SerialEnv steps them the generic
        # way: every entry must be the same, across episode ends and partial resets
        from torchrl.envs.libs.gym import GymEnv

        actions = [action(t) for t in range(steps)]
        out = []
        for cls in BATCHED:
            env = cls(2, lambda: GymEnv(name))
            env.set_seed(seed)
            out.append(env.rollout(steps, actions=actions, break_when_any_done=False))
            env.close()
        serial, parallel = out
        done = serial["next", "done"].squeeze(-1)
        if name == "CartPole-v1":
            assert (done[0] != done[1]).any(), "the workers' episodes should end at different steps (partial resets)"
        else:
            assert int(serial["next", "truncated"].sum()) == 2
        assert set(serial.keys(True, True)) == set(parallel.keys(True, True))
        for key in serial.keys(True, True):
            assert torch.equal(serial[key], parallel[key]), key


class TestSeeding:
    def test_distinct_and_reproducible(self, batched):
        env_a = batched(3, PendulumEnv)
        env_b = batched(3, PendulumEnv)
        assert env_a.set_seed(3) == env_b.set_seed(3)
        obs_a, obs_b = env_a.reset()["th"], env_b.reset()["th"]
        assert torch.equal(obs_a, obs_b)
        assert len(set(obs_a.tolist())) == 3
        env_b.set_seed(4)
        assert not torch.equal(env_b.reset()["th"], obs_a)

    def test_static_seed(self, batched):
        env = batched(2, PendulumEnv)
        assert env.set_seed(5, static_seed=True) == 5
        th = env.reset()["th"]
        assert th[0] == th[1]


class TestLifetime:
    def test_lazy_start_close_restart(self, batched):
        env = batched(2, CountingEnv)
        assert env.is_closed
        with pytest.raises(RuntimeError, match="already closed \\(or was never started\\)"):
            env.close()
        env.start()
        assert not env.is_closed
        with pytest.raises(RuntimeError, match="already running"):
            env.start()
        env.close()
        assert env.is_closed
        assert env.reset().batch_size == (2,)  # any use restarts it
        assert not env.is_closed

    def test_update_kwargs(self, batched):
        env = batched(2, make_counter, create_env_kwargs={"max_steps": 1})
        env.update_kwargs([{"max_steps": 2}, {"max_steps": 4}])
        assert env.max_steps == [2, 4]
        env.close()
        env.update_kwargs({"max_steps": 6})
        assert env.max_steps == [6, 6]

    def test_remote_attributes_and_methods(self, batched):
        env = batched(2, make_counter, create_env_kwargs=[{"max_steps": 2}, {"max_steps": 3}])
        assert env.max_steps == [2, 3]
        assert env.times(10) == [20, 30]
        assert env[1].max_steps == 3
        with pytest.raises(AttributeError, match="no attribute 'not_there'"):
            env.not_there

    def test_unstarted_env_pickles(self, batched):
        env = batched(2, lambda: CountingEnv(max_steps=1))
        copy = pickle.loads(pickle.dumps(env))
        try:
            assert copy.rollout(5, CountingEnvCountPolicy(copy.action_spec)).batch_size == (2, 2)
        finally:
            copy.close()
        env.start()
        with pytest.raises(RuntimeError, match="a running env cannot be pickled"):
            pickle.dumps(env)

    def test_device_option_returns_fresh_outputs(self, batched):
        env = batched(2, CountingEnv, device="cpu", create_env_kwargs={"max_steps": 100})
        assert env.device == torch.device("cpu")
        data = env.rollout(3, CountingEnvCountPolicy(env.action_spec))
        assert data["next", "observation"][0].squeeze(-1).tolist() == [1, 2, 3]
        assert data.device == torch.device("cpu")

    def test_state_dict(self, batched):
        env = batched(2, CountingEnv)
        env.reset()
        sd = env.state_dict()
        assert list(sd) == ["worker0", "worker1"]
        sd["worker1"]["count"] = torch.full((1,), 4, dtype=torch.int32)
        env.load_state_dict(sd)
        assert [c.item() for c in env.count] == [0, 4]


class TestParallelSpecifics:
    def test_serial_for_single(self):
        env = ParallelEnv(1, CountingEnv, serial_for_single=True)
        assert type(env) is SerialEnv and env.batch_size == (1,)
        env = ParallelEnv(1, CountingEnv)
        assert type(env) is ParallelEnv

    def test_make_parallel(self):
        env = ParallelEnv.make_parallel(CountingEnv, num_envs=3)
        try:
            assert env.reset().batch_size == (3,)
        finally:
            env.close()

    def test_without_buffers(self):
        env = ParallelEnv(2, make_counter, use_buffers=False, create_env_kwargs=[{"max_steps": 1}, {"max_steps": 2}])
        try:
            data = env.rollout(4, CountingEnvCountPolicy(env.action_spec), break_when_any_done=False)
            assert data["next", "observation"].squeeze(-1).tolist() == [[1, 2, 1, 2], [1, 2, 3, 1]]
        finally:
            env.close()

    def test_memmap_buffers(self):
        env = ParallelEnv(2, CountingEnv, memmap=True, shared_memory=False)
        try:
            assert env.rollout(3, CountingEnvCountPolicy(env.action_spec))["next", "observation"][1, -1].item() == 3
        finally:
            env.close()

    @pytest.mark.parametrize("daemon", [False, True])
    def test_daemon_option(self, daemon):
        before = set(mp.active_children())
        env = ParallelEnv(2, CountingEnv, daemon=daemon)
        try:
            env.start()
            workers = [p for p in mp.active_children() if p not in before]
            assert len(workers) == 2 and all(p.daemon is daemon for p in workers)
        finally:
            env.close()

    def test_cannot_replace_worker(self):
        env = ParallelEnv(2, CountingEnv)
        with pytest.raises(TypeError, match="cannot be replaced"):
            env[0] = CountingEnv()
        with pytest.raises(IndexError, match="worker index in \\[0, 2\\)"):
            env[2]

    def test_unknown_start_method(self):
        with pytest.raises(ValueError, match="mp_start_method='nope' is not available"):
            ParallelEnv(2, CountingEnv, mp_start_method="nope")

    @pytest.mark.slow
    def test_spawn(self):
        # CountingEnv comes from an importable module: the spawned workers do not import this test file.
        env = ParallelEnv(2, CountingEnv, mp_start_method="spawn", create_env_kwargs=[{"max_steps": 1}, {}])
        try:
            data = env.rollout(3, CountingEnvCountPolicy(env.action_spec), break_when_any_done=False)
            assert data["next", "observation"].squeeze(-1).tolist() == [[1, 2, 1], [1, 2, 3]]
            assert env.max_steps == [1, 5]
        finally:
            env.close()


class TestSerialSpecifics:
    def test_getitem_setitem(self):
        env = SerialEnv(2, CountingEnv)
        assert isinstance(env[0], CountingEnv)
        env[1] = CountingEnv(start_val=3)
        assert env.reset()["observation"].squeeze(-1).tolist() == [0, 3]
        with pytest.raises(ValueError, match="different specs from sub-env 0"):
            env[0] = PendulumEnv()
        env.close()

    def test_stateful_factory_with_changing_specs(self):
        calls = []

        def factory():
            calls.append(1)
            return CountingEnv() if len(calls) == 1 else CountingEnv(batch_size=[2])

        env = SerialEnv(2, factory)
        with pytest.raises(ValueError, match="worker 0's env has different specs.*batch size"):
            env.reset()

    def test_input_is_not_modified(self):
        env = SerialEnv(2, CountingEnv)
        td = env.reset()
        td["action"] = torch.ones(2, 1, dtype=torch.int8)
        keys = set(td.keys())
        env.step(td)
        assert set(td.keys()) == keys | {"next"}
        env.close()

