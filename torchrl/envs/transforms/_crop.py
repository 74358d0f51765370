"""``Crop``: a fixed window ``(top, left, height=w, width=h)`` of images ``(..., C, H, W)``."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from tensordict.utils import NestedKey

from torchrl.envs.transforms._to_tensor_image import _ImageTransform

__all__ = ["Crop"]


def crop_image(image: torch.Tensor, top: int, left: int, height: int, width: int) -> torch.Tensor:
    """``image[..., top:top + height, left:left + width]``, zero-padded where the window leaves the image
    (as torchvision's ``crop``)."""
    if image.ndim < 2:
        raise ValueError(f"crop: expected images of shape (..., H, W), got an entry of shape {tuple(image.shape)}.")
    h, w = image.shape[-2:]
    bottom, right = top + height, left + width
    if top < 0 or left < 0 or bottom > h or right > w:
        pads = [max(-left, 0), max(right - w, 0), max(-top, 0), max(bottom - h, 0)]
        image = image[..., max(top, 0):min(bottom, h), max(left, 0):min(right, w)]
        return F.pad(image, pads)
    return image[..., top:bottom, left:right]


class Crop(_ImageTransform):
    """Crops images ``(..., C, H, W)`` to the window starting at ``(top, left)``.

    As TorchRL (which follows torchvision's ``crop(img, top, left, height, width)``), ``w`` is the
    height of the output and ``h`` its width: the output is ``(..., C, w, h)``. Parts of the window
    outside the image are zero-padded.

    Args:
        w: output height.
        h: output width (default: ``w``).
        top: first row of the window.
        left: first column of the window.
        in_keys: image entries (default ``["pixels"]``).
        out_keys: where the results go (default: ``in_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._crop import Crop
        >>> img = torch.arange(12.0).reshape(1, 3, 4)
        >>> Crop(2, 3, top=1, left=1)(TensorDict(pixels=img))["pixels"]
        tensor([[[ 5.,  6.,  7.],
                 [ 9., 10., 11.]]])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        top: int = 0,
        left: int = 0,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = int(w)
        self.h = int(h) if h is not None else self.w
        self.top = int(top)
        self.left = int(left)
        if self.w <= 0 or self.h <= 0:
            raise ValueError(f"Crop: w and h must be positive, got w={self.w}, h={self.h}.")

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        return crop_image(observation, self.top, self.left, self.w, self.h)

    def __repr__(self) -> str:
        return f"Crop(w={self.w}, h={self.h}, top={self.top}, left={self.left}, in_keys={self.in_keys}, out_keys={self.out_keys})"
