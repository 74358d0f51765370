"""``SamplerWithoutReplacement``: epochs over the stored elements."""
from __future__ import annotations

from typing import Any

import torch

from torchrl.data.replay_buffers._utils import random_on, to_device, unravel_index
from torchrl.data.replay_buffers.samplers.base import Sampler, empty_storage_error


class SamplerWithoutReplacement(Sampler):
    """Samples every stored element once per epoch.

    An epoch is a permutation of the stored indices (or their natural order with ``shuffle=False``),
    consumed ``batch_size`` elements at a time. The permutation is drawn once per epoch on the storage's
    device (with a buffer ``generator`` on another device, drawn there and copied once), so that every batch
    is a view of it: sampling from a CUDA storage makes no copy and does not synchronise the host. When it is exhausted :attr:`ran_out` becomes ``True`` (which
    ends ``for batch in buffer`` loops) and the next call starts a new epoch. Writing to the buffer
    changes its length and also starts a new epoch.

    Keyword Args:
        drop_last (bool, optional): drop the last, incomplete batch of an epoch. With ``False`` that batch
            is returned smaller. Defaults to ``False``.
        shuffle (bool, optional): visit the elements in random order. Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import ReplayBuffer, LazyTensorStorage, SamplerWithoutReplacement
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(), batch_size=4)
        >>> _ = rb.extend(torch.arange(10))
        >>> sorted(torch.cat([batch for batch in rb]).tolist())
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    """

    def __init__(self, drop_last: bool = False, shuffle: bool = True):
        self.drop_last = drop_last
        self.shuffle = shuffle
        self._order: torch.Tensor | None = None
        self._position = 0
        self._epoch_len = -1
        self._ran_out = False

    @property
    def ran_out(self) -> bool:
        return self._ran_out

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        self._ran_out = bool(value)

    def _new_epoch(self, n: int, device: torch.device | None) -> None:
        if self.shuffle:
            self._order = random_on(torch.randperm, n, generator=self._rng, device=device)
        else:
            self._order = torch.arange(n, device=device)
        self._position = 0
        self._epoch_len = n

    def can_sample(self, storage, batch_size: int) -> bool:
        n = len(storage)
        return n > 0 and not (self.drop_last and batch_size > n)

    def _take(self, n: int, batch_size: int, device: torch.device | None = None) -> torch.Tensor:
        """The next ``batch_size`` positions of the epoch over ``n`` elements, on ``device`` (``None``: CPU)."""
        if n == 0:
            raise empty_storage_error(self)
        if self.drop_last and batch_size > n:
            raise ValueError(
                f"{type(self).__name__}: batch_size={batch_size} is larger than the {n} elements stored, so "
                "an epoch cannot provide a batch without repeated elements (drop_last=True). Use a smaller "
                "batch, drop_last=False, or a sampler with replacement."
            )
        if self._order is None or self._epoch_len != n:
            self._new_epoch(n, device)
        elif device is not None and self._order.device != device:  # a restored epoch, or a moved storage
            self._order = to_device(self._order, device)
        start = self._position
        index = self._order[start : start + batch_size]  # a view: no copy, no kernel
        self._position = start + index.numel()
        remaining = self._order.numel() - self._position  # a restored epoch holds only its remaining indices
        if remaining == 0 or (self.drop_last and remaining < batch_size):
            self._ran_out = True
            self._order = None
        else:
            self._ran_out = False
        return index

    def sample(self, storage, batch_size: int) -> tuple[Any, dict]:
        index = self._take(len(storage), batch_size, storage._index_device)
        if storage.ndim > 1:
            index = unravel_index(index, storage.shape[: storage.ndim])
        return index, {}

    def _empty(self) -> None:
        self._order = None
        self._position = 0
        self._epoch_len = -1
        self._ran_out = False

    def state_dict(self) -> dict[str, Any]:
        """TorchRL's layout: the storage length of the epoch, the indices it has left, ``drop_last``, ``_ran_out``."""
        return {
            "len_storage": max(self._epoch_len, 0),
            "_sample_list": self._order[self._position :].to("cpu", copy=True) if self._order is not None else None,
            "drop_last": self.drop_last,
            "_ran_out": self._ran_out,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if "_has_order" in state_dict:  # the layout of earlier versions of this package
            self._order = state_dict["_order"].clone() if bool(state_dict["_has_order"]) else None
            self._position = int(state_dict["_position"])
            self._epoch_len = int(state_dict["_epoch_len"])
            self._ran_out = bool(state_dict["_ran_out"])
            return
        remaining = state_dict["_sample_list"]
        self._order = remaining.clone() if remaining is not None else None
        self._position = 0
        self._epoch_len = int(state_dict["len_storage"]) if remaining is not None else -1
        self.drop_last = bool(state_dict.get("drop_last", self.drop_last))
        self._ran_out = bool(state_dict["_ran_out"])

    def dumps(self, path):
        return super().dumps(path)

    def loads(self, path):
        return super().loads(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(drop_last={self.drop_last}, shuffle={self.shuffle})"
