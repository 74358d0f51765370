"""TorchRL's module path ``torchrl.collectors.collectors`` (the classes live in private modules of
:mod:`torchrl.collectors`)."""
from __future__ import annotations

from torchrl.collectors import (
    AsyncCollector,
    BaseCollector,
    Collector,
    MultiAsyncCollector,
    MultiCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
    MultiaSyncDataCollector,
    SyncDataCollector,
    aSyncDataCollector,
)
from torchrl.envs.utils import RandomPolicy

__all__ = [
    "AsyncCollector",
    "BaseCollector",
    "Collector",
    "MultiAsyncCollector",
    "MultiCollector",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "RandomPolicy",
    "SyncDataCollector",
    "aSyncDataCollector",
]
