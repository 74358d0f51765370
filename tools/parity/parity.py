"""Helpers for scenario files (``tools/parity/scenarios/*.py``); importable as ``import parity`` there.

A scenario is a function named ``scenario_<name>`` without arguments. It uses TorchRL's public API only and
returns what should be the same under both packages; ``_child.py`` seeds torch, ``random`` and numpy with 0
before each one and summarises the result (``_summary.summarize``). An exception escaping a scenario is its
result (compared by type).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from _summary import Structure, Warned

__all__ = ["attempt", "structure", "warns"]


def structure(value: Any) -> Structure:
    """Compare ``value``'s keys, shapes, dtypes and classes, not its numbers (e.g. random draws)."""
    return Structure(value)


def attempt(fn: Callable[[], Any]) -> Any:
    """``fn()``, or the exception it raised (so that one scenario can check several error cases)."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001 - the exception is the result
        return err


def warns(fn: Callable[[], Any]) -> Warned:
    """``fn()``'s result (or exception) with the sorted, de-duplicated categories of the warnings it raised,
    leaving out DeprecationWarning/FutureWarning raised by torch or tensordict themselves."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = attempt(fn)
    names = set()
    for w in caught:
        module = getattr(w, "filename", "") or ""
        if ("/torch/" in module or "/tensordict/" in module) and issubclass(w.category, (DeprecationWarning, FutureWarning)):
            continue
        names.add(w.category.__name__)
    return Warned(value, sorted(names))
