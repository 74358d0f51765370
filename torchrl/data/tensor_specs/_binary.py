"""``Binary``: vectors of 0/1 entries (e.g. a multi-binary action)."""
from __future__ import annotations

from typing import Any

import torch

from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._boxes import BinaryBox
from torchrl.data.tensor_specs._categorical import Categorical
from torchrl.data.tensor_specs._utils import _cartesian, _dtype, _leaf_device, _size, _value_shape

__all__ = ["Binary"]


class Binary(Categorical):
    """A binary discrete tensor spec: every entry is 0 or 1.

    Args:
        n (int, optional): the length of the binary vectors (the last dim). Defaults to ``shape[-1]``.
        shape (torch.Size, optional): the shape; its last dim must be ``n``. Defaults to ``(n,)``.
        device (torch.device, optional): the device.
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.int8``.

    Examples:
        >>> spec = Binary(4)
        >>> spec.shape, spec.rand().dtype
        (torch.Size([4]), torch.int8)
        >>> spec.is_in(torch.tensor([0, 1, 1, 0], dtype=torch.int8))
        True
    """

    _feature_ndim = 1

    def __init__(
        self,
        n: int | None = None,
        shape: torch.Size | None = None,
        device: Any = None,
        dtype: str | torch.dtype = torch.int8,
    ) -> None:
        if n is None and shape is None:
            raise TypeError("Binary requires `n` or `shape`.")
        shape = torch.Size((int(n),)) if shape is None else _size(shape)
        if not len(shape):
            raise ValueError("Binary: the shape must have at least one dim (the vector length n).")
        if n is None:
            n = shape[-1]
        if shape[-1] != n:
            raise ValueError(f"Binary: the last dim of shape {tuple(shape)} must equal n={n}.")
        TensorSpec.__init__(self, shape, BinaryBox(n), _leaf_device(device), _dtype(dtype, torch.int8), "discrete")
        self.mask = None

    def update_mask(self, mask: torch.Tensor | None) -> None:
        if mask is not None:
            raise ValueError("Binary specs do not take masks.")

    def _params(self) -> dict[str, torch.Tensor]:
        return {}

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> Binary:
        return Binary(
            shape[-1], shape=shape, device=overrides.get("device", self._device), dtype=overrides.get("dtype", self.dtype)
        )

    def rand(self, shape: torch.Size = None) -> torch.Tensor:
        full = _value_shape(shape, self.shape)
        if self.dtype is torch.bool:
            return torch.rand(full, device=self._device) < 0.5
        return torch.randint(0, 2, full, dtype=self.dtype, device=self._device)

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._check_tensor(val):
            return False
        return self.dtype is torch.bool or bool(((val == 0) | (val == 1)).all())

    def _explain_values(self, val: torch.Tensor) -> str:
        bad = ((val != 0) & (val != 1)).nonzero()
        if len(bad):
            where = tuple(bad[0].tolist())
            return f" Value {val[where].item()} at index {where} is neither 0 nor 1."
        return ""

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return (val > 0.5).to(self.dtype) if val.is_floating_point() else val.clamp(0, 1).to(self.dtype)

    def index(self, index: Any, tensor_to_index: torch.Tensor) -> torch.Tensor:
        return tensor_to_index[index]

    def cardinality(self) -> int:
        return 2 ** self.shape.numel()

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        axes = [torch.arange(2, device=self._device)] * self.shape.numel()
        return _cartesian(axes, self.shape).to(self.dtype)

    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        raise ValueError("Binary values are binary vectors already; they have no one-hot encoding.")

    def to_one_hot_spec(self) -> TensorSpec:
        raise ValueError("Binary values are binary vectors already; they have no one-hot spec.")

    def clone(self) -> Binary:
        return self._rebuild(self.shape, {})

    def _repr_fields(self) -> list[str]:
        return TensorSpec._repr_fields(self)
