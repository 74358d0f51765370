"""The transforms a replay buffer applies: a ``Compose`` run forward on sampled data, inverted on writes.

``make_transform`` turns whatever the user passed as ``transform=`` (``None``, a TorchRL ``Transform`` or
``Compose``, an ``nn.Module``, a plain callable, or a list of those) into a :class:`BufferTransform`.
Plain callables are wrapped as transforms (their ``inv`` method, if any, is used on writes); members
appended with ``invert=True`` run their inverse on reads and their forward on writes.
"""
from __future__ import annotations

from typing import Any, Sequence

from tensordict import TensorDictBase

from torchrl.envs.transforms._compose import Compose
from torchrl.envs.transforms._transform import Transform

__all__ = ["BufferTransform", "make_transform"]


def _apply(fn: Any, data: Any) -> Any:
    out = fn(data)
    return data if out is None else out


def _apply_inv(fn: Any, data: Any, *, none_drops: bool = False) -> Any:
    """``fn.inv(data)`` (``data`` when ``fn`` has no inverse). A ``None`` result means "changed in place", except
    with ``none_drops`` from a ``Transform`` (a buffer write): then "nothing to write" (as TorchRL)."""
    if isinstance(fn, Transform) and not fn._has_inverse:
        return data
    inv = getattr(fn, "inv", None)
    if inv is None:
        return data
    out = inv(data)
    if out is None and not (none_drops and isinstance(fn, Transform)):
        return data
    return out


class _CallableMember(Transform):
    """A plain callable (or non-transform module) used as a buffer transform."""

    def __init__(self, fn: Any) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, data):
        return _apply(self.fn, data)

    def inv(self, data):
        inv = getattr(self.fn, "inv", None)
        return data if inv is None else _apply(inv, data)

    @property
    def _has_inverse(self) -> bool:
        return hasattr(self.fn, "inv")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.fn!r})"


class _InvertedMember(Transform):
    """Runs ``transform.inv`` on reads and ``transform`` on writes (``append_transform(..., invert=True)``)."""

    def __init__(self, transform: Any) -> None:
        super().__init__()
        self.inner = transform

    def forward(self, data):
        return _apply_inv(self.inner, data)

    def inv(self, data):
        return _apply(self.inner, data)

    @property
    def _has_inverse(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Inverted({self.inner!r})"


def _member(transform: Any, invert: bool) -> Transform:
    if not callable(transform):
        raise TypeError(
            f"replay-buffer transforms must be callables (a Transform, an nn.Module or a function); got "
            f"{type(transform).__name__}."
        )
    if invert:
        return _InvertedMember(transform)
    if isinstance(transform, Transform):
        return transform
    return _CallableMember(transform)


class BufferTransform(Compose):
    """The ``Compose`` of a replay buffer: ``self(data)`` on sampled data, ``self.inv(data)`` on written data.

    Works on TensorDicts and on any other data the buffer stores (members then receive that data as is).

    Examples:
        >>> chain = BufferTransform([lambda x: x + 1])
        >>> chain.append(lambda x: x * 10)
        >>> chain(1), chain.inv(1)
        (20, 1)
    """

    def __init__(self, transforms: Sequence[Any] = ()) -> None:
        super().__init__()
        for t in transforms:
            self.append(t)

    def append(self, transform: Any, invert: bool = False) -> None:
        self._attach(_member(transform, invert))

    def insert(self, index: int, transform: Any, invert: bool = False) -> None:
        n = len(self.transforms)
        if index < 0:
            index += n
        if not 0 <= index <= n:
            raise IndexError(f"insert_transform: index {index} out of range for {n} transforms.")
        self._attach(_member(transform, invert), index)

    def forward(self, data: Any) -> Any:
        for t in self.transforms:
            data = _apply(t, data)
        return data

    def inv(self, data: Any) -> Any:
        if not self._has_inverse:
            return data
        if isinstance(data, TensorDictBase):
            data = data.copy()
        for t in reversed(self.transforms):
            data = _apply_inv(t, data, none_drops=True)
            if data is None:  # nothing to write (e.g. MultiStepTransform waiting for a full window)
                return None
        return data

    @property
    def needs_tensordict(self) -> bool:
        """Whether a member is a TorchRL transform (which reads TensorDicts), not a plain callable."""
        for t in self.transforms:
            inner = t.inner if isinstance(t, _InvertedMember) else t
            if isinstance(inner, Transform) and not isinstance(inner, _CallableMember):
                return True
        return False

    @property
    def has_inverse(self) -> bool:
        """Whether :meth:`inv` can change data (some member is inverted or defines an inverse)."""
        return self._has_inverse


def make_transform(transform: Any) -> BufferTransform | None:
    """The buffer-side transform object for ``transform=`` (``None`` when there is nothing to apply)."""
    if transform is None:
        return None
    if isinstance(transform, BufferTransform):
        return transform
    if isinstance(transform, (list, tuple)):
        return BufferTransform(transform)
    if isinstance(transform, Compose):
        # the buffer takes the Compose's members (copies if that Compose already serves an env)
        members = list(transform.transforms)
        if transform.container is not None:
            return BufferTransform([t.clone() for t in members])
        for t in members:
            t._detach_container()
        return BufferTransform(members)
    return BufferTransform([transform])
