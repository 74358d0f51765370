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
