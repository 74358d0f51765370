"""Vector gymnasium envs under ``GymWrapper`` / ``GymEnv``: batch shapes and partial resets.

The key property: whatever the vector env's autoreset mode, a step's ``"next"`` data belong to the
episode the step was taken in, and the following root observation is the first of the next episode.
Each rollout is replayed in independent single envs seeded like the vector env's sub-envs.
"""
from __future__ import annotations

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from tensordict import TensorDict

from torchrl.envs import check_env_specs
from torchrl.envs.gym_like import default_info_dict_reader
from torchrl.envs.libs.gym import GymEnv, GymWrapper

from test.envs.libs._gym_envs import CountEnv

N = 3


def _replay_sub_envs(rollout: TensorDict, make, seed: int) -> int:
    """Replays every sub-env's actions in its own single env; returns the number of episode ends."""
    ends = 0
    for i in range(rollout.shape[0]):
        env = make()
        env.reset(seed=seed + i)  # set_seed resets with the seed at once (TorchRL): the rollout starts after
        obs, _ = env.reset()
        for t in range(rollout.shape[1]):
            step = rollout[i, t]
            np.testing.assert_array_equal(step["observation"].numpy(), obs, err_msg=f"sub-env {i}, step {t}")
            obs, reward, terminated, truncated, _ = env.step(int(step["action"].argmax()))
            np.testing.assert_array_equal(step["next", "observation"].numpy(), obs, err_msg=f"sub-env {i}, step {t}")
            assert step["next", "reward"].item() == reward
            assert step["next", "terminated"].item() == terminated
            assert step["next", "truncated"].item() == truncated
            if terminated or truncated:
                ends += 1
                obs, _ = env.reset()
    return ends


def _cartpole():
    return gymnasium.make("CartPole-v1")


def test_gym_env_num_envs_specs():
    env = GymEnv("CartPole-v1", num_envs=N, vectorization_mode="sync")
    assert env.batch_size == torch.Size([N])
    assert env.observation_spec["observation"].shape == torch.Size([N, 4])
    assert env.action_spec.shape == torch.Size([N, 2])
    assert env.reward_spec.shape == torch.Size([N, 1])
    assert env.full_done_spec["truncated"].shape == torch.Size([N, 1])
    assert env._env.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    check_env_specs(env)


def test_gym_env_num_envs_matches_single_envs():
    env = GymEnv("CartPole-v1", num_envs=N, vectorization_mode="sync")
    env.set_seed(10)
    torch.manual_seed(0)
    rollout = env.rollout(80, break_when_any_done=False)
    assert rollout.shape == torch.Size([N, 80])
    assert _replay_sub_envs(rollout, _cartpole, seed=10) >= 3


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_wrapped_vector_env_autoreset_modes(mode):
    vec = gymnasium.make_vec("CartPole-v1", num_envs=N, vectorization_mode="sync", vector_kwargs={"autoreset_mode": mode})
    env = GymWrapper(vec)
    assert env.batch_size == torch.Size([N])
    env.set_seed(5)
    torch.manual_seed(1)
    rollout = env.rollout(80, break_when_any_done=False)
    assert _replay_sub_envs(rollout, _cartpole, seed=5) >= 3
    # no step mixes two episodes: within an episode, next observations are the following root ones
    done = rollout["next", "done"].squeeze(-1)
    same = (rollout["next", "observation"][:, :-1] == rollout["observation"][:, 1:]).all(-1)
    assert torch.equal(same, ~done[:, :-1])


def test_same_step_partial_reset_of_running_sub_env():
    # resetting a sub-env that has not finished needs the vector env's reset_mask (SyncVectorEnv has it)
    vec = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP})
    env = GymWrapper(vec)
    td = env.reset()
    td = env.step_mdp(env.rand_step(td))
    before = td["observation"].clone()
    td["_reset"] = torch.tensor([[False], [True]])
    out = env.reset(td)
    assert torch.equal(out["observation"][0], before[0])
    assert (out["observation"][1].abs() <= 0.05).all()


def test_vector_entry_point_env_cannot_reset_partially():
    vec = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="vector_entry_point")
    env = GymWrapper(vec, categorical_action_encoding=True)
    rollout = env.rollout(600)  # stops at the first end: a full reset is fine
    assert rollout["next", "done"][:, -1].any()
    td = env.reset()
    td["_reset"] = torch.tensor([[True], [False]])
    with pytest.raises(RuntimeError, match="cannot reset only sub-envs"):
        env.reset(td)


def test_async_default():
    env = GymEnv("CartPole-v1", num_envs=2)
    try:
        assert type(env._env).__name__ == "AsyncVectorEnv"
        env.set_seed(3)
        torch.manual_seed(3)
        rollout = env.rollout(40, break_when_any_done=False)
        _replay_sub_envs(rollout, _cartpole, seed=3)
    finally:
        env.close()


def test_vector_info_reader_and_masks():
    vec = SyncVectorEnv([lambda: CountEnv(end=3), lambda: CountEnv(end=5)], autoreset_mode=AutoresetMode.NEXT_STEP)
    env = GymWrapper(vec).set_info_dict_reader(default_info_dict_reader(["count", "even"]))
    assert env.observation_spec["count"].shape == torch.Size([2])
    actions = [torch.tensor([[1, 0], [1, 0]])] * 6
    rollout = env.rollout(6, actions=actions, break_when_any_done=False)
    assert rollout["next", "count"].tolist() == [[1, 2, 3, 1, 2, 3], [1, 2, 3, 4, 5, 1]]
    assert rollout["next", "observation"].squeeze(-1).tolist() == [[1, 2, 3, 1, 2, 3], [1, 2, 3, 4, 5, 1]]
    assert rollout["observation"].squeeze(-1).tolist() == [[0, 1, 2, 0, 1, 2], [0, 1, 2, 3, 4, 0]]
    assert rollout["next", "terminated"].squeeze(-1).tolist() == [
        [False, False, True, False, False, True],
        [False, False, False, False, True, False],
    ]


def test_vector_same_step_final_obs_swap_with_count_env():
    vec = SyncVectorEnv([lambda: CountEnv(end=2), lambda: CountEnv(end=4)], autoreset_mode=AutoresetMode.SAME_STEP)
    env = GymWrapper(vec)
    rollout = env.rollout(5, actions=[torch.tensor([[1, 0], [1, 0]])] * 5, break_when_any_done=False)
    assert rollout["next", "observation"].squeeze(-1).tolist() == [[1, 2, 1, 2, 1], [1, 2, 3, 4, 1]]
    assert rollout["observation"].squeeze(-1).tolist() == [[0, 1, 0, 1, 0], [0, 1, 2, 3, 0]]


def test_vector_pixels():
    vec = SyncVectorEnv([lambda: CountEnv(end=9, render_mode="rgb_array")] * 2)
    env = GymWrapper(vec, from_pixels=True)
    assert env.observation_spec["pixels"].shape == torch.Size([2, 2, 3, 3])
    rollout = env.rollout(2, actions=[torch.tensor([[1, 0], [0, 1]])] * 2)
    assert rollout["next", "pixels"][:, :, 0, 0, 0].tolist() == [[1, 2], [2, 4]]


def test_vector_batch_size_mismatch():
    with pytest.raises(ValueError, match="contradicts the vector env's num_envs=2"):
        GymWrapper(SyncVectorEnv([lambda: CountEnv()] * 2), batch_size=[3])
