"""Lazy stacks of specs (``Stacked``, ``StackedComposite``) and ``torch.stack`` for specs.

``torch.stack(specs, dim)`` returns a plain expanded spec when all specs are equal, and a lazy stack
when they differ (heterogeneous multi-agent / multi-task settings). A lazy stack keeps its specs and
draws a stack of their samples (a ``LazyStackedTensorDict`` for Composites). Dims where the specs
differ show as ``-1`` in its shape.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDictBase, lazy_stack

from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._boxes import BoxList
from torchrl.data.tensor_specs._composite import Composite
from torchrl.data.tensor_specs._utils import (
    DEVICE_TYPING,
    INDEX_TYPING,
    _indent,
    _neg_dim,
    _norm_index,
    _shape_args,
    _shapes_compatible,
    _ValueRuntimeError,
)
from torchrl.data.tensor_specs._views import _is_key

__all__ = ["Stacked", "StackedComposite"]


class _TypeIndexError(TypeError, IndexError):
    """An index a lazy stack cannot take: TorchRL raises TypeError, the natural type is IndexError."""


def _leading(shape: Any) -> tuple:
    if shape is None:
        return ()
    return (shape,) if isinstance(shape, int) else tuple(shape)


class _LazyStackedMixin:
    """Shared machinery of the lazy stacks: a list of specs and the dim they are stacked along."""

    def __init__(self, *specs: TensorSpec, dim: int) -> None:
        if len(specs) == 1 and isinstance(specs[0], (list, tuple)):
            specs = tuple(specs[0])
        if not specs:
            raise ValueError(f"{type(self).__name__} needs at least one spec.")
        ndims = {s.ndim for s in specs}
        if len(ndims) != 1:
            raise ValueError(
                f"{type(self).__name__}: the specs must have the same number of dims; got shapes {[tuple(s.shape) for s in specs]}."
            )
        ndim = ndims.pop()
        d = dim if dim >= 0 else dim + ndim + 1
        if not 0 <= d <= ndim:
            raise ValueError(f"{type(self).__name__}: dim {dim} is out of range for specs with {ndim} dims.")
        self._stack = list(specs)
        self.dim = d

    # ------------------------------------------------------------------ shape / device
    @property
    def shape(self) -> torch.Size:
        shapes = [s.shape for s in self._stack]
        first = shapes[0]
        common = [sz if all(sh[i] == sz for sh in shapes) else -1 for i, sz in enumerate(first)]
        common.insert(self.dim, len(self._stack))
        return torch.Size(common)

    @property
    def ndim(self) -> int:
        return self._stack[0].ndim + 1

    def ndimension(self) -> int:
        return self.ndim

    @property
    def device(self) -> torch.device | None:
        return self._stack[0].device

    def _restack(self, specs: Sequence[TensorSpec], dim: int):
        return type(self)(*specs, dim=dim)

    def _stack_dim_from_end(self) -> int:
        return self.dim - self.ndim

    # ------------------------------------------------------------------ shape ops
    def _index_stack(self, idx: Any):
        idx = _norm_index(idx, self.ndim)
        if any(i is None or (isinstance(i, torch.Tensor) and i.dtype == torch.bool and i.ndim > 1) for i in idx):
            raise _TypeIndexError(f"{type(self).__name__}: indexing with None or multi-dim masks is not supported.")
        idx = idx + (slice(None),) * (self.ndim - len(idx))
        pre, sel, post = idx[: self.dim], idx[self.dim], idx[self.dim + 1 :]
        per = pre + post
        trivial = all(isinstance(i, slice) and i == slice(None) for i in per)
        new_dim = self.dim - sum(isinstance(i, int) for i in pre)
        if isinstance(sel, int):
            spec = self._stack[sel]
            return spec if trivial else spec[per]
        if isinstance(sel, slice):
            chosen = self._stack[sel]
        else:
            sel = torch.as_tensor(sel)
            positions = sel.nonzero().squeeze(-1) if sel.dtype == torch.bool else sel.reshape(-1)
            chosen = [self._stack[int(i)] for i in positions]
        if not trivial:
            chosen = [s[per] for s in chosen]
        return torch.stack(list(chosen), new_dim)

    def expand(self, *shape):
        new = _shape_args(shape)
        off = len(new) - self.ndim
        if off < 0 or not _shapes_compatible(self.shape, new[off:]) and not _shapes_compatible(new[off:], self.shape):
            raise _ValueRuntimeError(f"{type(self).__name__}.expand: shape {new} is not compatible with {self.shape}.")
        for i, (o, n) in enumerate(zip(self.shape, new[off:])):
            if n != o and o != -1:  # -1 is a dynamic dim (as for leaves), not "keep"
                raise _ValueRuntimeError(
                    f"{type(self).__name__}.expand: only new leading dims can be added; got {new} for {self.shape}."
                )
        return self._restack([s.expand(*new[:off], *s.shape) for s in self._stack], self.dim + off)

    def unsqueeze(self, dim: int):
        d = dim if dim >= 0 else dim + self.ndim + 1
        if not 0 <= d <= self.ndim:
            raise ValueError(f"{type(self).__name__}.unsqueeze: dim {dim} is out of range for shape {self.shape}.")
        if d <= self.dim:
            return self._restack([s.unsqueeze(d) for s in self._stack], self.dim + 1)
        return self._restack([s.unsqueeze(d - 1) for s in self._stack], self.dim)

    def squeeze(self, dim: int | None = None):
        if dim is None:
            out = self
            for d in reversed(range(self.ndim)):
                if out.shape[d] == 1:
                    out = out.squeeze(d)
            return out
        d = _neg_dim(dim, self.ndim)
        if self.shape[d] != 1:
            return self
        if d == self.dim:
            return self._stack[0]
        sub_d = d if d < self.dim else d - 1
        return self._restack([s.squeeze(sub_d) for s in self._stack], self.dim - (d < self.dim))

    def unbind(self, dim: int = 0):
        """The stacked specs (a list, as in TorchRL) along the stack dim; a tuple of stacks along another dim."""
        d = _neg_dim(dim, self.ndim)
        if d == self.dim:
            return list(self._stack)
        sub_d = d if d < self.dim else d - 1
        parts = [s.unbind(sub_d) for s in self._stack]
        new_dim = self.dim - (d < self.dim)
        return tuple(torch.stack(list(group), new_dim) for group in zip(*parts))

    def reshape(self, *shape):
        new = _shape_args(shape)
        if new == self.shape:
            return self
        raise NotImplementedError(
            f"`reshape` is not implemented for {type(self).__name__} specs (from {self.shape} to {new}); index or "
            "unbind it instead."
        )

    def clone(self):
        return self._restack([s.clone() for s in self._stack], self.dim)

    def to(self, dest: torch.dtype | DEVICE_TYPING):
        return self._restack([s.to(dest) for s in self._stack], self.dim)

    def clear_device_(self):
        for s in self._stack:
            s.clear_device_()
        return self

    def __eq__(self, other: Any) -> bool:
        return (
            type(self) is type(other)
            and self.dim == other.dim
            and len(self._stack) == len(other._stack)
            and all(a == b for a, b in zip(self._stack, other._stack))
        )

    __hash__ = None  # type: ignore[assignment]

    def cardinality(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"`cardinality` is not implemented for {type(self).__name__} specs.")

    def enumerate(self, use_mask: bool = False) -> Any:
        raise NotImplementedError(f"`enumerate` is not implemented for {type(self).__name__} specs.")

    def _unbind_value(self, value: Any) -> list:
        if isinstance(value, (list, tuple)):
            return list(value)
        if isinstance(value, torch.Tensor) and value.is_nested:
            return list(value.unbind(0))
        return list(value.unbind(self._stack_dim_from_end()))

    def index(self, index: INDEX_TYPING, tensor_to_index: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        """As the stacked specs' ``index`` (they index alike)."""
        return self._stack[0].index(index, tensor_to_index)

    def make_neg_dim(self, dim: int) -> None:
        """Makes dim ``dim`` of every stacked spec dynamic (``-1``), in place."""
        d = _neg_dim(dim, self.ndim)
        if d == self.dim:
            raise ValueError(f"{type(self).__name__}.make_neg_dim: the stack dim {dim} has a fixed size.")
        for s in self._stack:
            s.make_neg_dim(d if d < self.dim else d - 1)

    def __repr__(self) -> str:
        inner = ",\n".join(repr(s) for s in self._stack)
        return f"{type(self).__name__}(\n{_indent(inner)},\n    dim={self.dim})"


