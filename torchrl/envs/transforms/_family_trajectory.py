"""Re-exports of the trajectory transforms (n-step, reward-to-go, burn-in, truncation, crops) (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._burn_in_transform import BurnInTransform
from torchrl.envs.transforms._multi_step_transform import MultiStepTransform
from torchrl.envs.transforms._random_crop_tensor_dict import RandomCropTensorDict
from torchrl.envs.transforms._random_truncation_transform import RandomTruncationTransform
from torchrl.envs.transforms._reward2go_transform import Reward2GoTransform

__all__: list[str] = [
    "BurnInTransform",
    "MultiStepTransform",
    "RandomCropTensorDict",
    "RandomTruncationTransform",
    "Reward2GoTransform",
]
