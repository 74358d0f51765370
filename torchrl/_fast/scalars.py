"""Cached 0-dim tensors standing in for Python numbers in hot-path arithmetic.

``x + 0.5`` with a Python float costs twice the dispatch of ``x + c`` with a 0-dim tensor ``c`` of ``x``'s
dtype (torch wraps the number into a fresh tensor at each call: about 3 µs of a 256-element add here).
Hot paths (env steps, transforms, losses) therefore keep their constants as :func:`scalar` tensors.

Results are bit-identical to the Python-number form: a 0-dim operand takes part in type promotion like a
number and is cast to the op's compute type the same way. The tensors are shared: never write to them.
"""
from __future__ import annotations

import torch

from torchrl._fast import _switch

__all__ = ["scalar"]

_CACHE: dict = {}
_MAX_ENTRIES = 4096


def scalar(value, dtype: torch.dtype, device: torch.device | None = None):
    """A shared 0-dim tensor holding ``value`` (``dtype``, ``device``; CPU when ``None``).

    While ``torch.compile`` traces, or with the fast paths off, returns a fresh (uncached) tensor: the cache is host-side state.

    Examples:
        >>> import torch
        >>> from torchrl._fast import scalar
        >>> x = torch.ones(3)
        >>> torch.equal(x + scalar(0.5, x.dtype), x + 0.5)
        True
    """
    key = (value, dtype, device)
    out = _CACHE.get(key)
    if out is None:
        if torch.compiler.is_compiling() or not _switch.ON:
            return torch.tensor(value, dtype=dtype, device=device)
        if len(_CACHE) >= _MAX_ENTRIES:  # e.g. NaN keys never match: keep the memo bounded
            _CACHE.clear()
        # a plain tensor even when first requested under inference mode (it may be saved for backward later)
        with torch.inference_mode(False), torch.no_grad():
            out = _CACHE[key] = torch.tensor(value, dtype=dtype, device=device)
    return out
