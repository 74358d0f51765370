"""``TanhNormal``: a normal distribution squashed by ``tanh`` and mapped onto ``[low, high]``."""
from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Number

import torch
from torch import distributions as D
from torch.distributions import constraints
from torch.nn import functional as F

from torchrl.modules.distributions.utils import (
    _bounds,
    _scale_tensor,
    FasterTransformedDistribution,
    LOG_2,
    LOG_SQRT_2PI,
)

__all__ = ["TanhNormal"]


class TanhNormal(FasterTransformedDistribution):
    r"""A normal distribution squashed by ``tanh`` and mapped affinely onto ``[low, high]``.

    A sample is ``mid + half * tanh(u)`` with ``u ~ Normal(loc, scale)``, ``mid = (high + low) / 2`` and
    ``half = (high - low) / 2``. Its log-density is

    .. math::
        \log p(a) = \log \mathcal{N}(u; \mu, \sigma) - \log(1 - \tanh^2 u) - \log(\mathrm{half}),
        \quad u = \operatorname{atanh}((a - \mathrm{mid}) / \mathrm{half}),

    summed over the last ``event_dims`` dimensions. ``log(1 - tanh(u)^2)`` is computed as
    ``2 * (log 2 - u - softplus(-2u))``, which stays finite for large ``|u|``.

    With ``tanh_loc=True`` the location is first squashed and moved to the middle of the bounds, as in
    TorchRL: ``loc = upscale * tanh(loc / upscale) + mid``.

    ``mode`` raises (the squashed density has no closed-form mode); use ``deterministic_sample`` (the
    squashed location) or :meth:`get_mode` (the mode, found numerically).

    :meth:`rsample_and_log_prob` scores the pre-``tanh`` draw itself (no ``atanh`` round trip), and
    :meth:`log_prob` reuses the pre-``tanh`` value of the last :meth:`rsample` when it is given that very
    sample (not modified in place since), so ``dist.log_prob(dist.rsample())`` is exact even where ``tanh``
    saturates. Other values are
    clamped to ``[-1 + eps, 1 - eps]`` (``eps`` the dtype's resolution) before ``atanh`` when
    ``safe_tanh=True``, so log-probabilities and their gradients stay finite at the bounds.

    Args:
        loc (torch.Tensor): location of the normal distribution.
        scale (torch.Tensor, float or callable): its standard deviation; a number is broadcast to
            ``loc``'s shape, a callable is called with ``loc`` (e.g. ``torch.ones_like``).
        upscale (torch.Tensor or number, optional): the ``a`` of the location scaling above. Defaults
            to ``5.0``.
        low (torch.Tensor or number, optional): lower bound of the support. Defaults to ``-1.0``.
        high (torch.Tensor or number, optional): upper bound of the support. Defaults to ``1.0``.
        event_dims (int, optional): number of trailing dimensions that make one event; the
            log-probability sums over them. Defaults to ``1`` (``0`` for a scalar ``loc``).
        tanh_loc (bool, optional): apply the location scaling. Defaults to ``False``.
        safe_tanh (bool, optional): keep samples strictly inside ``(low, high)`` and clamp values
            before ``atanh``. Defaults to ``True``.

    Raises:
        ValueError: if ``low`` is not smaller than ``high`` everywhere, or ``event_dims`` exceeds the
            number of dimensions of ``loc``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import TanhNormal
        >>> dist = TanhNormal(torch.zeros(4, 2), torch.ones(4, 2), low=-2.0, high=2.0)
        >>> action = dist.rsample()
        >>> action.shape, dist.log_prob(action).shape
        (torch.Size([4, 2]), torch.Size([4]))
        >>> bool(((action > -2) & (action < 2)).all())
        True
    """

    __module__ = "torchrl.modules.distributions.continuous"  # TorchRL's module path (re-exported there)
    arg_constraints = {"loc": constraints.real, "scale": constraints.greater_than(1e-6)}
    has_rsample = True
    num_params = 2

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor | float | Callable[[torch.Tensor], torch.Tensor],
        upscale: torch.Tensor | Number = 5.0,
        low: torch.Tensor | Number = -1.0,
        high: torch.Tensor | Number = 1.0,
        event_dims: int | None = None,
        tanh_loc: bool = False,
        safe_tanh: bool = True,
    ) -> None:
        self.upscale = upscale
        self.tanh_loc = tanh_loc
        self.safe_tanh = safe_tanh
        self._bounds = _bounds(low, high, "TanhNormal", loc.device)
        self._event_dims = event_dims
        self._cache = None
        self.update(loc, scale)

    def update(self, loc: torch.Tensor, scale: torch.Tensor) -> None:
        """Replaces the location and scale (the location scaling is applied again if ``tanh_loc``)."""
        if self.tanh_loc:
            loc = (loc / self.upscale).tanh() * self.upscale
            mid = self._bounds.mid
            if isinstance(mid, torch.Tensor) or mid != 0.0:
                loc = loc + mid
        scale = _scale_tensor(scale, loc)
        if scale.shape != loc.shape:
            loc, scale = torch.broadcast_tensors(loc, scale)
        self.loc = loc
        self.scale = scale
        shape = loc.shape
        event_dims = self._event_dims
        if event_dims is None:
            event_dims = min(1, len(shape))
        elif event_dims > len(shape):
            raise ValueError(
                f"TanhNormal: event_dims={event_dims} exceeds the number of dimensions of loc "
                f"(shape {tuple(shape)})."
            )
        self.event_dims = event_dims
        split = len(shape) - event_dims
        self._batch_shape = shape[:split]
        self._event_shape = shape[split:]
        self._event_numel = math.prod(self._event_shape)
        self._cache = None
        self._reset_lazy()

    # ------------------------------------------------------------------ bounds and helpers
    @property
    def device(self) -> torch.device:
        """The device of the parameters."""
        return self.loc.device

    @property
    def low(self) -> torch.Tensor:
        """Lower bound of the support (a tensor, as in TorchRL)."""
        return torch.as_tensor(self._bounds.low, device=self.loc.device)

    @property
    def high(self) -> torch.Tensor:
        """Upper bound of the support (a tensor, as in TorchRL)."""
        return torch.as_tensor(self._bounds.high, device=self.loc.device)

    @property
    def non_trivial_max(self) -> torch.Tensor:
        """Whether the upper bound differs from 1 (a boolean tensor)."""
        return (self.high != 1.0).any()

    @property
    def non_trivial_min(self) -> torch.Tensor:
        """Whether the lower bound differs from -1 (a boolean tensor)."""
        return (self.low != -1.0).any()

    @property
    def min(self):
        """Lower bound of the support (alias of :attr:`low`)."""
        return self._bounds.low

    @property
    def max(self):
        """Upper bound of the support (alias of :attr:`high`)."""
        return self._bounds.high

    @property
    def support(self) -> constraints.Constraint:
        return constraints.interval(self._bounds.low, self._bounds.high)

    def _squash(self, u: torch.Tensor) -> torch.Tensor:
        y = u.tanh()
        if self.safe_tanh:
            lim = 1.0 - torch.finfo(y.dtype).resolution
            y = y.clamp(-lim, lim)
        b = self._bounds
        return y if b.trivial else y * b.half + b.mid

    def _sum_event(self, lp: torch.Tensor) -> torch.Tensor:
        n = self.event_dims
        if n == 1:
            return lp.sum(-1)
        if n == 0:
            return lp
        return lp.sum(tuple(range(-n, 0)))

    def _log_prob_pre(self, u: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """Log-density of the squashed value of the pre-``tanh`` value ``u`` (``z = (u - loc) / scale``)."""
        scale = self.scale
        if z is None:
            z = (u - self.loc) / scale
        # -log(1 - tanh(u)^2) = 2 * (u + softplus(-2u)) - 2 log 2; the constants are subtracted after the sum.
        # In-place ops act on fresh temporaries that autograd does not need.
        lp = F.softplus(u * -2.0).add_(u).mul_(2.0).sub_(scale.log()).addcmul_(z, z, value=-0.5)
        b = self._bounds
        if isinstance(b.log_half, torch.Tensor):
            lp = lp - b.log_half
            return self._sum_event(lp) - self._event_numel * (LOG_SQRT_2PI + 2.0 * LOG_2)
        return self._sum_event(lp) - self._event_numel * (LOG_SQRT_2PI + 2.0 * LOG_2 + b.log_half)

    def _draw(self, sample_shape) -> tuple[torch.Tensor, torch.Tensor]:
        loc = self.loc
        if sample_shape:
            shape = torch.Size(sample_shape) + loc.shape
            eps = torch.randn(shape, dtype=loc.dtype, device=loc.device)
        else:
            eps = torch.randn_like(loc)
        return torch.addcmul(loc, self.scale, eps), eps

    # ------------------------------------------------------------------ sampling and scoring
    def rsample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        u, _ = self._draw(sample_shape)
        out = self._squash(u)
        self._cache = (out, out._version, u)
        return out

    def sample(self, sample_shape: torch.Size | tuple[int, ...] = ()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample_and_log_prob(
        self, sample_shape: torch.Size | tuple[int, ...] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample and the log-density of that very draw (no ``atanh`` round trip)."""
        u, eps = self._draw(sample_shape)
        out = self._squash(u)
        self._cache = (out, out._version, u)
        return out, self._log_prob_pre(u, eps)

    def sample_and_log_prob(
        self, sample_shape: torch.Size | tuple[int, ...] = ()
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Like :meth:`rsample_and_log_prob`, without gradients."""
        with torch.no_grad():
            return self.rsample_and_log_prob(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        cache = self._cache
        if cache is not None and cache[0] is value and cache[1] == value._version:
            return self._log_prob_pre(cache[2])
        b = self._bounds
        y = value if b.trivial else (value - b.mid) / b.half
        if self.safe_tanh:
            lim = 1.0 - torch.finfo(y.dtype).resolution
            y = y.clamp(-lim, lim)
        return self._log_prob_pre(y.atanh())

    # ------------------------------------------------------------------ summaries
    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The squashed location, ``mid + half * tanh(loc)``."""
        return self._squash(self.loc)

    @property
    def mode(self) -> torch.Tensor:
        """Not defined in closed form: raises, as in TorchRL (see :meth:`get_mode` and ``deterministic_sample``).

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError(
            "The distribution TanhNormal has no analytical mode. Use ExplorationType.DETERMINISTIC (the "
            "distribution's deterministic_sample, the squashed location) for a deterministic action, or "
            "dist.get_mode() to compute the mode numerically."
        )

    def get_mode(self) -> torch.Tensor:
        r"""The mode of the squashed density, computed by bisection.

        In ``u``-space the mode maximises :math:`-(u - \mu)^2 / (2\sigma^2) - \log(1 - \tanh^2 u)`; its
        derivative :math:`(\mu - u) / \sigma^2 + 2\tanh u` has exactly one root between :math:`\mu`
        and :math:`\mu + 2\sigma^2\,\mathrm{sign}(\mu)`, found to float precision by 60 bisection steps.
        """
        with torch.no_grad():
            mu, var = self.loc, self.scale.pow(2)
            sign = torch.where(mu < 0, -1.0, 1.0).to(mu.dtype)
            lo, hi = mu * sign, mu * sign + 2.0 * var  # work on the positive side: u' = sign * u
            mu_pos = mu * sign
            for _ in range(60):
                mid = (lo + hi) / 2.0
                grad = (mu_pos - mid) / var + 2.0 * mid.tanh()
                go_right = grad >= 0
                lo = torch.where(go_right, mid, lo)
                hi = torch.where(go_right, hi, mid)
            u = (lo + hi) / 2.0 * sign
        return self._squash(u)

    @property
    def mean(self) -> torch.Tensor:
        raise NotImplementedError(
            "TanhNormal has no closed-form mean. Estimate it with dist.sample((N,)).mean(0) for a large N, "
            "or use dist.deterministic_sample (the squashed location)."
        )

    @property
    def root_dist(self) -> D.Distribution:
        """The ``Normal(loc, scale)`` before squashing (``base_dist`` is that normal made ``Independent``)."""
        base = self.base_dist
        return base.base_dist if isinstance(base, D.Independent) else base

    def entropy(self) -> torch.Tensor:
        raise NotImplementedError(
            "TanhNormal has no closed-form entropy. Estimate it with -dist.log_prob(dist.rsample((N,))).mean(0)."
        )

    def _make_base_dist(self) -> D.Distribution:
        base = D.Normal(self.loc, self.scale)
        return D.Independent(base, self.event_dims) if self.event_dims else base

    def _make_transforms(self) -> list[D.Transform]:
        transforms: list[D.Transform] = [D.TanhTransform(cache_size=1)]
        b = self._bounds
        if not b.trivial:
            transforms.append(D.AffineTransform(b.mid, b.half, event_dim=self.event_dims, cache_size=1))
        return transforms

    def expand(self, batch_shape: torch.Size, _instance=None) -> TanhNormal:
        batch_shape = torch.Size(batch_shape)
        shape = batch_shape + self._event_shape
        b = self._bounds
        return TanhNormal(
            self.loc.expand(shape),
            self.scale.expand(shape),
            low=b.low,
            high=b.high,
            event_dims=self.event_dims,
            safe_tanh=self.safe_tanh,
        )

    def __repr__(self) -> str:
        return f"TanhNormal(loc: {self.loc.shape}, scale: {self.scale.shape})"
