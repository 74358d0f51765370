"""Availability of optional libraries, found without importing them (``importlib.util.find_spec``).

The ``_has_<library>`` flags of ``torchrl.envs.libs.*`` and ``torchrl.record.loggers.*`` are computed here
once at import time, so that checking for a heavy library (gymnasium, tensorboard, wandb...) costs a
filesystem lookup, not an import.
"""
from __future__ import annotations

import importlib.util
import sys

__all__ = ["has_module"]


def has_module(name: str) -> bool:
    """Whether the module ``name`` (dotted names allowed) can be imported, without importing it.

    A dotted name whose parent package is missing answers ``False`` instead of raising.

    Examples:
        >>> from torchrl._utils._optional import has_module
        >>> has_module("torch"), has_module("surely_not_an_installed_module")
        (True, False)
    """
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a missing parent package, or a module with __spec__ = None
        return False
