"""``Bounded``: values in ``[low, high]`` (``BoundedContinuous`` / ``BoundedDiscrete`` by dtype)."""
from __future__ import annotations

from typing import Any

import torch

from torchrl._utils._deprecation import rename_kwargs
from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._boxes import ContinuousBox
from torchrl.data.tensor_specs._utils import _dtype, _is_float, _leaf_device, _ShapeError, _size, _value_shape

__all__ = ["Bounded", "BoundedContinuous", "BoundedDiscrete"]

_RENAMES = {"minimum": "low", "maximum": "high"}


def _pick_class(cls: type, args: tuple, kwargs: dict) -> type:
    """TorchRL's rule for ``Bounded(...)``: ``domain`` decides (anything but ``"continuous"`` is discrete),
    else the dtype does; ``BoundedContinuous(...)`` / ``BoundedDiscrete(...)`` keep their class."""
    if cls is not Bounded:
        return cls
    dtype = kwargs.get("dtype", args[4] if len(args) > 4 else None)
    domain = kwargs.get("domain", args[5] if len(args) > 5 else None)
    if domain is not None:
        return BoundedContinuous if domain == "continuous" else BoundedDiscrete
    return BoundedContinuous if _is_float(_dtype(dtype, torch.get_default_dtype())) else BoundedDiscrete


