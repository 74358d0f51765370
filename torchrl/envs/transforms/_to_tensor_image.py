"""``ToTensorImage``: uint8 ``(..., H, W, C)`` images to float ``(..., C, H, W)`` in ``[0, 1]``.

Also home of ``_ImageTransform``, the small base of the pixel transforms (``GrayScale``, ``Resize``,
``CenterCrop``, ``Crop``, ``FlattenObservation``): each maps every ``in_key`` through one tensor function
and derives the new spec by running the same function on the spec's bounds.
"""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Bounded, Composite, TensorSpec, Unbounded
from torchrl.envs.transforms._spec_edit import key_pairs, map_keys
from torchrl.envs.transforms._transform import ObservationTransform

__all__ = ["ToTensorImage"]


def map_image_spec(leaf: TensorSpec, fn, dtype: torch.dtype | None = None) -> TensorSpec:
    """The spec of ``fn(x)`` for ``x`` in ``leaf``: bounds mapped through ``fn`` (bounded specs), else the shape."""
    if isinstance(leaf, Bounded):
        low, high = fn(leaf.space.low.clone()), fn(leaf.space.high.clone())
        dtype = dtype or low.dtype
        return Bounded(low.to(dtype), high.to(dtype), shape=low.shape, device=leaf.device, dtype=dtype)
    out = fn(torch.zeros(leaf.shape, dtype=leaf.dtype))
    return Unbounded(shape=out.shape, device=leaf.device, dtype=dtype or out.dtype)


class _ImageTransform(ObservationTransform):
    """Maps each ``in_key`` to its ``out_key`` through ``_apply_transform``; specs follow the same map."""

    _out_keys_default_to_in_keys = True

    def __init__(self, in_keys: Sequence[NestedKey] | None = None, out_keys: Sequence[NestedKey] | None = None) -> None:
        super().__init__(in_keys=["pixels"] if in_keys is None else in_keys, out_keys=out_keys)
        self._check_keys()

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=not self._missing_tolerance, owner=type(self).__name__)

    def _spec_dtype(self, leaf: TensorSpec) -> torch.dtype | None:
        return None

    def _leaf_spec(self, leaf: TensorSpec) -> TensorSpec:
        return map_image_spec(leaf, self._apply_transform, self._spec_dtype(leaf))

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not isinstance(observation_spec, Composite):
            return self._leaf_spec(observation_spec)
        leaves = set(observation_spec.keys(include_nested=True, leaves_only=True))
        for in_key, out_key in key_pairs(self):  # absent in_keys are skipped, as TorchRL does
            if unravel_key(in_key) in leaves:
                observation_spec[out_key] = self._leaf_spec(observation_spec[in_key])
        return observation_spec


class ToTensorImage(_ImageTransform):
    """Turns images ``(..., H, W, C)`` into ``(..., C, H, W)`` tensors of ``dtype``, scaled to ``[0, 1]``.

    Args:
        from_int: divide by 255. ``None`` (default): divide only integer inputs (e.g. uint8 pixels).
        unsqueeze: add a leading dim to 3-dim images (``(C, H, W)`` becomes ``(1, C, H, W)``); images with
            leading batch dims are left as they are.
        dtype: the output dtype (default: ``torch.get_default_dtype()``, float32).

    Keyword Args:
        in_keys: image entries (default ``["pixels"]``).
        out_keys: where the results go (default: ``in_keys``).
        shape_tolerant: leave the layout unchanged when the last dim is not 3 (an image already in
            ``(C, H, W)`` layout); the dtype cast and scaling still apply.

    The spec becomes ``Bounded(0, 1)`` (a bounded integer spec's bounds divided by 255), in the new
    layout; an unbounded spec stays unbounded.

    Raises:
        RuntimeError: (when called) an entry has fewer than 3 dims.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._to_tensor_image import ToTensorImage
        >>> td = TensorDict(pixels=torch.full((4, 5, 3), 255, dtype=torch.uint8))
        >>> out = ToTensorImage()(td)["pixels"]
        >>> out.shape, out.dtype, out.max().item()
        (torch.Size([3, 4, 5]), torch.float32, 1.0)
    """

    def __init__(
        self,
        from_int: bool | None = None,
        unsqueeze: bool = False,
        dtype: torch.device | None = None,
        *,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        shape_tolerant: bool = False,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.from_int = from_int
        self.unsqueeze = bool(unsqueeze)
        self.dtype = torch.get_default_dtype() if dtype is None else dtype
        self.shape_tolerant = bool(shape_tolerant)

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        if observation.ndim < 3:
            raise RuntimeError(
                f"ToTensorImage: expected images of shape (..., H, W, C), got an entry of shape "
                f"{tuple(observation.shape)}."
            )
        if not self.shape_tolerant or observation.shape[-1] == 3:
            observation = observation.permute(*range(observation.ndim - 3), -1, -3, -2)
        from_int = self.from_int if self.from_int is not None else not observation.is_floating_point()
        observation = observation.to(self.dtype)
        if from_int:
            observation = observation.div(255)
        if self.unsqueeze and observation.ndim == 3:
            observation = observation.unsqueeze(0)
        return observation

    def _spec_dtype(self, leaf: TensorSpec) -> torch.dtype:
        return self.dtype

    def __repr__(self) -> str:
        return f"ToTensorImage(keys={self.in_keys})" if self.in_keys == self.out_keys else super().__repr__()
