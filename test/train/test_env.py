"""``make_env``: native or gymnasium env with time limit, float32 observations and episode returns."""
from __future__ import annotations

import pytest
import torch

from torchrl.envs import InitTracker, SerialEnv, VecNorm
from torchrl.train import make_batched_env, make_env, normalize_observations


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


def test_batched_native_env_is_one_batched_env():
    env = make_batched_env("PendulumEnv", 3, seed=0, max_episode_steps=5)
    assert env.batch_size == (3,) and not isinstance(env, SerialEnv)
    assert env.rollout(5)["next", "done"][:, -1].all()


def test_batched_gym_env_is_a_seeded_serial_env():
    pytest.importorskip("gymnasium")
    a = make_batched_env("CartPole-v1", 2, seed=3, max_episode_steps=500)
    b = make_batched_env("CartPole-v1", 2, seed=3, max_episode_steps=500)
    assert isinstance(a, SerialEnv) and a.batch_size == (2,)
    torch.testing.assert_close(a.reset()["observation"], b.reset()["observation"])
    assert not isinstance(make_batched_env("CartPole-v1", 1, seed=3), SerialEnv)


def test_normalize_observations_shares_frozen_statistics():
    train, evaluation = normalize_observations(make_env("PendulumEnv", seed=0, max_episode_steps=20),
                                               make_env("PendulumEnv", seed=1, max_episode_steps=20))
    train_norm, eval_norm = train.transform[-1], evaluation.transform[-1]
    assert isinstance(train_norm, VecNorm) and isinstance(eval_norm, VecNorm)
    before = eval_norm.loc["observation"].clone()
    train.rollout(20)
    moved = eval_norm.loc["observation"]
    assert not torch.equal(before, moved)  # the eval copy sees the training statistics ...
    torch.testing.assert_close(moved, train_norm.loc["observation"])
    evaluation.rollout(20)  # ... and does not update them
    torch.testing.assert_close(eval_norm.loc["observation"], moved)
