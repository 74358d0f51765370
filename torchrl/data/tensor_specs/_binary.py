"""``Binary``: tensors of 0/1 entries (e.g. a multi-binary action): a two-category ``Categorical``."""
from __future__ import annotations

from typing import Any

import torch

from torchrl.data.tensor_specs._categorical import Categorical
from torchrl.data.tensor_specs._utils import _expand_shape, _shape_args, _size, _value_shape

__all__ = ["Binary"]


class Binary(Categorical):
    """A binary discrete tensor spec: every entry is 0 or 1 (``False`` or ``True`` for a boolean dtype).

    As in TorchRL, a ``Binary`` spec is a :class:`Categorical` spec with two categories: its space is
    ``CategoricalBox(n=2)`` (so ``spec.n == 2``) and ``enumerate`` gives the all-zeros and all-ones values;
    ``n`` only says the length of the last dim, which (as in TorchRL) indexing and ``unbind`` leave alone
    while ``unsqueeze`` may add a dim after it.

    Args:
        n (int, optional): the length of the last dim. Defaults to ``shape[-1]``.
        shape (torch.Size, optional): the shape; its last dim must be ``n``. Defaults to ``(n,)``.
        device (torch.device, optional): the device.
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.int8``.

    Raises:
        TypeError: when neither ``n`` nor ``shape`` is given.
        ValueError: when ``shape[-1]`` is not ``n``.

    Examples:
        >>> spec = Binary(4)
        >>> spec.shape, spec.n, spec.rand().dtype
        (torch.Size([4]), 2, torch.int8)
        >>> spec.is_in(torch.tensor([0, 1, 1, 0], dtype=torch.int8))
        True
    """

    def __init__(
        self,
        n: int | None = None,
        shape: torch.Size | None = None,
        device: Any = None,
        dtype: str | torch.dtype = torch.int8,
    ) -> None:
        if n is None and shape is None:
            raise TypeError("Binary: pass `n` (the length of the last dim) or `shape`.")
        shape = torch.Size((int(n),)) if shape is None else _size(shape)
        if n is not None and (not len(shape) or shape[-1] != n):
            raise ValueError(f"Binary: the last dim of shape {tuple(shape)} must equal n={n}.")
        super().__init__(2, shape=shape, device=device, dtype=dtype)

    _feature_ndim = 1

    def _batch_ndim(self) -> int:
        return max(self.ndim - 1, 0)

    def expand(self, *shape: int) -> Binary:
        """A spec with ``shape`` (singleton or dynamic dims may grow, the last one too, as TorchRL)."""
        new = _expand_shape(self, _shape_args(shape))
        mask = None
        if self.mask is not None:
            off = len(new) - self.ndim
            mask = self.mask.expand(*[1 if (i < off and d == -1) else d for i, d in enumerate(new)], 2)
        return self._rebuild(new, {"mask": mask})

    def unsqueeze(self, dim: int) -> Binary:
        """A singleton dim inserted at ``dim`` (anywhere, the last dim included, as TorchRL)."""
        d = dim if dim >= 0 else dim + self.ndim + 1
        if not 0 <= d <= self.ndim:
            raise ValueError(f"Binary.unsqueeze: dim {dim} is out of range for shape {self.shape}.")
        mask = None if self.mask is None else self.mask.unsqueeze(d)
        return self._rebuild(torch.Size((*self.shape[:d], 1, *self.shape[d:])), {"mask": mask})

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> Binary:
        out = Binary(shape=shape, device=overrides.get("device", self._device), dtype=overrides.get("dtype", self.dtype))
        out.mask = params.get("mask")
        return out

    def rand(self, shape: torch.Size = None) -> torch.Tensor:
        if self.mask is not None:
            return super().rand(shape)
        full = _value_shape(shape, self.shape)
        if self.dtype is torch.bool:
            return torch.rand(full, device=self._device) < 0.5
        return torch.randint(0, 2, full, dtype=self.dtype, device=self._device)

    def is_in(self, val: torch.Tensor) -> bool:
        if self.mask is not None:
            return super().is_in(val)
        if not self._check_tensor(val):
            return False
        return self.dtype is torch.bool or bool(((val == 0) | (val == 1)).all())

    def _explain_values(self, val: torch.Tensor) -> str:
        bad = ((val != 0) & (val != 1)).nonzero()
        if len(bad):
            where = tuple(bad[0].tolist())
            return f" Value {val[where].item()} at index {where} is neither 0 nor 1."
        return " A value is excluded by the mask."

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return (val > 0.5).to(self.dtype) if val.is_floating_point() else val.clamp(0, 1).to(self.dtype)

    def clone(self) -> Binary:
        return self._rebuild(self.shape, {"mask": None if self.mask is None else self.mask.clone()})
