"""``Composite``: a (nested) mapping of specs with a common leading shape -- the spec of a TensorDict."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import new_td
from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._utils import (
    DEVICE_TYPING,
    INDEX_TYPING,
    _device,
    _expand_shape,
    _indent,
    _indexed_shape,
    _key_str,
    _neg_dim,
    _norm_index,
    _shape_args,
    _size,
)
from torchrl.data.tensor_specs._views import (
    NO_DEFAULT,
    _as_tuple,
    _CompositeSpecItemsView,
    _CompositeSpecKeysView,
    _CompositeSpecValuesView,
    _is_key,
    _public,
)

__all__ = ["Composite"]

#: Attributes of a Composite that cannot be entry names (TorchRL raises AttributeError for them).
_RESERVED_KEYS = frozenset({"shape", "device", "dtype", "space"})


class _NotASpecError(TypeError, AttributeError):
    """An entry that is not a spec: TorchRL raises AttributeError, the natural type is TypeError."""


class _NotACompositeError(TypeError, ValueError):
    """A nested key whose parent is a leaf: TorchRL raises TypeError, the natural type is ValueError."""


class _NotACompositeKeyError(KeyError, IndexError):
    """A nested key that goes through a leaf: TorchRL raises IndexError (the leaf is indexed with a string)."""


class _NamesError(IndexError, RuntimeError):
    """A wrong number of dim names: TorchRL raises IndexError, or RuntimeError once names are set."""


class _EraseDeviceError(RuntimeError, TypeError):
    """``spec.device = None``: TorchRL raises TypeError; ours says how to erase the device."""


class _ArgumentsError(TypeError, RuntimeError):
    """Too many positional arguments: TorchRL raises RuntimeError, the natural type is TypeError."""


def _default_is_leaf(cls: type) -> bool:
    return not issubclass(cls, Composite)


def _starts_with(shape: torch.Size, prefix: torch.Size) -> bool:
    if len(shape) < len(prefix):
        return False
    return all(p == s or p == -1 or s == -1 for p, s in zip(prefix, shape))


class Composite(TensorSpec):
    """A composition of specs: the spec of a TensorDict.

    Like a TensorDict, a ``Composite`` has a ``shape`` (the leading dims every entry starts with, also
    called ``batch_size``) and an optional ``device`` (when set, every entry lives on it). Entries are
    reached with string or nested tuple keys; missing intermediate levels are created on assignment.
    ``rand`` / ``zero`` / ``one`` return a TensorDict with ``batch_size = shape + spec.shape``.

    Args:
        *args: at most one mapping of keys (strings or tuples) to specs (or ``None``, or dicts that
            become nested Composites).

    Keyword Args:
        shape (torch.Size, optional): the leading shape of all entries. Defaults to ``()``.
            ``batch_size`` is accepted as an alias.
        device (torch.device, optional): the device of all entries. Defaults to ``None`` (any).
        data_cls (type, optional): a TensorDict class for the generated data. Defaults to ``None``.
        step_mdp_static (bool, optional): whether the entry is static under ``step_mdp``.
        names (list of str, optional): names of the Composite's dims, given to the TensorDicts it
            generates (a single string names a 1-dim Composite). Defaults to ``None`` (unnamed).
        **kwargs: entries, by key. ``shape``, ``device``, ``dtype`` and ``space`` are attributes of a
            Composite and cannot be entry names.

    Raises:
        ValueError: when an entry's shape does not start with the Composite's shape.
        RuntimeError: when an entry is on another device than the Composite's.
        AttributeError: for an entry named ``shape``, ``device``, ``dtype`` or ``space`` (so
            ``Composite(..., dtype=...)`` raises, as in TorchRL), or an entry that is not a spec (the
            error is also a ``TypeError``).

    Examples:
        >>> from torchrl.data import Bounded, Composite, Unbounded
        >>> spec = Composite(observation=Unbounded(3), shape=())
        >>> spec["agent", "action"] = Bounded(-1.0, 1.0, shape=(2,))
        >>> td = spec.rand()
        >>> td["agent", "action"].shape, spec.is_in(td)
        (torch.Size([2]), True)
        >>> sorted(spec.keys(include_nested=True, leaves_only=True), key=str)
        [('agent', 'action'), 'observation']
    """

    _feature_ndim = 0

    def __init__(
        self,
        *args: Any,
        shape: torch.Size | None = None,
        device: DEVICE_TYPING | None = None,
        data_cls: type | None = None,
        step_mdp_static: bool = False,
        names: Sequence[str | None] | str | None = None,
        **kwargs: Any,
    ) -> None:
        batch_size = kwargs.pop("batch_size", None)
        if shape is not None and batch_size is not None and _size(shape) != _size(batch_size):
            raise ValueError(f"Composite: got shape={tuple(shape)} and batch_size={tuple(batch_size)}; pass only one.")
        if len(args) > 1:
            raise _ArgumentsError(f"Composite takes at most one positional argument (a mapping of specs), got {len(args)}.")
        self._shape = _size(shape if shape is not None else batch_size)
        self._device = _device(device)
        self._specs: dict[str, TensorSpec | None] = {}
        self._locked = False
        self._names: list[str | None] | None = None if names is None else ([names] if isinstance(names, str) else list(names))
        self.data_cls = data_cls
        self.step_mdp_static = step_mdp_static
        self.space = None
        self.dtype = None
        self.domain = "composite"
        self._encode_memo_dict: dict = {}
        self._memoize = False
        if args:
            source = args[0]
            if source is not None:
                for key, value in source.items():
                    self[key] = value
        for key, value in kwargs.items():
            self[key] = value

    def _like(self, specs: dict, shape: torch.Size, device: Any = NO_DEFAULT) -> Composite:
        """A Composite with this one's settings and the given (already valid) entries."""
        out = object.__new__(Composite)
        out.__dict__.update(self.__dict__)
        out._specs = specs
        out._shape = shape
        out._locked = False
        out._encode_memo_dict = {}
        out._names = self._names if shape == self._shape else None
        if device is not NO_DEFAULT:
            out._device = device
        return out

    # ------------------------------------------------------------------ shape / device
    @property
    def shape(self) -> torch.Size:
        return self._shape

    @shape.setter
    def shape(self, value: Sequence[int]) -> None:
        if self._locked:
            raise RuntimeError("Cannot change the shape of a locked Composite; call unlock_() first.")
        value = _size(value)
        for key, spec in self._specs.items():
            if spec is not None and not _starts_with(spec.shape, value):
                raise ValueError(
                    f"Composite: cannot set shape {value}: key {key!r} has shape {spec.shape}, which does not start with it."
                )
        self._shape = value
        if self._names is not None and len(self._names) != len(value):
            self._names = None

    @property
    def batch_size(self) -> torch.Size:
        return self._shape

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        self.shape = value

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def ndimension(self) -> int:
        return len(self._shape)

    @property
    def device(self) -> torch.device | None:
        return self._device

    @device.setter
    def device(self, device: DEVICE_TYPING) -> None:
        device = _device(device)
        if device is None:
            raise _EraseDeviceError("To erase the device of a Composite, call clear_device_().")
        for key, spec in self.items(True, True):
            if spec is not None and spec.device is not None and spec.device != device:
                raise RuntimeError(
                    f"Composite: cannot set device {device}: key {_key_str(key)} is on {spec.device}; use spec.to({str(device)!r})."
                )
        for spec in self.values(True):
            if isinstance(spec, Composite):
                spec._device = device
        self._device = device

    def clear_device_(self) -> Composite:
        """Sets the device of this Composite and of its nested Composites to ``None``."""
        self._device = None
        for spec in self._specs.values():
            if isinstance(spec, Composite):
                spec.clear_device_()
        return self

    @property
    def names(self) -> list[str | None]:
        return list(self._names) if self._names is not None else [None] * self.ndim

    def refine_names(self, *names: str | None) -> Composite:
        """Names the dims of the Composite (the names are given to the TensorDicts it generates)."""
        if len(names) == 1 and isinstance(names[0], (list, tuple)):
            names = tuple(names[0])
        if len(names) != self.ndim:
            raise _NamesError(f"Composite.refine_names: got {len(names)} names for {self.ndim} dims.")
        if self._names is not None:
            for old, new in zip(self._names, names):
                if old is not None and new is not None and old != new:
                    raise RuntimeError(
                        f"refine_names: cannot coerce Composite names {self._names} with {tuple(names)}: a named dim "
                        "keeps its name."
                    )
            names = [new if new is not None else old for old, new in zip(self._names, names)]
        self._names = list(names)
        return self

    # ------------------------------------------------------------------ locking
    @property
    def is_locked(self) -> bool:
        return self._locked

    @property
    def locked(self) -> bool:
        return self._locked

    def lock_(self, recurse: bool | None = None) -> None:
        """Locks the Composite (and, unless ``recurse=False``, its nested Composites) against edits."""
        self._locked = True
        if recurse is None or recurse:
            for spec in self._specs.values():
                if isinstance(spec, Composite):
                    spec.lock_(recurse)
        return self

    def unlock_(self, recurse: bool | None = None) -> Composite:
        """Unlocks the Composite (and, unless ``recurse=False``, its nested Composites)."""
        self._locked = False
        if recurse is None or recurse:
            for spec in self._specs.values():
                if isinstance(spec, Composite):
                    spec.unlock_(recurse)
        return self

    def _check_unlocked(self, key: Any, action: str) -> None:
        if self._locked:
            raise RuntimeError(f"Cannot {action} key {_key_str(key)}: the Composite is locked; call unlock_() first.")

    # ------------------------------------------------------------------ mapping interface
    def _missing(self, full: tuple, depth: int, level: Composite) -> KeyError:
        where = "" if depth == 0 else f" under {_key_str(full[:depth])}"
        return KeyError(
            f"key {_key_str(_public(full))} not found in Composite; available keys{where}: {list(level._specs)}"
        )

    def _walk(self, key: tuple[str, ...]) -> TensorSpec | None:
        cur: Any = self
        for depth, k in enumerate(key):
            if not isinstance(cur, Composite):
                raise _NotACompositeKeyError(
                    f"key {_key_str(_public(key))} not found in Composite: {_key_str(_public(key[:depth]))} is a "
                    f"{type(cur).__name__}, not a Composite."
                )
            try:
                cur = cur._specs[k]
            except KeyError:
                raise self._missing(key, depth, cur) from None
        return cur

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, str):
            try:
                return self._specs[idx]
            except KeyError:
                raise self._missing((idx,), 0, self) from None
        if _is_key(idx):
            return self._walk(_as_tuple(idx))
        return self._index(idx)

    def get(self, item: Any, default: Any = NO_DEFAULT) -> Any:
        """The entry at ``item``, or ``default`` when it is missing (``KeyError`` without a default)."""
        try:
            return self[item]
        except KeyError:
            if default is NO_DEFAULT:
                raise
            return default

    def __setitem__(self, key: Any, value: Any) -> None:
        if not _is_key(key):
            raise TypeError(f"Composite keys are strings or tuples of strings, got {key!r}.")
        key = _as_tuple(key)
        cur = self
        detached = None  # the first missing level: attached only once the leaf is accepted
        for depth, k in enumerate(key[:-1]):
            sub = cur._specs.get(k)
            if sub is None:
                cur._check_unlocked(key, "set")
                sub = Composite(shape=cur._shape, device=cur._device)
                if detached is None:
                    detached = (cur, k, sub)
                else:
                    cur._specs[k] = sub
            elif not isinstance(sub, Composite):
                raise _NotACompositeError(
                    f"Composite: cannot set key {_key_str(key)}: {_key_str(_public(key[: depth + 1]))} is a "
                    f"{type(sub).__name__}, not a Composite."
                )
            elif type(sub).__setitem__ is not Composite.__setitem__:  # e.g. a StackedComposite
                sub[key[depth + 1 :]] = value
                return
            cur = sub
        cur._set_entry(key, value)
        if detached is not None:
            parent, k, sub = detached
            parent._specs[k] = sub

    def _set_entry(self, full: tuple[str, ...], value: Any) -> None:
        self._check_unlocked(_public(full), "set")
        if full[-1] in _RESERVED_KEYS:
            raise AttributeError(
                f"Composite[{full[-1]}] cannot be set: {full[-1]!r} is an attribute of Composite, not an entry name "
                f"(key {_key_str(_public(full))}). Rename the entry; to name dims pass names=[...]."
            )
        if isinstance(value, dict):
            value = Composite(value, shape=self._shape, device=self._device)
        if value is not None:
            if not isinstance(value, TensorSpec):
                raise _NotASpecError(
                    f"Composite: key {_key_str(_public(full))} must be a TensorSpec, got {type(value).__name__}."
                )
            if not _starts_with(value.shape, self._shape):
                raise ValueError(
                    f"Composite: key {_key_str(_public(full))} has shape {value.shape}, which does not start with "
                    f"the Composite's shape {self._shape}."
                )
            if self._device is not None and value.device is not None and value.device != self._device:
                raise RuntimeError(
                    f"Composite: key {_key_str(_public(full))} is on device {value.device} but the Composite is on "
                    f"{self._device}; move it first with spec.to({str(self._device)!r}) or build the Composite with device=None."
                )
            if self._device is not None and isinstance(value, Composite) and value.device is None:
                value = value.clone().to(self._device)
        self._specs[full[-1]] = value

    def set(self, name: str, spec: TensorSpec) -> Composite:
        """Sets ``spec`` at ``name`` (a string or nested key) and returns ``self``."""
        self[name] = spec
        return self

    def __delitem__(self, key: Any) -> None:
        key = _as_tuple(key)
        parent = self._walk(key[:-1]) if len(key) > 1 else self
        if isinstance(parent, Composite) and type(parent).__delitem__ is not Composite.__delitem__:
            del parent[key[-1]]
            return
        if not isinstance(parent, Composite) or key[-1] not in parent._specs:
            raise self._missing(key, len(key) - 1, parent if isinstance(parent, Composite) else self)
        parent._check_unlocked(_public(key), "delete")
        del parent._specs[key[-1]]

    def pop(self, key: Any, default: Any = NO_DEFAULT) -> Any:
        """Removes and returns the entry at ``key`` (``default`` when missing, if given)."""
        try:
            value = self[key]
        except KeyError:
            if default is NO_DEFAULT:
                raise
            return default
        del self[key]
        return value

    def __contains__(self, key: Any) -> bool:
        if isinstance(key, str):
            return key in self._specs
        if not _is_key(key):
            return False
        cur: Any = self
        for k in _as_tuple(key):
            if not isinstance(cur, Composite) or k not in cur._specs:
                return False
            cur = cur._specs[k]
        return True

    def __iter__(self):
        return iter(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def _iter_items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        is_leaf: Callable[[type], bool] | None = None,
        step_mdp_static_only: bool = False,
        prefix: tuple[str, ...] = (),
    ):
        # As TorchRL: nested entries come before their parent; with step_mdp_static_only a Composite marked
        # step_mdp_static is a leaf (not entered); is_leaf only says which entries leaves_only keeps.
        is_leaf = is_leaf or _default_is_leaf
        for k, v in self._specs.items():
            full = (*prefix, k)
            key = full if prefix else k
            static = step_mdp_static_only and isinstance(v, Composite) and v.step_mdp_static
            if include_nested and isinstance(v, Composite) and not static:
                yield from v._iter_items(include_nested, leaves_only, is_leaf, step_mdp_static_only, full)
            if not leaves_only or v is None or static or is_leaf(type(v)):
                yield key, v

    def keys(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        *,
        is_leaf: Callable[[type], bool] | None = None,
        step_mdp_static_only: bool = False,
    ) -> _CompositeSpecKeysView:
        """The keys (tuples for nested entries when ``include_nested``; only leaves when ``leaves_only``)."""
        return _CompositeSpecKeysView(self, include_nested, leaves_only, is_leaf, step_mdp_static_only)

    def items(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        *,
        is_leaf: Callable[[type], bool] | None = None,
        step_mdp_static_only: bool = False,
    ) -> _CompositeSpecItemsView:
        """``(key, spec)`` pairs, with the same options as :meth:`keys`."""
        return _CompositeSpecItemsView(self, include_nested, leaves_only, is_leaf, step_mdp_static_only)

    def values(
        self,
        include_nested: bool = False,
        leaves_only: bool = False,
        *,
        is_leaf: Callable[[type], bool] | None = None,
        step_mdp_static_only: bool = False,
    ) -> _CompositeSpecValuesView:
        """The specs, with the same options as :meth:`keys`."""
        return _CompositeSpecValuesView(self, include_nested, leaves_only, is_leaf, step_mdp_static_only)

    def update(self, dict_or_spec: Composite | dict[str, TensorSpec]) -> None:
        """Sets every entry of ``dict_or_spec``; nested Composites are updated rather than replaced."""
        for key, item in dict_or_spec.items():
            current = self.get(key, None)
            if isinstance(current, Composite) and isinstance(item, Composite) and type(current) is Composite:
                current.update(item)
            else:
                self[key] = item
        return self

    def select(self, *keys: Any, strict: bool = True) -> Composite:
        """A Composite with only ``keys`` (nested keys allowed); missing keys raise unless ``strict=False``."""
        out = self.empty()
        for key in keys:
            if key in self:
                out[key] = self[key]
            elif strict:
                self[key]  # raises the KeyError listing available keys
        return out

    def exclude(self, *keys: Any) -> Composite:
        """A Composite without ``keys`` (``self`` is left untouched)."""
        out = self._like(dict(self._specs), self._shape)
        for key in keys:
            key = _as_tuple(key)
            cur = out
            for k in key[:-1]:
                sub = cur._specs.get(k)
                if not isinstance(sub, Composite):
                    cur = None
                    break
                sub = sub._like(dict(sub._specs), sub._shape)
                cur._specs[k] = sub
                cur = sub
            if cur is not None:
                cur._specs.pop(key[-1], None)
        return out

    def separates(self, *keys: Any, default: Any = None) -> Composite:
        """Moves ``keys`` out of ``self`` into a new Composite (``default`` when none of them is present)."""
        out = self.empty()
        found = False
        for key in keys:
            if key in self:
                out[key] = self.pop(key)
                found = True
        return out if found else default

    def empty(self) -> Composite:
        """A Composite with the same shape, device and settings, and no entries."""
        return self._like({}, self._shape)

    def is_empty(self, recurse: bool = False) -> bool:
        """``True`` without entries (with ``recurse``: when every entry is an empty Composite)."""
        if not recurse:
            return not self._specs
        return all(isinstance(v, Composite) and v.is_empty(True) for v in self._specs.values())

    # ------------------------------------------------------------------ data generation (hot path)
    def _build(self, source: dict, shape: Any) -> TensorDictBase:
        batch = self._shape if not shape else torch.Size((*((shape,) if isinstance(shape, int) else shape), *self._shape))
        names = self._names
        if names is not None and len(names) != len(batch):
            raise ValueError(
                f"Composite: the dim names {names} do not match the {len(batch)} batch dims {tuple(batch)} of the "
                "TensorDict to generate; generate with the Composite's own shape, or expand it first."
            )
        if names is None:
            td = new_td(source, batch, self._device)
        else:  # rare: named dims go through the public constructor
            td = TensorDict(source, batch_size=batch, device=self._device, names=names)
        if self.data_cls is not None:
            return self.data_cls.from_tensordict(td)
        return td

    def rand(self, shape: torch.Size = None) -> TensorDictBase:
        """A TensorDict of random values with ``batch_size = shape + self.shape``."""
        return self._build({k: v.rand(shape) for k, v in self._specs.items() if v is not None}, shape)

    def zero(self, shape: torch.Size = None) -> TensorDictBase:
        """A TensorDict of zeros with ``batch_size = shape + self.shape``."""
        return self._build({k: v.zero(shape) for k, v in self._specs.items() if v is not None}, shape)

    def one(self, shape: torch.Size = None) -> TensorDictBase:
        """A TensorDict of ones with ``batch_size = shape + self.shape``."""
        return self._build({k: v.one(shape) for k, v in self._specs.items() if v is not None}, shape)

    def _leading(self, val: TensorDictBase) -> torch.Size:
        return val.batch_size[: len(val.batch_size) - self.ndim]

    def rand_update(self, val: TensorDictBase) -> TensorDictBase:
        """Writes random values for every entry into ``val`` and returns it."""
        return val.update(self.rand(self._leading(val)))

    def zeros_update(self, val: TensorDictBase) -> TensorDictBase:
        """Writes zeros for every entry into ``val`` and returns it."""
        return val.update(self.zero(self._leading(val)))

    def ones_update(self, val: TensorDictBase) -> TensorDictBase:
        """Writes ones for every entry into ``val`` and returns it."""
        return val.update(self.one(self._leading(val)))

    # ------------------------------------------------------------------ checks and conversions
    def is_in(self, val: dict | TensorDictBase) -> bool:
        for key, spec in self._specs.items():
            if spec is None:
                continue
            item = val.get(key, None)
            if item is None:
                if isinstance(spec, Composite) and spec.is_empty(True):
                    continue
                return False
            if not spec.is_in(item):
                return False
        return True

    def _explain(self, val: Any, key: Any = None) -> str:
        prefix = _as_tuple(key) if key is not None else ()
        for k, spec in self._specs.items():
            if spec is None:
                continue
            full = (*prefix, k)
            item = val.get(k, None)
            if item is None:
                if isinstance(spec, Composite) and spec.is_empty(True):
                    continue
                return f"Composite: key {_key_str(_public(full))} is missing from the value; present keys: {list(val.keys())}."
            if not spec.is_in(item):
                return spec._explain(item, key=_public(full))
        return "Composite: the value is not in the spec."

    def project(self, val: TensorDictBase) -> TensorDictBase:
        """Projects every entry of ``val`` onto its spec (in place) and returns ``val``."""
        for key, spec in self._specs.items():
            if spec is None:
                continue
            item = val.get(key, None)
            if item is not None:
                val.set(key, spec.project(item))
        return val

    def type_check(self, value: torch.Tensor | TensorDictBase, selected_keys: str | Sequence[str] | None = None):
        """Checks dtypes: of ``value`` against ``self[selected_keys]`` for a tensor, of every entry for a TensorDict."""
        if isinstance(value, torch.Tensor):
            if selected_keys is None or not _is_key(selected_keys):
                raise TypeError("Composite.type_check: pass the key of the tensor as selected_keys.")
            self[selected_keys].type_check(value, selected_keys)
            return
        keys = list(self._specs) if selected_keys is None else ([selected_keys] if _is_key(selected_keys) else selected_keys)
        for key in keys:
            spec = self[key]
            if spec is None:
                continue
            item = value.get(key, None)
            if item is None:
                continue
            if isinstance(spec, Composite):
                spec.type_check(item)
            else:
                spec.type_check(item, key)

    def encode(self, vals: dict[str, Any], *, ignore_device: bool = False) -> TensorDictBase:
        """A TensorDict of the encoded entries of ``vals`` (a mapping of numpy arrays, numbers, tensors)."""
        if isinstance(vals, TensorDictBase):
            return vals
        out = {}
        for key, item in vals.items():
            spec = self[key]
            if spec is None:
                raise KeyError(f"Composite.encode: key {_key_str(key)} has no spec (it is None); cannot encode it.")
            out[key] = spec.encode(item, ignore_device=ignore_device)
        return TensorDict(out, batch_size=self._shape, device=None if ignore_device else self._device)

    def to_numpy(self, val: TensorDict, safe: bool | None = None) -> dict:
        """A (nested) dict of numpy arrays."""
        if safe:
            self.assert_is_in(val)
        return {k: spec.to_numpy(val.get(k)) for k, spec in self._specs.items() if spec is not None and k in val.keys()}

    def index(self, index: INDEX_TYPING, tensor_to_index: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        """Not implemented for Composites (as in TorchRL): index with the leaf specs."""
        raise NotImplementedError("`index` is not implemented for Composite specs; use the leaf specs' index.")

    def cardinality(self) -> int:
        total = 1
        for spec in self.values(True, True):
            if spec is not None:
                total *= spec.cardinality()
        return total

    def enumerate(self, use_mask: bool = False) -> TensorDictBase:
        """Every combination of the leaves' values, stacked along a new leading dim of a TensorDict."""
        leaves = [(k, v.enumerate(use_mask)) for k, v in self.items(True, True) if v is not None]
        counts = [len(e) for _, e in leaves]
        axes = [torch.arange(c) for c in counts]
        grid = torch.cartesian_prod(*axes) if len(axes) > 1 else (axes[0].unsqueeze(-1) if axes else None)
        n = grid.shape[0] if grid is not None else 1
        out = TensorDict({}, batch_size=(n, *self._shape), device=self._device)
        for i, (key, values) in enumerate(leaves):
            out.set(key, values[grid[:, i]])
        return out

    # ------------------------------------------------------------------ shape ops
    def _index(self, idx: Any) -> Composite:
        idx = _norm_index(idx, self.ndim)
        try:
            shape = _indexed_shape(self._shape, idx)
        except IndexError as err:
            raise IndexError(f"Composite: {err}") from None
        return self._like({k: (v[idx] if v is not None else None) for k, v in self._specs.items()}, shape)

    def expand(self, *shape: tuple[int, ...] | torch.Size) -> Composite:
        new = _expand_shape(self, _shape_args(shape))  # -1 makes a dim dynamic, as for leaves
        old = self._shape
        off = len(new) - len(old)
        nd = len(old)
        specs = {k: (v.expand(*new, *v.shape[nd:]) if v is not None else None) for k, v in self._specs.items()}
        out = self._like(specs, new)
        if self._names is not None:
            out._names = [None] * off + list(self._names)
        return out

    def squeeze(self, dim: int | None = None) -> Composite:
        if dim is None:
            out = self
            for d in reversed(range(self.ndim)):
                if self._shape[d] == 1:
                    out = out.squeeze(d)
            return out
        d = _neg_dim(dim, self.ndim)
        if self._shape[d] != 1:
            return self
        shape = torch.Size((*self._shape[:d], *self._shape[d + 1 :]))
        out = self._like({k: (v.squeeze(d) if v is not None else None) for k, v in self._specs.items()}, shape)
        if self._names is not None and len(self._names) == self.ndim:
            out._names = self._names[:d] + self._names[d + 1 :]
        return out

    def unsqueeze(self, dim: int) -> Composite:
        d = dim if dim >= 0 else dim + self.ndim + 1
        if not 0 <= d <= self.ndim:
            raise ValueError(f"Composite.unsqueeze: dim {dim} is out of range for shape {self._shape}.")
        shape = torch.Size((*self._shape[:d], 1, *self._shape[d:]))
        out = self._like({k: (v.unsqueeze(d) if v is not None else None) for k, v in self._specs.items()}, shape)
        if self._names is not None and len(self._names) == self.ndim:
            out._names = self._names[:d] + [None] + self._names[d:]
        return out

    def reshape(self, *shape) -> Composite:
        new = list(_shape_args(shape))
        if new.count(-1) == 1:
            known = 1
            for s in new:
                if s != -1:
                    known *= s
            new[new.index(-1)] = self._shape.numel() // max(known, 1)
        new = torch.Size(new)
        if new.numel() != self._shape.numel():
            raise ValueError(f"Composite.reshape: cannot reshape {self._shape} into {new}.")
        nd = self.ndim
        return self._like({k: (v.reshape(*new, *v.shape[nd:]) if v is not None else None) for k, v in self._specs.items()}, new)

    def unbind(self, dim: int = 0) -> tuple[Composite, ...]:
        d = _neg_dim(dim, self.ndim)
        pre = (slice(None),) * d
        return tuple(self._index(pre + (i,)) for i in range(self._shape[d]))

    def make_neg_dim(self, dim: int) -> None:
        """Makes dim ``dim`` of the Composite and of every entry dynamic (``-1``), in place."""
        d = _neg_dim(dim, self.ndim)
        for v in self._specs.values():
            if v is not None:
                v.make_neg_dim(d)
        shape = list(self._shape)
        shape[d] = -1
        self._shape = torch.Size(shape)

    # ------------------------------------------------------------------ copies / devices
    def to(self, dest: torch.dtype | DEVICE_TYPING) -> Composite:
        if isinstance(dest, torch.dtype):
            return self._like({k: (v.to(dest) if v is not None else None) for k, v in self._specs.items()}, self._shape)
        dest = _device(dest)
        if dest is not None and dest == self._device:
            return self
        specs = {k: (v.to(dest) if v is not None else None) for k, v in self._specs.items()}
        return self._like(specs, self._shape, device=dest)

    def clone(self) -> Composite:
        """A deep copy (not locked, even when ``self`` is)."""
        return self._like({k: (v.clone() if v is not None else None) for k, v in self._specs.items()}, self._shape)

    def __eq__(self, other: Any) -> bool:
        if type(self) is not type(other):
            return False
        if self._shape != other._shape or self._device != other._device:
            return False
        if self._specs.keys() != other._specs.keys():
            return False
        return all(v == other._specs[k] for k, v in self._specs.items())

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        entries = [f"{k}: {v!r}" for k, v in self._specs.items()]
        tail = [f"device={self._device}", f"shape={self._shape}", f"data_cls={getattr(self.data_cls, '__name__', None)}"]
        body = ",\n".join(entries + tail)
        return f"{type(self).__name__}(\n{_indent(body)})"
