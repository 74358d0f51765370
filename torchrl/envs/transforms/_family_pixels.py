"""Re-exports of the pixels transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._center_crop import CenterCrop
from torchrl.envs.transforms._crop import Crop
from torchrl.envs.transforms._flatten_observation import FlattenObservation
from torchrl.envs.transforms._grayscale import GrayScale
from torchrl.envs.transforms._permute_transform import PermuteTransform
from torchrl.envs.transforms._resize import Resize
from torchrl.envs.transforms._to_tensor_image import ToTensorImage

__all__: list[str] = ["CenterCrop", "Crop", "FlattenObservation", "GrayScale", "PermuteTransform", "Resize", "ToTensorImage"]
