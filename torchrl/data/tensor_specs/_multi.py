"""``MultiCategorical`` and ``MultiOneHot``: several categorical variables side by side (``nvec``)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch

from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._boxes import BoxList, CategoricalBox
from torchrl.data.tensor_specs._categorical import Categorical, _check_mask, _gather_last, _masked_draw, _same_rows
from torchrl.data.tensor_specs._one_hot import OneHot, _one_hot
from torchrl.data.tensor_specs._utils import (
    _cartesian,
    _dtype,
    _leaf_device,
    _shapes_compatible,
    _size,
    _value_shape,
)

__all__ = ["MultiCategorical", "MultiOneHot"]

_BIG = 2**62  # draws from randint(0, _BIG) % n are uniform up to a 2**-62 relative bias


class MultiCategorical(Categorical):
    """A concatenation of categorical variables: entry ``i`` lies in ``[0, nvec[i])``.

    Args:
        nvec (sequence of int or torch.Tensor or int): number of categories of each entry (may have
            several dims; they form the last dims of the shape).
        shape (torch.Size, optional): the shape; its last dims must be ``nvec.shape``. Defaults to
            ``nvec.shape``.
        device (torch.device, optional): the device.
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.int64``.
        mask (torch.Tensor, optional): allowed categories, shape ``(*batch, sum(nvec))`` (1-D ``nvec``).
        remove_singleton (bool, optional): when the spec's shape is ``(1,)``, ``rand`` squeezes the last dim
            of its samples (as TorchRL does). Defaults to ``True``.

    Examples:
        >>> spec = MultiCategorical([3, 2])
        >>> spec.is_in(torch.tensor([2, 1])), spec.is_in(torch.tensor([2, 2]))
        (True, False)
        >>> spec.to_one_hot(torch.tensor([2, 1]))
        tensor([False, False,  True, False,  True])
    """

    def __init__(
        self,
        nvec: Sequence[int] | torch.Tensor | int,
        shape: torch.Size | None = None,
        device: Any = None,
        dtype: str | torch.dtype | None = torch.int64,
        mask: torch.Tensor | None = None,
        remove_singleton: bool = True,
    ) -> None:
        device = _leaf_device(device)
        nvec = torch.as_tensor(nvec, device=device).long()
        if nvec.ndim == 0:
            nvec = nvec.unsqueeze(0)
        fshape = nvec.shape
        shape = fshape if shape is None else _size(shape)
        if shape[len(shape) - len(fshape) :] != fshape or len(shape) < len(fshape):
            raise ValueError(f"MultiCategorical: the last dims of shape {tuple(shape)} must be nvec's shape {tuple(fshape)}.")
        if bool((nvec <= 0).any()):
            raise ValueError(f"MultiCategorical: every entry of nvec must be positive, got {nvec.tolist()}.")
        self._setup(nvec.expand(shape), len(fshape), shape, device, _dtype(dtype, torch.int64), mask, remove_singleton)

    def _setup(self, nvec, fnd, shape, device, dtype, mask, remove_singleton) -> None:
        self._feature_ndim = fnd
        bnd = len(shape) - fnd
        first = nvec[(0,) * bnd] if bnd and nvec.numel() else nvec
        uniform = not bnd or not nvec.numel() or bool((nvec == first).all())
        space = BoxList.from_nvec(first if uniform else nvec)
        TensorSpec.__init__(self, shape, space, device, dtype, "discrete")
        self.nvec = nvec
        self.remove_singleton = remove_singleton
        self.mask = None
        if mask is not None:
            self.update_mask(mask)

    def _segments(self) -> list[int]:
        if self._feature_ndim != 1:
            raise ValueError("MultiCategorical: masks and one-hot conversions need a 1-D nvec.")
        return self.nvec.reshape(-1, self.nvec.shape[-1])[0].tolist() if self.nvec.numel() else []

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Sets (or clears) the mask of allowed categories, shape ``(*batch, sum(nvec))`` for a 1-D nvec."""
        if mask is None:
            self.mask = None
            return
        total = sum(self._segments())
        self.mask = _check_mask("MultiCategorical", mask, torch.Size((*self.shape[:-1], total)), self._device)

    # ------------------------------------------------------------------ TensorSpec hooks
    def _params(self) -> dict[str, torch.Tensor]:
        return {"nvec": self.nvec, "mask": self.mask}

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> MultiCategorical:
        out = object.__new__(MultiCategorical)
        device = overrides.get("device", self._device)
        out._setup(
            params["nvec"].to(device),
            self._feature_ndim,
            shape,
            device,
            overrides.get("dtype", self.dtype),
            params.get("mask"),
            self.remove_singleton,
        )
        return out

    def rand(self, shape: torch.Size | None = None) -> torch.Tensor:
        full = _value_shape(shape, self.shape)
        if self.mask is None:
            out = torch.randint(0, _BIG, full, device=self._device) % self.nvec
            return self._squeezed(out if self.dtype is torch.int64 else out.to(self.dtype))
        mask = self.mask.expand(*full[:-1], self.mask.shape[-1]) if shape else self.mask
        draws = [_masked_draw(m, "MultiCategorical") for m in mask.split(self._segments(), -1)]
        out = torch.stack(draws, -1).to(self.dtype)
        return self._squeezed(out)

    def _squeezed(self, out: torch.Tensor) -> torch.Tensor:
        return out.squeeze(-1) if self.remove_singleton and self.shape == (1,) else out

    def is_in(self, val: torch.Tensor) -> bool:
        if self.remove_singleton and self.shape == (1,) and isinstance(val, torch.Tensor) and val.shape[-1:] != (1,):
            val = val.unsqueeze(-1)  # a sample whose singleton dim rand squeezed
        if not self._check_tensor(val) or not bool((val >= 0).all()) or not bool((val < self.nvec).all()):
            return False
        if self.mask is None:
            return True
        mask = self.mask.expand(*val.shape[:-1], self.mask.shape[-1])
        for i, m in enumerate(mask.split(self._segments(), -1)):
            if not bool(m.gather(-1, val[..., i : i + 1].long()).all()):
                return False
        return True

    def _explain_values(self, val: torch.Tensor) -> str:
        bad = ((val < 0) | (val >= self.nvec)).nonzero()
        if len(bad):
            where = tuple(bad[0].tolist())
            return f" Value {val[where].item()} at index {where} is not in [0, {self.nvec.expand_as(val)[where].item()})."
        return " A value is excluded by the mask."

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.is_floating_point():
            val = val.round()
        val = torch.minimum(val.long().clamp(min=0), self.nvec - 1)
        if self.mask is not None:
            mask = self.mask.expand(*val.shape[:-1], self.mask.shape[-1])
            cols = []
            for i, m in enumerate(mask.split(self._segments(), -1)):
                v = val[..., i]
                ok = m.gather(-1, v.unsqueeze(-1)).squeeze(-1)
                cols.append(torch.where(ok, v, m.long().argmax(-1)))
            val = torch.stack(cols, -1)
        return val.to(self.dtype)

    def _feature_nvec(self) -> torch.Tensor:
        """The nvec of one element (the feature dims), shared by every batch element."""
        bnd = self._batch_ndim()
        first = self.nvec[(0,) * bnd] if bnd and self.nvec.numel() else self.nvec
        if bnd and self.nvec.numel() and not bool((self.nvec == first).all()):
            raise ValueError(f"MultiCategorical: nvec differs from one element to another: {self.nvec.tolist()}.")
        return first

    def cardinality(self) -> int:
        """The number of combinations of one element's entries (``prod(nvec)``)."""
        return math.prod(self._feature_nvec().reshape(-1).tolist())

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """Every combination of one element's entries, each filling the batch dims: shape
        ``(cardinality, *shape)`` (with ``use_mask``, the mask must be the same for every element)."""
        fnvec = self._feature_nvec()
        axes = [torch.arange(n, device=self._device) for n in fnvec.reshape(-1).tolist()]
        if use_mask and self.mask is not None:
            row = _same_rows(self.mask, "MultiCategorical")
            axes = [a[m] for a, m in zip(axes, row.split(self._segments()))]
        values = _cartesian(axes, fnvec.shape).to(self.dtype)
        batch = _value_shape(None, self.shape[: self._batch_ndim()])
        return values.reshape(-1, *[1] * len(batch), *fnvec.shape).expand(-1, *batch, *fnvec.shape).clone()

    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Concatenated one-hot (boolean) encodings of the entries of ``val``."""
        if safe:
            self.assert_is_in(val)
        segs = self._segments()
        return torch.cat([_one_hot(val[..., i].long(), n, torch.bool) for i, n in enumerate(segs)], -1)

    def to_one_hot_spec(self) -> MultiOneHot:
        """The equivalent :class:`MultiOneHot` spec."""
        segs = self._segments()
        return MultiOneHot(segs, shape=(*self.shape[:-1], sum(segs)), device=self._device, mask=self.mask)

    def to_categorical(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Identity."""
        if safe:
            self.assert_is_in(val)
        return val

    def to_categorical_spec(self) -> MultiCategorical:
        """Identity."""
        return self

    def index(self, index: Any, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Gathers ``tensor_to_index`` along its last dim at the entries of ``index`` (as ``Categorical``)."""
        return _gather_last(index, tensor_to_index)

    def clone(self) -> MultiCategorical:
        return self._rebuild(self.shape, {"nvec": self.nvec.clone(), "mask": None if self.mask is None else self.mask.clone()})



class MultiOneHot(OneHot):
    """A concatenation of one-hot variables: segment ``i`` (of size ``nvec[i]``) holds exactly one 1.

    ``encode`` accepts the category index of each segment; ``to_numpy`` returns them.

    Args:
        nvec (sequence of int): size of each segment.
        shape (torch.Size, optional): the shape; its last dim must be ``sum(nvec)``.
        device (torch.device, optional): the device.
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.bool``.
        use_register (bool, optional): kept for API compatibility.
        mask (torch.Tensor, optional): allowed positions, same shape as the spec.

    Examples:
        >>> spec = MultiOneHot([2, 3])
        >>> spec.shape
        torch.Size([5])
        >>> spec.encode([1, 0])
        tensor([False,  True,  True, False, False])
        >>> spec.to_numpy(spec.encode([1, 0])).tolist()
        [1, 0]
    """

    def __init__(
        self,
        nvec: Sequence[int],
        shape: torch.Size | None = None,
        device=None,
        dtype=torch.bool,
        use_register=False,
        mask: torch.Tensor | None = None,
    ) -> None:
        nvec = [int(n) for n in torch.as_tensor(nvec).reshape(-1).tolist()]
        if any(n <= 0 for n in nvec):
            raise ValueError(f"MultiOneHot: every entry of nvec must be positive, got {nvec}.")
        total = sum(nvec)
        shape = torch.Size((total,)) if shape is None else _size(shape)
        if not len(shape) or shape[-1] != total:
            raise ValueError(f"MultiOneHot: the last dim of shape {tuple(shape)} must equal sum(nvec)={total}.")
        device = _leaf_device(device)
        TensorSpec.__init__(self, shape, BoxList([CategoricalBox(n) for n in nvec]), device, _dtype(dtype, torch.bool), "discrete")
        self.nvec = nvec
        self.use_register = use_register
        self._register = {}
        self._nvec_t = torch.tensor(nvec, device=device)
        self._offsets = torch.tensor([0, *np.cumsum(nvec)[:-1].tolist()], device=device)
        self.mask = _check_mask("MultiOneHot", mask, shape, device)

    @property
    def n(self) -> int:
        return sum(self.nvec)

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> MultiOneHot:
        return MultiOneHot(
            self.nvec,
            shape=shape,
            device=overrides.get("device", self._device),
            dtype=overrides.get("dtype", self.dtype),
            use_register=self.use_register,
            mask=params.get("mask"),
        )

    def rand(self, shape: torch.Size | None = None) -> torch.Tensor:
        full = _value_shape(shape, self.shape)
        if self.mask is None:
            idx = torch.randint(0, _BIG, (*full[:-1], len(self.nvec)), device=self._device) % self._nvec_t
        else:
            mask = self.mask.expand(full) if shape else self.mask
            idx = torch.stack([_masked_draw(m, "MultiOneHot") for m in mask.split(self.nvec, -1)], -1)
        out = torch.zeros(full, dtype=self.dtype, device=self._device)
        return out.scatter_(-1, idx + self._offsets, 1)

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._check_tensor(val):
            return False
        if val.dtype is not torch.bool and not bool(((val == 0) | (val == 1)).all()):
            return False
        for seg in val.split(self.nvec, -1):
            if not bool((seg.long().sum(-1) == 1).all()):
                return False
        return self.mask is None or not bool((val.bool() & ~self.mask).any())

    def _explain_values(self, val: torch.Tensor) -> str:
        return f" Each of the {len(self.nvec)} segments (sizes {self.nvec}) must hold exactly one 1 at an allowed position."

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        scores = val.float()
        if self.mask is not None:
            scores = scores.masked_fill(~self.mask.expand_as(scores), float("-inf"))
        idx = torch.stack([s.argmax(-1) for s in scores.split(self.nvec, -1)], -1)
        out = torch.zeros(scores.shape, dtype=self.dtype, device=val.device)
        return out.scatter_(-1, idx + self._offsets.to(val.device), 1)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """Per-segment category indices (``(..., len(nvec))``) to concatenated one-hot vectors."""
        if isinstance(val, np.ndarray) and not val.flags.writeable:
            val = val.copy()
        val = torch.as_tensor(val, device=None if ignore_device else self._device)
        # With every segment of size 1, indices (all 0) and one-hot vectors (all 1) have the same shape.
        ambiguous = len(self.nvec) == sum(self.nvec) and val.dtype != torch.bool and not bool(val.any())
        if _shapes_compatible(val.shape, self.shape) and not ambiguous:
            return val.to(self.dtype)
        val = val.long()
        if not val.ndim or val.shape[-1] != len(self.nvec) or bool(((val < 0) | (val >= self._nvec_t.to(val.device))).any()):
            raise ValueError(
                f"MultiOneHot.encode: expected {len(self.nvec)} category indices within nvec={self.nvec}, got {val.tolist()}."
            )
        out = torch.zeros((*val.shape[:-1], sum(self.nvec)), dtype=self.dtype, device=val.device)
        return out.scatter_(-1, val + self._offsets.to(val.device), 1)

    def to_categorical(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Per-segment category indices, shape ``(..., len(nvec))``."""
        if safe:
            self.assert_is_in(val)
        return torch.stack([s.long().argmax(-1) for s in val.split(self.nvec, -1)], -1)

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> np.ndarray:
        return self.to_categorical(val, safe).cpu().numpy()

    def to_categorical_spec(self) -> MultiCategorical:
        return MultiCategorical(self.nvec, shape=(*self.shape[:-1], len(self.nvec)), device=self._device, mask=self.mask)

    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        if safe:
            self.assert_is_in(val)
        return val

    def to_one_hot_spec(self) -> OneHot:
        return self

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Per segment, the entry of ``tensor_to_index`` that the one-hot ``index`` points to."""
        if not isinstance(index, torch.Tensor) or not index.ndim:
            raise TypeError(f"MultiOneHot.index expects a (multi) one-hot tensor index, got {index!r}.")
        picks = []
        for i, t in zip(index.split(self.nvec, -1), tensor_to_index.split(self.nvec, -1)):
            j = i.long().argmax(-1).expand(t.shape[:-1]).unsqueeze(-1)
            picks.append(t.gather(-1, j).squeeze(-1))
        return torch.stack(picks, -1)

    def cardinality(self) -> int:
        """The number of combinations of one vector's segments (``prod(nvec)``)."""
        return math.prod(self.nvec)

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """Every combination of one vector's segments, each filling the batch dims: shape
        ``(cardinality, *shape)`` (with ``use_mask``, the mask must be the same for every vector)."""
        axes = [torch.arange(n, device=self._device) for n in self.nvec]
        if use_mask and self.mask is not None:
            row = _same_rows(self.mask, "MultiOneHot")
            axes = [a[m] for a, m in zip(axes, row.split(self.nvec))]
        cats = _cartesian(axes, torch.Size((len(self.nvec),))).to(self._device)
        vectors = torch.zeros((cats.shape[0], sum(self.nvec)), dtype=self.dtype, device=self._device)
        vectors.scatter_(-1, cats + self._offsets, 1)
        batch = _value_shape(None, self.shape[:-1])
        return vectors.reshape(-1, *[1] * len(batch), vectors.shape[-1]).expand(-1, *batch, vectors.shape[-1]).clone()

    def clone(self) -> MultiOneHot:
        return self._rebuild(self.shape, {"mask": None if self.mask is None else self.mask.clone()})

