"""Replay-buffer storages (``torchrl.data.replay_buffers.storages``): one file per storage."""
from __future__ import annotations

from torchrl.data.replay_buffers.storages.base import Storage
from torchrl.data.replay_buffers.storages._checkpointers import (
    CompressedListStorageCheckpointer,
    FlatStorageCheckpointer,
    ListStorageCheckpointer,
    NestedStorageCheckpointer,
    StorageCheckpointerBase,
    StorageEnsembleCheckpointer,
    TensorStorageCheckpointer,
)
from torchrl.data.replay_buffers.storages._compressed import CompressedListStorage
from torchrl.data.replay_buffers.storages.ensemble import StorageEnsemble
from torchrl.data.replay_buffers.storages._lazy_memmap import LazyMemmapStorage
from torchrl.data.replay_buffers.storages._lazy_stack import LazyStackStorage
from torchrl.data.replay_buffers.storages._lazy_tensor import LazyTensorStorage
from torchrl.data.replay_buffers.storages._list_storage import ListStorage
from torchrl.data.replay_buffers.storages._ted import Flat2TED, Nested2TED, TED2Flat, TED2Nested
from torchrl.data.replay_buffers.storages._tensor_storage import TensorStorage

__all__ = [
    "CompressedListStorage",
    "LazyMemmapStorage",
    "LazyStackStorage",
    "LazyTensorStorage",
    "ListStorage",
    "Storage",
    "StorageEnsemble",
    "TensorStorage",
]
