"""``DensifyReward``: spreads sparse terminal rewards over their trajectory (reward-to-go)."""
from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModuleBase


def discounted_reward_to_go(reward: torch.Tensor, done: torch.Tensor, discount: float, time_dim: int) -> torch.Tensor:
    """:math:`G_t = r_t + \\gamma G_{t+1}`, restarted after every ``done`` step, along ``time_dim``."""
    reward_t = reward.movedim(time_dim, 0)
    done_t = done.movedim(time_dim, 0).to(torch.bool)
    out = torch.empty_like(reward_t)
    running = torch.zeros_like(reward_t[0])
    for t in range(reward_t.shape[0] - 1, -1, -1):
        running = reward_t[t] + discount * running * (~done_t[t]).to(reward_t.dtype)
        out[t] = running
    return out.movedim(0, time_dim)


class DensifyReward(TensorDictModuleBase):
    """Reassigns the rewards of each trajectory to every step as their (discounted) reward-to-go.

    For sparse tasks where only the last step is rewarded, every step then carries the trajectory's
    outcome. Intermediate rewards are summed as well: :math:`G_t = r_t + \\gamma G_{t+1}`, restarted after
    every done step.

    Keyword Args:
        reward_key (NestedKey, optional): the reward entry. Defaults to ``"reward"``.
        done_key (NestedKey, optional): the done entry. Defaults to ``"done"``.
        reward_key_out (NestedKey, optional): where to write the result. Defaults to ``reward_key``.
        time_dim (int, optional): the time dim of the reward tensor. Defaults to ``2``.
        discount (float, optional): the discount factor. Defaults to ``1.0``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.postprocs import DensifyReward
        >>> td = TensorDict(reward=torch.tensor([[0.0, 0.0, 1.0, 0.0, 2.0]]).unsqueeze(-1),
        ...                 done=torch.tensor([[False, False, True, False, True]]).unsqueeze(-1), batch_size=[1, 5])
        >>> DensifyReward(time_dim=1)(td)["reward"].squeeze(-1).tolist()
        [[1.0, 1.0, 1.0, 2.0, 2.0]]
    """

    def __init__(
        self,
        *,
        reward_key: NestedKey = "reward",
        done_key: NestedKey = "done",
        reward_key_out: NestedKey | None = None,
        time_dim: int = 2,
        discount: float = 1.0,
    ):
        super().__init__()
        self.reward_key = reward_key
        self.done_key = done_key
        self.reward_key_out = reward_key_out if reward_key_out is not None else reward_key
        self.time_dim = time_dim
        self.discount = discount
        self.in_keys = [reward_key, done_key]
        self.out_keys = [self.reward_key_out]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        reward = tensordict.get(self.reward_key)
        done = tensordict.get(self.done_key)
        if not -reward.ndim <= self.time_dim < reward.ndim:
            raise ValueError(
                f"DensifyReward: time_dim={self.time_dim} is not a dim of the reward (shape {tuple(reward.shape)})."
            )
        tensordict.set(self.reward_key_out, discounted_reward_to_go(reward, done, self.discount, self.time_dim))
        return tensordict
