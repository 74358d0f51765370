"""Whether ``TransformedEnv(TransformedEnv(env, t1), t2)`` flattens into one env with ``Compose(t1, t2)``."""
from __future__ import annotations

import os

from torch.utils._contextlib import _DecoratorContextManager

__all__ = ["auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env"]

_state: dict[str, bool | None] = {"mode": None}


def auto_unwrap_transformed_env(allow_none: bool = False) -> bool | None:
    """Current setting: the context manager's value, else ``TORCHRL_AUTO_UNWRAP_TRANSFORMED_ENV``, else True.

    With ``allow_none=True`` returns ``None`` when neither the context manager nor the variable set it.
    """
    mode = _state["mode"]
    if mode is not None:
        return mode
    env = os.environ.get("TORCHRL_AUTO_UNWRAP_TRANSFORMED_ENV")
    if env is not None:
        return env.strip().lower() in ("1", "true", "yes", "on")
    return None if allow_none else True


class set_auto_unwrap_transformed_env(_DecoratorContextManager):  # noqa: N801
    """Context manager / decorator that sets :func:`auto_unwrap_transformed_env`.

    Examples:
        >>> from torchrl import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
        >>> with set_auto_unwrap_transformed_env(False):
        ...     auto_unwrap_transformed_env()
        False
    """

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._previous: bool | None = None

    def clone(self) -> "set_auto_unwrap_transformed_env":
        return type(self)(self.mode)

    def set(self) -> None:
        """Sets the mode globally (without a ``with`` block)."""
        _state["mode"] = self.mode

    def __enter__(self) -> None:
        self._previous = _state["mode"]
        _state["mode"] = self.mode

    def __exit__(self, *exc) -> None:
        _state["mode"] = self._previous
