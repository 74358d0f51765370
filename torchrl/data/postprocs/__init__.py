"""Post-processing of collected batches (``torchrl.data.postprocs``): n-step returns, dense rewards."""
from __future__ import annotations

from torchrl.data.postprocs._densify import DensifyReward
from torchrl.data.postprocs._multistep import MultiStep

__all__ = ["DensifyReward", "MultiStep"]
