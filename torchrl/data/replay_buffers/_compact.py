"""Compact observations: store each observation once, rebuild ``("next", obs)`` when sampling.

In TED data the observation of step ``t + 1`` is stored twice (root of ``t + 1`` and ``("next", obs)`` of
``t``). With compaction the buffer drops the ``"next"`` copies on write (halving observation memory) and,
when sampling element ``t``, reads the root observation of the following stored step instead. Where that
step does not continue the trajectory (``t`` is done, or ``t`` is the newest element) the true next
observation was not kept: the entry is filled with ``fill_value`` (NaN by default). Value estimators do
not bootstrap through done steps, so only truncated steps lose information; keep full storage when
bootstrapping on truncation matters.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from tensordict import NestedKey, TensorDictBase

from torchrl.data.replay_buffers._utils import _key_str, ravel_index, to_device

_NEXT_ONLY = ("done", "terminated", "truncated", "reward")


def _as_tuple(key: NestedKey) -> tuple:
    return (key,) if isinstance(key, str) else tuple(key)


class CompactObservations:
    """Drops duplicated ``("next", key)`` entries on writes and rebuilds them on reads (see module doc)."""

    def __init__(self, keys: bool | Sequence[NestedKey], *, done_key: NestedKey = ("next", "done"), fill_value: float = math.nan):
        self.keys = None if keys is True else [_as_tuple(k) for k in keys]
        self.done_key = done_key
        self.fill_value = fill_value

    def _resolve(self, data: TensorDictBase) -> list[tuple]:
        if self.keys is None:
            root = {_as_tuple(k) for k in data.keys(True, True)}
            nxt = data.get("next", None)
            under = {_as_tuple(k) for k in nxt.keys(True, True)} if nxt is not None else set()
            self.keys = sorted(k for k in root & under if k[-1] not in _NEXT_ONLY)
        return self.keys

    def strip(self, data: Any) -> Any:
        """``data`` without the ``("next", key)`` copies (written data)."""
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"compact_obs needs TensorDict data, got {type(data).__name__}.")
        present = [("next", *k) for k in self._resolve(data) if ("next", *k) in data.keys(True, True)]
        return data.exclude(*present) if present else data

    def rebuild(self, data: TensorDictBase, index: Any, storage) -> TensorDictBase:
        """Sets ``("next", key)`` of the sampled ``data`` (read at ``index``) from the following stored steps."""
        rows = storage._rows
        capacity = storage._capacity_rows
        columns = max(1, len(storage) // max(rows, 1))
        row = index[0] if isinstance(index, tuple) else index
        flat = ravel_index(index, (0, *storage.shape[1 : storage.ndim])) if isinstance(index, tuple) else index
        full = rows == capacity
        following = (row + 1) % capacity if full else row + 1
        last = storage._last_row()
        has_next = following != (last + 1) % capacity if full and last is not None else following < rows
        done = data.get(self.done_key)
        content = storage._storage
        if done.device != row.device:  # a memory-mapped storage read on the CPU, sampled to a GPU: read it there
            stored = content.get(self.done_key)
            done = stored.reshape(-1, *stored.shape[storage.ndim :])[flat]
        done = done.reshape(*row.shape, -1).any(-1)
        keep = has_next & ~done
        next_flat = flat + columns
        if full:
            next_flat = next_flat % (capacity * columns)
        next_flat = torch.where(keep, next_flat, torch.zeros_like(next_flat))
        for key in self.keys or []:
            source = content.get(key)
            source = source.reshape(-1, *source.shape[storage.ndim :])
            value = source[next_flat]
            mask = keep.reshape(*keep.shape, *([1] * (value.ndim - keep.ndim)))
            fill = self.fill_value if value.is_floating_point() else 0
            value = torch.where(mask, value, torch.full_like(value, fill))
            data.set(("next", *key), value if data.device is None else to_device(value, data.device))
        return data

    def describe(self) -> str:
        return ", ".join(_key_str(k) for k in self.keys or [])
