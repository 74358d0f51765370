"""Import path kept from TorchRL (``torchrl.modules.models.exploration``): noisy layers, consistent dropout, gSDE."""
from __future__ import annotations

from torchrl.modules.models._dropout import ConsistentDropout
from torchrl.modules.models._gsde import gSDEModule, LazygSDEModule
from torchrl.modules.models._noisy import NoisyLazyLinear, NoisyLinear, reset_noise

__all__ = ["ConsistentDropout", "LazygSDEModule", "NoisyLazyLinear", "NoisyLinear", "gSDEModule", "reset_noise"]
