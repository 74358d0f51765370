"""``GrayScale``: RGB images ``(..., 3, H, W)`` to luminance ``(..., 1, H, W)``."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict.utils import NestedKey

from torchrl.envs.transforms._to_tensor_image import _ImageTransform

__all__ = ["GrayScale"]

_WEIGHTS = (0.2989, 0.587, 0.114)  # ITU-R 601-2 luma, as torchvision's rgb_to_grayscale


class GrayScale(_ImageTransform):
    """Turns RGB images ``(..., 3, H, W)`` into gray images ``(..., 1, H, W)``.

    ``gray = 0.2989 * r + 0.587 * g + 0.114 * b`` (torchvision's weights), cast back to the input dtype
    (integer images are truncated, as torchvision does). Run it after :class:`ToTensorImage` (channels first).

    Args:
        in_keys: image entries (default ``["pixels"]``).
        out_keys: where the results go (default: ``in_keys``).

    Raises:
        TypeError: (when called) an entry does not have 3 channels at dim -3.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._grayscale import GrayScale
        >>> img = torch.tensor([1.0, 0.0, 0.0]).reshape(3, 1, 1)  # a red pixel
        >>> GrayScale()(TensorDict(pixels=img))["pixels"]
        tensor([[[0.2989]]])
    """

    def __init__(self, in_keys: Sequence[NestedKey] | None = None, out_keys: Sequence[NestedKey] | None = None) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys)

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        if observation.ndim < 3 or observation.shape[-3] != 3:
            raise TypeError(
                f"GrayScale: expected RGB images of shape (..., 3, H, W), got an entry of shape "
                f"{tuple(observation.shape)}; apply ToTensorImage first for (H, W, 3) images."
            )
        r, g, b = observation.unbind(-3)
        gray = (_WEIGHTS[0] * r + _WEIGHTS[1] * g + _WEIGHTS[2] * b).to(observation.dtype)
        return gray.unsqueeze(-3)
