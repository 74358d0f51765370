"""Which gym library (``gymnasium`` or the legacy ``gym``) the gym wrappers use: ``set_gym_backend``, ``gym_backend``.

The backend is a process-wide choice, ``gymnasium`` by default (``gym`` when only that one is installed).
``set_gym_backend`` changes it for a ``with`` block, a decorated function, or for good with ``.set()``.
Nothing here imports a gym library before it is asked for.
"""
from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
from types import ModuleType
from typing import Any

from torch.utils._contextlib import _DecoratorContextManager

__all__ = ["set_gym_backend", "gym_backend", "library_of", "lib_version"]

_KNOWN = ("gymnasium", "gym")
_state: dict[str, ModuleType | None] = {"backend": None}


def _import(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise ImportError(
            f"set_gym_backend: could not import {name!r} ({err}). Install it (`pip install gymnasium`, or "
            f"`pip install gym==0.26.2` for the legacy API) or choose another backend."
        ) from err


def _default_backend() -> ModuleType:
    for name in _KNOWN:
        if name in sys.modules or importlib.util.find_spec(name) is not None:
            return _import(name)
    raise ImportError(
        "gym_backend: neither gymnasium nor gym is installed. Install gymnasium (`pip install \"torchrl[gym]\"` "
        "or `pip install gymnasium`)."
    )


def _resolve(backend: Any) -> ModuleType:
    if isinstance(backend, ModuleType):
        root = backend.__name__.split(".")[0]
        if root not in _KNOWN:
            raise ValueError(f"set_gym_backend: expected the gymnasium or gym module, got module {backend.__name__!r}.")
        return backend if backend.__name__ == root else _import(root)
    if isinstance(backend, str):
        if backend not in _KNOWN:
            raise ValueError(f"set_gym_backend: unknown backend {backend!r}; expected one of {list(_KNOWN)}.")
        return _import(backend)
    raise TypeError(f"set_gym_backend: expected a module or one of {list(_KNOWN)}, got {type(backend).__name__}.")


def gym_backend(submodule: str | None = None) -> ModuleType:
    """The gym library in use (or one of its submodules, e.g. ``gym_backend("spaces")``).

    Examples:
        >>> from torchrl.envs.libs.gym import gym_backend, set_gym_backend
        >>> with set_gym_backend("gymnasium"):
        ...     gym_backend().__name__, gym_backend("spaces").__name__
        ('gymnasium', 'gymnasium.spaces')
    """
    backend = _state["backend"]
    if backend is None:
        backend = _state["backend"] = _default_backend()
    if submodule is None:
        return backend
    return importlib.import_module(f"{backend.__name__}.{submodule}")


class set_gym_backend(_DecoratorContextManager):
    """Chooses the gym library (``"gymnasium"``, ``"gym"`` or the module itself) for the code it wraps.

    Works as a context manager, as a function decorator, or (``.set()``) for the rest of the process.

    Args:
        backend: ``"gymnasium"``, ``"gym"``, or the imported module.

    Raises:
        ValueError: for a name or module that is not a gym library.
        ImportError: when the library is not installed (raised when the backend is first needed).

    Examples:
        >>> import gymnasium
        >>> from torchrl.envs.libs.gym import GymEnv, gym_backend, set_gym_backend
        >>> with set_gym_backend(gymnasium):
        ...     env = GymEnv("Pendulum-v1")
        >>> env.lib.__name__
        'gymnasium'
        >>> @set_gym_backend("gymnasium")
        ... def make():
        ...     return gym_backend().__name__
        >>> make()
        'gymnasium'
    """

    def __init__(self, backend: Any) -> None:
        if not isinstance(backend, (str, ModuleType)):
            raise TypeError(f"set_gym_backend: expected a module or one of {list(_KNOWN)}, got {type(backend).__name__}.")
        if isinstance(backend, str) and backend not in _KNOWN:
            raise ValueError(f"set_gym_backend: unknown backend {backend!r}; expected one of {list(_KNOWN)}.")
        if isinstance(backend, ModuleType):
            backend = _resolve(backend)
        self._backend = backend
        self._previous: list[ModuleType | None] = []

    @property
    def backend(self) -> ModuleType:
        """The backend module (imported on first access)."""
        if not isinstance(self._backend, ModuleType):
            self._backend = _resolve(self._backend)
        return self._backend

    def set(self) -> None:
        """Makes this backend the process-wide default."""
        _state["backend"] = self.backend

    def __enter__(self) -> None:
        self._previous.append(_state["backend"])
        self.set()

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        _state["backend"] = self._previous.pop()

    def clone(self) -> set_gym_backend:
        return type(self)(self._backend)


def library_of(env: Any) -> ModuleType | None:
    """The gym library ``env`` (an ``Env``, a ``VectorEnv`` or a wrapper of one) comes from, or ``None``."""
    for name in _KNOWN:
        lib = sys.modules.get(name)
        if lib is None:
            continue
        bases = [getattr(lib, "Env", None)]
        vector = getattr(lib, "vector", None)
        bases.append(getattr(vector, "VectorEnv", None) if vector is not None else None)
        if any(b is not None and isinstance(env, b) for b in bases):
            return lib
    return None


def lib_version(lib: ModuleType) -> tuple[int, ...]:
    """``lib.__version__`` as a tuple of ints (``(1, 4, 0)``), pre-release suffixes dropped."""
    parts = []
    for piece in str(getattr(lib, "__version__", "0")).split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)
