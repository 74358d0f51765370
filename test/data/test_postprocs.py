"""``torchrl.data.postprocs``: n-step returns and dense rewards against hand-computed answers."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.postprocs import DensifyReward, MultiStep


def rollout(rewards, dones) -> TensorDict:
    n = len(rewards)
    obs = torch.arange(n, dtype=torch.float32)
    return TensorDict(
        observation=obs,
        next=TensorDict(
            observation=obs + 1, reward=torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1),
            done=torch.tensor(dones).unsqueeze(-1), batch_size=[n],
        ),
        batch_size=[n],
    )


def test_multistep_known_answers():
    td = rollout([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [False, False, True, False, False, False])
    out = MultiStep(gamma=0.9, n_steps=3)(td)
    expected = [1 + 0.9 * 2 + 0.81 * 3, 2 + 0.9 * 3, 3.0, 4 + 0.9 * 5 + 0.81 * 6, 5 + 0.9 * 6, 6.0]
    torch.testing.assert_close(out["next", "reward"].squeeze(-1), torch.tensor(expected))
    assert out["steps_to_next_obs"].squeeze(-1).tolist() == [3, 2, 1, 3, 2, 1]
    assert out["next", "observation"].tolist() == [3.0, 3.0, 3.0, 6.0, 6.0, 6.0]
    assert out["next", "done"].squeeze(-1).tolist() == [True, True, True, False, False, False]
    assert torch.equal(out["original_reward"], td["next", "reward"])
    assert torch.equal(out["observation"], td["observation"])


def test_multistep_batched_time_last_and_one_step_identity():
    td = torch.stack([rollout([1.0, 1.0, 1.0], [False] * 3), rollout([2.0, 2.0, 2.0], [False, True, False])])
    out = MultiStep(gamma=0.5, n_steps=2)(td)
    assert out["next", "reward"].squeeze(-1).tolist() == [[1.5, 1.5, 1.0], [3.0, 2.0, 2.0]]
    same = MultiStep(gamma=0.5, n_steps=1)(td)
    assert torch.equal(same["next", "reward"], td["next", "reward"])
    assert torch.equal(same["next", "observation"], td["next", "observation"])
    with pytest.raises(ValueError, match="n_steps must be >= 1"):
        MultiStep(0.9, 0)
    with pytest.raises(KeyError, match=r"needs \('next', 'done'\)"):
        MultiStep(0.9, 2)(TensorDict(next=TensorDict(reward=torch.ones(2, 1), batch_size=[2]), batch_size=[2]))


def test_densify_reward():
    td = TensorDict(
        reward=torch.tensor([[0.0, 0.0, 1.0, 0.0, 0.0, 4.0]]).unsqueeze(-1),
        done=torch.tensor([[False, False, True, False, False, True]]).unsqueeze(-1),
        batch_size=[1, 6],
    )
    out = DensifyReward(time_dim=1, discount=0.5, reward_key_out="dense")(td)
    assert out["dense"].squeeze(-1).tolist() == [[0.25, 0.5, 1.0, 1.0, 2.0, 4.0]]
    assert torch.equal(out["reward"], td["reward"])
    with pytest.raises(ValueError, match="time_dim=5 is not a dim of the reward"):
        DensifyReward(time_dim=5)(td)
