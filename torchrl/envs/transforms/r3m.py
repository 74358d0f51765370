"""TorchRL's module path for the R3M encoder transform (re-export)."""
from torchrl.envs.transforms._r3m import R3MTransform

__all__ = ["R3MTransform"]
