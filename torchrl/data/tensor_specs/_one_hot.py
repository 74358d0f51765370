"""``OneHot``: one-hot vectors over ``n`` categories, optionally masked."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._boxes import CategoricalBox
from torchrl.data.tensor_specs._categorical import Categorical, _check_mask, _gather_last, _masked_draw, _same_rows
from torchrl.data.tensor_specs._utils import _dtype, _leaf_device, _shapes_compatible, _size, _value_shape

__all__ = ["OneHot"]


def _one_hot(idx: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    out = torch.zeros((*idx.shape, n), dtype=dtype, device=idx.device)
    return out.scatter_(-1, idx.unsqueeze(-1), 1)


def _valid_one_hot(val: torch.Tensor) -> bool:
    """Entries are 0/1 and each vector (last dim) has exactly one 1."""
    if val.dtype is torch.bool:
        return bool((val.sum(-1) == 1).all())
    return bool(((val == 0) | (val == 1)).all()) and bool((val.sum(-1) == 1).all())


class OneHot(TensorSpec):
    """A one-hot discrete tensor spec: the last dim (of size ``n``) holds exactly one 1.

    ``encode`` accepts category indices (an int or an array of ints, as gym's ``Discrete`` spaces give)
    and returns one-hot tensors; ``to_numpy`` returns the category indices, so that
    ``encode(to_numpy(x))`` gives ``x`` back.

    Args:
        n (int): number of categories.
        shape (torch.Size, optional): the shape; its last dim must be ``n``. Defaults to ``(n,)``.
        device (torch.device, optional): the device.
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.bool``.
        use_register (bool, optional): map arbitrary values to categories in order of appearance when
            encoding (``to_numpy`` maps them back). Defaults to ``False``.
        mask (torch.Tensor, optional): allowed categories, same shape as the spec.

    Examples:
        >>> spec = OneHot(3)
        >>> spec.encode(2)
        tensor([False, False,  True])
        >>> int(spec.to_numpy(spec.encode(2)))
        2
        >>> spec.is_in(spec.rand())
        True
    """

    _feature_ndim = 1
    _eye = None  # the identity matrix cached by _identity

    def __init__(
        self,
        n: int,
        shape: torch.Size | None = None,
        device: Any = None,
        dtype: str | torch.dtype | None = torch.bool,
        use_register: bool = False,
        mask: torch.Tensor | None = None,
    ) -> None:
        n = int(n)
        shape = torch.Size((n,)) if shape is None else _size(shape)
        if not len(shape) or shape[-1] != n:
            raise ValueError(f"{type(self).__name__}: the last dim of shape {tuple(shape)} must equal n={n}.")
        device = _leaf_device(device)
        super().__init__(shape, CategoricalBox(n), device, _dtype(dtype, torch.bool), "discrete")
        self.use_register = use_register
        self._register: dict[Any, int] = {}
        self.mask = _check_mask(type(self).__name__, mask, shape, device)

    @property
    def n(self) -> int:
        return self.space.n

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Sets (or with ``None`` clears) the boolean mask of allowed categories (same shape as the spec)."""
        self.mask = _check_mask(type(self).__name__, mask, self.shape, self._device)

    # ------------------------------------------------------------------ TensorSpec hooks
    def _params(self) -> dict[str, torch.Tensor]:
        return {"mask": self.mask}

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> OneHot:
        return OneHot(
            self.space.n,
            shape=shape,
            device=overrides.get("device", self._device),
            dtype=overrides.get("dtype", self.dtype),
            use_register=self.use_register,
            mask=params.get("mask"),
        )

    def rand(self, shape: torch.Size = None) -> torch.Tensor:
        n = self.space.n
        batch = _value_shape(shape, self.shape[:-1])
        if self.mask is None:
            # one draw and one row gather from a cached identity matrix (cheaper than zeros + scatter)
            idx = torch.randint(0, n, (batch.numel(),), device=self._device)
            return self._identity().index_select(0, idx).reshape(*batch, n)
        mask = self.mask.expand(*batch, n) if shape else self.mask
        idx = _masked_draw(mask, type(self).__name__)
        return _one_hot(idx, n, self.dtype)

    def _identity(self) -> torch.Tensor:
        eye = self._eye
        if eye is None or eye.dtype != self.dtype or eye.device != (self._device or eye.device):
            eye = torch.eye(self.space.n, dtype=self.dtype, device=self._device)
            self._eye = eye
        return eye

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._check_tensor(val) or not _valid_one_hot(val):
            return False
        if self.mask is not None:
            return not bool((val.bool() & ~self.mask).any())
        return True

    def _explain_values(self, val: torch.Tensor) -> str:
        return " Each vector along the last dim must hold exactly one 1 (at an allowed position)."

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        scores = val.float()
        if self.mask is not None:
            scores = scores.masked_fill(~self.mask.expand_as(scores), float("-inf"))
        return _one_hot(scores.argmax(-1), self.space.n, self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """Category indices (int or array of ints) to one-hot vectors; one-hot input is cast as is."""
        device = None if ignore_device else self._device
        if self.use_register and not isinstance(val, torch.Tensor):
            key = val.item() if isinstance(val, np.ndarray) and val.size == 1 else val
            val = self._register.setdefault(key, len(self._register))
        if isinstance(val, np.ndarray) and not val.flags.writeable:
            val = val.copy()
        val = torch.as_tensor(val, device=device)
        if _shapes_compatible(val.shape, self.shape):
            return val.to(self.dtype)
        n = self.space.n
        val = val.long()
        # TorchRL's types: AssertionError for an index >= n, RuntimeError for a negative one
        if bool((val >= n).any()):
            raise AssertionError(f"{type(self).__name__}.encode: category indices must be < n={n}, got {val.tolist()}.")
        if bool((val < 0).any()):
            raise RuntimeError(f"{type(self).__name__}.encode: category indices must be >= 0, got {val.tolist()}.")
        return _one_hot(val, n, self.dtype)

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> np.ndarray:
        """The category indices of one-hot ``val`` (registered values when ``use_register``); integer indices
        (``val`` without the one-hot dim, e.g. a policy's argmax) are taken as they are."""
        if val.shape != self.shape and self._is_index(val):
            idx = val.reshape(self.shape[:-1]).cpu().numpy()
        else:
            if safe:
                self.assert_is_in(val)
            idx = val.long().argmax(-1).cpu().numpy()
        if self.use_register:
            inverse = {v: k for k, v in self._register.items()}
            if idx.ndim == 0:
                return inverse[int(idx)]
            return np.vectorize(inverse.__getitem__, otypes=[object])(idx)
        return idx

    def _is_index(self, val: torch.Tensor) -> bool:
        """Whether ``val`` holds category indices rather than one-hot vectors: an integer tensor shaped like the
        spec without its one-hot dim (or with a trailing 1 in its place)."""
        if val.is_floating_point() or val.dtype == torch.bool:
            return False
        lead = self.shape[:-1]
        return val.shape == lead or val.shape == lead + (1,)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Gathers ``tensor_to_index`` along its last dim at the categories the one-hot ``index`` points to
        (the categories' dim is kept, as in TorchRL)."""
        if not isinstance(index, torch.Tensor):
            raise ValueError(f"{type(self).__name__}.index expects a one-hot tensor index, got {type(index).__name__}.")
        return _gather_last(index.long().argmax(-1), tensor_to_index)

    def cardinality(self) -> int:
        """``n``: the leading dims are batch dims, each enumerated value fills all of them."""
        return self.space.n

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """The ``n`` one-hot vectors, each filling the batch dims: shape ``(n, *shape)`` (with ``use_mask``,
        only the allowed ones; the mask must then be the same for every element)."""
        n = self.space.n
        eye = torch.eye(n, dtype=self.dtype, device=self._device)
        if use_mask and self.mask is not None:
            eye = eye[_same_rows(self.mask, type(self).__name__)]
        batch = _value_shape(None, self.shape[:-1])
        return eye.reshape(-1, *[1] * len(batch), n).expand(-1, *batch, n).clone()

    # ------------------------------------------------------------------ conversions
    def to_categorical(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Category indices of one-hot ``val`` (last dim reduced)."""
        if safe:
            self.assert_is_in(val)
        return val.long().argmax(-1)

    def to_categorical_spec(self) -> Categorical:
        """The equivalent :class:`Categorical` spec."""
        mask = self.mask
        return Categorical(self.space.n, shape=self.shape[:-1], device=self._device, mask=mask)

    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Identity (values are one-hot already)."""
        if safe:
            self.assert_is_in(val)
        return val

    def to_one_hot_spec(self) -> OneHot:
        """Identity."""
        return self

    def clone(self) -> OneHot:
        out = self._rebuild(self.shape, {"mask": None if self.mask is None else self.mask.clone()})
        out._register = dict(self._register)
        return out
