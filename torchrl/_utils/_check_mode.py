"""Check mode: opt-in validation of data against specs and storages, off by default on hot paths.

One switch for the whole package. When it is on, envs check every action against the action spec
(bounds, dtype, shape, NaN) before stepping, and replay-buffer writes check each entry's dtype and shape
against the storage, naming the key, the expected and the received. It is read from, in order:

1. the innermost :class:`set_check_mode` block (or its ``.set()``),
2. the ``TORCHRL_CHECK_MODE`` environment variable (``1``/``true``/``yes``/``on`` turn it on), read once
   when ``torchrl`` is imported,
3. off.

The resolved value is kept in ``_state["on"]``: hot paths (``EnvBase.step``) read that one dict entry, so
that check mode being off costs them a single lookup per step.

An env's own ``run_type_checks=True`` turns the env checks on for that env whatever this switch says;
:func:`~torchrl.envs.utils.check_env_specs` runs with the checks on.
"""
from __future__ import annotations

import os

from torch.utils._contextlib import _DecoratorContextManager

__all__ = ["check_mode", "set_check_mode"]

_TRUE = ("1", "true", "yes", "on")


def _from_environment() -> bool:
    value = os.environ.get("TORCHRL_CHECK_MODE")
    return value is not None and value.strip().lower() in _TRUE


#: ``mode``: the innermost ``set_check_mode`` setting (``None``: none); ``on``: the resolved switch.
_state: dict[str, bool | None] = {"mode": None, "on": _from_environment()}
_ENV_DEFAULT = _state["on"]


def _set(mode: bool | None) -> None:
    _state["mode"] = mode
    _state["on"] = _ENV_DEFAULT if mode is None else mode


def check_mode() -> bool:
    """Whether check mode is on (see the module docstring for where the setting comes from).

    Examples:
        >>> from torchrl import check_mode, set_check_mode
        >>> with set_check_mode(True):
        ...     check_mode()
        True
    """
    return bool(_state["on"])


class set_check_mode(_DecoratorContextManager):  # noqa: N801
    """Context manager / decorator that turns check mode on or off (:func:`check_mode`).

    Args:
        mode: ``True`` to check actions and buffer writes, ``False`` to skip the checks.

    Examples:
        >>> import torch
        >>> from torchrl import set_check_mode
        >>> from torchrl.envs import PendulumEnv
        >>> env = PendulumEnv()
        >>> td = env.reset()
        >>> td["action"] = torch.tensor([float("nan")])
        >>> with set_check_mode(True):
        ...     try:
        ...         env.step(td)
        ...     except ValueError as err:
        ...         print("rejected")
        rejected
    """

    def __init__(self, mode: bool = True) -> None:
        self.mode = bool(mode)
        self._previous: bool | None = None

    def clone(self) -> "set_check_mode":
        return type(self)(self.mode)

    def set(self) -> None:
        """Sets the mode globally (without a ``with`` block)."""
        _set(self.mode)

    def __enter__(self) -> None:
        self._previous = _state["mode"]
        _set(self.mode)

    def __exit__(self, *exc) -> None:
        _set(self._previous)
