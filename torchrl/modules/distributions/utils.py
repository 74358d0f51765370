"""Shared helpers for the distributions: a lighter ``TransformedDistribution`` base, safe tanh, bounds.

TorchRL turns argument validation off for every ``torch.distributions`` class when its distributions are
imported (``Distribution.set_default_validate_args(False)``): building a distribution sits in every actor
step, and validation costs more than the maths. We keep that behaviour.
"""
from __future__ import annotations

import math
from numbers import Number

import torch
from torch import distributions as D

from torchrl._utils._errors import ValueRuntimeError

__all__ = ["FasterTransformedDistribution", "has_analytic_entropy", "has_analytic_kl", "safetanh", "safeatanh"]

D.Distribution.set_default_validate_args(False)

LOG_2 = math.log(2.0)
LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class FasterTransformedDistribution(D.TransformedDistribution):
    """A ``TransformedDistribution`` whose subclasses build their base and transforms only when asked.

    ``torch.distributions.TransformedDistribution.__init__`` checks and composes its transforms on every
    construction. Subclasses (:class:`~torchrl.modules.TanhNormal`, :class:`~torchrl.modules.TanhDelta`)
    compute samples and log-probabilities in closed form, so they skip that constructor and expose
    ``base_dist`` and ``transforms`` as lazily built attributes, for code that inspects them.

    Subclasses set ``_batch_shape``, ``_event_shape`` and implement ``_make_base_dist`` and
    ``_make_transforms``.
    """

    _validate_args = False
    _base_dist = None  # built on first use (see base_dist)
    _transforms = None  # built on first use (see transforms)

    def _make_base_dist(self) -> D.Distribution:
        raise NotImplementedError(f"{type(self).__name__} must implement _make_base_dist.")

    def _make_transforms(self) -> list[D.Transform]:
        raise NotImplementedError(f"{type(self).__name__} must implement _make_transforms.")

    @property
    def base_dist(self) -> D.Distribution:
        if self._base_dist is None:
            self._base_dist = self._make_base_dist()
        return self._base_dist

    @base_dist.setter
    def base_dist(self, value: D.Distribution) -> None:
        self._base_dist = value

    @property
    def transforms(self) -> list[D.Transform]:
        if self._transforms is None:
            self._transforms = self._make_transforms()
        return self._transforms

    @transforms.setter
    def transforms(self, value: list[D.Transform]) -> None:
        self._transforms = value

    def _reset_lazy(self) -> None:
        self._base_dist = None
        self._transforms = None


def safetanh(x: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    """``tanh(x)`` clamped to ``[-1 + eps, 1 - eps]`` so that ``atanh`` of the result stays finite.

    ``eps`` defaults to the resolution of ``x``'s dtype (``1e-6`` for float32).

    Examples:
        >>> safetanh(torch.tensor([100.0]))
        tensor([1.0000])
        >>> bool(torch.isfinite(torch.atanh(safetanh(torch.tensor([100.0])))).all())
        True
    """
    if eps is None:
        eps = torch.finfo(x.dtype).resolution
    lim = 1.0 - eps
    return torch.tanh(x).clamp(-lim, lim)


def safeatanh(y: torch.Tensor, eps: float | None = None) -> torch.Tensor:
    """``atanh(y)`` of ``y`` clamped to ``[-1 + eps, 1 - eps]``: finite at (and beyond) the bounds."""
    if eps is None:
        eps = torch.finfo(y.dtype).resolution
    lim = 1.0 - eps
    return torch.atanh(y.clamp(-lim, lim))


class _Bounds:
    """Affine map from ``[-1, 1]`` onto ``[low, high]``, with its constants computed once."""

    __slots__ = ("low", "high", "mid", "half", "log_half", "trivial")

    def __init__(self, low, high, mid, half, log_half, trivial: bool) -> None:
        self.low, self.high, self.mid, self.half, self.log_half, self.trivial = low, high, mid, half, log_half, trivial


_BOUNDS_CACHE: dict = {}



def _bounds(low, high, owner: str, device: torch.device) -> _Bounds:
    """The ``_Bounds`` for ``low``/``high``: numbers, or tensors (validated once per tensor version)."""
    if isinstance(low, Number) and isinstance(high, Number):
        key = (float(low), float(high))
        hit = _BOUNDS_CACHE.get(key)
        if hit is not None:
            return hit
        if not low < high:
            raise ValueRuntimeError(f"{owner}: low must be strictly smaller than high, got low={low} and high={high}.")
        half = (high - low) / 2.0
        out = _Bounds(float(low), float(high), (high + low) / 2.0, half, math.log(half), low == -1.0 and high == 1.0)
        if len(_BOUNDS_CACHE) > 64:
            _BOUNDS_CACHE.clear()
        _BOUNDS_CACHE[key] = out
        return out
    low_t = torch.as_tensor(low, device=device)
    high_t = torch.as_tensor(high, device=device)
    if not low_t.is_floating_point():
        low_t = low_t.float()
    if not high_t.is_floating_point():
        high_t = high_t.float()
    key = ("tensor", id(low), id(high), getattr(low, "_version", None), getattr(high, "_version", None), device)
    hit = _BOUNDS_CACHE.get(key)
    if hit is not None and hit[0] is low and hit[1] is high:
        return hit[2]
    if not bool((low_t < high_t).all()):
        raise ValueRuntimeError(
            f"{owner}: low must be strictly smaller than high everywhere, got low={low_t.tolist()} and "
            f"high={high_t.tolist()}."
        )
    half = (high_t - low_t) / 2.0
    out = _Bounds(low_t, high_t, (high_t + low_t) / 2.0, half, half.log(), False)
    if len(_BOUNDS_CACHE) > 64:
        _BOUNDS_CACHE.clear()
    # Keep references to ``low``/``high`` so that their ids cannot be reused by other tensors.
    _BOUNDS_CACHE[key] = (low, high, out)
    return out


def _scale_tensor(scale, loc: torch.Tensor) -> torch.Tensor:
    """``scale`` as a tensor like ``loc``: tensors pass through, numbers are filled, callables called."""
    if isinstance(scale, torch.Tensor):
        return scale
    if callable(scale):
        return scale(loc)
    return torch.full_like(loc, float(scale))


def has_analytic_entropy(dist: D.Distribution) -> bool:
    """Whether ``dist.entropy()`` has a closed form (it does not raise ``NotImplementedError``).

    Examples:
        >>> has_analytic_entropy(D.Normal(0.0, 1.0))
        True
        >>> from torchrl.modules.distributions import TanhNormal
        >>> has_analytic_entropy(TanhNormal(torch.zeros(2), torch.ones(2)))
        False
    """
    try:
        dist.entropy()
    except NotImplementedError:
        return False
    return True


def has_analytic_kl(p: D.Distribution, q: D.Distribution) -> bool:
    """Whether ``torch.distributions.kl_divergence(p, q)`` is registered for the pair.

    Examples:
        >>> has_analytic_kl(D.Normal(0.0, 1.0), D.Normal(1.0, 1.0))
        True
    """
    try:
        D.kl_divergence(p, q)
    except NotImplementedError:
        return False
    return True
