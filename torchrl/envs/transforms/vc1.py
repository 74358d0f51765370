"""TorchRL's module path for the VC-1 encoder transform (re-export)."""
from torchrl.envs.transforms._vc1 import VC1Transform

__all__ = ["VC1Transform"]
