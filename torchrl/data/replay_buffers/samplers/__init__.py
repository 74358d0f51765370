"""Replay-buffer samplers (``torchrl.data.replay_buffers.samplers``): one file per sampler.

The segment trees are pure torch (``segment_tree.py``); TorchRL's CUDA tree names exist and are ``None``
as in a TorchRL build without the CUDA extension (the torch trees run on any device).
"""
from __future__ import annotations

from torchrl.data.replay_buffers.samplers.base import Sampler
from torchrl.data.replay_buffers.samplers.ensemble import SamplerEnsemble
from torchrl.data.replay_buffers.samplers.prioritized import PrioritizedSampler
from torchrl.data.replay_buffers.samplers.prioritized_slice import PrioritizedSliceSampler
from torchrl.data.replay_buffers.samplers.random import RandomSampler
from torchrl.data.replay_buffers.samplers._segment_tree import (
    MinSegmentTreeFp32,
    MinSegmentTreeFp64,
    SumSegmentTreeFp32,
    SumSegmentTreeFp64,
)
from torchrl.data.replay_buffers.samplers.slice import SliceSampler, SliceSamplerWithoutReplacement
from torchrl.data.replay_buffers.samplers._without_replacement import SamplerWithoutReplacement

CudaMinSegmentTreeFp32 = None
CudaMinSegmentTreeFp64 = None
CudaSumSegmentTreeFp32 = None
CudaSumSegmentTreeFp64 = None

__all__ = [
    "CudaMinSegmentTreeFp32",
    "CudaMinSegmentTreeFp64",
    "CudaSumSegmentTreeFp32",
    "CudaSumSegmentTreeFp64",
    "MinSegmentTreeFp32",
    "MinSegmentTreeFp64",
    "PrioritizedSampler",
    "PrioritizedSliceSampler",
    "RandomSampler",
    "Sampler",
    "SamplerEnsemble",
    "SamplerWithoutReplacement",
    "SliceSampler",
    "SliceSamplerWithoutReplacement",
    "SumSegmentTreeFp32",
    "SumSegmentTreeFp64",
]
