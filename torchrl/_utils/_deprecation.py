"""One helper for every deprecated name: warn once, say what to use instead."""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

__all__ = ["warn_once", "deprecated_alias", "deprecated_function", "rename_kwargs"]

_WARNED: set[str] = set()


def warn_once(message: str, *, category: type[Warning] = DeprecationWarning, stacklevel: int = 3) -> None:
    """Emits ``message`` once per process (keyed by the message text)."""
    if message in _WARNED:
        return
    _WARNED.add(message)
    warnings.warn(message, category, stacklevel=stacklevel)


def deprecated_alias(target: type, old_name: str, *, module: str | None = None) -> type:
    """Returns a class named ``old_name`` that stands for ``target``.

    Calling the alias warns once (``DeprecationWarning`` naming ``target``) and returns an instance of
    ``target``; ``isinstance(obj, Alias)`` and ``issubclass(cls, Alias)`` answer as for ``target``; user
    classes may still subclass the alias.

    Examples:
        >>> class New: ...
        >>> Old = deprecated_alias(New, "Old")
        >>> isinstance(Old(), New) and isinstance(New(), Old)
        True
    """
    message = f"{old_name} is deprecated; use {target.__name__} instead."
    # ABCMeta walks a class's subclasses (the alias is one): the guard stops the walk re-entering the alias.
    in_progress: set[int] = set()

    class _AliasMeta(type(target)):
        def __call__(cls, *args: Any, **kwargs: Any):
            if cls is alias:
                warn_once(message)
                return target(*args, **kwargs)
            return super().__call__(*args, **kwargs)

        def __instancecheck__(cls, obj: Any) -> bool:
            if cls is alias:
                return cls.__subclasscheck__(type(obj))
            return super().__instancecheck__(obj)

        def __subclasscheck__(cls, sub: type) -> bool:
            if cls is alias:
                if id(sub) in in_progress:
                    return False
                in_progress.add(id(sub))
                try:
                    return issubclass(sub, target)
                finally:
                    in_progress.discard(id(sub))
            return super().__subclasscheck__(sub)

    alias = _AliasMeta(
        old_name,
        (target,),
        {"__doc__": f"Deprecated alias of :class:`{target.__name__}`.", "__module__": module or target.__module__},
    )
    return alias


def deprecated_function(fn: Callable, old_name: str) -> Callable:
    """Wraps ``fn`` under ``old_name``: the wrapper warns once, then calls ``fn``."""
    message = f"{old_name} is deprecated; use {fn.__name__} instead."

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any):
        warn_once(message)
        return fn(*args, **kwargs)

    wrapper.__name__ = old_name
    return wrapper


def rename_kwargs(owner: str, kwargs: dict[str, Any], renames: dict[str, str]) -> dict[str, Any]:
    """Maps deprecated keyword names onto their replacements in place, warning once per (owner, name).

    Raises:
        TypeError: if both the old and the new name are given.
    """
    for old, new in renames.items():
        if old in kwargs:
            if new in kwargs:
                raise TypeError(f"{owner}: got both '{old}' (deprecated) and '{new}'; pass only '{new}'.")
            warn_once(f"{owner}: the keyword '{old}' is deprecated; use '{new}' instead.")
            kwargs[new] = kwargs.pop(old)
    return kwargs
