"""``ImmutableDatasetWriter``: forbids writes (static datasets)."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from torchrl.data.replay_buffers.writers.base import Writer


class ImmutableDatasetWriter(Writer):
    """A writer for read-only datasets: ``add``, ``extend`` and ``empty`` raise ``RuntimeError``.

    Overwriting elements by index (``rb[i] = data``) is still allowed, as in TorchRL.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import ReplayBuffer, TensorStorage, ImmutableDatasetWriter
        >>> rb = ReplayBuffer(storage=TensorStorage(torch.arange(5)), writer=ImmutableDatasetWriter())
        >>> try:
        ...     rb.extend(torch.arange(2))
        ... except RuntimeError as err:
        ...     print(str(err)[:40])
        This replay buffer is immutable (Immutab
    """

    def _refuse(self) -> RuntimeError:
        return RuntimeError(
            "This replay buffer is immutable (ImmutableDatasetWriter): it is a static dataset and cannot be "
            "written to. Build a buffer with a RoundRobinWriter to add data."
        )

    def add(self, data: Any) -> int:
        raise self._refuse()

    def extend(self, data: Sequence) -> torch.Tensor:
        raise self._refuse()

    def _empty(self) -> None:
        raise RuntimeError(
            "This replay buffer is immutable (ImmutableDatasetWriter): empty() would erase the static dataset. "
            "Build a new buffer instead."
        )

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None

    def dumps(self, path):
        return super().dumps(path)

    def loads(self, path):
        return super().loads(path)
