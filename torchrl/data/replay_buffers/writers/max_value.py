"""``TensorDictMaxValueWriter``: keeps the elements with the highest rank (e.g. the best episodes)."""
from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

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
    written; once full, an element is written only if its rank beats the lowest stored rank, which it
    replaces. Elements that do not make it are dropped.

    Args:
        rank_key (NestedKey, optional): the entry ranking the elements. Defaults to ``("next", "reward")``.
        reduction (str, optional): ``"sum"``, ``"mean"``, ``"max"``, ``"min"`` or ``"median"``. Defaults to
            ``"sum"``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TensorDictReplayBuffer, LazyTensorStorage
        >>> from torchrl.data.replay_buffers import TensorDictMaxValueWriter
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(2), writer=TensorDictMaxValueWriter(rank_key="r"))
        >>> _ = rb.extend(TensorDict(r=torch.tensor([1.0, 5.0, 3.0, 0.0]), batch_size=[4]))
        >>> sorted(rb.storage.get(torch.arange(2))["r"].tolist())
        [3.0, 5.0]
    """

    def __init__(self, rank_key=None, reduction: str = "sum", **kwargs) -> None:
        super().__init__(**kwargs)
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"TensorDictMaxValueWriter: reduction must be one of {sorted(_REDUCTIONS)}, got {reduction!r}."
            )
        self._rank_key = rank_key if rank_key is not None else ("next", "reward")
        self._reduction = reduction
        self._cursor = 0
        self._ranks: torch.Tensor | None = None

    def register_storage(self, storage) -> None:
        super().register_storage(storage)

    def _capacity(self) -> int:
        return self._storage._max_size_along_dim0(None)

    def _stored_ranks(self) -> torch.Tensor:
        if self._ranks is None:
            self._ranks = torch.full((self._capacity(),), float("-inf"), dtype=torch.float64)
        return self._ranks

    def _rank(self, data: TensorDictBase, batch_dims: int) -> torch.Tensor:
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"TensorDictMaxValueWriter writes TensorDicts; got {type(data).__name__}.")
        value = data.get(self._rank_key, None)
        if value is None:
            raise KeyError(
                f"TensorDictMaxValueWriter: the data has no rank entry {_key_str(self._rank_key)}; pass "
                "rank_key= naming the entry to rank elements by."
            )
        leading = value.shape[:batch_dims]
        return _REDUCTIONS[self._reduction](value.reshape(*leading, -1).to(torch.float64))

    def get_insert_index(self, data: Any) -> int:
        """Where one element would be written now, or ``None`` if its rank is too low to be kept."""
        return self._insert_index(float(self._rank(data, 0)))

    def _insert_index(self, rank: float) -> int | None:
        ranks = self._stored_ranks()
        if self._cursor < ranks.numel():
            return self._cursor
        lowest = int(ranks.argmin())
        return lowest if rank > float(ranks[lowest]) else None

    def add(self, data: Any) -> int | torch.Tensor:
        rank = float(self._rank(data, 0))
        index = self._insert_index(rank)
        if index is None:
            return None
        self._storage.set(index, data)
        self._stored_ranks()[index] = rank
        if index == self._cursor:
            self._cursor += 1
        return index

    def extend(self, data: TensorDictBase) -> None:
        ranks = self._rank(data, 1)
        stored = self._stored_ranks()
        order = ranks.argsort(descending=True)
        free = stored.numel() - self._cursor
        to_free = order[:free]
        rest = order[free:]
        slots = [torch.arange(self._cursor, self._cursor + to_free.numel())]
        chosen = [to_free]
        if rest.numel():
            filled = stored[: self._cursor]
            lowest = filled.argsort()[: rest.numel()]
            beats = ranks[rest[: lowest.numel()]] > filled[lowest]
            count = int(beats.sum())
            slots.append(lowest[:count])
            chosen.append(rest[:count])
        slots = torch.cat(slots)
        chosen = torch.cat(chosen)
        if chosen.numel() == 0:
            return torch.zeros(0, dtype=torch.long)
        self._storage.set(slots, data[chosen])
        stored[slots] = ranks[chosen]
        self._cursor += to_free.numel()
        return slots

    def _empty(self) -> None:
        self._cursor = 0
        self._ranks = None

    def state_dict(self) -> dict[str, Any]:
        state: dict[str, Any] = {"_cursor": self._cursor}
        if self._ranks is not None:
            state["_ranks"] = self._ranks.clone()
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._cursor = int(state_dict["_cursor"])
        self._ranks = torch.as_tensor(state_dict["_ranks"]).clone() if "_ranks" in state_dict else None

    def dumps(self, path):
        return super().dumps(path)

    def loads(self, path):
        return super().loads(path)
