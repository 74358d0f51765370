"""``TensorSpec``: what every spec shares (sampling, membership, encoding, shape ops, devices, ``torch.*``).

Leaf specs describe one tensor. Their shape is ``batch dims + feature dims``: the last ``_feature_ndim``
dims describe one value (the ``n`` of a one-hot vector) and cannot be indexed or reshaped. A leaf exposes
its per-element tensors (bounds, masks, ``nvec``) through ``_params()`` -- each with the batch dims leading
-- and rebuilds itself from a new shape and new params through ``_rebuild``; every shape op (``expand``,
indexing, ``squeeze``, ``reshape``, ``unbind`` ...) is written once here on top of those two hooks.
"""
from __future__ import annotations

from typing import Any, Callable, TypeVar

import numpy as np
import torch
from tensordict import TensorDictBase

from torchrl.data.tensor_specs._boxes import Box
from torchrl.data.tensor_specs._utils import (
    DEVICE_TYPING,
    INDEX_TYPING,
    SHAPE_INDEX_TYPING,
    _device,
    _expand_shape,
    _indent,
    _indexed_shape,
    _key_str,
    _leaf_device,
    _neg_dim,
    _norm_index,
    _shape_args,
    _shapes_compatible,
    _DimError,
    _ShapeError,
    _value_shape,
    _ValueRuntimeError,
)

__all__ = ["TensorSpec"]

T = TypeVar("T", bound="TensorSpec")

_HANDLED_FUNCTIONS: dict[Callable, Callable] = {}
# Spec classes by name, so that sibling modules can build each other (``Categorical.to_one_hot_spec``
# returns a ``OneHot`` and vice versa) without an import cycle.
_SPEC_CLASSES: dict[str, type] = {}


