"""``RandomSampler``: uniform sampling with replacement."""
from __future__ import annotations

from typing import Any

import torch

from torchrl.data.replay_buffers._utils import random_on
from torchrl.data.replay_buffers.samplers.base import Sampler, empty_storage_error


class RandomSampler(Sampler):
    """Draws every index uniformly at random, with replacement (one ``torch.randint`` per batch).

    Indices are drawn on the storage's device (a CUDA storage gets CUDA indices, and sampling does not
    synchronise the host with the device). With a buffer ``generator`` on another device (a CPU generator for
    a CUDA storage), they are drawn with that generator and copied to the storage's device without blocking.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import ReplayBuffer, LazyTensorStorage, RandomSampler
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=RandomSampler(), batch_size=4)
        >>> _ = rb.extend(torch.arange(10))
        >>> rb.sample().shape
        torch.Size([4])
    """

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        if storage.ndim > 1:
            if len(storage) == 0:
                raise empty_storage_error(self)
            return storage._rand_given_ndim(batch_size), {}
        n = len(storage)
        if n == 0:
            raise empty_storage_error(self)
        device = storage._index_device
        if device is None:
            return torch.randint(0, n, (batch_size,), generator=self._rng), {}
        return random_on(torch.randint, 0, n, (batch_size,), generator=self._rng, device=device), {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None

    def dumps(self, path):
        return super().dumps(path)

    def loads(self, path):
        return super().loads(path)
