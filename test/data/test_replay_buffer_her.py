"""``HERReplayBuffer``: goal relabelling strategies, rewards, episode boundaries."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import HERReplayBuffer, HindsightStrategy, LazyTensorStorage


def goal_episodes(lengths) -> TensorDict:
    """Episodes whose achieved goal after step ``t`` is ``100 * episode + t``; the desired goal is unreachable."""
    achieved = torch.cat([100.0 * e + torch.arange(n, dtype=torch.float32) for e, n in enumerate(lengths)])
    done = torch.cat([torch.arange(n) == n - 1 for n in lengths]).unsqueeze(-1)
    n = achieved.numel()
    return TensorDict(
        desired_goal=torch.full((n, 1), -1.0),
        achieved_goal=(achieved - 1).unsqueeze(-1),
        next=TensorDict(
            achieved_goal=achieved.unsqueeze(-1), desired_goal=torch.full((n, 1), -1.0), reward=-torch.ones(n, 1),
            done=done, batch_size=[n],
        ),
        batch_size=[n],
    )


def buffer(strategy, **kwargs) -> HERReplayBuffer:
    rb = HERReplayBuffer(storage=LazyTensorStorage(50), strategy=strategy, her_ratio=1.0, batch_size=400, **kwargs)
    rb.extend(goal_episodes([6, 4, 8]))
    return rb


@pytest.mark.parametrize("strategy", ["future", "final", "episode"])
def test_goals_come_from_the_same_episode(strategy):
    sample = buffer(strategy).sample()
    achieved = sample["next", "achieved_goal"].squeeze(-1)
    goal = sample["desired_goal"].squeeze(-1)
    episode, step = achieved // 100, achieved % 100
    assert torch.equal(goal // 100, episode)
    lengths = torch.tensor([6, 4, 8])[episode.long()]
    if strategy == "future":
        assert (goal % 100 >= step).all() and (goal % 100 < lengths).all()
    elif strategy == "final":
        assert torch.equal(goal % 100, (lengths - 1).float())
    else:
        assert (goal % 100 < lengths).all() and (goal % 100 < step).any()
    assert torch.equal(sample["next", "desired_goal"], sample["desired_goal"])
    expected_reward = torch.where(goal == achieved, 0.0, -1.0)
    assert torch.equal(sample["next", "reward"].squeeze(-1), expected_reward)
    assert sample["her_relabelled"].all()


def test_random_strategy_and_ratio():
    rb = buffer(HindsightStrategy.RANDOM)
    rb.her_ratio = 0.5
    sample = rb.sample()
    relabelled = sample["her_relabelled"]
    assert 0.3 < relabelled.float().mean() < 0.7
    assert (sample["desired_goal"][~relabelled] == -1).all() and (sample["desired_goal"][relabelled] >= 0).all()
    assert (rb.storage.get(torch.arange(18))["desired_goal"] == -1).all()  # stored data untouched


def test_custom_reward_and_errors():
    rb = buffer("final", reward_fn=lambda achieved, goal: (achieved - goal).abs())
    sample = rb.sample()
    expected = (sample["next", "achieved_goal"] - sample["desired_goal"]).abs()
    assert torch.equal(sample["next", "reward"], expected)
    with pytest.raises(ValueError, match="unknown strategy 'later'"):
        HERReplayBuffer(storage=LazyTensorStorage(4), strategy="later")
    with pytest.raises(ValueError, match=r"her_ratio must lie in \[0, 1\]"):
        HERReplayBuffer(storage=LazyTensorStorage(4), her_ratio=2.0)
