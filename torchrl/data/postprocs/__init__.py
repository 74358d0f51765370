"""Post-processing of collected batches (``torchrl.data.postprocs``): n-step returns, dense rewards."""
from __future__ import annotations

from torchrl.data.postprocs.densify import DensifyReward
from torchrl.data.postprocs.multistep import MultiStep

__all__ = ["DensifyReward", "MultiStep"]
