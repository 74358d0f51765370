"""Import path kept from TorchRL (``torchrl.modules.models.exploration``): noisy layers and consistent dropout."""
from __future__ import annotations

from torchrl.modules.models.dropout import ConsistentDropout
from torchrl.modules.models.noisy import NoisyLazyLinear, NoisyLinear, reset_noise

__all__ = ["ConsistentDropout", "NoisyLazyLinear", "NoisyLinear", "reset_noise"]
