"""Value-decomposition mixers for cooperative multi-agent Q-learning: ``VDNMixer`` and ``QMixer``.

A mixer maps the chosen-action values of the agents, shape ``(*B, n_agents, 1)``, to one global value of
shape ``(*B, 1)``; ``QMixer`` also reads a global state of shape ``(*B, *state_shape)``.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["Mixer", "QMixer", "VDNMixer"]


class Mixer(nn.Module):
    """Base class of the mixers: checks shapes, flattens batch dimensions and calls :meth:`mix`.

    Args:
        n_agents (int): number of agents.
        needs_state (bool): whether ``forward`` takes a state after the values.
        state_shape (tuple or torch.Size): shape of the state without batch dimensions.
        device (torch.device): device of the parameters.
    """

    def __init__(self, n_agents: int, needs_state: bool, state_shape, device) -> None:
        super().__init__()
        self.n_agents = n_agents
        self.needs_state = needs_state
        self.state_shape = torch.Size(state_shape)
        self.device = device

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        name = type(self).__name__
        expected = 2 if self.needs_state else 1
        if len(inputs) != expected:
            raise ValueError(
                f"{name}: expected {expected} input(s) (chosen_action_value{', state' if self.needs_state else ''}), "
                f"got {len(inputs)}."
            )
        value = inputs[0]
        if value.shape[-2:] != (self.n_agents, 1):
            raise ValueError(
                f"{name}: chosen_action_value must have shape (*B, n_agents={self.n_agents}, 1), got "
                f"{tuple(value.shape)}."
            )
        batch = value.shape[:-2]
        state = None
        if self.needs_state:
            state = inputs[1]
            if state.shape[len(batch):] != self.state_shape:
                raise ValueError(
                    f"{name}: state must have shape (*B, *state_shape) = {(*batch, *self.state_shape)}, got "
                    f"{tuple(state.shape)}."
                )
            state = state.reshape(-1, *self.state_shape)
        out = self.mix(value.reshape(-1, self.n_agents, 1), state)
        return out.reshape(*batch, 1)

    def mix(self, chosen_action_value: torch.Tensor, state: torch.Tensor | None) -> torch.Tensor:
        """Maps values ``(B, n_agents, 1)`` (and a state ``(B, *state_shape)``) to ``(B, 1)``."""
        raise NotImplementedError(f"{type(self).__name__} must implement mix().")


class VDNMixer(Mixer):
    """Value-Decomposition Networks mixer (Sunehag et al., 2017): the global value is the sum of the agents'.

    Args:
        n_agents (int): number of agents.
        device (torch.device): device (the mixer has no parameters).

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import VDNMixer
        >>> VDNMixer(n_agents=3, device="cpu")(torch.tensor([[[1.0], [2.0], [4.0]]]))
        tensor([[7.]])
    """

    def __init__(self, n_agents: int, device) -> None:
        super().__init__(n_agents=n_agents, needs_state=False, state_shape=(), device=device)

    def mix(self, chosen_action_value: torch.Tensor, state: torch.Tensor | None = None):
        return chosen_action_value.sum(dim=-2)


class QMixer(Mixer):
    r"""QMIX mixer (Rashid et al., 2018): a monotonic mixing network whose weights come from the state.

    With hypernetworks :math:`W_1(s) = |h_{w1}(s)|` (``n_agents x embed``), :math:`b_1(s)`,
    :math:`W_2(s) = |h_{w2}(s)|` (``embed x 1``) and :math:`V(s)` (a two-layer MLP),

    .. math:: Q_{tot} = \mathrm{ELU}(q^\top W_1 + b_1)\, W_2 + V(s).

    The absolute values make :math:`Q_{tot}` non-decreasing in every agent's value.

    Args:
        state_shape (tuple or torch.Size): shape of the global state (without batch dimensions).
        mixing_embed_dim (int): width of the mixing layer.
        n_agents (int): number of agents.
        device (torch.device): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import QMixer
        >>> mixer = QMixer(state_shape=(5,), mixing_embed_dim=8, n_agents=3, device="cpu")
        >>> mixer(torch.randn(4, 3, 1), torch.randn(4, 5)).shape
        torch.Size([4, 1])
    """

    def __init__(self, state_shape, mixing_embed_dim: int, n_agents: int, device) -> None:
        super().__init__(n_agents=n_agents, needs_state=True, state_shape=state_shape, device=device)
        self.embed_dim = mixing_embed_dim
        self.state_dim = math.prod(self.state_shape)
        self.hyper_w_1 = nn.Linear(self.state_dim, mixing_embed_dim * n_agents, device=device)
        self.hyper_w_final = nn.Linear(self.state_dim, mixing_embed_dim, device=device)
        self.hyper_b_1 = nn.Linear(self.state_dim, mixing_embed_dim, device=device)
        self.V = nn.Sequential(
            nn.Linear(self.state_dim, mixing_embed_dim, device=device),
            nn.ReLU(),
            nn.Linear(mixing_embed_dim, 1, device=device),
        )

    def mix(self, chosen_action_value: torch.Tensor, state: torch.Tensor):
        batch = chosen_action_value.shape[0]
        state = state.reshape(batch, self.state_dim)
        q = chosen_action_value.reshape(batch, 1, self.n_agents)
        w1 = self.hyper_w_1(state).abs().view(batch, self.n_agents, self.embed_dim)
        b1 = self.hyper_b_1(state).view(batch, 1, self.embed_dim)
        hidden = F.elu(torch.bmm(q, w1) + b1)
        w_final = self.hyper_w_final(state).abs().view(batch, self.embed_dim, 1)
        v = self.V(state).view(batch, 1, 1)
        return (torch.bmm(hidden, w_final) + v).view(batch, 1)
