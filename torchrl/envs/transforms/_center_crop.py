"""``CenterCrop``: the central ``w x h`` window of images ``(..., C, H, W)``."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict.utils import NestedKey

from torchrl.envs.transforms._crop import crop_image
from torchrl.envs.transforms._to_tensor_image import _ImageTransform

__all__ = ["CenterCrop"]


class CenterCrop(_ImageTransform):
    """Crops the center of images ``(..., C, H, W)``.

    As TorchRL (torchvision's ``center_crop(img, [w, h])``), ``w`` is the output height and ``h`` the
    output width: the output is ``(..., C, w, h)``. The window starts at row
    ``round((H - w) / 2)`` and column ``round((W - h) / 2)``; a window larger than the image is
    zero-padded around it.

    Args:
        w: output height.
        h: output width (default: ``w``).
        in_keys: image entries (default ``["pixels"]``).
        out_keys: where the results go (default: ``in_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._center_crop import CenterCrop
        >>> img = torch.arange(16.0).reshape(1, 4, 4)
        >>> CenterCrop(2)(TensorDict(pixels=img))["pixels"]
        tensor([[[ 5.,  6.],
                 [ 9., 10.]]])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = int(w)
        self.h = int(h) if h is not None else self.w
        if self.w <= 0 or self.h <= 0:
            raise ValueError(f"CenterCrop: w and h must be positive, got w={self.w}, h={self.h}.")

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        if observation.ndim < 2:
            raise ValueError(f"CenterCrop: expected images of shape (..., H, W), got an entry of shape {tuple(observation.shape)}.")
        height, width = observation.shape[-2:]
        if self.w > height or self.h > width:  # torchvision pads first, then crops the center
            top, left = -((self.w - height) // 2) if self.w > height else 0, -((self.h - width) // 2) if self.h > width else 0
            padded = crop_image(observation, top, left, max(height, self.w), max(width, self.h))
            return self._apply_transform(padded)
        top = int(round((height - self.w) / 2.0))
        left = int(round((width - self.h) / 2.0))
        return crop_image(observation, top, left, self.w, self.h)

    def __repr__(self) -> str:
        return f"CenterCrop(w={self.w}, h={self.h}, in_keys={self.in_keys}, out_keys={self.out_keys})"
