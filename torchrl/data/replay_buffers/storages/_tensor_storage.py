"""``TensorStorage``: contiguous preallocated tensors (or a TensorDict of them) indexed along dim 0."""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from tensordict import TensorDictBase, is_tensor_collection
from torch.utils._pytree import keystr, tree_flatten, tree_flatten_with_path, tree_map

from torchrl._utils._check_mode import _state as _check_state

from torchrl.data.replay_buffers._utils import (
    INT_CLASSES,
    _tree_leading_len,
    _tree_slice,
    random_on,
    stack_elements,
    to_device,
    unravel_index,
)
from torchrl.data.replay_buffers.storages._layout import Layout, check_leaf
from torchrl.data.replay_buffers.storages.base import Storage
from torchrl.data.replay_buffers.storages._checkpointers import TensorStorageCheckpointer


def _batch_shape(data: Any) -> torch.Size:
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        return data.shape
    return tree_flatten(data)[0][0].shape


def _index_dims(cursor: Any, ndim: int) -> int:
    """How many leading dims of the written data the storage index ``cursor`` addresses."""
    if isinstance(cursor, INT_CLASSES):
        return ndim - 1
    if isinstance(cursor, tuple):
        produced = max((c.ndim if isinstance(c, torch.Tensor) else (0 if isinstance(c, INT_CLASSES) else 1))
                       for c in cursor)
        return produced + ndim - len(cursor)
    if isinstance(cursor, torch.Tensor):
        return (cursor.ndim if cursor.dtype != torch.bool else 1) + ndim - 1
    return ndim  # slice, list, range


def _max_row(cursor: Any) -> int:
    """1 + the largest row written by ``cursor`` along dim 0 (-1 when nothing is written)."""
    if isinstance(cursor, tuple):
        cursor = cursor[0]
    if isinstance(cursor, INT_CLASSES):
        return int(cursor) + 1 if cursor >= 0 else -1
    if isinstance(cursor, slice):
        return cursor.stop if cursor.stop is not None else -1
    if isinstance(cursor, torch.Tensor):
        if cursor.numel() == 0:
            return -1
        if cursor.dtype == torch.bool:
            return int(cursor.reshape(cursor.shape[0], -1).any(-1).nonzero().max()) + 1
        return int(cursor.max()) + 1
    return max(cursor) + 1 if len(cursor) else -1


