"""``torchrl.data``: specs (loaded eagerly) and replay buffers, post-processing, datasets (loaded on use).

Specs come first in the import order (everything checks data against them); replay buffers come after
environments (they run environment transforms on sampled data), so their names are resolved lazily
here: ``from torchrl.data import ReplayBuffer`` works and ``import torchrl.data`` stays cheap and
free of import cycles.
"""
from __future__ import annotations

import importlib

from torchrl.data.tensor_specs import *  # noqa: F401,F403
from torchrl.data.tensor_specs import __all__ as _spec_names

_LAZY_MODULES = ("torchrl.data.replay_buffers", "torchrl.data.postprocs")


def __getattr__(name: str):
    if name == "__all__":  # ``from torchrl.data import *`` includes the lazily resolved names
        return _all_names()
    if not name.startswith("_"):
        for module_name in _LAZY_MODULES:
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as err:
                if err.name != module_name:
                    raise
                continue
            if name in getattr(module, "__all__", ()):
                value = getattr(module, name)
                globals()[name] = value
                return value
    raise AttributeError(f"module 'torchrl.data' has no attribute {name!r}")


def _all_names() -> list[str]:
    names = list(_spec_names)
    for module_name in _LAZY_MODULES:
        try:
            names += list(importlib.import_module(module_name).__all__)
        except ModuleNotFoundError:
            pass
    return names


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_all_names()))
