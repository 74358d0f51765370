"""Re-exports of the pixels transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._to_tensor_image import ToTensorImage

__all__: list[str] = ["ToTensorImage"]
