"""``MultiAgentGAE``: GAE with per-agent values and team-level rewards / done flags."""
from __future__ import annotations

from torchrl.objectives.utils import ValueEstimators, register_value_estimator
from torchrl.objectives.value._estimator_base import _trailing
from torchrl.objectives.value._gae import GAE

__all__ = ["MultiAgentGAE"]


@register_value_estimator(
    ValueEstimators.MAGAE, default_kwargs={"gamma": 0.99, "lmbda": 0.95, "differentiable": True}
)
class MultiAgentGAE(GAE):
    """:class:`GAE` for per-agent values ``[*B, T, n_agents, 1]`` with shared signals ``[*B, T, 1]``.

    Rewards, done and terminated flags lacking the agent dimension (relative to the value) are broadcast
    along it before the usual GAE recursion; per-agent signals pass through unchanged. Advantage and value
    target come out shaped like the value.

    Keyword Args:
        agent_dim: the agent dimension of the value tensor (negative: counted from the end). Defaults to -2.
        **kwargs: forwarded to :class:`GAE`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.objectives.value import MultiAgentGAE
        >>> gae = MultiAgentGAE(gamma=0.9, lmbda=0.9, value_network=None)
        >>> td = TensorDict({"state_value": torch.zeros(2, 5, 3, 1), "next": {"state_value": torch.zeros(2, 5, 3, 1),
        ...     "reward": torch.ones(2, 5, 1), "done": torch.zeros(2, 5, 1, dtype=torch.bool)}}, [2, 5])
        >>> gae(td)["advantage"].shape
        torch.Size([2, 5, 3, 1])
    """

    def __init__(self, *, agent_dim: int = -2, **kwargs):
        super().__init__(**kwargs)
        self.agent_dim = agent_dim

    def _align_signals(self, like, reward, done, terminated):
        dim = self.agent_dim % like.ndim
        out = []
        for t in (reward, done, terminated):
            t = _trailing(t, like[(slice(None),) * dim + (0,)]) if t.ndim < like.ndim - 1 else t
            if t.ndim == like.ndim - 1:
                t = t.unsqueeze(dim).expand_as(like)
            out.append(t)
        return tuple(out)
