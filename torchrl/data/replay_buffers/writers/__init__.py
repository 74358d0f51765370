"""Replay-buffer writers (``torchrl.data.replay_buffers.writers``): one file per writer."""
from __future__ import annotations

from torchrl.data.replay_buffers.writers.base import Writer
from torchrl.data.replay_buffers.writers.ensemble import WriterEnsemble
from torchrl.data.replay_buffers.writers._immutable import ImmutableDatasetWriter
from torchrl.data.replay_buffers.writers.max_value import TensorDictMaxValueWriter
from torchrl.data.replay_buffers.writers.round_robin import RoundRobinWriter, TensorDictRoundRobinWriter

__all__ = [
    "ImmutableDatasetWriter",
    "RoundRobinWriter",
    "TensorDictMaxValueWriter",
    "TensorDictRoundRobinWriter",
    "Writer",
    "WriterEnsemble",
]
