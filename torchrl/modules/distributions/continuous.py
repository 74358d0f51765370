"""Continuous distributions: ``IndependentNormal``, ``Delta`` and ``TanhDelta``.

``TanhNormal`` lives in ``tanh_normal.py`` and ``TruncatedNormal`` in ``truncated_normal.py``; both are
re-exported here, at TorchRL's module path.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict.nn.distributions import Delta as _TDDelta
from torch import distributions as D
from torch.distributions import constraints

from torchrl.modules.distributions._tanh_normal import TanhNormal
from torchrl.modules.distributions.truncated_normal import TruncatedNormal
from torchrl.modules.distributions.utils import _bounds, _scale_tensor, FasterTransformedDistribution

__all__ = ["IndependentNormal", "Delta", "TanhDelta", "TanhNormal", "TruncatedNormal"]


class IndependentNormal(D.Independent):
    r"""A normal distribution whose last ``event_dim`` dimensions form one event.

    With ``tanh_loc=True`` the location is squashed first, ``loc = upscale * tanh(loc / upscale)``, which
    keeps it within ``[-upscale, upscale]``.

    Args:
        loc (torch.Tensor): the location.
        scale (torch.Tensor, float or callable): the standard deviation; a number is broadcast to
            ``loc``'s shape and a callable is called with ``loc``.
        upscale (float, optional): the bound of the location scaling. Defaults to ``5.0``.
        tanh_loc (bool, optional): apply the location scaling. Defaults to ``False``.
        event_dim (int, optional): number of trailing dimensions that make one event. Defaults to ``1``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import IndependentNormal
        >>> dist = IndependentNormal(torch.zeros(3, 2), 1.0)
        >>> dist.log_prob(torch.zeros(3, 2)).shape
        torch.Size([3])
        >>> dist.mode.shape
        torch.Size([3, 2])
    """

    num_params: int = 2

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor | float | Callable[[torch.Tensor], torch.Tensor],
        upscale: float = 5.0,
        tanh_loc: bool = False,
        event_dim: int = 1,
        **kwargs,
    ) -> None:
        self.tanh_loc = tanh_loc
        self.upscale = upscale
        self._event_dim = event_dim
        self._kwargs = kwargs
        super().__init__(D.Normal(*self._params(loc, scale), **kwargs), event_dim)

    def _params(self, loc, scale):
        if self.tanh_loc:
            loc = (loc / self.upscale).tanh() * self.upscale
        return loc, _scale_tensor(scale, loc)

    def update(self, loc: torch.Tensor, scale: torch.Tensor) -> None:
        """Replaces the location and scale."""
        self.base_dist = D.Normal(*self._params(loc, scale), **self._kwargs)
        super().__init__(self.base_dist, self._event_dim)

    @property
    def mode(self) -> torch.Tensor:
        return self.base_dist.loc

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.base_dist.loc


class Delta(_TDDelta):
    """A distribution with all its mass on ``param``.

    Samples are ``param`` (expanded to the sample shape), with gradients for :meth:`rsample`.
    :meth:`log_prob` is ``+inf`` where a value equals ``param`` (within ``atol``/``rtol`` on every element
    of the event) and ``-inf`` elsewhere. Without ``batch_shape``/``event_shape`` the last dimension of
    ``param`` is the event.

    Args:
        param (torch.Tensor): the value holding all the mass.
        atol (float, optional): absolute tolerance of :meth:`log_prob`. Defaults to ``1e-6``.
        rtol (float, optional): relative tolerance of :meth:`log_prob`. Defaults to ``1e-6``.
        batch_shape (torch.Size, optional): the batch shape.
        event_shape (torch.Size, optional): the event shape.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import Delta
        >>> dist = Delta(torch.tensor([[1.0, 2.0]]))
        >>> dist.sample((3,)).shape
        torch.Size([3, 1, 2])
        >>> dist.log_prob(torch.tensor([[1.0, 2.0]]))
        tensor([inf])
    """

    def __init__(
        self,
        param: torch.Tensor,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        batch_shape: torch.Size | Sequence[int] = None,
        event_shape: torch.Size | Sequence[int] = None,
    ) -> None:
        super().__init__(param, atol=atol, rtol=rtol, batch_shape=batch_shape, event_shape=event_shape)

    def update(self, param):
        """Replaces ``param`` (the batch and event shapes do not change)."""
        self.param = param

    def expand(self, batch_shape: torch.Size, _instance=None):
        batch_shape = torch.Size(batch_shape)
        param = self.param.expand(batch_shape + self.event_shape)
        return type(self)(param, atol=self.atol, rtol=self.rtol, batch_shape=batch_shape, event_shape=self.event_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        is_equal = self._is_equal(value)
        inf = torch.tensor(float("inf"), dtype=value.dtype, device=value.device)
        return torch.where(is_equal, inf, -inf)

    def sample(self, size=None) -> torch.Tensor:
        return self.rsample(size).detach()

    def rsample(self, size=None) -> torch.Tensor:
        if not size:
            return self.param
        return self.param.expand(torch.Size(size) + self.param.shape)

    @property
    def mode(self) -> torch.Tensor:
        return self.param

    @property
    def mean(self) -> torch.Tensor:
        return self.param

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self.param


class TanhDelta(FasterTransformedDistribution):
    """A :class:`Delta` on ``mid + half * tanh(param + mid)``: a deterministic, bounded action.

    ``mid = (high + low) / 2`` and ``half = (high - low) / 2``; as in TorchRL, the parameter is moved to the
    middle of the bounds before the ``tanh`` (this changes nothing for bounds symmetric around 0). Useful for
    deterministic policies (DDPG, TD3) written as probabilistic modules. Like TorchRL's, it reports
    ``has_rsample = False`` (sampling and ``rsample`` both return the value, the latter with its gradient).

    Args:
        param (torch.Tensor): the pre-``tanh`` value.
        low (torch.Tensor or number, optional): lower bound. Defaults to ``-1.0``.
        high (torch.Tensor or number, optional): upper bound. Defaults to ``1.0``.
        event_dims (int, optional): number of trailing dimensions that make one event. Defaults to ``1``.
        atol (float, optional): absolute tolerance of :meth:`log_prob`. Defaults to ``1e-6``.
        rtol (float, optional): relative tolerance of :meth:`log_prob`. Defaults to ``1e-6``.
        safe (bool, optional): keep the value strictly inside ``(low, high)``. Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import TanhDelta
        >>> dist = TanhDelta(torch.tensor([[0.0, 100.0]]), low=-2.0, high=2.0)
        >>> dist.sample()
        tensor([[0.0000, 2.0000]])
        >>> dist.log_prob(dist.sample())
        tensor([inf])
    """

    arg_constraints: dict = {"loc": constraints.real}
    has_rsample = False

    def __init__(
        self,
        param: torch.Tensor,
        low: torch.Tensor | float = -1.0,
        high: torch.Tensor | float = 1.0,
        event_dims: int = 1,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        safe: bool = True,
    ) -> None:
        if event_dims > param.ndim:
            raise ValueError(
                f"TanhDelta: event_dims={event_dims} exceeds the number of dimensions of param "
                f"(shape {tuple(param.shape)})."
            )
        self._bounds = _bounds(low, high, "TanhDelta", param.device)
        self.low = low
        self.high = high
        self.event_dims = event_dims
        self.atol = atol
        self.rtol = rtol
        self.safe = safe
        self.update(param)

    def update(self, net_output: torch.Tensor) -> torch.Tensor | None:
        """Replaces the pre-``tanh`` parameter."""
        mid = self._bounds.mid
        if isinstance(mid, torch.Tensor) or mid != 0.0:
            net_output = net_output + mid
        self.param = net_output
        split = net_output.ndim - self.event_dims
        self._batch_shape = net_output.shape[:split]
        self._event_shape = net_output.shape[split:]
        self._reset_lazy()
        return None

    @property
    def min(self):
        """Lower bound of the support."""
        return self._bounds.low

    @property
    def max(self):
        """Upper bound of the support."""
        return self._bounds.high

    @property
    def support(self) -> constraints.Constraint:
        return constraints.interval(self._bounds.low, self._bounds.high)

    def _value(self) -> torch.Tensor:
        y = self.param.tanh()
        if self.safe:
            lim = 1.0 - torch.finfo(y.dtype).resolution
            y = y.clamp(-lim, lim)
        b = self._bounds
        return y if b.trivial else y * b.half + b.mid

    def rsample(self, sample_shape: torch.Size | Sequence[int] = ()) -> torch.Tensor:
        value = self._value()
        if sample_shape:
            value = value.expand(torch.Size(sample_shape) + value.shape)
        return value

    def sample(self, sample_shape: torch.Size | Sequence[int] = ()) -> torch.Tensor:
        return self.rsample(sample_shape).detach()

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        target = self._value().expand_as(value)
        is_equal = (value - target).abs() <= self.atol + self.rtol * target.abs()
        if self.event_dims:
            is_equal = is_equal.flatten(-self.event_dims).all(-1)
        inf = torch.tensor(float("inf"), dtype=value.dtype, device=value.device)
        return torch.where(is_equal, inf, -inf)

    @property
    def mode(self) -> torch.Tensor:
        return self._value()

    @property
    def mean(self) -> torch.Tensor:
        return self._value()

    @property
    def deterministic_sample(self) -> torch.Tensor:
        return self._value()

    def _make_base_dist(self) -> D.Distribution:
        return Delta(self.param, atol=self.atol, rtol=self.rtol, event_shape=self._event_shape,
                     batch_shape=self._batch_shape)

    def _make_transforms(self) -> list[D.Transform]:
        transforms: list[D.Transform] = [D.TanhTransform(cache_size=1)]
        b = self._bounds
        if not b.trivial:
            transforms.append(D.AffineTransform(b.mid, b.half, event_dim=self.event_dims, cache_size=1))
        return transforms
