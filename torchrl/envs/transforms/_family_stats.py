"""Re-exports of the statistics and model transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._rnd_transform import RNDTransform
from torchrl.envs.transforms._running_mean_std import RunningMeanStd
from torchrl.envs.transforms._vecnorm_v2 import VecNormV2

__all__: list[str] = ["RNDTransform", "RunningMeanStd", "VecNormV2"]
