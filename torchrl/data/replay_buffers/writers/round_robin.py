"""``RoundRobinWriter``: a ring buffer cursor (the oldest elements are overwritten first)."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from tensordict import TensorDictBase

from torchrl.data.replay_buffers._utils import INT_CLASSES, _as_index, to_device
from torchrl.data.replay_buffers.storages._list_storage import ListStorage
from torchrl.data.replay_buffers.storages._tensor_storage import _batch_shape
from torchrl.data.replay_buffers.writers.base import Writer


class RoundRobinWriter(Writer):
    """Writes at a cursor that advances by the number of written elements and wraps at capacity.

    ``extend`` of a batch that fits before the end of the storage writes one contiguous slice; a batch that
    wraps is written as two slices; a batch larger than the storage keeps its last elements. The returned
    indices are CPU tensors (the cursor lives on the host; samplers keep their bookkeeping there), and no
    index tensor is ever needed on the storage's device, so ``extend`` into a CUDA storage does not
    synchronise the host with the device.

    Args:
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Keyword Args:
        track_generations (bool, optional): keep, for every storage slot, a counter bumped by each write to
            it. A consumer that kept the generation of a sampled slot (``info["index_generation"]``) can tell
            whether the slot still holds the same data (see :meth:`generations_of`). Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import ReplayBuffer, LazyTensorStorage, RoundRobinWriter
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(4), writer=RoundRobinWriter(track_generations=True))
        >>> rb.extend(torch.arange(3)), rb.extend(torch.arange(3, 6))
        (tensor([0, 1, 2]), tensor([3, 0, 1]))
        >>> rb.storage.get(torch.arange(4)), rb.writer.generations_of(torch.arange(4))
        (tensor([4, 5, 2, 3]), tensor([2, 2, 1, 1]))
    """

    def __init__(self, compilable: bool = False, *, track_generations: bool = False) -> None:
        super().__init__(compilable=compilable)
        self._track_generations = track_generations
        self._cursor_value = 0
        self._write_count_value = 0
        self._shared: torch.Tensor | None = None  # [cursor, write_count] in shared memory
        self._generations: torch.Tensor | None = None

    # ---------------------------------------------------------------- counters
    @property
    def _cursor(self) -> int:
        return self._cursor_value if self._shared is None else int(self._shared[0])

    @_cursor.setter
    def _cursor(self, value: int) -> None:
        if self._shared is None:
            self._cursor_value = value
        else:
            self._shared[0] = value

    @property
    def _write_count(self) -> int:
        return self._write_count_value if self._shared is None else int(self._shared[1])

    @_write_count.setter
    def _write_count(self, value: int) -> None:
        if self._shared is None:
            self._write_count_value = value
        else:
            self._shared[1] = value

    def _share(self) -> None:
        if self._shared is None:
            self._shared = torch.tensor([self._cursor_value, self._write_count_value]).share_memory_()
        if self._generations is not None:
            self._generations.share_memory_()

    @property
    def tracks_generations(self) -> bool:
        return self._track_generations

    def _capacity(self, data: Any, single: bool) -> int:
        shape = None
        if not single and self._storage.ndim > 1 and type(data) is not list:
            shape = _batch_shape(data)
        return self._storage._max_size_along_dim0(shape)

    def _bump(self, index: Any, capacity: int) -> None:
        if self._generations is None or self._generations.numel() < capacity:
            # with the data: a sampled batch reads its slots' generations without leaving the device
            grown = torch.zeros(capacity, dtype=torch.long, device=self._storage._index_device)
            if self._generations is not None:
                grown[: self._generations.numel()] = self._generations
            self._generations = grown
            if self._shared is not None:
                self._generations.share_memory_()
        if isinstance(index, slice):
            self._generations[index] += 1
        else:
            index = to_device(_as_index(index), self._generations.device)
            self._generations.index_add_(0, index, torch.ones_like(index))

    def generations_of(self, index: int | torch.Tensor) -> torch.Tensor:
        if not self._track_generations:
            return super().generations_of(index)
        if isinstance(index, tuple):
            index = index[0]
        index = torch.as_tensor(index)
        if self._generations is None:
            return torch.zeros(index.shape, dtype=torch.long, device=index.device)
        return self._generations[to_device(index, self._generations.device).long()]

    # ---------------------------------------------------------------- writes
    def add(self, data: Any) -> int | torch.Tensor:
        capacity = self._capacity(data, single=True)
        index = self._cursor
        self._storage.set(index, data)
        self._cursor = (index + 1) % capacity
        self._write_count += 1
        if self._track_generations:
            self._bump([index], capacity)
        return index

    def extend(self, data: Sequence) -> torch.Tensor:
        return self._extend(data, None)

    def _extend(self, data: Sequence, slots: torch.Tensor | None) -> torch.Tensor:
        """``extend``; ``slots``: the slots already computed for ``data`` (``arange(cursor, cursor + n)``)."""
        storage = self._storage
        shape = getattr(data, "shape", None)
        n = shape[0] if shape else storage._batch_len(data)
        if n == 0:
            raise RuntimeError(
                f"{type(self).__name__}.extend: expected at least one element, got an empty batch "
                f"({type(data).__name__} of length 0). Skip the call when there is nothing to write."
            )
        capacity = storage._capacity_rows if getattr(storage, "initialized", False) else self._capacity(data, single=False)
        cursor = self._cursor_value if self._shared is None else self._cursor
        written = n
        full_index = None
        if n > capacity:  # only the last `capacity` elements survive
            full_index = torch.arange(cursor, cursor + n) % capacity
            data = storage._batch_slice(data, n - capacity)
            cursor = (cursor + n - capacity) % capacity
            n = capacity
        if cursor + n <= capacity:
            where: Any = slice(cursor, cursor + n)
            index = slots if slots is not None and full_index is None else torch.arange(cursor, cursor + n)
            storage.set(where, data)
        else:
            # a wrapping batch is written as two slices: no index tensor to move to the storage's device,
            # and the storage knows its length without reading one on the host
            index = torch.arange(cursor, cursor + n) % capacity
            where = index
            head = capacity - cursor
            writes = [(slice(cursor, capacity), storage._batch_slice(data, 0, head)),
                      (slice(0, n - head), storage._batch_slice(data, head))]
            if isinstance(storage, ListStorage):  # a list grows by appending: its lower positions come first
                writes.reverse()
            for part, chunk in writes:  # a tensor storage takes the newest row from its last write
                storage.set(part, chunk)
        if self._shared is None:
            self._cursor_value = (cursor + n) % capacity
            self._write_count_value += written
        else:
            self._cursor = (cursor + n) % capacity
            self._write_count += written
        if self._track_generations:
            self._bump(where, capacity)
        return index if full_index is None else full_index

    def write_at(self, index: int | torch.Tensor, data: Any) -> int | torch.Tensor:
        """Overwrites the slots at ``index`` (the cursor does not move)."""
        self._storage.set(index, data)
        if self._track_generations:
            capacity = self._capacity(data, single=isinstance(index, INT_CLASSES))
            self._bump([index] if isinstance(index, INT_CLASSES) else index, capacity)
        return index

    # ---------------------------------------------------------------- state
    def _empty(self) -> None:
        self._cursor = 0

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"_cursor": self._cursor, "_write_count": self._write_count}
        if self._generations is not None:
            state["_generations"] = self._generations.to("cpu", copy=True)
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._cursor = int(state_dict["_cursor"])
        self._write_count = int(state_dict["_write_count"])
        if "_generations" in state_dict:
            generations = torch.as_tensor(state_dict["_generations"])
            device = self._storage._index_device if self._storage is not None else None
            self._generations = generations.to(device or "cpu", copy=True)

    def dumps(self, path):
        return super().dumps(path)

    def loads(self, path):
        return super().loads(path)

    def register_storage(self, storage) -> None:
        return super().register_storage(storage)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(cursor={self._cursor}, full_storage={self._write_count >= (self._storage.max_size or 0) if self._storage is not None else False})"


class TensorDictRoundRobinWriter(RoundRobinWriter):
    """A :class:`RoundRobinWriter` for TensorDict data: as TorchRL's, every element carries its slot as an
    ``"index"`` entry when read back. Tensor storages do not keep that column (it always equals the slot:
    reads through :class:`TensorDictReplayBuffer` rebuild it); storages of element objects (``ListStorage``)
    store each element with it. The written TensorDict itself is left as it was.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TensorDictReplayBuffer, LazyTensorStorage
        >>> from torchrl.data.replay_buffers import TensorDictRoundRobinWriter
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictRoundRobinWriter())
        >>> rb.extend(TensorDict(a=torch.arange(4), batch_size=[4])).tolist()
        [0, 1, 2, 0]
        >>> rb[:]["index"].tolist()
        [0, 1, 2]
    """

    def _keeps_index(self) -> bool:
        """Whether the storage keeps an ``"index"`` entry written into the data (tensor layouts ignore it)."""
        storage = self._storage
        return getattr(storage, "initialized", True) and getattr(storage, "_layout", None) is None

    def add(self, data: Any) -> int | torch.Tensor:
        if isinstance(data, TensorDictBase) and self._keeps_index():
            data = _with_index(data, torch.tensor(self._cursor))
        return super().add(data)

    def extend(self, data: Sequence) -> torch.Tensor:
        if isinstance(data, TensorDictBase) and data.batch_dims and self._keeps_index():
            storage = self._storage
            n = data.shape[0]
            capacity = (storage._capacity_rows if getattr(storage, "initialized", False)
                        else self._capacity(data, single=False))
            cursor = self._cursor_value if self._shared is None else self._cursor
            slots = torch.arange(cursor, cursor + n)
            if cursor + n > capacity:
                slots = slots % capacity
            column = slots if data.batch_dims == 1 else slots.reshape(-1, *([1] * (data.batch_dims - 1))).expand(data.batch_size)
            return self._extend(_with_index(data, column), slots)
        return super().extend(data)

    def write_at(self, index: int | torch.Tensor, data: Any) -> int | torch.Tensor:
        return super().write_at(index, data)


def _with_index(data: TensorDictBase, index: torch.Tensor) -> TensorDictBase:
    """A shallow copy of ``data`` with an ``"index"`` entry (the caller's TensorDict stays as it was)."""
    data = data.copy()
    data.set("index", index)
    return data
