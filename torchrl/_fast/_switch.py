"""The fast-paths switch: one module-level flag, read by every fast path as ``_switch.ON``."""
from __future__ import annotations

import os

__all__ = ["ON", "fast_paths_enabled", "set_fast_paths"]


def _from_environment() -> bool:
    value = os.environ.get("TORCHRL_FAST_PATHS", "1").strip().lower()
    if value in ("0", "false", "no", "off"):
        return False
    if value in ("", "1", "true", "yes", "on"):
        return True
    raise ValueError(f"TORCHRL_FAST_PATHS={value!r}: expected 1/0 (or true/false, yes/no, on/off).")


ON: bool = _from_environment()


def fast_paths_enabled() -> bool:
    """Whether the fast paths are on (the default; ``TORCHRL_FAST_PATHS=0`` turns them off at import)."""
    return ON


class set_fast_paths:  # noqa: N801 - a function-like switch, as torch's set_grad_enabled
    """Turns the fast paths on or off: at once when called, for a block when used as a context manager.

    Args:
        enabled (bool): ``False`` routes every hot path through tensordict's public API and the general
            code (same results, slower).

    Examples:
        >>> from torchrl._fast import fast_paths_enabled, set_fast_paths
        >>> with set_fast_paths(False):
        ...     fast_paths_enabled()
        False
        >>> fast_paths_enabled()
        True
    """

    def __init__(self, enabled: bool) -> None:
        global ON
        if not isinstance(enabled, bool):
            raise TypeError(f"set_fast_paths expects a bool, got {type(enabled).__name__}.")
        self._previous = ON
        ON = enabled

    def __enter__(self) -> "set_fast_paths":
        return self

    def __exit__(self, *exc) -> None:
        global ON
        ON = self._previous