class Bounded(TensorSpec):
    """A bounded tensor spec: every element lies in ``[low, high]``.

    ``Bounded(...)`` returns a :class:`BoundedContinuous` for floating dtypes (the default) and a
    :class:`BoundedDiscrete` for integer dtypes (or as ``domain`` says: anything but ``"continuous"`` is
    discrete); the subclasses keep their class whatever the dtype. The dtype defaults to
    ``torch.get_default_dtype()`` whatever the class, as in TorchRL.

    Args:
        low (float or torch.Tensor): lower bound(s), broadcast to ``shape``.
        high (float or torch.Tensor): upper bound(s), broadcast to ``shape``.
        shape (int or torch.Size, optional): the shape; defaults to the broadcast shape of the bounds
            (required when both bounds are scalars).
        device (torch.device, optional): the device. Defaults to the bounds' device or the default device.
        dtype (torch.dtype, optional): the dtype. Defaults to ``torch.get_default_dtype()``.
        domain (str, optional): ``"continuous"`` or ``"discrete"``; defaults from the dtype.

    ``minimum`` / ``maximum`` are accepted as deprecated names of ``low`` / ``high``.

    Raises:
        ValueError: when ``low > high`` anywhere or the bounds do not broadcast to ``shape``.

    Examples:
        >>> spec = Bounded(-1.0, 1.0, shape=(3,))
        >>> type(spec).__name__, spec.rand().shape
        ('BoundedContinuous', torch.Size([3]))
        >>> pixels = Bounded(0, 255, shape=(3, 4, 4), dtype=torch.uint8)
        >>> type(pixels).__name__, pixels.is_in(pixels.rand())
        ('BoundedDiscrete', True)
    """

    _default_dtype: torch.dtype | None = None

    def __new__(cls, *args: Any, **kwargs: Any):
        return super().__new__(_pick_class(cls, args, kwargs))

    def __init__(
        self,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        shape: torch.Size | int | None = None,
        device: Any = None,
        dtype: torch.dtype | str | None = None,
        domain: str | None = None,
        **kwargs: Any,
    ) -> None:
        if kwargs:
            given = {k: v for k, v in (("low", low), ("high", high)) if v is not None}
            given.update(kwargs)
            rename_kwargs("Bounded", given, _RENAMES)
            low, high = given.pop("low", None), given.pop("high", None)
            if given:
                raise TypeError(f"Bounded got unexpected keyword argument(s) {sorted(given)}.")
        if low is None or high is None:
            raise TypeError("Bounded requires both `low` and `high`.")
        dtype = _dtype(dtype, torch.get_default_dtype())
        if device is None and isinstance(low, torch.Tensor):
            device = low.device
        device = _leaf_device(device)
        low = torch.as_tensor(low, device=device).to(dtype)
        high = torch.as_tensor(high, device=device).to(dtype)
        if shape is None and not low.ndim and not high.ndim:
            raise _ShapeError(
                "Bounded: pass `shape` when both bounds are scalars (e.g. Bounded(-1.0, 1.0, shape=(1,)))."
            )
        try:
            shape = torch.broadcast_shapes(low.shape, high.shape) if shape is None else _size(shape)
            bounds = _value_shape(None, shape)  # a dynamic (-1) dim keeps one row of bounds
            # contiguous copies: writing one bound in place (spec.space.low[0] = ...) changes only that bound
            low, high = low.expand(bounds).contiguous(), high.expand(bounds).contiguous()
        except RuntimeError:
            raise _ShapeError(
                f"Bounded: low (shape {tuple(low.shape)}) and high (shape {tuple(high.shape)}) do not broadcast "
                f"to the spec's shape {tuple(shape) if shape is not None else None}."
            ) from None
        bad = low > high
        # a meta tensor holds no values to check (specs built on the meta device stand in for accelerators)
        if low.device.type != "meta" and bool(bad.any()):
            where = tuple(bad.nonzero()[0].tolist())
            raise ValueError(
                f"Bounded: low must be <= high everywhere; at index {where} low={low[where].item()} > "
                f"high={high[where].item()}."
            )
        super().__init__(shape, ContinuousBox(low, high), device, dtype, "continuous" if self._continuous else "discrete")
        if domain is not None:
            self.domain = domain

    # ------------------------------------------------------------------ bounds
    @property
    def low(self) -> torch.Tensor:
        return self.space.low

    @low.setter
    def low(self, value: torch.Tensor) -> None:
        self.space.low = value

    @property
    def high(self) -> torch.Tensor:
        return self.space.high

    @high.setter
    def high(self, value: torch.Tensor) -> None:
        self.space.high = value

    # ------------------------------------------------------------------ TensorSpec hooks
    def _params(self) -> dict[str, torch.Tensor]:
        return {"low": self.space.low, "high": self.space.high}

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> Bounded:
        return Bounded(
            params["low"],
            params["high"],
            shape=shape,
            device=overrides.get("device", self._device),
            dtype=overrides.get("dtype", self.dtype),
            domain=None if "dtype" in overrides else self.domain,  # a new dtype picks the class again
        )

    def is_in(self, val: torch.Tensor) -> bool:
        if not self._check_tensor(val):
            return False
        box = self.space
        try:
            return bool((val >= box._low).all()) and bool((val <= box._high).all())
        except RuntimeError:  # a dynamic (-1) dim whose bounds keep another size
            return False

    def _explain_values(self, val: torch.Tensor) -> str:
        box = self.space
        bad = ((val < box._low) | (val > box._high) | (val != val)).nonzero()
        if not len(bad):
            return ""
        where = tuple(bad[0].tolist())
        spec_where = where[len(where) - self.ndim :]
        return (
            f" Value {val[where].item()} at index {where} is outside "
            f"[{box._low[spec_where].item()}, {box._high[spec_where].item()}]."
        )

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        box = self.space
        if not self._continuous and val.is_floating_point():
            val = val.round()
        val = val.to(self.dtype)
        if val.is_floating_point():
            val = torch.where(torch.isnan(val), box._low, val)
        return torch.clamp(val, box._low, box._high)

    def cardinality(self) -> int:
        """``inf`` for continuous specs; for discrete ones with the same bounds everywhere, ``high - low + 1``
        (each enumerated value fills the whole shape, as for :class:`Categorical`)."""
        if self._continuous:
            return float("inf")
        lo, hi = self._uniform_int_bounds()
        return hi - lo + 1

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """Every value of a discrete spec with the same bounds everywhere, each filling the whole shape."""
        if self._continuous:
            raise NotImplementedError(f"`enumerate` is not implemented for {type(self).__name__}: it has infinitely many values.")
        lo, hi = self._uniform_int_bounds()
        values = torch.arange(lo, hi + 1, device=self._device).to(self.dtype)
        return values.reshape(-1, *[1] * self.ndim).expand(-1, *_value_shape(None, self.shape)).clone()

    def _uniform_int_bounds(self) -> tuple[int, int]:
        box = self.space
        if not box._low.numel():
            return 0, -1
        lo, hi = box._low.reshape(-1)[0], box._high.reshape(-1)[0]
        if not (bool((box._low == lo).all()) and bool((box._high == hi).all())):
            raise NotImplementedError(
                f"{type(self).__name__}: cannot enumerate bounds that differ from one element to another "
                "(each enumerated value fills the whole shape)."
            )
        return int(lo), int(hi)

    def clone(self) -> Bounded:
        return self._rebuild(self.shape, {"low": self.space.low.clone(), "high": self.space.high.clone()})


