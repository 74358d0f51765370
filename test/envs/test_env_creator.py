"""``EnvCreator``, ``env_creator``, ``EnvMetaData`` and ``get_env_metadata``."""
from __future__ import annotations

import multiprocessing as mp
import pickle

import pytest
import torch

from torchrl.envs import PendulumEnv
from torchrl.envs.batched_envs import ParallelEnv, SerialEnv
from torchrl.envs.env_creator import EnvCreator, EnvMetaData, env_creator, get_env_metadata
from torchrl.testing import CountingEnv, NestedCountingEnv

BUILT = []


def counted_env(**kwargs):
    BUILT.append(kwargs)
    return CountingEnv(**kwargs)


def counted_pendulum():
    BUILT.append("pendulum")
    return PendulumEnv()


class TestEnvMetaData:
    def test_from_env(self):
        env = NestedCountingEnv(nested_dim=2, batch_size=[3])
        meta = EnvMetaData.metadata_from_env(env)
        assert meta.batch_size == (3,)
        assert meta.device is None and meta.batch_locked
        assert meta.specs["output_spec", "full_observation_spec", "data", "states"].shape == (3, 2, 1)
        assert meta.specs["input_spec", "full_action_spec"] == env.full_action_spec
        assert meta.tensordict["data", "states"].shape == (3, 2, 1)
        assert int(meta.tensordict["data", "states"].abs().sum()) == 0
        assert ("output_spec", "full_done_spec", "data", "done") in meta.device_map
        assert "NestedCountingEnv" in meta.env_str

    def test_specs_are_a_copy(self):
        env = CountingEnv()
        meta = EnvMetaData.metadata_from_env(env)
        meta.specs["output_spec", "full_observation_spec"]["extra"] = meta.specs[
            "output_spec", "full_observation_spec", "observation"
        ].clone()
        assert "extra" not in env.full_observation_spec.keys()

    def test_expand_index_clone_to(self):
        meta = EnvMetaData.metadata_from_env(PendulumEnv())
        big = meta.expand(4, 2)
        assert big.batch_size == (4, 2)
        assert big.specs["output_spec", "full_observation_spec", "observation"].shape == (4, 2, 3)
        assert big.tensordict.batch_size == (4, 2)
        row = big[1]
        assert row.batch_size == (2,) and row.specs.shape == (2,)
        copy = meta.clone()
        assert copy.specs == meta.specs and copy.specs is not meta.specs
        moved = meta.to("cpu")
        assert moved.device == torch.device("cpu")
        assert all(d == torch.device("cpu") for d in moved.device_map.values())

    def test_pickles(self):
        meta = EnvMetaData.metadata_from_env(PendulumEnv())
        back = pickle.loads(pickle.dumps(meta))
        assert back.specs == meta.specs and back.batch_size == meta.batch_size

    def test_rejects_non_env(self):
        with pytest.raises(TypeError, match="expects an EnvBase, got int"):
            EnvMetaData.metadata_from_env(3)


class TestGetEnvMetadata:
    def test_from_callable_with_kwargs_and_validator(self):
        seen = []
        meta = get_env_metadata(CountingEnv, {"batch_size": [2]}, env_validator=seen.append)
        assert meta.batch_size == (2,)
        assert len(seen) == 1 and seen[0].is_closed  # validated, then closed

    def test_from_env(self):
        env = CountingEnv()
        assert get_env_metadata(env).specs["output_spec"] == env.output_spec
        assert not env.is_closed

    def test_from_creator_uses_cache(self):
        BUILT.clear()
        creator = EnvCreator(counted_env)
        assert get_env_metadata(creator) is creator.meta_data
        assert len(BUILT) == 1
        assert get_env_metadata(creator, {"batch_size": [3]}).batch_size == (3,)
        assert len(BUILT) == 2

    def test_factory_must_return_an_env(self):
        with pytest.raises(TypeError, match="create_env_fn must return an EnvBase, got int"):
            get_env_metadata(lambda: 3)


