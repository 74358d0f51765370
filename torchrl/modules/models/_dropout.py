"""``ConsistentDropout`` (Hausknecht & Wagener, 2022): dropout whose mask can be stored and reused."""
from __future__ import annotations

import torch
from torch.nn.modules.dropout import _DropoutNd

__all__ = ["ConsistentDropout"]


class ConsistentDropout(_DropoutNd):
    """Dropout whose mask is returned with the output and can be passed back, so that the update phase of
    a policy-gradient method reuses the masks drawn during the rollout.

    In training mode ``forward(x)`` returns ``(x * mask / (1 - p), mask)`` with a new boolean ``mask``
    (``True`` = kept), and ``forward(x, mask)`` applies the given mask. In evaluation mode it returns ``x``
    unchanged. Like ``nn.Dropout``, it follows train/eval mode, not the exploration type.

    Args:
        p (float, optional): dropout probability. Defaults to ``0.5``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import ConsistentDropout
        >>> drop = ConsistentDropout(p=0.5)
        >>> x = torch.ones(2, 4)
        >>> y, mask = drop(x)
        >>> torch.equal(drop(x, mask)[0], y)
        True
    """

    def __init__(self, p: float = 0.5):
        super().__init__(p=p)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if not self.training:
            return x
        if mask is None:
            mask = self.make_mask(input=x)
        return x * mask / (1.0 - self.p), mask

    def make_mask(self, *, input=None, shape=None):  # noqa: A002 - TorchRL's argument name
        """A boolean keep-mask (each entry ``True`` with probability ``1 - p``) like ``input`` or of ``shape``."""
        if input is not None:
            return torch.empty_like(input, dtype=torch.bool).bernoulli_(1.0 - self.p)
        if shape is None:
            raise ValueError("ConsistentDropout.make_mask: pass input or shape.")
        return torch.empty(shape, dtype=torch.bool).bernoulli_(1.0 - self.p)
