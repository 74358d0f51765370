"""Re-exports of the time transforms (frame stacking, pooling) (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._cat_frames import CatFrames
from torchrl.envs.transforms._time_max_pool import TimeMaxPool

__all__: list[str] = ["CatFrames", "TimeMaxPool"]
