"""Version-dispatched implementations: one function name, one body per range of a library's versions."""
from __future__ import annotations

import functools
import importlib
import sys
from typing import Any, Callable

from packaging.version import Version, parse

__all__ = ["implement_for"]


class implement_for:  # noqa: N801 - TorchRL's public name
    """Registers ``fn`` as the implementation to use when ``module_name``'s version is in a range.

    Several bodies can be registered under one name; the first call picks the last registered body whose
    range ``[from_version, to_version)`` holds the installed version, and later calls reuse that choice
    (until :meth:`reset`). A missing module or a version that no body covers raises when the function is
    called, not when it is defined, so optional libraries are never imported at import time.

    Args:
        module_name: the distribution to check (``"gymnasium"``), or a callable returning the module.
        from_version: first compatible version (inclusive), ``None`` for open.
        to_version: first incompatible version (exclusive), ``None`` for open.

    Keyword Args:
        class_method: wrap the dispatcher in ``classmethod``.
        compilable: resolve the implementation at decoration time (so that ``torch.compile`` sees a plain
            function) instead of at the first call.

    Examples:
        >>> from torchrl import implement_for
        >>> @implement_for("torch", None, "1.0")
        ... def which():
        ...     return "old torch"
        >>> @implement_for("torch", "1.0", None)
        ... def which():
        ...     return "modern torch"
        >>> which()
        'modern torch'
    """

    _implementations: dict[str, list[tuple["implement_for", Callable]]] = {}
    _dispatchers: dict[str, Callable] = {}
    _resolved: dict[str, Callable] = {}

    def __init__(
        self,
        module_name: str | Callable[[], Any],
        from_version: str | None = None,
        to_version: str | None = None,
        *,
        class_method: bool = False,
        compilable: bool = False,
    ) -> None:
        self.module_name = module_name
        self.from_version = from_version
        self.to_version = to_version
        self.class_method = class_method
        self.compilable = compilable

    # -- version logic -------------------------------------------------------------------------
    @staticmethod
    def import_module(module_name: str | Callable[[], Any]) -> Any:
        """Imports (or calls) ``module_name`` and returns the module."""
        if callable(module_name):
            return module_name()
        if module_name in sys.modules:
            return sys.modules[module_name]
        return importlib.import_module(module_name)

    @staticmethod
    def get_version(module: Any) -> Version:
        version = getattr(module, "__version__", None)
        if version is None:
            raise ImportError(f"implement_for: module {getattr(module, '__name__', module)!r} has no __version__.")
        return parse(str(version).split("+")[0])

    def covers(self, version: Version) -> bool:
        """Whether ``version`` lies in this implementation's ``[from_version, to_version)`` range."""
        if self.from_version is not None and version < parse(self.from_version):
            return False
        if self.to_version is not None and version >= parse(self.to_version):
            return False
        return True

    def module_set(self) -> bool:
        """Whether the module of this implementation is importable and its version in range."""
        try:
            return self.covers(self.get_version(self.import_module(self.module_name)))
        except ImportError:
            return False

    # -- registration and dispatch -------------------------------------------------------------
    @staticmethod
    def _key(fn: Callable) -> str:
        return f"{fn.__module__}.{fn.__qualname__}"

    @classmethod
    def _resolve(cls, key: str) -> Callable:
        candidates = cls._implementations[key]
        failures = []
        for impl, fn in reversed(candidates):
            try:
                module = impl.import_module(impl.module_name)
            except ImportError as err:
                failures.append(f"{impl.module_name}: not importable ({err})")
                continue
            version = impl.get_version(module)
            if impl.covers(version):
                return fn
            failures.append(f"{getattr(module, '__name__', impl.module_name)} {version} not in [{impl.from_version}, {impl.to_version})")
        raise ModuleNotFoundError(f"implement_for: no implementation of {key} fits the installed libraries: " + "; ".join(failures))

    def __call__(self, fn: Callable) -> Callable:
        key = self._key(fn)
        self._implementations.setdefault(key, []).append((self, fn))
        self._resolved.pop(key, None)
        dispatcher = self._dispatchers.get(key)
        if dispatcher is None:
            registry = type(self)

            @functools.wraps(fn)
            def dispatcher(*args: Any, **kwargs: Any) -> Any:
                impl = registry._resolved.get(key)
                if impl is None:
                    impl = registry._resolved[key] = registry._resolve(key)
                return impl(*args, **kwargs)

            self._dispatchers[key] = dispatcher
        if self.compilable and self.module_set():
            self._resolved[key] = fn
        return classmethod(dispatcher) if self.class_method else dispatcher

    @classmethod
    def reset(cls, setters_dict: dict | None = None) -> None:
        """Forgets which implementation was chosen, so the next call checks versions again."""
        cls._resolved.clear()
