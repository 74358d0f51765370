"""Generalized state-dependent exploration (gSDE): ``gSDEModule`` and ``LazygSDEModule``.

Raffin, Kober & Stulp, "Smooth Exploration for Robotic Reinforcement Learning" (2021),
https://arxiv.org/abs/2005.05719. The exploration noise is linear in the state,
:math:`\\epsilon(s) = (\\sigma \\odot E)\\, s` with an exploration matrix :math:`E \\sim \\mathcal{N}(0, 1)^{A \\times S}`
drawn once per episode: within an episode the same state gives the same noise, so actions are smooth. The
matrix travels in the data under ``"_eps_gSDE"``; :class:`~torchrl.envs.transforms.gSDENoise` resets it at
every environment reset (to zeros of shape ``[*batch, 1]``, which tells the module to draw a new one).
"""
from __future__ import annotations

import math

import torch
from torch import distributions as d, nn
from torch.nn import functional as F
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

from torchrl._utils._exploration import ExplorationType, exploration_type
from torchrl.modules.models.utils import inv_softplus

__all__ = ["gSDEModule", "LazygSDEModule"]

_DETERMINISTIC = (ExplorationType.DETERMINISTIC, ExplorationType.MODE, ExplorationType.MEAN)


class _gSDEBase(nn.Module):  # noqa: N801 - TorchRL's naming
    """The forward pass shared by :class:`gSDEModule` and :class:`LazygSDEModule` (before and after init)."""

    action_dim: int
    state_dim: int
    scale_min: float
    scale_max: float
    learn_sigma: bool
    transform: d.Transform | None

    def _set_options(self, action_dim: int, state_dim: int, scale_min: float, scale_max: float,
                     transform: d.Transform | None, learn_sigma: bool) -> None:
        self.action_dim = action_dim
        self.state_dim = state_dim
        self.scale_min = scale_min
        self.scale_max = scale_max
        self.transform = transform
        self.learn_sigma = learn_sigma

    @property
    def sigma(self) -> torch.Tensor:
        """The ``[action_dim, state_dim]`` standard deviations of the exploration matrix (at least ``scale_min``)."""
        if self.learn_sigma:
            return F.softplus(self.log_sigma).clamp_min(self.scale_min)
        return self._sigma.clamp_min(self.scale_min)

    def forward(self, mu: torch.Tensor, state: torch.Tensor, _eps_gSDE: torch.Tensor):  # noqa: N803 - TorchRL's name
        """``(loc, scale, action, _eps_gSDE)`` for the mean action ``mu [*B, A]`` in state ``state [*B, S]``.

        ``_eps_gSDE`` is the exploration matrix ``[*B, A, S]``; zeros of shape ``[*B, 1]`` (what
        :class:`~torchrl.envs.transforms.gSDENoise` writes at reset) ask for a new one, drawn from a standard
        normal. ``scale`` is the standard deviation of the noise, :math:`\\sqrt{(s^2)^\\top \\sigma^2}`. The action
        is ``mu`` plus the noise under ``ExplorationType.RANDOM``, ``mu`` under ``DETERMINISTIC``/``MODE``/``MEAN``,
        mapped by ``transform`` when there is one; ``loc`` is ``mu`` itself.

        Raises:
            RuntimeError: if the noise and the state have different batch shapes, or no exploration type is
                set (wrap the call in ``set_exploration_type``).
        """
        batch = state.shape[:-1]
        if _eps_gSDE.shape[: len(batch)] != batch:
            raise RuntimeError(
                f"noise and state are expected to have matching batch size, got shapes {_eps_gSDE.shape} and "
                f"{state.shape} (the noise is [*batch, action_dim, state_dim], or [*batch, 1] zeros to draw one)."
            )
        if _eps_gSDE.shape == (*batch, 1) and not _eps_gSDE.any():
            _eps_gSDE = torch.randn(
                *batch, self.action_dim, self.state_dim, dtype=state.dtype, device=state.device
            )
        sigma = self.sigma.clamp_max(self.scale_max)
        noise = ((sigma * _eps_gSDE) @ state.unsqueeze(-1)).squeeze(-1)
        scale = (state.pow(2) @ sigma.pow(2).transpose(-2, -1)).sqrt()
        etype = exploration_type()
        if etype in _DETERMINISTIC:
            action = mu
        elif etype is ExplorationType.RANDOM:
            action = mu + noise
        else:
            raise RuntimeError(
                f"gSDE behavior for exploration mode {etype} is not defined. Choose from 'random' or 'mode' "
                "(wrap the call in torchrl.envs.utils.set_exploration_type(ExplorationType.RANDOM), say)."
            )
        if self.transform is not None:
            action = self.transform(action)
        return mu, scale, action, _eps_gSDE


