"""Replay-buffer storages (``torchrl.data.replay_buffers.storages``): one file per storage."""
from __future__ import annotations

from torchrl.data.replay_buffers.storages.base import Storage
from torchrl.data.replay_buffers.storages.checkpointers import (
    CompressedListStorageCheckpointer,
    FlatStorageCheckpointer,
    ListStorageCheckpointer,
    NestedStorageCheckpointer,
    StorageCheckpointerBase,
    StorageEnsembleCheckpointer,
    TensorStorageCheckpointer,
)
from torchrl.data.replay_buffers.storages.compressed import CompressedListStorage
from torchrl.data.replay_buffers.storages.ensemble import StorageEnsemble
from torchrl.data.replay_buffers.storages.lazy_memmap import LazyMemmapStorage
from torchrl.data.replay_buffers.storages.lazy_stack import LazyStackStorage
from torchrl.data.replay_buffers.storages.lazy_tensor import LazyTensorStorage
from torchrl.data.replay_buffers.storages.list_storage import ListStorage
from torchrl.data.replay_buffers.storages.ted import Flat2TED, Nested2TED, TED2Flat, TED2Nested
from torchrl.data.replay_buffers.storages.tensor_storage import TensorStorage

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