class Stacked(_LazyStackedMixin, TensorSpec):
    """A lazy representation of a stack of tensor specs.

    Samples are stacked when the specs' shapes agree (an error is raised otherwise). Indexing is
    allowed along any dim; along the stack dim it selects specs.

    Args:
        *specs (TensorSpec): the specs (same number of dims).
        dim (int): the stack dim.

    Examples:
        >>> from torchrl.data import Bounded
        >>> spec = torch.stack([Bounded(0.0, 1.0, shape=(2,)), Bounded(5.0, 6.0, shape=(2,))], 0)
        >>> type(spec).__name__, spec.shape
        ('Stacked', torch.Size([2, 2]))
        >>> sample = spec.rand()
        >>> spec.is_in(sample), bool((sample[1] >= 5).all())
        (True, True)
    """

    def __init__(self, *specs: TensorSpec, dim: int) -> None:
        _LazyStackedMixin.__init__(self, *specs, dim=dim)
        first = self._stack[0]
        self.dtype = first.dtype
        self.domain = ""
        self._encode_memo_dict = {}
        self._memoize = False

    @property
    def space(self) -> BoxList:
        return BoxList([s.space for s in self._stack])

    @property
    def _device(self) -> torch.device | None:
        return self._stack[0].device

    def __len__(self) -> int:
        return len(self._stack)

    def __getitem__(self, idx: Any):
        return self._index_stack(idx)

    def _gather(self, parts: list, shape: tuple):
        shapes = {tuple(p.shape) for p in parts}
        if len(shapes) != 1:
            raise ValueError(
                f"Stacked: the stacked specs have different shapes {sorted(shapes)}; their values cannot be stacked "
                "into one tensor. Draw from each spec (spec.unbind(dim)) instead."
            )
        return torch.stack(parts, self.dim + len(shape))

    def rand(self, shape: torch.Size = None) -> torch.Tensor:
        shape = _leading(shape)
        return self._gather([s.rand(shape) for s in self._stack], shape)

    def zero(self, shape: torch.Size = None) -> torch.Tensor:
        shape = _leading(shape)
        return self._gather([s.zero(shape) for s in self._stack], shape)

    def one(self, shape: torch.Size = None) -> torch.Tensor:
        shape = _leading(shape)
        return self._gather([s.one(shape) for s in self._stack], shape)

    def is_in(self, value) -> bool:
        if isinstance(value, torch.Tensor) and not value.is_nested and not _shapes_compatible(value.shape, self.shape):
            return False
        parts = self._unbind_value(value)
        return len(parts) == len(self._stack) and all(s.is_in(v) for s, v in zip(self._stack, parts))

    def _explain(self, val: Any, key: Any = None) -> str:
        where = "Stacked" + (f" at key {key!r}" if key is not None else "")
        if isinstance(val, torch.Tensor) and not val.is_nested and not _shapes_compatible(val.shape, self.shape):
            return f"{where}: value has shape {val.shape}, which does not end with the spec's shape {self.shape}."
        for i, (s, v) in enumerate(zip(self._stack, self._unbind_value(val))):
            if not s.is_in(v):
                return f"{where}, stack index {i}: " + s._explain(v)
        return f"{where}: expected {len(self._stack)} stacked values."

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return self._gather([s.project(v) for s, v in zip(self._stack, self._unbind_value(val))], ())

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        val = torch.as_tensor(val) if not isinstance(val, torch.Tensor) else val
        parts = val.unbind(self.dim)
        return self._gather([s.encode(v, ignore_device=ignore_device) for s, v in zip(self._stack, parts)], ())

    def type_check(self, value: torch.Tensor, key: Any = None) -> None:
        for s, v in zip(self._stack, self._unbind_value(value)):
            s.type_check(v, key)

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> dict:
        if safe:
            self.assert_is_in(val)
        return val.detach().cpu().numpy()



