"""Exception types shared across the package."""
from __future__ import annotations

__all__ = ["ValueRuntimeError"]


class ValueRuntimeError(ValueError, RuntimeError):
    """A bad value where TorchRL raises ``RuntimeError`` (or either, depending on the class): ours is a
    ``ValueError`` that code catching TorchRL's ``RuntimeError`` also catches."""
