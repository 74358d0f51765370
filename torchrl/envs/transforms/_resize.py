"""``Resize``: images ``(..., C, H, W)`` resized to ``(..., C, w, h)`` with ``torch.nn.functional.interpolate``."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from tensordict.utils import NestedKey

from torchrl.envs.transforms._to_tensor_image import _ImageTransform

__all__ = ["Resize"]

_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "area")
_ANTIALIAS = ("bilinear", "bicubic")  # torchvision's resize antialiases these on tensors


class Resize(_ImageTransform):
    """Resizes images ``(..., C, H, W)`` (any number of leading dims) to ``(..., C, w, h)``.

    As TorchRL (torchvision's ``resize(img, [w, h])``), ``w`` is the output height and ``h`` the output
    width. The work is done by ``torch.nn.functional.interpolate`` (torchvision is not needed), with
    antialiasing for ``"bilinear"`` and ``"bicubic"`` as torchvision does; integer images are resized
    in floating point, rounded and clamped back to their dtype's range.

    Args:
        w: output height.
        h: output width (default: ``w``).
        interpolation: one of ``"nearest"``, ``"nearest-exact"``, ``"bilinear"``, ``"bicubic"``, ``"area"``.
        in_keys: image entries (default ``["pixels"]``).
        out_keys: where the results go (default: ``in_keys``).

    Raises:
        ValueError: an unknown ``interpolation``, a non-positive size, or (when called) an entry with
            fewer than 3 dims.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._resize import Resize
        >>> Resize(2, 3)(TensorDict(pixels=torch.ones(5, 3, 8, 8)))["pixels"].shape
        torch.Size([5, 3, 2, 3])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        interpolation: str = "bilinear",
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.w = int(w)
        self.h = int(h) if h is not None else self.w
        if self.w <= 0 or self.h <= 0:
            raise ValueError(f"Resize: w and h must be positive, got w={self.w}, h={self.h}.")
        interpolation = str(getattr(interpolation, "value", interpolation)).lower()  # also an InterpolationMode
        if interpolation not in _MODES:
            raise ValueError(f"Resize: interpolation {interpolation!r} is not supported; use one of {list(_MODES)}.")
        self.interpolation = interpolation

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        if observation.ndim < 3:
            raise ValueError(f"Resize: expected images of shape (..., C, H, W), got an entry of shape {tuple(observation.shape)}.")
        lead = observation.shape[:-3]
        x = observation.reshape(-1, *observation.shape[-3:])
        dtype = x.dtype
        if not dtype.is_floating_point:
            x = x.to(torch.get_default_dtype())
        kwargs = {}
        if self.interpolation in _ANTIALIAS:
            kwargs = {"align_corners": False, "antialias": True}
        out = F.interpolate(x, size=(self.w, self.h), mode=self.interpolation, **kwargs)
        if not dtype.is_floating_point:
            info = torch.iinfo(dtype)
            out = out.round_().clamp_(info.min, info.max).to(dtype)
        return out.reshape(*lead, *out.shape[-3:])

    def __repr__(self) -> str:
        return (
            f"Resize(w={self.w}, h={self.h}, interpolation={self.interpolation!r}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys})"
        )
