"""Deterministic seed chaining: one user seed gives a distinct, reproducible seed per sub-environment."""
from __future__ import annotations

__all__ = ["next_seed"]

_MULT = 6364136223846793005
_INC = 1442695040888963407
_MASK = (1 << 63) - 1


def next_seed(seed: int) -> int:
    """The seed that follows ``seed`` (a 63-bit linear congruential step; never equal to ``seed``).

    Examples:
        >>> next_seed(0) != 0 and next_seed(0) == next_seed(0)
        True
    """
    out = (int(seed) * _MULT + _INC) & _MASK
    return out if out != seed else (out + 1) & _MASK
