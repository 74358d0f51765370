"""TorchRL's ``torchrl.data.replay_buffers.replay_buffers`` module path (the buffers live in their own files)."""
from __future__ import annotations

from torchrl.data.replay_buffers._ensemble import ReplayBufferEnsemble
from torchrl.data.replay_buffers.her import HERReplayBuffer, HindsightStrategy
from torchrl.data.replay_buffers._offline_online import OfflineToOnlineReplayBuffer
from torchrl.data.replay_buffers._prioritized import PrioritizedReplayBuffer, TensorDictPrioritizedReplayBuffer
from torchrl.data.replay_buffers._replay_buffer import ReplayBuffer
from torchrl.data.replay_buffers._tensordict_replay_buffer import TensorDictReplayBuffer

__all__ = [
    "HERReplayBuffer",
    "HindsightStrategy",
    "OfflineToOnlineReplayBuffer",
    "PrioritizedReplayBuffer",
    "ReplayBuffer",
    "ReplayBufferEnsemble",
    "TensorDictPrioritizedReplayBuffer",
    "TensorDictReplayBuffer",
]
