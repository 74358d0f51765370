"""The wrapper contract (``wrapper_contract.py``) run on the wrappers of this package."""
from __future__ import annotations

import pytest

from torchrl.envs import GymEnv, GymWrapper
from torchrl.envs.libs.envpool import _has_envpool
from torchrl.envs.libs.gym import _has_gym

from test.envs.libs.wrapper_contract import WrapperContract




class TestGymEnvContinuousContract(WrapperContract):
    def make_env(self, seed=None):
        env = GymEnv("Pendulum-v1")
        if seed is not None:
            env.set_seed(seed)
        return env


class TestGymEnvDiscreteContract(WrapperContract):
    def make_env(self, seed=None):
        env = GymEnv("CartPole-v1")
        if seed is not None:
            env.set_seed(seed)
        return env


class TestGymWrapperContract(WrapperContract):
    def make_env(self, seed=None):
        import gymnasium

        env = GymWrapper(gymnasium.make("MountainCarContinuous-v0"))
        if seed is not None:
            env.set_seed(seed)
        return env


class TestBatchedGymEnvContract(WrapperContract):
    def make_env(self, seed=None):
        env = GymEnv("CartPole-v1", num_envs=2)
        if seed is not None:
            env.set_seed(seed)
        return env



@pytest.mark.skipif(not _has_envpool, reason="envpool installs only on some platforms (see test_envpool.py)")
class TestMultiThreadedEnvContract(WrapperContract):
    def make_env(self, seed=None):
        from torchrl.envs.libs.envpool import MultiThreadedEnv

        env = MultiThreadedEnv(2, "CartPole-v1")
        if seed is not None:
            env.set_seed(seed)
        return env
