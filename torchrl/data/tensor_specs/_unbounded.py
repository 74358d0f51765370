"""``Unbounded``: any value of a shape and dtype (``UnboundedContinuous`` / ``UnboundedDiscrete`` by dtype)."""
from __future__ import annotations

from typing import Any

import torch

from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._boxes import ContinuousBox
from torchrl.data.tensor_specs._utils import _dtype, _is_float, _leaf_device, _size, _value_shape

__all__ = ["Unbounded", "UnboundedContinuous", "UnboundedDiscrete"]

_DEFAULT_SHAPE = torch.Size((1,))


def _int_range(dtype: torch.dtype) -> tuple[int, int]:
    """``[low, high)`` for ``torch.randint`` covering the dtype (int64 is capped to stay representable)."""
    if dtype == torch.bool:
        return 0, 2
    info = torch.iinfo(dtype)
    return info.min, min(info.max + 1, 2**63 - 1)


class Unbounded(TensorSpec):
    """An unbounded tensor spec.

    ``Unbounded(...)`` (and either subclass) returns an :class:`UnboundedContinuous` for floating dtypes
    (the default) and an :class:`UnboundedDiscrete` for integer and boolean dtypes; a ``domain`` keyword
    other than ``"continuous"`` gives an :class:`UnboundedDiscrete` whatever the dtype, as in TorchRL.

    Args:
        shape (int or torch.Size, optional): the shape. Defaults to ``(1,)``.
        device (torch.device, optional): the device. Defaults to the default device.
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.get_default_dtype()``
            (``torch.int64`` for ``UnboundedDiscrete``).

    Examples:
        >>> spec = Unbounded(3)
        >>> type(spec).__name__, spec.rand().shape
        ('UnboundedContinuous', torch.Size([3]))
        >>> type(Unbounded((2,), dtype=torch.int64)).__name__
        'UnboundedDiscrete'
    """

    _default_dtype: torch.dtype | None = None

    def __new__(cls, *args: Any, **kwargs: Any):
        called = cls  # its default dtype applies (Unbounded(domain="discrete") is float, UnboundedDiscrete() int64)
        domain = kwargs.get("domain")
        dtype = kwargs.get("dtype", args[2] if len(args) > 2 else None)
        if domain is not None:
            cls = UnboundedContinuous if domain == "continuous" else UnboundedDiscrete
        elif dtype is not None or cls is Unbounded:
            dtype = _dtype(dtype, torch.get_default_dtype())
            cls = UnboundedContinuous if _is_float(dtype) else UnboundedDiscrete
        out = super().__new__(cls)
        out._default_dtype = called._default_dtype
        if not issubclass(cls, called):  # e.g. UnboundedDiscrete(dtype=torch.float32): Python skips __init__
            out.__init__(*args, **kwargs)
        return out

    def __init__(
        self,
        shape: torch.Size | int | None = _DEFAULT_SHAPE,
        device: Any = None,
        dtype: torch.dtype | str | None = None,
        **kwargs: Any,
    ) -> None:
        domain = kwargs.pop("domain", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__} got unexpected keyword argument(s) {sorted(kwargs)}.")
        shape = _DEFAULT_SHAPE if shape is None else _size(shape)
        dtype = _dtype(dtype, self._default_dtype or torch.get_default_dtype())
        device = _leaf_device(device)
        continuous = _is_float(dtype)
        # the box holds the dtype's extreme finite values, as TorchRL's does (membership ignores it)
        info = torch.finfo(dtype) if continuous else (torch.iinfo(dtype) if dtype != torch.bool else None)
        lo, hi = (info.min, info.max) if info is not None else (False, True)
        bounds = _value_shape(None, shape)  # a dynamic (-1) dim keeps one row of bounds
        box = ContinuousBox(torch.full(bounds, lo, dtype=dtype, device=device), torch.full(bounds, hi, dtype=dtype, device=device))
        if domain is None:
            domain = "continuous" if type(self) is UnboundedContinuous else "discrete"
        super().__init__(shape, box, device, dtype, domain)
        self._continuous = continuous
        self._int_range = None if continuous else _int_range(dtype)

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> Unbounded:
        return Unbounded(
            shape=shape, device=overrides.get("device", self._device), dtype=overrides.get("dtype", self.dtype),
            domain=None if "dtype" in overrides else self.domain,  # a new dtype picks the class again
        )

    def rand(self, shape: torch.Size = None) -> torch.Tensor:
        full = _value_shape(shape, self.shape)
        if self._continuous:
            return torch.randn(full, dtype=self.dtype, device=self._device)
        if self.dtype is torch.bool:
            return torch.rand(full, device=self._device) < 0.5
        lo, hi = self._int_range
        return torch.randint(lo, hi, full, dtype=self.dtype, device=self._device)

    def is_in(self, val: torch.Tensor) -> bool:
        return self._check_tensor(val)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if not self._continuous and val.is_floating_point():
            val = val.round()
        return val.to(self.dtype)

    def cardinality(self) -> int:
        raise NotImplementedError("`cardinality` is not implemented for Unbounded specs: they have infinitely many values.")

    def enumerate(self, use_mask: bool = False) -> Any:
        raise NotImplementedError("`enumerate` is not implemented for Unbounded specs: they have infinitely many values.")

    def clone(self) -> Unbounded:
        return self._rebuild(self.shape, {})


class UnboundedContinuous(Unbounded):
    """An unbounded spec with a floating dtype (see :class:`Unbounded`).

    Examples:
        >>> UnboundedContinuous(shape=(2,)).dtype
        torch.float32
    """


class UnboundedDiscrete(Unbounded):
    """An unbounded spec with an integer or boolean dtype (see :class:`Unbounded`).

    Examples:
        >>> UnboundedDiscrete(shape=(2,)).dtype
        torch.int64
    """

    _default_dtype = torch.int64
