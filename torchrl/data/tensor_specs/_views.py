"""Key helpers and the ``keys()`` / ``items()`` / ``values()`` views of a ``Composite``."""
from __future__ import annotations

import enum
from typing import Any, Callable, Iterator

from tensordict.utils import unravel_key


class _NoDefault(enum.Enum):
    ZERO = 0
    ONE = 1


NO_DEFAULT = _NoDefault.ZERO


def _is_key(idx: Any) -> bool:
    """``True`` for a string or a (nested) tuple of strings -- i.e. a key rather than a shape index."""
    if isinstance(idx, str):
        return True
    return isinstance(idx, tuple) and len(idx) > 0 and all(_is_key(i) for i in idx)


def _as_tuple(key: Any) -> tuple[str, ...]:
    """A nested key as a flat tuple of strings (``"a"`` -> ``("a",)``)."""
    if isinstance(key, str):
        return (key,)
    key = unravel_key(key)
    return (key,) if isinstance(key, str) else key


def _public(key: tuple[str, ...]) -> str | tuple[str, ...]:
    """How a key is shown to users: a string at the top level, a tuple below."""
    return key[0] if len(key) == 1 else key


class _View:
    """A lazily evaluated view over a ``Composite``'s entries (re-iterable, sized, supports ``in``)."""

    _kind = "keys"

    def __init__(
        self,
        spec: Any,
        include_nested: bool,
        leaves_only: bool,
        is_leaf: Callable[[type], bool] | None,
        step_mdp_static_only: bool,
    ) -> None:
        self._spec = spec
        self._args = (include_nested, leaves_only, is_leaf, step_mdp_static_only)

    def _items(self) -> Iterator[tuple[Any, Any]]:
        return self._spec._iter_items(*self._args)

    def __iter__(self) -> Iterator[Any]:
        for key, value in self._items():
            yield self._pick(key, value)

    def _pick(self, key: Any, value: Any) -> Any:
        return key

    def __len__(self) -> int:
        return sum(1 for _ in self._items())

    def __contains__(self, item: Any) -> bool:
        return any(item == x for x in self)

    def __repr__(self) -> str:
        return f"_CompositeSpec{self._kind.capitalize()}View({list(self)})"


class _CompositeSpecKeysView(_View):
    def __contains__(self, key: Any) -> bool:
        if not _is_key(key):
            return False
        key = _public(_as_tuple(key))
        return any(key == k for k, _ in self._items())


class _CompositeSpecItemsView(_View):
    _kind = "items"

    def _pick(self, key: Any, value: Any) -> Any:
        return key, value


class _CompositeSpecValuesView(_View):
    _kind = "values"

    def _pick(self, key: Any, value: Any) -> Any:
        return value
