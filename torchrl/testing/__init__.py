"""``torchrl.testing``: mock environments and helpers shared by test suites (TorchRL's public test kit).

Importing this package needs ``pytest`` (for :func:`dtype_fixture`); nothing else in ``torchrl`` imports it.
"""
from __future__ import annotations

from torchrl.modules.models._lstm_net import LSTMNet
from torchrl.testing._helpers import dtype_fixture, get_available_devices, get_default_devices, rand_reset, retry
from torchrl.testing.mocking_classes import *  # noqa: F401,F403
from torchrl.testing.mocking_classes import __all__ as _mock_names

__all__ = [
    "LSTMNet",
    "dtype_fixture",
    "get_available_devices",
    "get_default_devices",
    "rand_reset",
    "retry",
    *_mock_names,
]
