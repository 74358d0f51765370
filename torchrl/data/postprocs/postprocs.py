"""TorchRL's ``torchrl.data.postprocs.postprocs`` module path."""
from __future__ import annotations

from torchrl.data.postprocs.densify import DensifyReward
from torchrl.data.postprocs.multistep import MultiStep

__all__ = ["DensifyReward", "MultiStep"]