class StackedComposite(_LazyStackedMixin, Composite):
    """A lazy representation of a stack of Composite specs (e.g. agents with different observations).

    Keys shared by all stacked Composites are exposed (``spec[key]`` stacks the entries); keys that only
    some have are listed by :meth:`repr_exclusive_keys`. ``rand`` / ``zero`` / ``one`` return a
    ``LazyStackedTensorDict`` that holds every key.

    Args:
        *specs (Composite): the Composites.
        dim (int): the stack dim.

    Examples:
        >>> from torchrl.data import Composite, Unbounded
        >>> a = Composite(obs=Unbounded(3), extra=Unbounded(1))
        >>> b = Composite(obs=Unbounded(4))
        >>> spec = torch.stack([a, b], 0)
        >>> type(spec).__name__, list(spec.keys()), spec.shape
        ('StackedComposite', ['obs'], torch.Size([2]))
        >>> spec.is_in(spec.rand())
        True
    """

    def __init__(self, *specs: Composite, dim: int) -> None:
        _LazyStackedMixin.__init__(self, *specs, dim=dim)
        for s in self._stack:
            if not isinstance(s, Composite):
                raise TypeError(f"StackedComposite stacks Composite specs, got {type(s).__name__}.")
        self._locked = False
        self._names = None
        self.data_cls = None
        self.step_mdp_static = False
        self.space = None
        self.dtype = None
        self.domain = "composite"
        self._encode_memo_dict = {}
        self._memoize = False

    # Composite's helpers read the entries from ``_specs``: here they are the stacked shared entries.
    @property
    def _specs(self) -> dict:
        shared = [k for k in self._stack[0]._specs if all(k in s._specs for s in self._stack[1:])]
        return {k: self._stack_entry(k) for k in shared}

    @property
    def _shape(self) -> torch.Size:
        return self.shape

    @property
    def _device(self) -> torch.device | None:
        return self._stack[0].device

    def _stack_entry(self, key: str):
        entries = [s._specs[key] for s in self._stack]
        if any(e is None for e in entries):
            return None
        return torch.stack(entries, self.dim)

    def __len__(self) -> int:
        """The number of stacked Composites (as TorchRL; ``len(spec.keys())`` counts the shared keys)."""
        return len(self._stack)

    def __iter__(self):
        return iter(self._specs)

    def __getitem__(self, idx: Any):
        if _is_key(idx):
            missing = [i for i, s in enumerate(self._stack) if idx not in s]
            if missing:
                raise KeyError(
                    f"key {idx!r} not found in StackedComposite: missing from the stacked spec(s) at index {missing}; "
                    f"shared keys: {list(self._specs)}"
                )
            return torch.stack([s[idx] for s in self._stack], self.dim)
        return self._index_stack(idx)

    def __setitem__(self, key: Any, value: Any) -> None:
        if self._locked:
            raise RuntimeError(f"Cannot set key {key!r}: the StackedComposite is locked; call unlock_() first.")
        if isinstance(value, _LazyStackedMixin) and value.dim == self.dim and len(value._stack) == len(self._stack):
            parts = value._stack
        elif value is None:
            parts = [None] * len(self._stack)
        elif value.ndim >= self.ndim and value.shape[self.dim] == len(self._stack):
            parts = value.unbind(self.dim)
        else:  # a spec for one stacked Composite: each of them gets a copy
            parts = [value.clone() for _ in self._stack]
        for s, v in zip(self._stack, parts):
            s[key] = v

    def __delitem__(self, key: Any) -> None:
        for s in self._stack:
            if key in s:
                del s[key]

    def set(self, name: str, spec: TensorSpec) -> StackedComposite:
        self[name] = spec
        return self

    def update(self, dict) -> None:
        for key, value in dict.items():
            self[key] = value
        return self

    def empty(self):
        return self._restack([s.empty() for s in self._stack], self.dim)

    def lock_(self, recurse: bool | None = None):
        self._locked = True
        for s in self._stack:
            s.lock_(recurse)
        return self

    def unlock_(self, recurse: bool | None = None):
        self._locked = False
        for s in self._stack:
            s.unlock_(recurse)
        return self

    def keys(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None, step_mdp_static_only: bool = False):
        return Composite.keys(self, include_nested, leaves_only, is_leaf=is_leaf, step_mdp_static_only=step_mdp_static_only)

    def items(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None, step_mdp_static_only: bool = False):
        return Composite.items(self, include_nested, leaves_only, is_leaf=is_leaf, step_mdp_static_only=step_mdp_static_only)

    def values(self, include_nested: bool = False, leaves_only: bool = False, *, is_leaf=None, step_mdp_static_only: bool = False):
        return Composite.values(self, include_nested, leaves_only, is_leaf=is_leaf, step_mdp_static_only=step_mdp_static_only)

    def repr_exclusive_keys(self) -> str:
        """The keys that only some of the stacked Composites have, by stack index."""
        shared = set(self._specs)
        lines = []
        for i, s in enumerate(self._stack):
            extra = [k for k in s.keys(True, True) if (k if isinstance(k, str) else k[0]) not in shared]
            if extra:
                lines.append(f"{i}: {extra}")
        return "exclusive keys: {" + ", ".join(lines) + "}"

    def _gather(self, parts: list, shape: tuple) -> LazyStackedTensorDict:
        return lazy_stack(parts, self.dim + len(shape))

    def rand(self, shape: torch.Size = None) -> TensorDictBase:
        shape = _leading(shape)
        return self._gather([s.rand(shape) for s in self._stack], shape)

    def zero(self, shape: torch.Size = None) -> TensorDictBase:
        shape = _leading(shape)
        return self._gather([s.zero(shape) for s in self._stack], shape)

    def one(self, shape: torch.Size = None) -> TensorDictBase:
        shape = _leading(shape)
        return self._gather([s.one(shape) for s in self._stack], shape)

    def is_in(self, value) -> bool:
        if not isinstance(value, TensorDictBase) or not _shapes_compatible(value.batch_size, self.shape):
            return False
        parts = self._unbind_value(value)
        return all(s.is_in(v) for s, v in zip(self._stack, parts))

    def _explain(self, val: Any, key: Any = None) -> str:
        if not isinstance(val, TensorDictBase) or not _shapes_compatible(val.batch_size, self.shape):
            return f"StackedComposite: expected a TensorDict with batch size ending with {self.shape}."
        for i, (s, v) in enumerate(zip(self._stack, self._unbind_value(val))):
            if not s.is_in(v):
                return f"StackedComposite, stack index {i}: " + s._explain(v, key)
        return "StackedComposite: the value is not in the spec."

    def project(self, val: TensorDictBase) -> TensorDictBase:
        return self._gather([s.project(v) for s, v in zip(self._stack, self._unbind_value(val))], ())

    def type_check(self, value, selected_keys=None):
        for s, v in zip(self._stack, self._unbind_value(value)):
            s.type_check(v, selected_keys)

    def to_numpy(self, val: TensorDictBase, safe: bool | None = None) -> dict:
        if safe:
            self.assert_is_in(val)
        parts = [s.to_numpy(v) for s, v in zip(self._stack, self._unbind_value(val))]
        shared = [k for k in parts[0] if all(k in p for p in parts[1:])]
        out = {}
        for k in shared:
            items = [p[k] for p in parts]
            same = all(np.shape(x) == np.shape(items[0]) for x in items) and not isinstance(items[0], dict)
            out[k] = np.stack(items, self.dim) if same else items
        return out



