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
    default) with the spec's shape as batch size. As in TorchRL, the last ``feature_dims`` dims belong to
    one datum (by default every dim given at construction) and copies are stacked over the dims before
    them (a ``NonTensorStack``: after ``expand`` or with a leading ``shape`` argument), unless the datum
    is 0-dim; ``batched=True`` (the example is a whole batch) always gives one ``NonTensorData``. ``is_in`` accepts ``NonTensorData`` / ``NonTensorStack`` values whose batch size ends with
    the spec's shape, and plain Python objects (the data itself); it refuses tensors. ``dtype`` stays
    ``None`` (``to(dtype)`` keeps it), ``domain`` is ``None``.

    Args:
        shape (int or torch.Size, optional): the shape. Defaults to ``(1,)``.
        device (torch.device, optional): the device. Defaults to ``None``.
        dtype (torch.dtype, optional): kept for API compatibility. Defaults to ``None``.
        example_data (Any, optional): the value used by ``rand`` / ``zero`` / ``one``.
        batched (bool, optional): the example data is a whole batch: data is one ``NonTensorData``.
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
        super().__init__(shape, None, None, dtype, None)
        self._device = _device(device)
        self.example_data = example_data
        self.batched = bool(batched)
        # as TorchRL: unless batched, every dim given at construction belongs to one datum
        self.feature_dims = feature_dims if (feature_dims is not None or self.batched) else len(shape)

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
        fd = 0 if self.batched else min(self.feature_dims or 0, len(full))
        lead, inner = full[: len(full) - fd], full[len(full) - fd :]
        if not len(lead) or not len(inner):
            return NonTensorData(data=self.example_data, batch_size=full, device=self._device)
        return self._stack(lead, inner)

    def _stack(self, lead: torch.Size, inner: torch.Size) -> NonTensorData | NonTensorStack:
        """Copies of ``NonTensorData(example, batch_size=inner)`` stacked over ``lead``."""
        if not len(lead):
            return NonTensorData(data=copy.deepcopy(self.example_data), batch_size=inner, device=self._device)
        return NonTensorStack(*[self._stack(lead[1:], inner) for _ in range(lead[0])], stack_dim=0)

    def rand(self, shape=None):
        return self._make(shape)

    def zero(self, shape=None):
        return self._make(shape)

    def one(self, shape=None):
        return self._make(shape)

    def is_in(self, val: Any) -> bool:
        if isinstance(val, (torch.Tensor, TensorDictBase)) and not is_non_tensor(val):
            return False
        if not is_non_tensor(val):
            return True  # the data itself
        return _shapes_compatible(val.batch_size, self.shape)

    def _explain(self, val: Any, key: Any = None) -> str:
        where = "NonTensor" + (f" at key {key!r}" if key is not None else "")
        if not is_non_tensor(val):
            return f"{where}: expected NonTensorData or NonTensorStack, got {type(val).__name__}."
        return f"{where}: value has batch size {val.batch_size}, which does not end with the spec's shape {self.shape}."

    def type_check(self, value: Any, key: Any = None) -> None:
        """Refuses tensors (non-tensor data has no dtype to check); ``TypeError`` as in TorchRL."""
        if isinstance(value, torch.Tensor):
            where = f" at key {key!r}" if key is not None else ""
            raise TypeError(f"NonTensor{where}: got a tensor of dtype {value.dtype}; expected non-tensor data.")

    def _project(self, val: Any) -> Any:
        return val

    def encode(self, val: Any, *, ignore_device: bool = False) -> Any:
        if is_non_tensor(val):
            return val
        return NonTensorData(data=val, batch_size=self.shape, device=None if ignore_device else self._device)

    def to_numpy(self, val: torch.Tensor | TensorDictBase, safe: bool | None = None) -> np.ndarray | dict:
        """``val`` itself (non-tensor data has no numpy form), as in TorchRL."""
        if safe:
            self.assert_is_in(val)
        return val

    def index(self, index: Any, tensor_to_index: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        raise NotImplementedError("`index` is not implemented for NonTensor specs.")

    def cardinality(self) -> Any:
        raise NotImplementedError("Cannot enumerate a NonTensor spec: its values are arbitrary objects.")

    def enumerate(self, use_mask: bool = False) -> Any:
        raise NotImplementedError("Cannot enumerate a NonTensor spec: its values are arbitrary objects.")

    def to(self, dest: torch.dtype | DEVICE_TYPING) -> NonTensor:
        if isinstance(dest, torch.dtype):
            return self.clone()  # non-tensor data has no dtype: kept as it is
        dest = _device(dest)
        if dest == self._device:
            return self
        return self._rebuild(self.shape, {}, device=dest)

    def clone(self) -> NonTensor:
        return self._rebuild(self.shape, {})

    def __eq__(self, other: Any) -> bool:
        return (
            type(other) is NonTensor
            and self.shape == other.shape
            and self._device == other._device
            and self.dtype == other.dtype
            and _same_data(self.example_data, other.example_data)
        )

    __hash__ = None  # type: ignore[assignment]

    def _repr_fields(self) -> list[str]:
        return [
            f"shape={self.shape}",
            "space=None",
            f"device={self._device}",
            f"dtype={self.dtype}",
            f"domain={self.domain}",
            f"example_data={self.example_data}",
        ]


def _same_data(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - e.g. arrays whose == is elementwise
        return a is b