class TensorSpec:
    """Parent class of the tensor meta-data containers.

    A spec describes the shape, dtype, device and set of values (``space``) of a tensor. It can draw
    values (``rand``, ``zero``, ``one``), check them (``is_in``, ``assert_is_in``, ``type_check``), map
    outside values in (``encode``, ``project``) and be reshaped like a tensor (``expand``, indexing,
    ``squeeze``, ``unsqueeze``, ``reshape``, ``unbind``, ``torch.stack``).

    Args:
        shape (torch.Size): the full shape (batch dims and feature dims).
        space (Box): the set of values.
        device (torch.device, optional): the device of the tensors (defaults to the default device).
        dtype (torch.dtype, optional): the dtype of the tensors. Defaults to ``torch.float32``.
        domain (str, optional): ``"continuous"`` or ``"discrete"``.

    Examples:
        >>> from torchrl.data import Bounded
        >>> spec = Bounded(-1.0, 1.0, shape=(3,))
        >>> isinstance(spec, TensorSpec) and spec.is_in(spec.rand())
        True
    """

    _feature_ndim: int = 0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.__module__.startswith("torchrl.data.tensor_specs.") and cls.__name__ not in _SPEC_CLASSES:
            _SPEC_CLASSES[cls.__name__] = cls

    def __init__(
        self,
        shape: torch.Size,
        space: None | Box,
        device: torch.device | None = None,
        dtype: torch.dtype = torch.float32,
        domain: str = "",
        _encode_memo_dict: dict[Any, Callable[[Any], Any]] | None = None,
    ) -> None:
        self.shape = torch.Size(shape)
        self.space = space
        self._device = _leaf_device(device)
        self.dtype = dtype
        self.domain = domain
        self._encode_memo_dict = {} if _encode_memo_dict is None else _encode_memo_dict
        self._memoize = False

    # ------------------------------------------------------------------ basic attributes
    @property
    def device(self) -> torch.device:
        """The device of the spec (leaves always have one; only a ``Composite``'s may be ``None``)."""
        return self._device

    @device.setter
    def device(self, device: DEVICE_TYPING) -> None:
        self._device = _leaf_device(device)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def ndimension(self) -> int:
        """The number of dims of the spec (same as ``ndim``)."""
        return len(self.shape)

    # ------------------------------------------------------------------ hooks for subclasses
    def _params(self) -> dict[str, torch.Tensor]:
        """Per-element tensors whose leading dims are the spec's batch dims."""
        return {}

    def _rebuild(self: T, shape: torch.Size, params: dict[str, torch.Tensor], **overrides: Any) -> T:
        """A spec of the same kind with ``shape`` and ``params`` (``overrides``: ``device``, ``dtype``)."""
        raise NotImplementedError(f"{type(self).__name__} must define _rebuild.")

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} must define _project.")

    def _batch_ndim(self) -> int:
        return len(self.shape) - self._feature_ndim

    def _explain_values(self, val: torch.Tensor) -> str:
        return ""

    # ------------------------------------------------------------------ sampling
    def rand(self, shape: torch.Size = None) -> torch.Tensor | TensorDictBase:
        """A random value of the spec, with ``shape`` prepended to the spec's shape."""
        raise NotImplementedError(f"{type(self).__name__} must define rand.")

    def sample(self, shape: torch.Size = None) -> torch.Tensor | TensorDictBase:
        """Same as :meth:`rand`."""
        return self.rand(shape)

    def zero(self, shape: torch.Size = None) -> torch.Tensor | TensorDictBase:
        """A zero-filled value, with ``shape`` prepended to the spec's shape."""
        return torch.zeros(_value_shape(shape, self.shape), dtype=self.dtype, device=self._device)

    def zeros(self, shape: torch.Size = None) -> torch.Tensor | TensorDictBase:
        """Same as :meth:`zero`."""
        return self.zero(shape)

    def one(self, shape: torch.Size = None) -> torch.Tensor | TensorDictBase:
        """A one-filled value, with ``shape`` prepended to the spec's shape."""
        return torch.ones(_value_shape(shape, self.shape), dtype=self.dtype, device=self._device)

    def ones(self, shape: torch.Size = None) -> torch.Tensor | TensorDictBase:
        """Same as :meth:`one`."""
        return self.one(shape)

    # ------------------------------------------------------------------ membership
    def is_in(self, val: torch.Tensor | TensorDictBase) -> bool:
        """``True`` when ``val`` could have been drawn from this spec (shape, dtype and values)."""
        raise NotImplementedError(f"{type(self).__name__} must define is_in.")

    def contains(self, item: torch.Tensor | TensorDictBase) -> bool:
        """Same as :meth:`is_in`."""
        return self.is_in(item)

    def _check_tensor(self, val: Any) -> bool:
        """Shape and dtype part of ``is_in``."""
        return isinstance(val, torch.Tensor) and val.dtype == self.dtype and _shapes_compatible(val.shape, self.shape)

    def _explain(self, val: Any, key: Any = None) -> str:
        """Why ``val`` is not in the spec (only called once ``is_in`` said no)."""
        where = type(self).__name__ + (f" at key {_key_str(key)}" if key is not None else "")
        if not isinstance(val, torch.Tensor):
            return f"{where}: expected a torch.Tensor, got {type(val).__name__}."
        if not _shapes_compatible(val.shape, self.shape):
            return f"{where}: value has shape {val.shape}, which does not end with the spec's shape {self.shape}."
        if val.dtype != self.dtype:
            return f"{where}: value has dtype {val.dtype}, expected {self.dtype}."
        return f"{where}: value is outside the spec's space.{self._explain_values(val)}"

    def assert_is_in(self, value: torch.Tensor) -> None:
        """Raises ``AssertionError`` (saying what is wrong) when ``value`` is not in the spec."""
        if not self.is_in(value):
            raise AssertionError(self._explain(value))

    def type_check(self, value: torch.Tensor, key: Any = None) -> None:
        """Raises ``TypeError`` when ``value``'s dtype is not the spec's dtype."""
        if value.dtype != self.dtype:
            where = f" at key {_key_str(key)}" if key is not None else ""
            raise TypeError(
                f"{type(self).__name__}{where}: value has dtype {value.dtype}, expected {self.dtype}; "
                f"cast it with .to({self.dtype})."
            )

    def project(self, val: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        """Maps ``val`` onto the closest value in the spec (returns ``val`` itself when it is already in)."""
        if self.is_in(val):
            return val
        return self._project(val)

    # ------------------------------------------------------------------ conversion
    def encode(
        self, val: np.ndarray | list | torch.Tensor | TensorDictBase, *, ignore_device: bool = False
    ) -> torch.Tensor | TensorDictBase:
        """Turns ``val`` (numpy array, list, number or tensor) into a tensor of the spec's dtype/device.

        A value with as many elements as the spec but another shape (e.g. a scalar reward for a
        ``(1,)`` spec) is reshaped to the spec's shape; any other shape raises ``RuntimeError``.
        """
        device = None if ignore_device else self._device
        if isinstance(val, torch.Tensor):
            out = val.to(dtype=self.dtype, device=device) if device is not None else val.to(self.dtype)
        else:
            if isinstance(val, np.ndarray) and not val.flags.writeable:
                val = val.copy()
            out = torch.as_tensor(val, dtype=self.dtype, device=device)
        if out.shape != self.shape and not (out.ndim == self.ndim and _shapes_compatible(out.shape, self.shape)):
            if out.numel() != self.shape.numel():
                raise _ShapeError(
                    f"{type(self).__name__}.encode: value has shape {tuple(out.shape)}, which matches neither "
                    f"the spec's shape {self.shape} nor its number of elements ({self.shape.numel()})."
                )
            out = out.reshape(self.shape)
        return out

    def to_numpy(self, val: torch.Tensor | TensorDictBase, safe: bool | None = None) -> np.ndarray | dict:
        """The numpy version of ``val`` (checked against the spec first when ``safe``)."""
        if safe:
            self.assert_is_in(val)
        return val.detach().cpu().numpy()

    def index(self, index: INDEX_TYPING, tensor_to_index: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        """Picks entries of ``tensor_to_index`` along its last dim (discrete specs only; see theirs)."""
        raise NotImplementedError(f"`index` is not implemented for {type(self).__name__} specs.")

    def memoize_encode(self, mode: bool = True) -> None:
        """Turns encode memoization on or off (kept for API compatibility; encode is already direct)."""
        self._memoize = bool(mode)
        if not mode:
            self.erase_memoize_cache()

    def erase_memoize_cache(self) -> None:
        """Forgets memoized encode functions."""
        self._encode_memo_dict.clear()

    # ------------------------------------------------------------------ enumeration
    def cardinality(self) -> int:
        """The number of possible values of one element: the leading dims of a spec are batch dims, each
        enumerated value fills all of them (``Categorical(4, shape=(2,))`` has cardinality 4)."""
        raise NotImplementedError(f"`cardinality` is not implemented for {type(self).__name__} specs.")

    def enumerate(self, use_mask: bool = False) -> Any:
        """All possible values (see :meth:`cardinality`), stacked along a new leading dim."""
        raise NotImplementedError(f"`enumerate` is not implemented for {type(self).__name__} specs.")

    # ------------------------------------------------------------------ shape ops
    def _feature_shape(self) -> torch.Size:
        return self.shape[self._batch_ndim() :]

    def _with_batch(self: T, new_batch: torch.Size, fn: Callable[[torch.Tensor], torch.Tensor]) -> T:
        params = {k: (fn(v) if v is not None else None) for k, v in self._params().items()}
        return self._rebuild(torch.Size((*new_batch, *self._feature_shape())), params)

    def expand(self: T, *shape: int) -> T:
        """A spec with ``shape``: new dims are prepended, singleton (and dynamic) dims may grow.

        As in TorchRL, ``-1`` is a dynamic dim (a size that changes from step to step), not "keep this
        dim": it may replace a singleton or dynamic dim, or be a new leading dim.
        """
        new = _expand_shape(self, _shape_args(shape))
        f = self._feature_ndim
        if f and new[len(new) - f :] != self.shape[self.ndim - f :]:
            raise ValueError(f"{type(self).__name__}.expand: the feature dims {self.shape[self.ndim - f:]} cannot change.")
        nb = len(new) - f
        bnd = self._batch_ndim()
        off = len(new) - self.ndim
        # parameters: a new dynamic leading dim keeps one row; an existing dim that becomes dynamic keeps its size
        target = [1 if (i < off and d == -1) else d for i, d in enumerate(new[:nb])]
        return self._with_batch(new[:nb], lambda v: v.expand(*target, *v.shape[bnd:]))

    def __getitem__(self: T, idx: SHAPE_INDEX_TYPING) -> T:
        """Indexes the batch dims of the spec, as the same index would for a tensor drawn from it."""
        bnd = self._batch_ndim()
        idx = _norm_index(idx, bnd)
        try:
            new_batch = _indexed_shape(self.shape[:bnd], idx)
        except IndexError as err:
            raise IndexError(
                f"{type(self).__name__}: {err}"
                + (f" (the last {self._feature_ndim} dim(s) are feature dims and cannot be indexed)" if self._feature_ndim else "")
            ) from None
        return self._with_batch(new_batch, lambda v: v[idx])

    def squeeze(self: T, dim: int | None = None) -> T:
        """Removes singleton batch dims (all of them, or ``dim``)."""
        bnd = self._batch_ndim()
        if dim is None:
            dims = [i for i in range(bnd) if self.shape[i] == 1]
        else:
            d = _neg_dim(dim, self.ndim)
            if self.shape[d] != 1:
                return self  # as torch.squeeze: a non-singleton dim is left alone
            if d >= bnd:
                raise ValueError(f"{type(self).__name__}.squeeze: dim {dim} is a feature dim and cannot be squeezed.")
            dims = [d]
        if not dims:
            return self
        new_batch = torch.Size([s for i, s in enumerate(self.shape[:bnd]) if i not in dims])
        return self._with_batch(new_batch, lambda v: v.reshape(torch.Size((*new_batch, *v.shape[bnd:]))))

    def unsqueeze(self: T, dim: int) -> T:
        """Inserts a singleton dim at ``dim`` (which must fall among the batch dims)."""
        bnd = self._batch_ndim()
        d = dim if dim >= 0 else dim + self.ndim + 1
        if not 0 <= d <= bnd:
            raise ValueError(
                f"{type(self).__name__}.unsqueeze: dim {dim} is out of range for shape {self.shape}"
                + (" or would split the feature dims" if self._feature_ndim else "")
                + "."
            )
        new_batch = torch.Size((*self.shape[:d], 1, *self.shape[d:bnd]))
        return self._with_batch(new_batch, lambda v: v.unsqueeze(d))

    def reshape(self: T, *shape) -> T:
        """A spec with the same number of elements and a new shape (feature dims unchanged)."""
        new = list(_shape_args(shape))
        if new.count(-1) == 1:
            known = int(np.prod([s for s in new if s != -1])) if len(new) > 1 else 1
            new[new.index(-1)] = self.shape.numel() // max(known, 1)
        new = torch.Size(new)
        f = self._feature_ndim
        bnd = self._batch_ndim()
        if new.numel() != self.shape.numel() or (f and new[len(new) - f :] != self.shape[bnd:]):
            raise _ValueRuntimeError(f"{type(self).__name__}.reshape: cannot reshape {self.shape} into {new}.")
        nb = new[: len(new) - f]
        return self._with_batch(nb, lambda v: v.reshape(torch.Size((*nb, *v.shape[bnd:]))))

    def view(self: T, *shape) -> T:
        """Same as :meth:`reshape`."""
        return self.reshape(*shape)

    def flatten(self: T, start_dim: int, end_dim: int) -> T:
        """Merges dims ``start_dim .. end_dim`` into one."""
        s, e = _neg_dim(start_dim, self.ndim), _neg_dim(end_dim, self.ndim)
        if e < s:
            raise ValueError(f"flatten: end_dim ({end_dim}) comes before start_dim ({start_dim}).")
        merged = int(np.prod(self.shape[s : e + 1]))
        return self.reshape(*self.shape[:s], merged, *self.shape[e + 1 :])

    def unflatten(self: T, dim: int, sizes: tuple[int]) -> T:
        """Splits dim ``dim`` into ``sizes``."""
        try:
            d = _neg_dim(dim, self.ndim)
        except _DimError as err:
            raise _ValueRuntimeError(f"{type(self).__name__}.unflatten: {err}") from None  # TorchRL: RuntimeError
        return self.reshape(*self.shape[:d], *sizes, *self.shape[d + 1 :])

    def unbind(self, dim: int = 0) -> tuple:
        """Splits the spec along batch dim ``dim`` (like ``tensor.unbind``)."""
        d = _neg_dim(dim, self.ndim)
        if d >= self._batch_ndim():
            raise _DimError(f"{type(self).__name__}.unbind: dim {dim} is a feature dim (the last {self._feature_ndim}).")
        pre = (slice(None),) * d
        return tuple(self[pre + (i,)] for i in range(self.shape[d]))

    def make_neg_dim(self, dim: int) -> None:
        """Makes dim ``dim`` dynamic (``-1``: a size that changes from step to step), in place.

        Per-element tensors (bounds, masks) keep their shape.
        """
        d = _neg_dim(dim, self.ndim)
        shape = list(self.shape)
        shape[d] = -1
        self.shape = torch.Size(shape)

    # ------------------------------------------------------------------ device / dtype / copies
    def to(self, dest: torch.dtype | DEVICE_TYPING) -> TensorSpec:
        """The spec on another device, or with another dtype (``self`` when nothing changes)."""
        if isinstance(dest, torch.dtype):
            if dest == self.dtype:
                return self
            return self._rebuild(self.shape, self._params(), dtype=dest)
        dest = _device(dest)
        if dest is None or dest == self._device:
            return self
        params = {k: (v.to(dest) if v is not None else None) for k, v in self._params().items()}
        return self._rebuild(self.shape, params, device=dest)

    def cpu(self):
        """The spec on the CPU."""
        return self.to("cpu")

    def cuda(self, device=None):
        """The spec on a CUDA device."""
        return self.to("cuda" if device is None else device)

    def clone(self) -> TensorSpec:
        """A copy of the spec (tensors cloned)."""
        return self._rebuild(self.shape, {k: (v.clone() if v is not None else None) for k, v in self._params().items()})

    def clear_device_(self: T) -> T:
        """A no-op for leaves (which always have a device)."""
        return self

    # ------------------------------------------------------------------ comparison / display
    def __eq__(self, other: Any) -> bool:
        if type(self) is not type(other):
            return False
        if self.shape != other.shape or self.dtype != other.dtype or self._device != other._device:
            return False
        if self.domain != other.domain or self.space != other.space:
            return False
        mine, theirs = self._params(), other._params()
        for k, v in mine.items():
            w = theirs.get(k)
            if (v is None) != (w is None):
                return False
            if v is not None and (v.shape != w.shape or not torch.equal(v, w)):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def _repr_fields(self) -> list[str]:
        return [
            f"shape={self.shape}",
            f"space={self.space!r}",
            f"device={self._device}",
            f"dtype={self.dtype}",
            f"domain={self.domain}",
        ]

    def __repr__(self) -> str:
        body = ",\n".join(self._repr_fields())
        return f"{type(self).__name__}(\n{_indent(body)})"

    # ------------------------------------------------------------------ torch.* dispatch
    @classmethod
    def __torch_function__(cls, func: Callable, types: tuple, args: tuple = (), kwargs: dict | None = None) -> Any:
        handler = _HANDLED_FUNCTIONS.get(func)
        if handler is None:
            return NotImplemented
        return handler(*args, **(kwargs or {}))

    @classmethod
    def implements_for_spec(cls, torch_function: Callable) -> Callable:
        """Registers a function as the implementation of ``torch_function`` for specs.

        Examples:
            >>> @TensorSpec.implements_for_spec(torch.squeeze)
            ... def _squeeze(spec, dim=None):
            ...     return spec.squeeze(dim)
        """

        def decorator(fn: Callable) -> Callable:
            _HANDLED_FUNCTIONS[torch_function] = fn
            return fn

        return decorator


@TensorSpec.implements_for_spec(torch.squeeze)
def _squeeze(spec: TensorSpec, dim: int | None = None) -> TensorSpec:
    return spec.squeeze(dim)


@TensorSpec.implements_for_spec(torch.unsqueeze)
def _unsqueeze(spec: TensorSpec, dim: int) -> TensorSpec:
    return spec.unsqueeze(dim)


@TensorSpec.implements_for_spec(torch.unbind)
def _unbind(spec: TensorSpec, dim: int = 0) -> tuple:
    return spec.unbind(dim)


@TensorSpec.implements_for_spec(torch.flatten)
def _flatten(spec: TensorSpec, start_dim: int = 0, end_dim: int = -1) -> TensorSpec:
    return spec.flatten(start_dim, end_dim)
