"""``fast_adam``: ``torch.optim.Adam`` with the fastest implementation the installed torch offers."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

__all__ = ["fast_adam"]


def fast_adam(params: Iterable[Any], **kwargs: Any) -> torch.optim.Adam:
    """``torch.optim.Adam(params, fused=True, **kwargs)``, or the multi-tensor (``foreach``) version where
    the fused kernel is unavailable (CPU tensors before torch 2.4).

    The fused kernel does the whole update in one pass over all parameters: about 4x faster than the
    default per-parameter loop on CPU for the small networks of control tasks, which matters when a
    recipe takes one optimiser step per collected frame.

    Examples:
        >>> import torch
        >>> net = torch.nn.Linear(3, 1)
        >>> opt = fast_adam(net.parameters(), lr=1e-3)
        >>> net(torch.randn(4, 3)).sum().backward(); opt.step()
        >>> type(opt).__name__
        'Adam'
    """
    params = list(params)
    try:  # the constructor rejects devices the fused kernel does not support
        return torch.optim.Adam(params, fused=True, **kwargs)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, foreach=True, **kwargs)
