"""``StorageEnsemble``: several storages read together by a ``ReplayBufferEnsemble``."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from torchrl.data.replay_buffers._transforms import make_transform
from torchrl.data.replay_buffers.storages.base import Storage
from torchrl.data.replay_buffers.storages._checkpointers import StorageEnsembleCheckpointer


class StorageEnsemble(Storage):
    """An ensemble of storages, each read with its own transform.

    Reads take a list of ``(storage_id, index)`` pairs (as produced by :class:`SamplerEnsemble`) and
    return the list of per-storage results, each passed through that storage's transform. Writes go
    through the member storages (or a routed :class:`ReplayBufferEnsemble`), not through the ensemble.

    Args:
        *storages (Storage): the member storages.

    Keyword Args:
        transforms (list of Transform or callables, optional): one read transform per storage.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import StorageEnsemble, LazyTensorStorage
        >>> s0, s1 = LazyTensorStorage(4), LazyTensorStorage(4)
        >>> s0.set(torch.arange(2), torch.zeros(2)); s1.set(torch.arange(2), torch.ones(2))
        >>> ensemble = StorageEnsemble(s0, s1)
        >>> [x.tolist() for x in ensemble.get([(0, torch.tensor([1])), (1, torch.tensor([0]))])]
        [[0.0], [1.0]]
    """

    _default_checkpointer = StorageEnsembleCheckpointer

    def __init__(self, *storages: Storage, transforms: list = None):
        self._storages = list(storages)
        if transforms is None:
            transforms = [None] * len(self._storages)
        if len(transforms) != len(self._storages):
            raise ValueError(
                f"StorageEnsemble: got {len(transforms)} transforms for {len(self._storages)} storages."
            )
        self._transforms = [make_transform(t) for t in transforms]
        super().__init__(sum(s.max_size or 0 for s in self._storages))

    def __getitem__(self, index):
        if isinstance(index, int):
            return self._storages[index]
        return self.get(index)

    def __len__(self):
        return len(self._storages)

    def _total_len(self) -> int:
        return sum(len(s) for s in self._storages)

    def get(self, item: Sequence[tuple[int, Any]]) -> list[Any]:
        if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], int):
            item = [item]
        out = []
        for storage_id, index in item:
            storage_id = int(storage_id)
            data = self._storages[storage_id].get(index)
            transform = self._transforms[storage_id]
            if transform is not None:
                data = transform(data)
            out.append(data)
        return out

    def set(self, cursor, data, *, set_cursor: bool = True):
        raise RuntimeError(
            "StorageEnsemble is read-only: write to its member storages (ensemble[i]) or through a "
            "ReplayBufferEnsemble built with routing_key=... ."
        )

    def add(self, value):
        return self.set(None, value)

    def extend(self, value):
        return self.set(None, value)

    def _empty(self) -> None:
        for storage in self._storages:
            storage._empty()

    def state_dict(self) -> dict[str, Any]:
        return {f"storage_{i}": s.state_dict() for i, s in enumerate(self._storages)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for i, s in enumerate(self._storages):
            s.load_state_dict(state_dict[f"storage_{i}"])

    @property
    def shape(self) -> torch.Size:
        return torch.Size([self._total_len()])
