"""TorchRL's ``torchrl.data.replay_buffers.checkpointers`` module path (the classes live in ``storages/``)."""
from __future__ import annotations

from torchrl.data.replay_buffers.storages._checkpointers import (
    CompressedListStorageCheckpointer,
    FlatStorageCheckpointer,
    ListStorageCheckpointer,
    NestedStorageCheckpointer,
    StorageCheckpointerBase,
    StorageEnsembleCheckpointer,
    TensorStorageCheckpointer,
)

__all__ = [
    "CompressedListStorageCheckpointer",
    "FlatStorageCheckpointer",
    "ListStorageCheckpointer",
    "NestedStorageCheckpointer",
    "StorageCheckpointerBase",
    "StorageEnsembleCheckpointer",
    "TensorStorageCheckpointer",
]
