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
    # TorchRL's entries: batch-shaped steps_to_next_obs / gamma / nonterminal, ("next", "original_reward")
    assert out["steps_to_next_obs"].tolist() == [3, 2, 1, 3, 2, 1] and out["steps_to_next_obs"].dtype == torch.int64
    torch.testing.assert_close(out["gamma"], torch.tensor([0.729, 0.81, 0.9, 0.729, 0.81, 0.9]))
    assert out["nonterminal"].tolist() == [True, True, False, True, True, False]
    assert out["next", "observation"].tolist() == [3.0, 3.0, 3.0, 6.0, 6.0, 6.0]
    # deliberate difference with TorchRL: done flags follow the observation (so the bootstrap is masked)
    assert out["next", "done"].squeeze(-1).tolist() == [True, True, True, False, False, False]
    assert torch.equal(out["next", "original_reward"], td["next", "reward"])
    assert torch.equal(out["observation"], td["observation"])


def test_multistep_window_longer_than_the_batch():
    """n_steps larger than the time dim used to crash in narrow(); the window is cut at the batch end."""
    td = rollout([1.0, 2.0, 3.0, 4.0, 5.0], [False, False, True, False, False])
    out = MultiStep(gamma=0.9, n_steps=8)(td)
    same = MultiStep(gamma=0.9, n_steps=5)(td)
    # TorchRL 0.14.1's values
    torch.testing.assert_close(out["next", "reward"].squeeze(-1), torch.tensor([5.23, 4.7, 3.0, 8.5, 5.0]))
    assert out["steps_to_next_obs"].tolist() == [3, 2, 1, 2, 1]
    assert torch.equal(out["next", "reward"], same["next", "reward"])
    batched = torch.stack([rollout([1.0, 2.0, 3.0, 4.0], [False, True, False, False]),
                           rollout([5.0, 6.0, 7.0, 8.0], [False] * 4)])
    out = MultiStep(gamma=0.9, n_steps=7)(batched)
    torch.testing.assert_close(out["next", "reward"].squeeze(-1), torch.tensor([[2.8, 2.0, 6.6, 4.0], [21.902, 18.78, 14.2, 8.0]]))
    torch.testing.assert_close(out["gamma"], torch.tensor([[0.81, 0.9, 0.81, 0.9], [0.6561, 0.729, 0.81, 0.9]]))
    one = MultiStep(gamma=0.9, n_steps=2)(rollout([1.0], [False]))
    assert one["next", "reward"].tolist() == [[1.0]] and one["steps_to_next_obs"].tolist() == [1]


def test_multistep_reward_shapes_and_tensor_gamma():
    td = rollout([1.0, 2.0, 3.0, 4.0, 5.0], [False, False, True, False, False])
    flat = td.clone()
    flat["next", "reward"] = flat["next", "reward"].squeeze(-1)
    assert MultiStep(0.9, 2)(flat)["next", "reward"].shape == (5,)
    out = MultiStep(torch.tensor(0.9), 2)(td)
    torch.testing.assert_close(out["next", "reward"].squeeze(-1), torch.tensor([2.8, 4.7, 3.0, 8.5, 5.0]))
    multi = td.clone()
    multi["next", "reward"] = torch.ones(5, 3, 1)
    assert MultiStep(0.9, 2)(multi)["next", "reward"][:, 0, 0].tolist() == pytest.approx([1.9, 1.9, 1.0, 1.9, 1.0])
    m = MultiStep(0.9, 3)
    assert repr(m) == "MultiStep()" and m.done_keys == ("done", "truncated", "terminated") and m.reward_keys == ("reward",)


def test_multistep_batched_time_last_and_one_step_identity():
    td = torch.stack([rollout([1.0, 1.0, 1.0], [False] * 3), rollout([2.0, 2.0, 2.0], [False, True, False])])
    out = MultiStep(gamma=0.5, n_steps=2)(td)
    assert out["next", "reward"].squeeze(-1).tolist() == [[1.5, 1.5, 1.0], [3.0, 2.0, 2.0]]
    same = MultiStep(gamma=0.5, n_steps=1)(td)
    assert torch.equal(same["next", "reward"], td["next", "reward"])
    assert torch.equal(same["next", "observation"], td["next", "observation"])
    with pytest.raises(ValueError, match="n_steps must be >= 1"):
        MultiStep(0.9, 0)
    with pytest.raises(TypeError, match="n_steps must be an int"):
        MultiStep(0.9, 2.5)
    with pytest.raises(ValueError, match=r"gamma must lie in \[0, 1\], got 1.5"):
        MultiStep(1.5, 2)
    # TorchRL raises AttributeError for missing entries: ours is a KeyError and an AttributeError
    with pytest.raises(AttributeError, match=r"\('next', 'done'\) is missing"):
        MultiStep(0.9, 2)(TensorDict(next=TensorDict(reward=torch.ones(2, 1), batch_size=[2]), batch_size=[2]))
    with pytest.raises(KeyError, match=r"\('next', 'reward'\) is missing"):
        MultiStep(0.9, 2)(TensorDict(next=TensorDict(done=torch.zeros(2, 1, dtype=torch.bool), batch_size=[2]), batch_size=[2]))


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
