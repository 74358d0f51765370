"""``TruncatedNormal``: a normal distribution restricted to ``[low, high]``, one event per last dimension."""
from __future__ import annotations

import torch
from tensordict.nn.distributions import TruncatedNormal as _TruncatedNormalBase
from torch import distributions as D
from torch.distributions import constraints

__all__ = ["TruncatedNormal"]


class TruncatedNormal(D.Independent):
    r"""A normal distribution truncated to ``[low, high]``; the last dimension is the event.

    With ``tanh_loc=True`` the location is squashed first, ``loc = upscale * tanh(loc / upscale)``.
    The per-element distribution is tensordict's reparameterised truncated normal.

    Args:
        loc (torch.Tensor): location of the normal distribution before truncation.
        scale (torch.Tensor): its standard deviation.
        upscale (torch.Tensor or float, optional): bound of the location scaling. Defaults to ``5.0``.
        low (torch.Tensor or float, optional): lower bound. Defaults to ``-1.0``.
        high (torch.Tensor or float, optional): upper bound. Defaults to ``1.0``.
        tanh_loc (bool, optional): apply the location scaling. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.distributions import TruncatedNormal
        >>> dist = TruncatedNormal(torch.zeros(5, 2), torch.ones(5, 2) * 3, low=-0.5, high=0.5)
        >>> sample = dist.sample()
        >>> bool(((sample >= -0.5) & (sample <= 0.5)).all()), dist.log_prob(sample).shape
        (True, torch.Size([5]))
    """

    __module__ = "torchrl.modules.distributions.continuous"  # TorchRL's module path (re-exported there)
    num_params: int = 2
    has_rsample = True
    arg_constraints = {"loc": constraints.real, "scale": constraints.greater_than(1e-6)}

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor,
        upscale: torch.Tensor | float = 5.0,
        low: torch.Tensor | float = -1.0,
        high: torch.Tensor | float = 1.0,
        tanh_loc: bool = False,
    ) -> None:
        if isinstance(low, torch.Tensor) or isinstance(high, torch.Tensor):
            self.non_trivial_max = bool((torch.as_tensor(high) != 1.0).any())
            self.non_trivial_min = bool((torch.as_tensor(low) != -1.0).any())
        else:
            if not low < high:
                raise ValueError(f"TruncatedNormal: low must be smaller than high, got low={low} and high={high}.")
            self.non_trivial_max = high != 1.0
            self.non_trivial_min = low != -1.0
        # stored as tensors, as in TorchRL
        self.low = torch.as_tensor(low, device=loc.device, dtype=loc.dtype)
        self.high = torch.as_tensor(high, device=loc.device, dtype=loc.dtype)
        self.upscale = torch.as_tensor(upscale, device=loc.device, dtype=loc.dtype)
        self.tanh_loc = tanh_loc
        self.update(loc, scale)

    def update(self, loc: torch.Tensor, scale: torch.Tensor) -> None:
        """Replaces the location and scale."""
        if self.tanh_loc:
            loc = (loc / self.upscale).tanh() * self.upscale
        if not isinstance(scale, torch.Tensor):
            scale = torch.full_like(loc, float(scale))
        low = self.low.to(device=loc.device, dtype=loc.dtype)
        high = self.high.to(device=loc.device, dtype=loc.dtype)
        base = _TruncatedNormalBase(loc, scale, low, high)
        super().__init__(base, 1)

    @property
    def device(self) -> torch.device:
        """The device of the parameters."""
        return self.base_dist.loc.device

    @property
    def loc(self) -> torch.Tensor:
        """The location (after the ``tanh_loc`` scaling, when on)."""
        return self.base_dist.loc

    @property
    def scale(self) -> torch.Tensor:
        """The scale of the normal distribution before truncation."""
        return self.base_dist.scale

    @property
    def min(self):
        """Lower bound of the support."""
        return self.low

    @property
    def max(self):
        """Upper bound of the support."""
        return self.high

    @property
    def mode(self) -> torch.Tensor:
        """The location clipped to ``[low, high]`` (where a truncated normal's density peaks)."""
        base = self.base_dist
        return torch.maximum(torch.minimum(base.loc, base._non_std_b), base._non_std_a)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The mean of the truncated distribution."""
        return self.mean

    def log_prob(self, value, **kwargs):
        """Log-density of ``value`` summed over the last dimension; ``-inf`` outside ``[low, high]``."""
        base = self.base_dist
        lp = base.log_prob(value, **kwargs)
        outside = (value < base._non_std_a) | (value > base._non_std_b)
        lp = lp.masked_fill(outside, float("-inf"))
        return lp.sum(-1)
