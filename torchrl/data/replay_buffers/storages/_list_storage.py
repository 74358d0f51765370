"""``ListStorage``: a Python list of arbitrary objects."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from torchrl.data.replay_buffers._utils import INT_CLASSES
from torchrl.data.replay_buffers.storages.base import Storage
from torchrl.data.replay_buffers.storages._checkpointers import ListStorageCheckpointer


def _positions(index: Any) -> list[int]:
    if isinstance(index, torch.Tensor):
        return index.reshape(-1).tolist()
    if isinstance(index, np.ndarray):
        return index.reshape(-1).tolist()
    return [int(i) for i in index]


class ListStorage(Storage):
    """Stores each element as a Python object in a list (any data type, no preallocation).

    This is the most flexible storage and the slowest one: reading a batch gathers Python objects that
    the buffer's ``collate_fn`` stacks afterwards.

    Args:
        max_size (int, optional): the capacity. ``None`` means unbounded.

    Keyword Args:
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.
        device (torch.device, optional): if given, tensors read from the storage are moved there.

    Examples:
        >>> from torchrl.data.replay_buffers import ReplayBuffer, ListStorage
        >>> rb = ReplayBuffer(storage=ListStorage(10), batch_size=2)
        >>> _ = rb.extend(["a", "b", "c"])
        >>> len(rb), rb.storage[1]
        (3, 'b')
    """

    _default_checkpointer = ListStorageCheckpointer

    def __init__(
        self,
        max_size: int | None = None,
        *,
        compilable: bool = False,
        device: torch.device | str | int | None = None,
    ):
        super().__init__(max_size, compilable=compilable)
        self._storage: list[Any] = []
        self.device = torch.device(device) if device is not None else None

    def _max_size_along_dim0(self, batched_data_shape=None) -> int:
        return self.max_size if self.max_size is not None else 2**62

    def _batch_len(self, data: Any) -> int:
        if isinstance(data, dict):
            raise TypeError(
                f"Cannot extend a {type(self).__name__} with a dict: a list storage stores a sequence of elements. "
                "Provide a list, tuple, set, range, np.ndarray, tensor or tensordict of elements (e.g. [d1, d2]), "
                "add(d) to store one dict, or use a LazyTensorStorage to store a dict of batched tensors."
            )
        if isinstance(data, (set, frozenset)):
            return len(data)
        return super()._batch_len(data)

    def set(self, cursor: int | Sequence[int] | slice, data: Any, *, set_cursor: bool = True):
        if isinstance(data, (set, frozenset)) and not isinstance(cursor, INT_CLASSES):
            data = list(data)
        if isinstance(cursor, INT_CLASSES):
            cursor = int(cursor)
            if cursor == len(self._storage):
                self._storage.append(data)
            elif cursor < len(self._storage):
                self._storage[cursor] = data
            else:
                raise IndexError(
                    f"{type(self).__name__}.set: cannot write at position {cursor}; the list holds "
                    f"{len(self._storage)} elements, so the next free position is {len(self._storage)}."
                )
            return
        if isinstance(cursor, slice):
            cursor = range(*cursor.indices(max(cursor.stop or 0, len(self._storage))))
        positions = _positions(cursor)
        # ascending (stable) order: a wrapped round-robin write into a short list appends in order, and the
        # last of repeated positions still wins
        for i in sorted(range(len(positions)), key=positions.__getitem__):
            self.set(positions[i], data[i])

    def get(self, index: int | Sequence[int] | slice) -> Any:
        if isinstance(index, INT_CLASSES) or (isinstance(index, torch.Tensor) and index.ndim == 0):
            return self._to_device(self._storage[int(index)])
        if isinstance(index, slice):
            return [self._to_device(x) for x in self._storage[index]]
        if isinstance(index, tuple):
            index = index[0]
        return [self._to_device(self._storage[i]) for i in _positions(index)]

    def _to_device(self, item: Any) -> Any:
        if self.device is not None and hasattr(item, "to"):
            return item.to(self.device)
        return item

    def __len__(self):
        return len(self._storage)

    def contains(self, item):
        return super().contains(item)

    def _empty(self) -> None:
        self._storage = []

    def state_dict(self) -> dict[str, Any]:
        return {"_storage": list(self._storage)}

    def load_state_dict(self, state_dict):
        self._storage = list(state_dict["_storage"])
