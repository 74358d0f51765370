"""Re-exports of the statistics and model transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._running_mean_std import RunningMeanStd

__all__: list[str] = ["RunningMeanStd"]
