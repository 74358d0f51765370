"""Replay buffers (``torchrl.data.replay_buffers``): storages, samplers, writers and the buffers composing them.

Layout: ``storages/`` (one file per storage, plus checkpointers and the TED checkpoint layouts),
``samplers/`` (one file per sampler; ``segment_tree.py`` holds the pure-torch trees), ``writers/``, the
buffers (``replay_buffer.py``, ``tensordict_replay_buffer.py``, ``prioritized.py``, ``ensemble.py``,
``her.py``, ``offline_online.py``), sample units, trajectory queries and conditional updates. The private
``_transforms.py`` is the only place that knows how transforms are called.
"""
from __future__ import annotations

from torchrl.data.replay_buffers._conditional import ConditionalUpdateResult
from torchrl.data.replay_buffers._ensemble import ReplayBufferEnsemble
from torchrl.data.replay_buffers.her import HERReplayBuffer, HindsightStrategy
from torchrl.data.replay_buffers._offline_online import OfflineToOnlineReplayBuffer
from torchrl.data.replay_buffers._prioritized import PrioritizedReplayBuffer, TensorDictPrioritizedReplayBuffer
from torchrl.data.replay_buffers._replay_buffer import ReplayBuffer
from torchrl.data.replay_buffers.sample_units import SampleUnit, Sequence, Transition
from torchrl.data.replay_buffers.samplers import (
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    Sampler,
    SamplerEnsemble,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)
from torchrl.data.replay_buffers.samplers._trajectories import find_start_stop_traj
from torchrl.data.replay_buffers.storages import (
    CompressedListStorage,
    CompressedListStorageCheckpointer,
    Flat2TED,
    FlatStorageCheckpointer,
    LazyMemmapStorage,
    LazyStackStorage,
    LazyTensorStorage,
    ListStorage,
    ListStorageCheckpointer,
    Nested2TED,
    NestedStorageCheckpointer,
    Storage,
    StorageCheckpointerBase,
    StorageEnsemble,
    StorageEnsembleCheckpointer,
    TED2Flat,
    TED2Nested,
    TensorStorage,
    TensorStorageCheckpointer,
)
from torchrl.data.replay_buffers.storages._ted import DEFAULT_DONE_KEYS
from torchrl.data.replay_buffers._remote import RemoteTensorDictReplayBuffer
from torchrl.data.replay_buffers._tensordict_replay_buffer import TensorDictReplayBuffer
from torchrl.data.replay_buffers._trajectories import (
    Trajectory,
    TrajectoryPredicate,
    filter_trajectories,
    iter_trajectories,
    traj,
)
from torchrl.data.replay_buffers.utils import prefill_replay_buffer
from torchrl.data.replay_buffers.writers import (
    ImmutableDatasetWriter,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
    Writer,
    WriterEnsemble,
)

__all__ = [
    "CompressedListStorage",
    "CompressedListStorageCheckpointer",
    "ConditionalUpdateResult",
    "DEFAULT_DONE_KEYS",
    "Flat2TED",
    "FlatStorageCheckpointer",
    "HERReplayBuffer",
    "HindsightStrategy",
    "ImmutableDatasetWriter",
    "LazyMemmapStorage",
    "LazyStackStorage",
    "LazyTensorStorage",
    "ListStorage",
    "ListStorageCheckpointer",
    "Nested2TED",
    "NestedStorageCheckpointer",
    "OfflineToOnlineReplayBuffer",
    "PrioritizedReplayBuffer",
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "RandomSampler",
    "ReplayBuffer",
    "ReplayBufferEnsemble",
    "RoundRobinWriter",
    "SampleUnit",
    "Sampler",
    "SamplerEnsemble",
    "SamplerWithoutReplacement",
    "Sequence",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "Storage",
    "StorageCheckpointerBase",
    "StorageEnsemble",
    "StorageEnsembleCheckpointer",
    "TED2Flat",
    "TED2Nested",
    "TensorDictMaxValueWriter",
    "TensorDictPrioritizedReplayBuffer",
    "RemoteTensorDictReplayBuffer",
    "TensorDictReplayBuffer",
    "TensorDictRoundRobinWriter",
    "TensorStorage",
    "TensorStorageCheckpointer",
    "Trajectory",
    "TrajectoryPredicate",
    "Transition",
    "Writer",
    "WriterEnsemble",
    "filter_trajectories",
    "find_start_stop_traj",
    "iter_trajectories",
    "prefill_replay_buffer",
    "traj",
]
