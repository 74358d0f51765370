"""``Storage``: the container a replay buffer reads from and writes into."""
from __future__ import annotations

import weakref
from abc import abstractmethod
from pathlib import Path
from typing import Any, Iterator

import torch

from torchrl._utils._deprecation import warn_once
from torchrl.data.replay_buffers._utils import _leading_len, random_on
from torchrl.data.replay_buffers.storages._checkpointers import StorageCheckpointerBase


class Storage:
    """Base class of replay-buffer storages.

    A storage holds up to ``max_size`` elements, addressed by integer indices. Writers call :meth:`set`
    with the indices they chose, samplers read ``len(storage)`` and buffers call :meth:`get` with the
    sampled indices. Subclasses implement ``set``, ``get``, ``__len__``, ``state_dict`` and
    ``load_state_dict``; checkpoints go through the storage's :attr:`checkpointer`.

    Args:
        max_size (int): the capacity of the storage.
        checkpointer (StorageCheckpointerBase, optional): saves and loads the storage content. Defaults to
            the storage class's own checkpointer.
        compilable (bool, optional): accepted for API compatibility (this implementation has no
            compile-specific code path). Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers.storages import LazyTensorStorage
        >>> storage = LazyTensorStorage(10)
        >>> storage.set(torch.arange(3), torch.zeros(3, 2))
        >>> len(storage), storage.get(torch.tensor([0, 2])).shape
        (3, torch.Size([2, 2]))
    """

    ndim = 1
    # where index tensors that address the stored data live (``None``: the CPU); samplers draw there
    _index_device: torch.device | None = None
    _default_checkpointer: type[StorageCheckpointerBase] = StorageCheckpointerBase

    def __init__(
        self, max_size: int, checkpointer: StorageCheckpointerBase | None = None, compilable: bool = False
    ) -> None:
        self.max_size = int(max_size) if max_size is not None else None
        self._compilable = compilable
        self._attached_refs: list[weakref.ref] = []  # weak: a dropped buffer must not stay alive through us
        self._rng: torch.Generator | None = None
        self.checkpointer = checkpointer

    # ---------------------------------------------------------------- abstract interface
    @abstractmethod
    def set(self, cursor: int, data: Any, *, set_cursor: bool = True):
        """Writes ``data`` at ``cursor`` (an int, a slice or an index tensor).

        With ``set_cursor=False`` the stored length is not updated (overwriting known entries).
        """

    @abstractmethod
    def get(self, index: int) -> Any:
        """Reads the elements at ``index``."""

    @abstractmethod
    def __len__(self):
        ...

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        ...

    @abstractmethod
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        ...

    @abstractmethod
    def _empty(self) -> None:
        """Forgets the content (the length goes back to 0; memory may be kept)."""

    # ---------------------------------------------------------------- common behaviour
    @property
    def checkpointer(self) -> StorageCheckpointerBase:
        return self._checkpointer

    @checkpointer.setter
    def checkpointer(self, value: StorageCheckpointerBase | None) -> None:
        self._checkpointer = self._default_checkpointer() if value is None else value

    @property
    def _attached_entities(self) -> list[Any]:
        """The buffers and samplers attached to this storage that are still alive."""
        return [e for e in (r() for r in self._attached_refs) if e is not None]

    def attach(self, buffer: Any) -> None:
        """Registers a buffer (or sampler) that must hear about writes made through other buffers.

        The storage holds it weakly, so that a buffer and its storage (which refer to each other) are freed,
        memory maps included, as soon as the buffer is dropped rather than at the next garbage collection."""
        if all(r() is not buffer for r in self._attached_refs):
            self._attached_refs = [r for r in self._attached_refs if r() is not None] + [weakref.ref(buffer)]

    def __getitem__(self, item):
        return self.get(item)

    def __setitem__(self, index, value):
        return self.set(index, value, set_cursor=False)

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self[i]

    def contains(self, item) -> bool | torch.Tensor:
        """Whether ``item`` (an index or a tensor of indices) points at written data."""
        if isinstance(item, int):
            return -len(self) <= item < len(self)
        item = torch.as_tensor(item)
        return (item < len(self)) & (item >= -len(self))

    @property
    def shape(self) -> torch.Size:
        return torch.Size([len(self)])

    def flatten(self):
        """The storage seen as a 1-dimensional storage (itself when ``ndim == 1``)."""
        if self.ndim == 1:
            return self
        raise NotImplementedError(f"{type(self).__name__} does not support ndim > 1.")

    def _rand_given_ndim(self, batch_size: int) -> torch.Tensor | tuple[torch.Tensor, ...]:
        return random_on(torch.randint, 0, len(self), (batch_size,), generator=self._rng, device=self._index_device)

    def _max_size_along_dim0(self, batched_data_shape: torch.Size | None = None) -> int:
        return self.max_size

    def _batch_len(self, data: Any) -> int:
        """The number of elements in ``data`` written by ``extend`` (data without a ``shape``)."""
        return _leading_len(data)

    def _batch_slice(self, data: Any, start: int, stop: int | None = None) -> Any:
        """The elements ``[start, stop)`` of the batch ``data`` (the writers' wrapped or oversized batches)."""
        if isinstance(data, (set, frozenset)):
            data = list(data)
        return data[start:stop]

    # ---------------------------------------------------------------- checkpoints
    def dumps(self, path) -> None:
        """Saves the content under the directory ``path`` with the storage's checkpointer."""
        path = Path(path).expanduser()
        path.mkdir(parents=True, exist_ok=True)
        self.checkpointer.dumps(self, path)

    def loads(self, path) -> None:
        """Restores the content saved by :meth:`dumps` under ``path``."""
        self.checkpointer.loads(self, Path(path).expanduser())

    def save(self, *args, **kwargs):
        """Deprecated alias of :meth:`dumps`."""
        warn_once(f"{type(self).__name__}.save is deprecated; use dumps instead.")
        return self.dumps(*args, **kwargs)

    def dump(self, *args, **kwargs):
        """Deprecated alias of :meth:`dumps`."""
        warn_once(f"{type(self).__name__}.dump is deprecated; use dumps instead.")
        return self.dumps(*args, **kwargs)

    def load(self, *args, **kwargs):
        """Deprecated alias of :meth:`loads`."""
        warn_once(f"{type(self).__name__}.load is deprecated; use loads instead.")
        return self.loads(*args, **kwargs)

    def register_save_hook(self, hook):
        """Adds ``hook(data) -> data`` to run on the content before it is saved."""
        self.checkpointer.register_save_hook(hook)

    def register_load_hook(self, hook):
        """Adds ``hook(data) -> data`` to run on the content after it is loaded."""
        self.checkpointer.register_load_hook(hook)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_attached_refs"] = []
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        state.pop("_attached_entities", None)  # pickles of earlier versions held the buffers themselves
        state.setdefault("_attached_refs", [])
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_size={self.max_size}, len={len(self)})"
