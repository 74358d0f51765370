"""Deterministic seed chaining: one user seed gives a distinct, reproducible seed per sub-environment."""
from __future__ import annotations

from torchrl._utils._seeding import seed_generator

__all__ = ["next_seed"]

#: The seed that follows ``seed`` (see :func:`torchrl._utils.seed_generator`).
next_seed = seed_generator