class TensorStorage(Storage):
    """A storage over preallocated tensors: a tensor, a TensorDict or a pytree of tensors.

    Element ``i`` is ``storage[i]`` along the first dimension. With ``ndim > 1``, the first ``ndim``
    dimensions are storage dimensions: with ``ndim=2`` and data laid out as ``[time, env]``, every
    ``(t, env)`` pair is one element, writes append along ``time`` and samplers draw ``(t, env)`` pairs.

    Reads and writes of TensorDict content go through one index operation per leaf: writing validates the
    keys and per-element shapes of the incoming data against the storage first (and leaves the storage
    untouched if they disagree); reading builds the result without re-validation.

    Args:
        storage (Tensor, TensorDict or pytree of tensors): the preallocated data; it is considered full.
        max_size (int, optional): the number of elements ``storage`` holds (checked when given).

    Keyword Args:
        device (torch.device, optional): where the data lives. Defaults to ``"cpu"``.
        ndim (int, optional): the number of storage dimensions. Defaults to ``1``.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import ReplayBuffer, TensorStorage, ImmutableDatasetWriter
        >>> data = TensorDict(obs=torch.arange(10.0), batch_size=[10])
        >>> rb = ReplayBuffer(storage=TensorStorage(data), writer=ImmutableDatasetWriter(), batch_size=4)
        >>> len(rb), rb.sample().shape
        (10, torch.Size([4]))
    """

    _default_checkpointer = TensorStorageCheckpointer

    def __init__(
        self,
        storage,
        max_size=None,
        *,
        device: torch.device | str = "cpu",
        ndim: int = 1,
        compilable: bool = False,
    ):
        if storage is None and max_size is None:
            raise ValueError(f"{type(self).__name__}: pass the preallocated storage or max_size.")
        if storage is not None:
            shape = _batch_shape(storage)
            if len(shape) < ndim:
                raise ValueError(
                    f"{type(self).__name__}: ndim={ndim} but the storage has only {len(shape)} batch dims "
                    f"(shape {tuple(shape)})."
                )
            numel = math.prod(shape[:ndim])
            if max_size is not None and max_size != numel:
                raise ValueError(
                    f"{type(self).__name__}: max_size={max_size} but the storage holds {numel} elements "
                    f"(shape {tuple(shape[:ndim])})."
                )
            max_size = numel
        super().__init__(max_size, compilable=compilable)
        self.ndim = ndim
        self.device = device if device == "auto" else torch.device(device)
        self._index_device = _non_cpu(self.device)
        self._storage = None
        self._layout: Layout | None = None
        self._tree: tuple[list[torch.Tensor], Any] | None = None  # leaves and structure of a pytree storage
        self._rows_value = 0
        self._shared_rows: torch.Tensor | None = None
        self._inner = 1
        self._capacity_rows = 0
        self._version = 0  # bumped on every write: samplers cache what they derive from the content
        self._last_cursor: Any = None
        self.initialized = False
        if storage is not None:
            if self.device != "auto" and _device_of(storage) not in (None, self.device):
                storage = tree_map(lambda x: x.to(self.device), storage) if not is_tensor_collection(
                    storage
                ) else storage.to(self.device)
            self._adopt(storage, rows=_batch_shape(storage)[0])

    # ---------------------------------------------------------------- bookkeeping
    @property
    def _rows(self) -> int:
        shared = self._shared_rows
        return self._rows_value if shared is None else int(shared)

    @_rows.setter
    def _rows(self, value: int) -> None:
        if self._shared_rows is None:
            self._rows_value = value
        else:
            self._shared_rows.fill_(value)

    def _adopt(self, storage: Any, rows: int) -> None:
        self._storage = storage
        self.initialized = True
        self._index_device = _non_cpu(_device_of(storage))
        shape = _batch_shape(storage)
        self._capacity_rows = shape[0]
        self._inner = math.prod(shape[1 : self.ndim])
        self._layout = Layout(storage, self.ndim, f"{type(self).__name__}.set") if Layout.supports(storage) else None
        plain = is_tensor_collection(storage) or isinstance(storage, torch.Tensor)
        self._tree = None if plain else tree_flatten(storage)
        self._rows = rows

    def _share(self) -> None:
        """Moves the content and the length counter to shared memory (for use across processes)."""
        if self._shared_rows is None:
            self._shared_rows = torch.tensor(self._rows_value, dtype=torch.long).share_memory_()
        if self.initialized and not _is_shared(self._storage):
            storage = self._storage
            if is_tensor_collection(storage):
                storage.share_memory_()
            else:
                tree_map(lambda x: x.share_memory_(), storage)
            self._adopt(storage, self._rows)

    def __len__(self):
        return self._rows * self._inner

    @property
    def shape(self) -> torch.Size:
        if not self.initialized:
            return torch.Size([0])
        return torch.Size([self._rows, *_batch_shape(self._storage)[1 : self.ndim]])

    def _max_size_along_dim0(self, batched_data_shape: torch.Size | None = None) -> int:
        if self.initialized:
            return self._capacity_rows
        if batched_data_shape is None or self.ndim == 1:
            return self.max_size
        return -(self.max_size // -math.prod(batched_data_shape[1 : self.ndim]))

    def _rand_given_ndim(self, batch_size: int):
        device = self._index_device
        if self.ndim == 1:
            if device is None:
                return torch.randint(0, self._rows, (batch_size,), generator=self._rng)
            return random_on(torch.randint, 0, self._rows, (batch_size,), generator=self._rng, device=device)
        flat = random_on(torch.randint, 0, len(self), (batch_size,), generator=self._rng, device=device)
        return unravel_index(flat, self.shape[: self.ndim])

    def contains(self, item):
        if isinstance(item, INT_CLASSES):
            return -len(self) <= item < len(self)
        return super().contains(item)

    # ---------------------------------------------------------------- writes
    def _batch_len(self, data: Any) -> int:
        # a list is a list of elements (stacked when written); a tuple or a dict is a pytree of batches
        return len(data) if type(data) is list else _tree_leading_len(data)

    def _batch_slice(self, data: Any, start: int, stop: int | None = None) -> Any:
        return data[start:stop] if type(data) is list else _tree_slice(data, slice(start, stop))

    def _init(self, data: Any, single: bool) -> None:
        raise RuntimeError(f"{type(self).__name__} was not initialized with data.")

    def set(self, cursor: int | Sequence[int] | slice, data: Any, *, set_cursor: bool = True):
        if type(data) is list:
            data = stack_elements(data, f"{type(self).__name__}.set")
        single = type(cursor) is not slice and isinstance(cursor, INT_CLASSES)
        if not self.initialized:
            self._init(data, single=single)
        check = _check_state["on"]  # check mode: exact dtypes and shapes on every write
        where = cursor
        if type(cursor) is torch.Tensor or type(cursor) is tuple:  # index tensors go where the data is
            where = _cursor_on(cursor, self._index_device)
        layout = self._layout
        if layout is not None:
            dims = self.ndim if type(cursor) is slice else _index_dims(cursor, self.ndim)
            layout.write(where, layout.sources(data, dims, not single, check))
        elif isinstance(self._storage, torch.Tensor):
            self._check_tensor(cursor, data, single, check)
            self._storage[where] = data if self._index_device is None else to_device(data, self._index_device)
        elif is_tensor_collection(self._storage):
            self._storage[where] = data
        else:
            sources = self._tree_sources(cursor, data, single, check)
            device = self._index_device
            for dst, src in zip(self._tree[0], sources):
                dst[where] = src if device is None else to_device(src, device)
        self._version += 1
        if set_cursor:
            self._last_cursor = cursor
            row = cursor.stop if type(cursor) is slice and cursor.stop is not None else _max_row(cursor)
            if row > self._rows:
                self._rows = min(row, self._capacity_rows)

    def _check_tensor(self, cursor: Any, data: Any, single: bool, check: bool) -> None:
        """Checks a write into a plain-tensor storage (a dtype that differs only fails batched writes)."""
        stored = self._storage
        if not isinstance(data, torch.Tensor):
            raise TypeError(f"{type(self).__name__}.set: the storage holds a tensor, got a {type(data).__name__}.")
        dims = _index_dims(cursor, self.ndim)
        if data.shape[dims:] != stored.shape[self.ndim :] or (data.dtype is not stored.dtype and (check or not single)):
            check_leaf(
                "the data", data, stored.shape[self.ndim :], stored.dtype, dims,
                f"{type(self).__name__}.set", strict_dtype=not single, check=check,
            )

    def _tree_sources(self, cursor: Any, data: Any, single: bool, check: bool) -> list[torch.Tensor]:
        """The leaves of a pytree written into a pytree storage, checked against the stored leaves."""
        stored, spec = self._tree
        leaves, data_spec = tree_flatten(data)
        where = f"{type(self).__name__}.set"
        if data_spec != spec:
            raise RuntimeError(
                f"{where}: the data's structure differs from the storage's: got {data_spec}, the storage holds "
                f"{spec}. Every write must have the structure of the first write. The buffer's content was not "
                "modified."
            )
        dims = _index_dims(cursor, self.ndim)
        strict_dtype = check or not single
        for i, (src, dst) in enumerate(zip(leaves, stored)):
            if type(src) is not torch.Tensor or src.shape[dims:] != dst.shape[self.ndim :] or (
                strict_dtype and src.dtype is not dst.dtype
            ):
                key = keystr(tree_flatten_with_path(data)[0][i][0])
                if not isinstance(src, torch.Tensor):
                    raise TypeError(f"{where}: entry {key} holds a {type(src).__name__}, expected a tensor.")
                check_leaf(
                    f"entry {key}", src, dst.shape[self.ndim :], dst.dtype, dims, where,
                    strict_dtype=strict_dtype, check=check,
                )
        return leaves

    def _last_row(self) -> int | None:
        """The row written last (``None`` when unknown)."""
        cursor = self._last_cursor
        if isinstance(cursor, tuple):
            cursor = cursor[0]
        if cursor is None:
            return None
        if isinstance(cursor, INT_CLASSES):
            return int(cursor) % max(self._capacity_rows, 1)
        if isinstance(cursor, slice):
            return (cursor.stop - 1) if cursor.stop is not None else None
        if isinstance(cursor, torch.Tensor):
            return int(cursor.reshape(-1)[-1]) if cursor.numel() and cursor.dtype != torch.bool else None
        return int(cursor[-1]) if len(cursor) else None

    # ---------------------------------------------------------------- reads
    def get(self, index: int | Sequence[int] | slice) -> Any:
        if not self.initialized:
            raise RuntimeError(f"Cannot read from an empty {type(self).__name__}: write to it first.")
        if self._rows < self._capacity_rows and (isinstance(index, slice) or (self.ndim == 1 and isinstance(index, int))):
            index = self._written_index(index)
        elif self._index_device is not None and (type(index) is torch.Tensor or type(index) is tuple):
            index = _cursor_on(index, self._index_device)  # e.g. a CPU index from user code
        layout = self._layout
        if layout is not None:
            return layout.gather(index)
        if is_tensor_collection(self._storage) or isinstance(self._storage, torch.Tensor):
            return self._storage[index]
        return tree_map(lambda x: x[index], self._storage)

    def _written_index(self, index):
        """An int or slice index taken over the written rows only (as TorchRL: ``storage[:]`` is the data
        written so far, negative indices count from its end, and indices past it raise ``IndexError``)."""
        n = self._rows
        if isinstance(index, slice):
            r = range(n)[index]
            return slice(r.start, r.stop if r.stop >= 0 else None, r.step)
        if isinstance(index, bool) or not -n <= index < n:
            raise IndexError(f"index {index} is out of range for a {type(self).__name__} holding {n} elements.")
        return index % n

    def __getitem__(self, index):
        if isinstance(index, str) or (type(index) is tuple and index and all(isinstance(k, str) for k in index)):
            # an entry name, as TorchRL: that entry over the written rows
            return self._written_rows().get(index)
        if self.ndim == 1 and self.initialized and self._rows < self._capacity_rows and not isinstance(index, (int, slice, tuple)):
            t = torch.as_tensor(index)
            if t.dtype != torch.bool and t.numel():
                n = self._rows
                if int(t.min()) < -n or int(t.max()) >= n:
                    raise IndexError(f"indices {t.tolist()} are out of range for a {type(self).__name__} holding {n} elements.")
                index = torch.where(t < 0, t + n, t)
        return self.get(index)

    def flatten(self):
        """A 1-dimensional ``TensorStorage`` viewing the written rows with the storage dims merged."""
        if self.ndim == 1:
            return self
        data = self._written_rows()
        if is_tensor_collection(data):
            flat = data.reshape(-1, *data.batch_size[self.ndim :]) if data.batch_size[self.ndim :] else data.reshape(-1)
        else:
            flat = tree_map(lambda x: x.flatten(0, self.ndim - 1), data)
        return TensorStorage(flat, device=self.device if self.device != "auto" else "cpu")

    # ---------------------------------------------------------------- state
    def _empty(self) -> None:
        self._rows = 0
        self._version += 1
        self._last_cursor = None

    def _written_rows(self) -> Any:
        rows = self._rows
        if is_tensor_collection(self._storage) or isinstance(self._storage, torch.Tensor):
            return self._storage[:rows]
        return tree_map(lambda x: x[:rows], self._storage)

    def _checkpoint_metadata(self) -> dict[str, Any]:
        meta = {"initialized": self.initialized, "rows": self._rows, "ndim": self.ndim, "max_size": self.max_size}
        if self.initialized:
            meta["storage_shape"] = list(_batch_shape(self._storage))
        return meta

    def _restore_content(self, data: Any, meta: dict[str, Any]) -> None:
        rows = meta["rows"]
        if self.initialized and _batch_shape(self._storage)[1:] != _batch_shape(data)[1:]:
            raise RuntimeError(
                f"{type(self).__name__}.loads: the checkpoint holds elements of batch shape "
                f"{tuple(_batch_shape(data)[1:])}, this storage {tuple(_batch_shape(self._storage)[1:])}."
            )
        if not self.initialized:
            if rows == 0:
                return
            self._init_like(data, meta["storage_shape"][0])
        if rows > self._capacity_rows:
            raise RuntimeError(
                f"{type(self).__name__}.loads: the checkpoint holds {rows} rows but this storage has room for "
                f"{self._capacity_rows}; create the storage with a larger max_size."
            )
        if rows:
            self.set(slice(0, rows), data, set_cursor=False)
        self._rows = rows

    def _init_like(self, data: Any, rows: int) -> None:
        raise RuntimeError(f"{type(self).__name__} cannot be initialized from a checkpoint.")

    def state_dict(self) -> dict[str, Any]:
        return {
            "_storage": self._written_rows() if self.initialized else None,
            "initialized": self.initialized,
            "_len": self._rows,
            "storage_shape": list(_batch_shape(self._storage)) if self.initialized else None,
        }

    def load_state_dict(self, state_dict):
        if not state_dict["initialized"]:
            self._empty()
            return
        meta = {"rows": state_dict["_len"], "storage_shape": state_dict["storage_shape"]}
        self._restore_content(state_dict["_storage"], meta)

    def __getstate__(self):
        state = super().__getstate__()
        state["_layout"] = None
        state["_tree"] = None
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if self.initialized:
            self._adopt(self._storage, self._rows)


def _non_cpu(device: Any) -> torch.device | None:
    """``device`` as an index device: ``None`` for the CPU (and for ``"auto"`` or unknown devices)."""
    if device is None or device == "auto" or device.type == "cpu":
        return None
    return device


def _cursor_on(cursor: Any, device: torch.device | None) -> Any:
    """A write index (a tensor, or a tuple of coordinates) with its tensors on ``device`` (``None``: the CPU)."""
    if type(cursor) is tuple:
        return tuple(to_device(c, device) if isinstance(c, torch.Tensor) else c for c in cursor)
    return to_device(cursor, device)


def _device_of(data: Any) -> torch.device | None:
    if is_tensor_collection(data):
        return data.device
    leaves = tree_flatten(data)[0]
    return leaves[0].device if leaves else None


def _is_shared(data: Any) -> bool:
    if isinstance(data, TensorDictBase):
        return data.is_shared() or data.is_memmap()
    leaves = tree_flatten(data)[0]
    return all(x.is_shared() for x in leaves)