class BoundedContinuous(Bounded):
    """A :class:`Bounded` spec with a floating dtype.

    Examples:
        >>> spec = BoundedContinuous(0.0, 2.0, shape=(2,))
        >>> bool((spec.rand() <= 2).all())
        True
    """

    _continuous = True

    def rand(self, shape: torch.Size = None) -> torch.Tensor:
        full = _value_shape(shape, self.shape)
        box = self.space
        r = torch.rand(full, dtype=self.dtype, device=self._device)
        plain = box._cache.get("lerp")
        if plain is None:
            # one host read per box, cached (a meta box has no values: any formula gives its shape)
            plain = box._cache["lerp"] = box._low.device.type == "meta" or bool(
                torch.isfinite(box._high - box._low).all())
        if plain:
            return torch.lerp(box._low, box._high, r)
        return self._rand_wide(box._low, box._high, r)

    @staticmethod
    def _rand_wide(low: torch.Tensor, high: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """Sampling when ``high - low`` overflows or a bound is infinite (half-lines get a normal tail)."""
        lo_ok, hi_ok = torch.isfinite(low), torch.isfinite(high)
        tail = torch.randn_like(r)
        inside = torch.where(lo_ok & hi_ok, low * (1 - r) + high * r, tail)
        inside = torch.where(lo_ok & ~hi_ok, low + tail.abs(), inside)
        inside = torch.where(~lo_ok & hi_ok, high - tail.abs(), inside)
        return torch.clamp(inside, low, high)


class BoundedDiscrete(Bounded):
    """A :class:`Bounded` spec with a discrete domain (pass an integer dtype: the default is
    ``torch.get_default_dtype()``, as in TorchRL).

    Examples:
        >>> spec = BoundedDiscrete(0, 5, shape=(2,), dtype=torch.int64)
        >>> spec.dtype, spec.cardinality()
        (torch.int64, 6)
    """

    _continuous = False

    def rand(self, shape: torch.Size = None) -> torch.Tensor:
        full = _value_shape(shape, self.shape)
        box = self.space
        uniform = box._cache.get("uniform")
        if uniform is None:
            uniform = box._cache["uniform"] = self._uniform_bounds()
        if uniform:
            if self.dtype is torch.bool:
                return torch.randint(uniform[0], uniform[1], full, device=self._device).bool()
            return torch.randint(uniform[0], uniform[1], full, dtype=self.dtype, device=self._device)
        low, high = box._low.double(), box._high.double()
        r = torch.rand(full, dtype=torch.float64, device=self._device)
        out = (low + (r * (high - low + 1)).floor_()).clamp_(max=high)
        return out.to(self.dtype)

    def _uniform_bounds(self) -> tuple[int, int] | bool:
        box = self.space
        if not box._low.numel():
            return (0, 1)
        lo, hi = box._low.reshape(-1)[0], box._high.reshape(-1)[0]
        if bool((box._low == lo).all()) and bool((box._high == hi).all()):
            return int(lo), min(int(hi) + 1, 2**63 - 1)
        return False