class gSDEModule(_gSDEBase):  # noqa: N801 - TorchRL's public name
    """Adds generalized state-dependent exploration noise to a mean action.

    The noise is :math:`(\\sigma \\odot E)\\, s`, linear in the state ``s`` through an exploration matrix
    :math:`E` kept in the data as ``"_eps_gSDE"`` and redrawn at each environment reset (see
    :class:`~torchrl.envs.transforms.gSDENoise`). :math:`\\sigma = \\mathrm{softplus}(\\texttt{log\\_sigma})`
    (a learned parameter, initialised to zeros) or a fixed buffer, bounded below by ``scale_min`` (and by
    ``scale_max`` above, in the forward pass). Called as ``module(mu, state, _eps_gSDE)`` it returns
    ``(loc, scale, action, _eps_gSDE)``.

    Args:
        action_dim (int): the action size ``A``.
        state_dim (int): the state size ``S``.
        sigma_init (float, optional): kept in the ``sigma_init`` buffer; with ``learn_sigma=False`` it is the
            fixed :math:`\\sigma`. Defaults to :math:`\\sqrt{(1 - \\texttt{scale\\_min}) / S}` (stored through
            ``inv_softplus`` when ``learn_sigma``).
        scale_min (float, optional): lower bound of :math:`\\sigma`. Defaults to ``0.01``.
        scale_max (float, optional): upper bound of :math:`\\sigma` in the forward pass. Defaults to ``10.0``.
        learn_sigma (bool, optional): make :math:`\\sigma` a learned parameter (``log_sigma``). Defaults to
            ``True``.
        transform (torch.distributions.Transform, optional): applied to the action (e.g. a tanh).
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.envs.utils import ExplorationType, set_exploration_type
        >>> from torchrl.modules.models.exploration import gSDEModule
        >>> module = gSDEModule(action_dim=2, state_dim=3)
        >>> mu, state = torch.zeros(4, 2), torch.randn(4, 3)
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     loc, scale, action, eps = module(mu, state, torch.zeros(4, 1))  # zeros: draw a new matrix
        ...     _, _, again, _ = module(mu, state, eps)  # same matrix and state: same action
        >>> eps.shape, torch.equal(action, again)
        (torch.Size([4, 2, 3]), True)
    """

    def __init__(
        self,
        action_dim: int,
        state_dim: int,
        sigma_init: float | None = None,
        scale_min: float = 0.01,
        scale_max: float = 10.0,
        learn_sigma: bool = True,
        transform: d.Transform | None = None,
        device: torch.device | str | int | None = None,
    ) -> None:
        super().__init__()
        self._set_options(action_dim, state_dim, scale_min, scale_max, transform, learn_sigma)
        default = math.sqrt((1.0 - scale_min) / state_dim)
        if learn_sigma:
            if sigma_init is None:
                sigma_init = inv_softplus(default)
            self.log_sigma = nn.Parameter(torch.zeros(action_dim, state_dim, device=device))
        else:
            if sigma_init is None:
                sigma_init = default
            self.register_buffer("_sigma", torch.full((action_dim, state_dim), float(sigma_init), device=device))
        self.register_buffer("sigma_init", torch.as_tensor(sigma_init, device=device))


class LazygSDEModule(LazyModuleMixin, _gSDEBase):  # noqa: N801 - TorchRL's public name
    """A :class:`gSDEModule` whose sizes are read from the first call (it becomes a ``gSDEModule`` then).

    At the first call, ``A`` and ``S`` come from ``mu`` and ``state``, and :math:`\\sigma` starts at
    ``sigma_init / sqrt(S * mean(state ** 2))`` per state dimension (the mean over the batch), so that the
    first noise has a standard deviation of about ``sigma_init``: ``log_sigma`` (or the fixed ``_sigma``) is
    set from it.

    Args:
        sigma_init (float, optional): the target noise scale. Defaults to ``1.0``.
        scale_min, scale_max, learn_sigma, transform, device: as :class:`gSDEModule`.

    Examples:
        >>> import torch
        >>> from torchrl.envs.utils import ExplorationType, set_exploration_type
        >>> from torchrl.modules.models.exploration import gSDEModule, LazygSDEModule
        >>> module = LazygSDEModule()
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     _ = module(torch.zeros(5, 2), torch.randn(5, 3), torch.zeros(5, 1))
        >>> isinstance(module, gSDEModule), module.log_sigma.shape
        (True, torch.Size([2, 3]))
    """

    cls_to_become = gSDEModule

    def __init__(
        self,
        sigma_init: float | None = None,
        scale_min: float = 0.01,
        scale_max: float = 10.0,
        learn_sigma: bool = True,
        transform: d.Transform | None = None,
        device: torch.device | str | int | None = None,
    ) -> None:
        super().__init__()
        self._set_options(0, 0, scale_min, scale_max, transform, learn_sigma)
        self._sigma_init_value = 1.0 if sigma_init is None else float(sigma_init)
        if learn_sigma:
            self.log_sigma = UninitializedParameter(device=device)
        else:
            self.register_buffer("_sigma", UninitializedBuffer(device=device))
        self.register_buffer("sigma_init", UninitializedBuffer(device=device))

    def initialize_parameters(self, mu: torch.Tensor, state: torch.Tensor, _eps_gSDE: torch.Tensor) -> None:  # noqa: N803
        """Sizes and initial :math:`\\sigma` from the first ``mu`` and ``state``."""
        action_dim, state_dim = mu.shape[-1], state.shape[-1]
        self.action_dim, self.state_dim = action_dim, state_dim
        with torch.no_grad():
            mean_sq = state.detach().pow(2).reshape(-1, state_dim).mean(0)
            target = self._sigma_init_value / (state_dim * mean_sq).sqrt()
            if self.learn_sigma:
                init = inv_softplus(target)
                self.log_sigma.materialize((action_dim, state_dim), dtype=state.dtype)
                self.log_sigma.copy_(init.expand(action_dim, state_dim))
            else:
                init = target
                self._sigma.materialize((action_dim, state_dim), dtype=state.dtype)
                self._sigma.copy_(init.expand(action_dim, state_dim))
            self.sigma_init.materialize((state_dim,), dtype=state.dtype)
            self.sigma_init.copy_(init)
        del self._sigma_init_value
