"""Seed chaining: the seed handed to the next environment (or worker) after one is seeded with ``seed``."""
from __future__ import annotations

import numpy as np

__all__ = ["seed_generator"]

_MAX_SEED = 2**32 - 1


def seed_generator(seed: int) -> int:
    """The seed that follows ``seed``: 8 bytes drawn from ``numpy.random.default_rng(seed)``, read big-endian,
    modulo :math:`2^{32} - 1` (so that it is a valid seed for numpy, gym and torch alike).

    The same chain as TorchRL's: ``EnvBase.set_seed(seed)`` returns ``seed_generator(seed)``, and batched
    environments seed their sub-environments along the chain.

    Args:
        seed: a non-negative integer.

    Raises:
        ValueError: if ``seed`` is negative.

    Examples:
        >>> from torchrl._utils import seed_generator
        >>> seed_generator(0)
        795726461
    """
    if seed < 0:
        raise ValueError(f"seed_generator: seeds must be non-negative integers, got {seed}.")
    return int.from_bytes(np.random.default_rng(int(seed)).bytes(8), "big") % _MAX_SEED
