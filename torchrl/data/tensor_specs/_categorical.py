"""``Categorical``: integer categories ``0 .. n - 1``, optionally masked."""
from __future__ import annotations

from typing import Any

import torch

from torchrl.data.tensor_specs._base import _SPEC_CLASSES, TensorSpec
from torchrl.data.tensor_specs._boxes import CategoricalBox
from torchrl.data.tensor_specs._utils import _DimError, _dtype, _leaf_device, _size, _value_shape, _ValueRuntimeError

__all__ = ["Categorical"]


def _check_mask(owner: str, mask: torch.Tensor | None, shape: torch.Size, device: torch.device) -> torch.Tensor | None:
    """A boolean mask broadcast to ``shape`` (non-zero entries of a numeric mask are allowed); an error naming
    both shapes otherwise (``RuntimeError`` as in TorchRL, also a ``ValueError``)."""
    if mask is None:
        return None
    mask = torch.as_tensor(mask, device=device)
    if mask.dtype != torch.bool:
        mask = mask != 0
    try:
        return mask.expand(shape)
    except RuntimeError:
        raise _ValueRuntimeError(f"{owner}: mask of shape {tuple(mask.shape)} does not broadcast to {tuple(shape)}.") from None


def _gather_last(index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
    """``tensor_to_index`` gathered along its last dim at ``index`` (expanded over the leading dims; the last
    dim of ``index`` is kept, as in TorchRL)."""
    index = torch.as_tensor(index, device=tensor_to_index.device).long()
    if not index.ndim:
        index = index.unsqueeze(-1)
    return tensor_to_index.gather(-1, index.expand(*tensor_to_index.shape[:-1], index.shape[-1]))


def _same_rows(mask: torch.Tensor, owner: str) -> torch.Tensor:
    """The one row of ``mask`` (last dim = categories) shared by every element, for ``enumerate``."""
    rows = mask.reshape(-1, mask.shape[-1])
    if rows.shape[0] and not bool((rows == rows[0]).all()):
        raise _DimError(
            f"{owner}.enumerate(use_mask=True): the mask differs from one element to another; each enumerated value "
            "fills the whole shape, so only a mask shared by every element can be applied."
        )
    return rows[0] if rows.shape[0] else torch.ones(mask.shape[-1], dtype=torch.bool, device=mask.device)


def _masked_draw(mask: torch.Tensor, owner: str) -> torch.Tensor:
    """One allowed index per row of ``mask`` (last dim = categories); shape ``mask.shape[:-1]``."""
    n = mask.shape[-1]
    try:
        draw = torch.multinomial(mask.reshape(-1, n).float(), 1)
    except RuntimeError:
        raise ValueError(f"{owner}: the mask allows no value at some position; cannot sample.") from None
    return draw.reshape(mask.shape[:-1])


class Categorical(TensorSpec):
    """A discrete tensor spec: integers in ``[0, n)``.

    Categorical values are indices (not one-hot vectors). A boolean ``mask`` of shape ``(*shape, n)``
    restricts the values that ``rand`` draws and ``is_in`` accepts (see :meth:`update_mask`).

    Args:
        n (int): number of categories (``-1`` when unknown yet; see :meth:`set_provisional_n`).
        shape (torch.Size, optional): the shape. Defaults to ``()``.
        device (torch.device, optional): the device.
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.int64``.
        mask (torch.Tensor, optional): allowed categories, shape ``(*shape, n)``.

    Examples:
        >>> spec = Categorical(3)
        >>> spec.shape, spec.is_in(torch.tensor(2)), spec.is_in(torch.tensor(3))
        (torch.Size([]), True, False)
        >>> spec.update_mask(torch.tensor([False, True, False]))
        >>> spec.rand().item()
        1
    """

    def __init__(
        self,
        n: int,
        shape: torch.Size | None = None,
        device: Any = None,
        dtype: str | torch.dtype = torch.int64,
        mask: torch.Tensor | None = None,
    ) -> None:
        shape = _size(shape)
        device = _leaf_device(device)
        super().__init__(shape, CategoricalBox(n), device, _dtype(dtype, torch.int64), "discrete")
        self.mask = _check_mask("Categorical", mask, torch.Size((*shape, int(n))), device) if mask is not None else None

    @property
    def n(self) -> int:
        """The number of categories (``RuntimeError`` while it is unknown, see :meth:`set_provisional_n`)."""
        n = self.space.n
        if n < 0:
            raise _ValueRuntimeError(
                f"{type(self).__name__}: the number of categories is undefined (n=-1); call set_provisional_n(n) first."
            )
        return n

    def set_provisional_n(self, n: int) -> None:
        """Sets the number of categories of a spec built with ``n=-1``."""
        self.space = CategoricalBox(n)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Sets (or with ``None`` clears) the boolean mask of allowed categories, shape ``(*shape, n)``."""
        self.mask = _check_mask(type(self).__name__, mask, torch.Size((*self.shape, self.space.n)), self._device)

    # ------------------------------------------------------------------ TensorSpec hooks
    def _params(self) -> dict[str, torch.Tensor]:
        return {"mask": self.mask}

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> Categorical:
        return Categorical(
            self.space.n,
            shape=shape,
            device=overrides.get("device", self._device),
            dtype=overrides.get("dtype", self.dtype),
            mask=params.get("mask"),
        )

    def _no_n(self) -> ValueError:
        return _ValueRuntimeError(f"{type(self).__name__} was built with n=-1: call set_provisional_n(n) before sampling.")

    def rand(self, shape: torch.Size = None) -> torch.Tensor:
        full = _value_shape(shape, self.shape)
        n = self.space.n
        if n < 0:
            raise self._no_n()
        mask = self.mask
        if mask is None:
            return torch.randint(0, n, full, dtype=self.dtype, device=self._device)
        if shape:
            mask = mask.expand(*full, n)
        return _masked_draw(mask, "Categorical").to(self.dtype)

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._check_tensor(val):
            return False
        n = self.space.n
        if self.dtype is torch.bool:
            ok = n >= 2 or bool((~val).all())
        else:
            ok = bool((val >= 0).all()) and (n < 0 or bool((val < n).all()))
        if ok and self.mask is not None:
            mask = self.mask.expand(*val.shape, n)
            ok = bool(mask.gather(-1, val.long().unsqueeze(-1)).all())
        return ok

    def _explain_values(self, val: torch.Tensor) -> str:
        n = self.space.n
        bad = ((val < 0) | (val >= n)).nonzero() if n >= 0 else (val < 0).nonzero()
        if len(bad):
            where = tuple(bad[0].tolist())
            return f" Value {val[where].item()} at index {where} is not in [0, {n})."
        return " A value is excluded by the mask."

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if val.is_floating_point():
            val = val.round()
        val = val.long().clamp(0, max(self.space.n - 1, 0))
        if self.mask is not None:
            mask = self.mask.expand(*val.shape, self.space.n)
            allowed = mask.gather(-1, val.unsqueeze(-1)).squeeze(-1)
            val = torch.where(allowed, val, mask.long().argmax(-1))
        return val.to(self.dtype)

    def index(self, index: Any, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Gathers ``tensor_to_index`` along its last dim at the categories of ``index`` (its last dim kept)."""
        return _gather_last(index, tensor_to_index)

    def cardinality(self) -> int:
        """``n``: the leading dims are batch dims, each enumerated value fills all of them."""
        if self.space.n < 0:
            raise self._no_n()
        return self.space.n

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """The ``n`` categories, each filling the spec's shape: shape ``(n, *shape)`` (with ``use_mask``, only
        the categories the mask allows; the mask must then be the same for every element)."""
        n = self.space.n
        if n < 0:
            raise self._no_n()
        values = torch.arange(n, device=self._device)
        if use_mask and self.mask is not None:
            values = values[_same_rows(self.mask, type(self).__name__)]
        shape = _value_shape(None, self.shape)
        return values.to(self.dtype).reshape(-1, *[1] * len(shape)).expand(-1, *shape).clone()

    # ------------------------------------------------------------------ conversions
    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """One-hot (boolean) encoding of categorical ``val``."""
        if safe:
            self.assert_is_in(val)
        return torch.nn.functional.one_hot(val.long(), self.space.n).bool()

    def to_one_hot_spec(self) -> TensorSpec:
        """The equivalent :class:`OneHot` spec."""
        return _SPEC_CLASSES["OneHot"](
            self.space.n, shape=(*self.shape, self.space.n), device=self._device, mask=self.mask
        )

    def to_categorical(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Identity (values are already categorical)."""
        if safe:
            self.assert_is_in(val)
        return val

    def to_categorical_spec(self) -> Categorical:
        """Identity."""
        return self

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> Any:
        return super().to_numpy(val, safe)

    def _repr_fields(self) -> list[str]:
        fields = super()._repr_fields()
        if self.mask is not None:
            fields.insert(2, f"mask=Tensor(shape={tuple(self.mask.shape)}, dtype=torch.bool)")
        return fields
