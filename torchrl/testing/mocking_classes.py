"""Mock environments and policies for tests, at TorchRL's module path ``torchrl.testing.mocking_classes``.

The classes live in small private modules (``_counting``, ``_multikey``, ``_mock_envs``) and are re-exported
here and from ``torchrl.testing``.
"""
from __future__ import annotations

from torchrl.testing._counting import CountingEnv, CountingEnvCountModule, CountingEnvCountPolicy, NestedCountingEnv
from torchrl.testing._mock_envs import (
    ContinuousActionVecMockEnv,
    DiscreteActionConvMockEnv,
    DiscreteActionVecMockEnv,
    MockBatchedLockedEnv,
    MockBatchedUnLockedEnv,
    MockSerialEnv,
)
from torchrl.testing._multikey import (
    HeterogeneousCountingEnv,
    HeterogeneousCountingEnvPolicy,
    MultiKeyCountingEnv,
    MultiKeyCountingEnvPolicy,
)

__all__ = [
    "ContinuousActionVecMockEnv",
    "CountingEnv",
    "CountingEnvCountModule",
    "CountingEnvCountPolicy",
    "DiscreteActionConvMockEnv",
    "DiscreteActionVecMockEnv",
    "HeterogeneousCountingEnv",
    "HeterogeneousCountingEnvPolicy",
    "MockBatchedLockedEnv",
    "MockBatchedUnLockedEnv",
    "MockSerialEnv",
    "MultiKeyCountingEnv",
    "MultiKeyCountingEnvPolicy",
    "NestedCountingEnv",
]
