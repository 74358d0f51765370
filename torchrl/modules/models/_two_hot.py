"""``SymExpTwoHot``: DreamerV3's categorical representation of scalars on a symexp-spaced support."""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["SymExpTwoHot"]


def _symexp(x: torch.Tensor) -> torch.Tensor:
    return x.sign() * x.abs().expm1()


class SymExpTwoHot(nn.Module):
    """Scalars as distributions over ``num_bins`` support values ``symexp(linspace(-20, 20, num_bins))``.

    :meth:`encode` spreads a raw scalar over its two neighbouring support values by linear interpolation
    (values beyond the support saturate at its ends), so the encoding's expectation is the scalar.
    :meth:`decode` returns the softmax-weighted expectation of the support; mirrored support values are
    paired so that a uniform distribution decodes to exactly ``0``. :meth:`loss` is the cross-entropy
    between the two-hot encoding of the target and the logits. Reference: Hafner et al., 2023,
    https://arxiv.org/abs/2301.04104.

    Args:
        num_bins (int, optional): support size. Defaults to ``255``.

    Raises:
        ValueError: if ``num_bins < 2``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import SymExpTwoHot
        >>> two_hot = SymExpTwoHot(num_bins=5)
        >>> target = torch.tensor([-10.0, 0.0, 10.0])
        >>> torch.allclose(two_hot.decode(two_hot.encode(target).log()), target, atol=1e-3)
        True
    """

    def __init__(self, num_bins: int = 255):
        super().__init__()
        if num_bins < 2:
            raise ValueError(f"SymExpTwoHot: num_bins must be at least 2, got {num_bins}.")
        self.num_bins = num_bins
        grid = torch.linspace(-20.0, 20.0, num_bins, dtype=torch.float64)
        grid = (grid - grid.flip(0)) / 2  # exactly antisymmetric, with an exact 0 in the middle
        self.register_buffer("bins", _symexp(grid).to(torch.get_default_dtype()), persistent=False)

    def encode(self, target: torch.Tensor) -> torch.Tensor:
        """Two-hot encoding of raw scalars: shape ``(*target.shape, num_bins)``."""
        bins = self.bins.to(target.dtype)
        x = target.clamp(bins[0], bins[-1])
        upper = torch.searchsorted(bins, x.detach().contiguous(), right=False).clamp(1, self.num_bins - 1)
        lower = upper - 1
        lo, hi = bins[lower], bins[upper]
        w_hi = ((x - lo) / (hi - lo)).clamp(0.0, 1.0)
        out = torch.zeros(*target.shape, self.num_bins, dtype=target.dtype, device=target.device)
        out.scatter_(-1, lower.unsqueeze(-1), (1.0 - w_hi).unsqueeze(-1))
        out.scatter_add_(-1, upper.unsqueeze(-1), w_hi.unsqueeze(-1))
        return out

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """Expectation of the support under ``softmax(logits)``: shape ``logits.shape[:-1]``."""
        probs = logits.softmax(-1)
        half = self.num_bins // 2
        bins = self.bins.to(probs.dtype)
        paired = (probs[..., :half] - probs[..., self.num_bins - half:].flip(-1)) @ bins[:half]
        if self.num_bins % 2:
            paired = paired + probs[..., half] * bins[half]
        return paired

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        """:meth:`decode` with a trailing singleton dimension: shape ``(*logits.shape[:-1], 1)``."""
        return self.decode(logits).unsqueeze(-1)

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Two-hot cross-entropy; ``target`` has shape ``logits.shape[:-1]`` (or that with a trailing 1)."""
        if target.shape != logits.shape[:-1] and target.shape[-1:] == (1,):
            target = target.squeeze(-1)
        return -(self.encode(target) * logits.log_softmax(-1)).sum(-1)
