"""``TensorDictMaxValueWriter``: keeps the elements with the highest rank (e.g. the best episodes)."""
from __future__ import annotations

import heapq
from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection

from torchrl.data.replay_buffers._utils import _key_str
from torchrl.data.replay_buffers.writers.base import Writer

_REDUCTIONS = {
    "sum": lambda x: x.sum(-1),
    "mean": lambda x: x.mean(-1),
    "max": lambda x: x.amax(-1),
    "min": lambda x: x.amin(-1),
    "median": lambda x: x.median(-1).values,
}


class TensorDictMaxValueWriter(Writer):
    """Keeps the ``max_size`` elements with the highest rank seen so far.

    The rank of an element is its ``rank_key`` entry reduced to a scalar over every non-batch dim (for a
    stored trajectory of shape ``[T]``, over time too). While the storage has room every element is
    written; once full, an element is written only if its rank is strictly higher than the lowest stored
    rank, which it replaces (the first such slot on ties). ``extend`` gives the same result as adding the
    elements one by one, in order, and returns, for every element of the batch, the slot that holds it
    afterwards, or ``-1`` when it was dropped or replaced by a later element of the same batch.

    Args:
        rank_key (NestedKey, optional): the entry ranking the elements. Defaults to ``("next", "reward")``.
        reduction (str, optional): ``"sum"``, ``"mean"``, ``"max"``, ``"min"`` or ``"median"``. Defaults to
            ``"sum"``.

    Raises:
        NotImplementedError: for an unknown ``reduction`` (TorchRL's type, raised here at construction).
        RuntimeError: on writes of data that is not a TensorDict, and on ``extend`` of a TensorDict without
            a batch dimension.
        KeyError: when the written data has no ``rank_key`` entry.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TensorDictReplayBuffer, LazyTensorStorage
        >>> from torchrl.data.replay_buffers import TensorDictMaxValueWriter
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(2), writer=TensorDictMaxValueWriter(rank_key="r"))
        >>> rb.extend(TensorDict(r=torch.tensor([1.0, 5.0, 3.0, 0.0]), batch_size=[4])).tolist()
        [-1, 1, 0, -1]
        >>> sorted(rb.storage.get(torch.arange(2))["r"].tolist())
        [3.0, 5.0]
    """

    def __init__(self, rank_key=None, reduction: str = "sum", **kwargs) -> None:
        super().__init__(**kwargs)
        if reduction not in _REDUCTIONS:
            raise NotImplementedError(
                f"TensorDictMaxValueWriter: unknown reduction {reduction!r}; expected one of {sorted(_REDUCTIONS)}."
            )
        self._rank_key = rank_key if rank_key is not None else ("next", "reward")
        self._reduction = reduction
        self._cursor = 0  # number of slots written so far (until the storage is full)
        self._ranks: torch.Tensor | None = None  # rank of every slot (-inf when empty)
        self._heap: list[tuple[float, int]] | None = None  # (rank, slot) of every slot once full

    def register_storage(self, storage) -> None:
        super().register_storage(storage)

    def _capacity(self) -> int:
        return self._storage._max_size_along_dim0(None)

    def _stored_ranks(self) -> torch.Tensor:
        if self._ranks is None:
            self._ranks = torch.full((self._capacity(),), float("-inf"), dtype=torch.float64)
        return self._ranks

    def _rank(self, data: Any, batch_dims: int, where: str) -> torch.Tensor:
        if not is_tensor_collection(data):
            raise RuntimeError(
                f"TensorDictMaxValueWriter.{where} expects a tensor collection (TensorDict or tensorclass) holding "
                f"the rank entry {_key_str(self._rank_key)}; got a {type(data).__name__}."
            )
        if batch_dims and not data.batch_size:
            raise RuntimeError(
                "TensorDictMaxValueWriter.extend expects a TensorDict with a batch dimension (one element per "
                "row); got batch_size=torch.Size([]). Use add() to write a single element."
            )
        value = data.get(self._rank_key, None)
        if value is None:
            raise KeyError(
                f"TensorDictMaxValueWriter: the data has no rank entry {_key_str(self._rank_key)}; pass "
                "rank_key= naming the entry to rank elements by."
            )
        leading = value.shape[:batch_dims]
        return _REDUCTIONS[self._reduction](value.reshape(*leading, -1).to(torch.float64))

    def _place(self, rank: float, undo: list) -> int:
        """The slot an element of rank ``rank`` takes now (``-1``: dropped); updates the bookkeeping.

        ``undo`` receives ``(slot, previous rank)`` for every change, so that a failed write can be rolled back.
        """
        ranks = self._stored_ranks()
        if self._cursor < ranks.numel():
            slot = self._cursor
            self._cursor += 1
        else:
            heap = self._heap
            if heap is None:
                heap = self._heap = [(r, i) for i, r in enumerate(ranks.tolist())]
                heapq.heapify(heap)
            lowest, slot = heap[0]
            if not rank > lowest:
                return -1
            heapq.heapreplace(heap, (rank, slot))
        undo.append((slot, float(ranks[slot])))
        ranks[slot] = rank
        return slot

    def _roll_back(self, cursor: int, undo: list) -> None:
        for slot, rank in reversed(undo):
            self._ranks[slot] = rank
        self._cursor = cursor
        self._heap = None  # rebuilt from the ranks when next needed

    def get_insert_index(self, data: Any) -> int | None:
        """Where one element would be written now, or ``None`` if its rank is too low to be kept."""
        rank = float(self._rank(data, 0, "get_insert_index"))
        ranks = self._stored_ranks()
        if self._cursor < ranks.numel():
            return self._cursor
        lowest = int(ranks.argmin())
        return lowest if rank > float(ranks[lowest]) else None

    def add(self, data: Any) -> int | None:
        rank = float(self._rank(data, 0, "add"))
        cursor, undo = self._cursor, []
        slot = self._place(rank, undo)
        if slot < 0:
            return None
        try:
            self._storage.set(slot, data)
        except BaseException:
            self._roll_back(cursor, undo)
            raise
        return slot

    def extend(self, data: TensorDictBase) -> torch.Tensor:
        if is_tensor_collection(data) and data.batch_size[:1] == (0,):
            raise RuntimeError(
                "TensorDictMaxValueWriter.extend: expected at least one element, got an empty batch. Skip the call "
                "when there is nothing to write."
            )
        ranks = self._rank(data, 1, "extend").tolist()
        index = [-1] * len(ranks)
        holder: dict[int, int] = {}  # slot -> element of this batch written there last
        cursor, undo = self._cursor, []
        for element, rank in enumerate(ranks):
            slot = self._place(rank, undo)
            if slot >= 0:
                previous = holder.get(slot)
                if previous is not None:
                    index[previous] = -1
                holder[slot] = element
                index[element] = slot
        if holder:
            slots = sorted(holder)
            try:
                self._storage.set(torch.tensor(slots), data[torch.tensor([holder[s] for s in slots])])
            except BaseException:
                self._roll_back(cursor, undo)  # a failed write (keys, dtypes...) leaves the ranking as it was
                raise
        return torch.tensor(index, dtype=torch.long)

    def _empty(self) -> None:
        self._cursor = 0
        self._ranks = None
        self._heap = None

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"_cursor": self._cursor}
        if self._ranks is not None:
            state["_ranks"] = self._ranks.clone()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._cursor = int(state_dict["_cursor"])
        self._ranks = torch.as_tensor(state_dict["_ranks"]).clone() if "_ranks" in state_dict else None
        self._heap = None

    def dumps(self, path):
        return super().dumps(path)

    def loads(self, path):
        return super().loads(path)

    def __repr__(self) -> str:
        capacity = self._capacity() if self._storage is not None else 0
        full = self._storage is not None and self._cursor >= capacity
        cursor = self._cursor % capacity if capacity else self._cursor
        return (
            f"{type(self).__name__}(cursor={cursor}, full_storage={full}, rank_key={_rank_key_str(self._rank_key)}, "
            f"reduction={self._reduction})"
        )


def _rank_key_str(key: Any) -> str:
    return key if isinstance(key, str) else str(key)