class TestEnvCreator:
    def test_metadata_and_calls(self):
        BUILT.clear()
        creator = EnvCreator(counted_env, {"max_steps": 3}, start_val=1)
        assert BUILT == [{"max_steps": 3, "start_val": 1}]
        assert creator.meta_data.specs["output_spec", "full_observation_spec", "observation"].dtype == torch.int32
        env = creator(max_steps=7)
        assert BUILT[-1] == {"max_steps": 7, "start_val": 1}
        assert env.max_steps == 7 and env.start_val == 1

    def test_make_variant_shares_metadata(self):
        creator = EnvCreator(CountingEnv, max_steps=3)
        variant = creator.make_variant(max_steps=9)
        assert variant.meta_data is creator.meta_data
        assert variant().max_steps == 9 and creator().max_steps == 3

    def test_state_is_shared_between_envs(self):
        creator = EnvCreator(CountingEnv)
        a, b = creator(), creator()
        a.count += 4
        assert b.count.item() == 4
        assert creator.state_dict()["count"].item() == 4
        assert creator.state_dict()["count"].is_shared()

    def test_load_state_dict(self):
        creator = EnvCreator(CountingEnv)
        env = creator()
        creator.load_state_dict({"count": torch.full((1,), 2, dtype=torch.int32)})
        assert env.count.item() == 2
        with pytest.raises(KeyError, match="unknown keys \\['nope'\\]"):
            creator.load_state_dict({"nope": torch.zeros(1)})

    @pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="needs fork")
    def test_state_is_shared_across_processes(self):
        creator = EnvCreator(CountingEnv)

        def child(c):
            env = c()
            env.count += 5

        proc = mp.get_context("fork").Process(target=child, args=(creator,))
        proc.start()
        proc.join(30)
        assert proc.exitcode == 0
        assert creator().count.item() == 5

    def test_unshared_memory(self):
        creator = EnvCreator(CountingEnv, share_memory=False)
        assert not creator.state_dict()["count"].is_shared()

    def test_pickles_lambdas(self):
        creator = EnvCreator(lambda: CountingEnv(max_steps=4))
        back = pickle.loads(pickle.dumps(creator))
        assert back().max_steps == 4
        assert back.meta_data.batch_size == ()

    def test_wrapping_a_creator(self):
        inner = EnvCreator(CountingEnv, max_steps=2)
        outer = EnvCreator(inner, start_val=1)
        env = outer()
        assert env.max_steps == 2 and env.start_val == 1

    def test_rejects_env_instance(self):
        with pytest.raises(TypeError, match="expects a callable that builds an env"):
            EnvCreator(CountingEnv())

    def test_decorator(self):
        @env_creator
        def make():
            return PendulumEnv()

        assert isinstance(make, EnvCreator)
        assert make().rollout(2).batch_size == (2,)


class TestCreatorInBatchedEnvs:
    def test_parallel_env_builds_no_env_in_the_parent(self):
        BUILT.clear()
        creator = EnvCreator(counted_pendulum)
        env = ParallelEnv(3, creator)
        try:
            assert env.rollout(2).batch_size == (3, 2)
            assert len(BUILT) == 1  # only the creator's own metadata probe; workers build theirs
        finally:
            env.close()

    def test_serial_env_with_creator(self):
        env = SerialEnv(2, EnvCreator(PendulumEnv))
        assert env.rollout(3).batch_size == (2, 3)
        env.close()

    def test_plain_callable_builds_one_env_per_distinct_kwargs(self):
        BUILT.clear()
        env = ParallelEnv(4, counted_env, create_env_kwargs=[{"max_steps": 1}, {"max_steps": 1}, {"max_steps": 2}, {"max_steps": 1}])
        assert BUILT == [{"max_steps": 1}, {"max_steps": 2}]
        assert env.max_steps == [1, 1, 2, 1]
        env.close()


def test_pickled_creator_keeps_state_values():
    creator = EnvCreator(CountingEnv)
    creator.load_state_dict({"count": torch.full((1,), 3, dtype=torch.int32)})
    back = pickle.loads(pickle.dumps(creator))
    assert back().count.item() == 3


# -- statistics kept as extra state (VecNormV2, VecNorm) are shared by every env of a creator ----------------


class _Ramp(CountingEnv):
    """``observation = [t, 2t]`` (float): 0 at reset, ``t`` after the ``t``-th step; never done."""

    def __init__(self):
        super().__init__(max_steps=1000)
        from torchrl.data import Composite, Unbounded

        self.observation_spec = Composite(observation=Unbounded((2,)))
        self.t = 0

    def _reset(self, tensordict):
        self.t = 0
        out = super()._reset(tensordict)
        out.set("observation", torch.zeros(2))
        return out

    def _step(self, tensordict):
        self.t += 1
        out = super()._step(tensordict)
        out.set("observation", torch.tensor([1.0, 2.0]) * self.t)
        return out


def ramp_vecnorm_v2():
    from torchrl.envs import TransformedEnv
    from torchrl.envs.transforms import VecNormV2

    return TransformedEnv(_Ramp(), VecNormV2(in_keys=["observation"], decay=1.0))


def ramp_vecnorm():
    from torchrl.envs import TransformedEnv
    from torchrl.envs.transforms.vecnorm import VecNorm

    return TransformedEnv(_Ramp(), VecNorm(in_keys=["observation"], decay=1.0))


def _v2_stats(state):
    extra = state["transform._extra_state"]
    return extra["count.-|-.observation"].item(), extra["loc.-|-.observation"].tolist(), extra["var.-|-.observation"].tolist()


def _v1_stats(state):
    extra = state["transform._extra_state"]
    return extra["observation_count"].item(), extra["observation_sum"].tolist(), extra["observation_ssq"].tolist()


