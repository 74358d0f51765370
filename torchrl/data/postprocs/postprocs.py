"""TorchRL's ``torchrl.data.postprocs.postprocs`` module path."""
from __future__ import annotations

from torchrl.data.postprocs._densify import DensifyReward
from torchrl.data.postprocs._multistep import MultiStep

__all__ = ["DensifyReward", "MultiStep"]