@TensorSpec.implements_for_spec(torch.stack)
def _stack_specs(list_of_spec: Sequence[TensorSpec], dim: int = 0, *, out: Any = None) -> TensorSpec:
    """``torch.stack`` for specs: an expanded spec when all are equal, a lazy stack otherwise."""
    if out is not None:
        raise ValueError("torch.stack of specs does not take `out`.")
    specs = list(list_of_spec)
    if not specs:
        raise ValueError("torch.stack needs at least one spec.")
    composite = [isinstance(s, Composite) for s in specs]
    if any(composite) and not all(composite):
        raise _ValueRuntimeError("torch.stack cannot mix Composite and leaf specs.")
    ndim = specs[0].ndim
    if any(s.ndim != ndim for s in specs):
        raise _ValueRuntimeError(
            f"torch.stack: the specs must have the same number of dims; got shapes {[tuple(s.shape) for s in specs]}."
        )
    d = dim if dim >= 0 else dim + ndim + 1
    if not 0 <= d <= ndim:
        raise ValueError(f"torch.stack: dim {dim} is out of range for specs with {ndim} dims.")
    first = specs[0]
    if all(s == first for s in specs[1:]) and not isinstance(first, _LazyStackedMixin) and -1 not in first.shape:
        new_shape = (*first.shape[:d], len(specs), *first.shape[d:])
        return first.unsqueeze(d).expand(*new_shape).clone()
    if all(composite):
        return StackedComposite(*specs, dim=d)
    if len({type(s) for s in specs}) != 1:
        raise _ValueRuntimeError(f"torch.stack: cannot stack specs of different classes {[type(s).__name__ for s in specs]}.")
    if len({s.dtype for s in specs}) != 1:
        raise _ValueRuntimeError(f"torch.stack: cannot stack specs of different dtypes {[s.dtype for s in specs]}.")
    return Stacked(*specs, dim=d)