class TestSharedStatistics:
    def test_extra_state_is_in_shared_memory(self):
        creator = EnvCreator(ramp_vecnorm_v2)
        extra = creator.state_dict()["transform._extra_state"]
        assert sorted(extra) == ["count.-|-.observation", "loc.-|-.observation", "var.-|-.observation"]
        assert all(t.is_shared() for t in extra.values())
        assert creator._lock is not None

    def test_envs_of_one_creator_share_vecnorm_v2_statistics(self):
        creator = EnvCreator(ramp_vecnorm_v2)
        a, b = creator(), creator()
        assert a.transform.lock is creator._lock
        a.rollout(3)  # reset + 3 steps: 0, 1, 2, 3
        b.rollout(1)  # reset + 1 step: 0, 1
        count, loc, var = _v2_stats(creator.state_dict())
        assert count == 6
        assert loc == pytest.approx([7 / 6, 14 / 6])  # decay=1: plain means of every sample
        assert var == pytest.approx([15 / 6, 60 / 6])  # second moments
        assert b.transform.state_dict()["_extra_state"]["count.-|-.observation"].item() == 6

    def test_parallel_env_workers_share_vecnorm_v2_statistics(self):
        creator = EnvCreator(ramp_vecnorm_v2)
        env = ParallelEnv(2, creator, mp_start_method="fork" if "fork" in mp.get_all_start_methods() else None)
        try:
            data = env.rollout(5, break_when_any_done=False)
        finally:
            env.close()
        count, loc, var = _v2_stats(creator.state_dict())
        # 2 workers x (reset + 5 steps): values 0..5 twice (one worker alone would count 6)
        assert count == 12
        assert loc == pytest.approx([30 / 12, 60 / 12])
        assert var == pytest.approx([110 / 12, 440 / 12])
        # the worker updating last sees all 12 samples, the other 11: (5 - 25/11) / std_11 and 2.5 / std_12
        last = sorted(data["next", "observation"][:, -1, 0].tolist())
        assert last == pytest.approx([2.5 / (110 / 12 - 6.25) ** 0.5, (5 - 25 / 11) / (85 / 11 - (25 / 11) ** 2) ** 0.5], rel=1e-4)
        # an env built afterwards, in this process, starts from the shared statistics
        assert creator().transform.loc["observation"].tolist() == pytest.approx([2.5, 5.0])

    @pytest.mark.slow
    def test_spawned_workers_share_statistics(self):
        # spawned workers get the creator through a plain pickler: it must send shared-memory handles, not copies
        creator = EnvCreator(ramp_vecnorm_v2)
        env = ParallelEnv(1, creator, mp_start_method="spawn")  # (one worker: spawning is slow)
        try:
            env.rollout(2, break_when_any_done=False)
        finally:
            env.close()
        count, loc, _ = _v2_stats(creator.state_dict())
        assert count == 3 and loc == pytest.approx([1.0, 2.0])  # 0, 1, 2

    def test_parallel_env_workers_share_vecnorm_statistics(self):
        creator = EnvCreator(ramp_vecnorm)
        assert creator().transform.lock is creator._lock
        env = ParallelEnv(2, creator)
        try:
            env.rollout(5, break_when_any_done=False)
        finally:
            env.close()
        count, total, ssq = _v1_stats(creator.state_dict())
        assert count == [12.0] or count == 12.0
        assert total == [30.0, 60.0] and ssq == [110.0, 440.0]

    def test_load_state_dict_writes_into_shared_extra_state(self):
        creator = EnvCreator(ramp_vecnorm_v2)
        env = creator()
        creator.load_state_dict({"transform._extra_state": {"count.-|-.observation": torch.tensor(4)}})
        assert env.transform.state_dict()["_extra_state"]["count.-|-.observation"].item() == 4
        with pytest.raises(KeyError, match="unknown entry 'nope' of 'transform._extra_state'"):
            creator.load_state_dict({"transform._extra_state": {"nope": torch.zeros(1)}})

    def test_pickled_creator_drops_the_lock_outside_process_start(self):
        creator = EnvCreator(ramp_vecnorm_v2)
        back = pickle.loads(pickle.dumps(creator))
        assert back._lock is None
        assert back().rollout(2).batch_size == (2,)

    def test_unshared_creator_copies_statistics_into_each_env(self):
        # without shared memory a VecNormV2 copies the creator's statistics (it adopts shared tensors only)
        creator = EnvCreator(ramp_vecnorm_v2, share_memory=False)
        assert creator._lock is None
        creator.load_state_dict({"transform._extra_state": {"count.-|-.observation": torch.tensor(3)}})
        a, b = creator(), creator()
        a.rollout(1)
        assert a.transform.state_dict()["_extra_state"]["count.-|-.observation"].item() == 5
        assert b.transform.state_dict()["_extra_state"]["count.-|-.observation"].item() == 3

    def test_stateless_vecnorm_v2_needs_no_lock(self):
        from torchrl.envs import TransformedEnv
        from torchrl.envs.transforms import VecNormV2

        creator = EnvCreator(lambda: TransformedEnv(_Ramp(), VecNormV2(in_keys=["observation"], stateful=False)))
        assert creator._lock is None and not creator.state_dict()["transform._extra_state"]
        env = creator()
        assert env.transform.lock is None
        assert env.rollout(2)["next", "_vecnorm_count", "observation"][-1].tolist() == [3, 3]  # reset + 2 steps
