"""TorchRL's module path for the random network distillation transform (re-exports)."""
from torchrl.envs.transforms._rnd_transform import RNDTransform
from torchrl.envs.transforms._running_mean_std import RunningMeanStd

__all__ = ["RNDTransform", "RunningMeanStd"]
