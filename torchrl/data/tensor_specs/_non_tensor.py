"""``NonTensor``: a spec for non-tensor data (strings, objects) carried in TensorDicts as ``NonTensorData``."""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase
from tensordict.utils import is_non_tensor

from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._utils import (
    DEVICE_TYPING,
    _cat_shape,
    _device,
    _shapes_compatible,
    _size,
)

__all__ = ["NonTensor"]

_DEFAULT_SHAPE = torch.Size((1,))


class NonTensor(TensorSpec):
    """A spec for non-tensor data.

    ``rand``, ``zero`` and ``one`` return a ``NonTensorData`` holding ``example_data`` (``None`` by
    default) with the spec's shape as batch size; with ``batched=True`` they return a ``NonTensorStack``
    of independent copies instead. ``is_in`` accepts ``NonTensorData`` / ``NonTensorStack`` values whose
    batch size ends with the spec's shape.

    Args:
        shape (int or torch.Size, optional): the shape. Defaults to ``(1,)``.
        device (torch.device, optional): the device. Defaults to ``None``.
        dtype (torch.dtype, optional): kept for API compatibility. Defaults to ``None``.
        example_data (Any, optional): the value used by ``rand`` / ``zero`` / ``one``.
        batched (bool, optional): generate a stack of copies rather than one shared value.
        feature_dims (int, optional): number of trailing dims that belong to one datum (exclusive with
            ``batched``).

    Examples:
        >>> spec = NonTensor(shape=(), example_data="hello")
        >>> data = spec.rand()
        >>> data.data, spec.is_in(data)
        ('hello', True)
    """

    def __init__(
        self,
        shape: torch.Size | int = _DEFAULT_SHAPE,
        device: DEVICE_TYPING | None = None,
        dtype: torch.dtype | None = None,
        example_data: Any = None,
        batched: bool | None = None,
        feature_dims: int | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("domain", None)
        if kwargs:
            raise TypeError(f"NonTensor got unexpected keyword argument(s) {sorted(kwargs)}.")
        if batched and feature_dims is not None:
            raise ValueError("NonTensor: `batched` and `feature_dims` are exclusive; pass only one.")
        shape = _DEFAULT_SHAPE if shape is None else _size(shape)
        super().__init__(shape, None, None, dtype, "")
        self._device = _device(device)
        self.example_data = example_data
        self.batched = bool(batched)
        self.feature_dims = feature_dims

    @property
    def device(self) -> torch.device | None:
        return self._device

    @device.setter
    def device(self, device: DEVICE_TYPING | None) -> None:
        self._device = _device(device)

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> NonTensor:
        return NonTensor(
            shape=shape,
            device=overrides.get("device", self._device),
            dtype=overrides.get("dtype", self.dtype),
            example_data=self.example_data,
            batched=self.batched,
            feature_dims=self.feature_dims,
        )

    def _make(self, shape: Any) -> NonTensorData | NonTensorStack:
        full = _cat_shape(shape, self.shape)
        if not self.batched or not len(full):
            return NonTensorData(data=self.example_data, batch_size=full, device=self._device)
        return self._stack(full)

    def _stack(self, full: torch.Size) -> NonTensorData | NonTensorStack:
        if not len(full):
            return NonTensorData(data=copy.deepcopy(self.example_data), batch_size=(), device=self._device)
        return NonTensorStack(*[self._stack(full[1:]) for _ in range(full[0])], stack_dim=0)

    def rand(self, shape=None):
        return self._make(shape)

    def zero(self, shape=None):
        return self._make(shape)

    def one(self, shape=None):
        return self._make(shape)

    def is_in(self, val: Any) -> bool:
        return is_non_tensor(val) and _shapes_compatible(val.batch_size, self.shape)

    def _explain(self, val: Any, key: Any = None) -> str:
        where = "NonTensor" + (f" at key {key!r}" if key is not None else "")
        if not is_non_tensor(val):
            return f"{where}: expected NonTensorData or NonTensorStack, got {type(val).__name__}."
        return f"{where}: value has batch size {val.batch_size}, which does not end with the spec's shape {self.shape}."

    def type_check(self, value: Any, key: Any = None) -> None:
        """Non-tensor data has no dtype to check."""

    def _project(self, val: Any) -> Any:
        return val

    def encode(self, val: Any, *, ignore_device: bool = False) -> Any:
        if is_non_tensor(val):
            return val
        return NonTensorData(data=val, batch_size=self.shape, device=None if ignore_device else self._device)

    def to_numpy(self, val: torch.Tensor | TensorDictBase, safe: bool | None = None) -> np.ndarray | dict:
        if safe:
            self.assert_is_in(val)
        if isinstance(val, NonTensorData):
            return val.data
        return val.tolist()

    def index(self, index: Any, tensor_to_index: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        return tensor_to_index[index]

    def cardinality(self) -> Any:
        raise RuntimeError("Cannot enumerate a NonTensor spec: its values are arbitrary objects.")

    def enumerate(self, use_mask: bool = False) -> Any:
        raise RuntimeError("Cannot enumerate a NonTensor spec: its values are arbitrary objects.")

    def to(self, dest: torch.dtype | DEVICE_TYPING) -> NonTensor:
        if isinstance(dest, torch.dtype):
            return self._rebuild(self.shape, {}, dtype=dest)
        dest = _device(dest)
        if dest == self._device:
            return self
        return self._rebuild(self.shape, {}, device=dest)

    def clone(self) -> NonTensor:
        return self._rebuild(self.shape, {})

    def _repr_fields(self) -> list[str]:
        return [f"shape={self.shape}", f"device={self._device}", f"dtype={self.dtype}", f"example_data={self.example_data!r}"]
