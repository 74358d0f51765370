"""``make_env``: native or gymnasium env with time limit, float32 observations and episode returns."""
from __future__ import annotations

import pytest
import torch

from torchrl.envs import InitTracker
from torchrl.train import make_env


def test_native_pendulum_time_limit_and_episode_reward():
    env = make_env("PendulumEnv", seed=1, max_episode_steps=7, batch_size=3)
    td = env.rollout(7)
    assert td.shape == (3, 7)
    assert td["next", "done"][:, -1].all() and not td["next", "done"][:, :-1].any()
    torch.testing.assert_close(td["next", "episode_reward"][:, -1], td["next", "reward"].sum(1))


def test_native_needs_a_time_limit():
    with pytest.raises(ValueError, match=r"PendulumEnv never ends by itself; pass max_episode_steps"):
        make_env("PendulumEnv")


def test_native_seed_reproduces_initial_states():
    a = make_env("PendulumEnv", seed=5, max_episode_steps=10).reset()["observation"]
    b = make_env("PendulumEnv", seed=5, max_episode_steps=10).reset()["observation"]
    torch.testing.assert_close(a, b)


def test_gym_pendulum():
    pytest.importorskip("gymnasium")
    env = make_env("Pendulum-v1", seed=0, max_episode_steps=200, transforms=[InitTracker()])
    td = env.rollout(5)
    assert td["next", "observation"].dtype == torch.float32
    assert "is_init" in td.keys() and ("next", "episode_reward") in td.keys(True)


def test_mujoco_observations_become_float32(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")  # the mujoco extra; installed in the test environment
    monkeypatch.chdir(tmp_path)  # MuJoCo writes MUJOCO_LOG.TXT into the working directory
    env = make_env("HalfCheetah-v5", seed=0)
    assert env.base_env.observation_spec["observation"].dtype == torch.float64
    assert env.observation_spec["observation"].dtype == torch.float32
    assert env.rollout(3)["next", "observation"].dtype == torch.float32
