"""Leaf-level view of a preallocated TensorDict: validated writes and gathers with one index op per leaf.

``TensorDict.__setitem__``/``__getitem__`` are general and therefore slow on the replay-buffer hot path
(key resolution, batch-size checks and new-instance construction on every call). A ``Layout`` walks the
storage once and remembers its leaves, their trailing shapes and the nested structure, so that a write
is "check every source leaf, then ``dst[idx] = src``" and a read is "``leaf[idx]`` for every leaf, then
build the result tensordict without re-validation".
"""
from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import entries, new_td
from torchrl.data.replay_buffers._utils import _key_str, to_device

# keys written by the buffers themselves: present in sampled data, never part of the stored content
IGNORED_KEYS = frozenset({"index", "priority_weight", "index_generation", "buffer_ids"})


def _broadcasts(value_shape: torch.Size, target: torch.Size) -> bool:
    """Whether ``dst[index] = value`` broadcasts ``value_shape`` to ``target`` (leading 1s are dropped)."""
    shape = list(value_shape)
    while len(shape) > len(target) and shape[0] == 1:
        shape.pop(0)
    if len(shape) > len(target):
        return False
    return all(v == t or v == 1 for v, t in zip(reversed(shape), reversed(target)))


def check_leaf(
    what: str, value: torch.Tensor, trailing: torch.Size, dtype: torch.dtype, batch_ndim: int, where: str, *,
    strict_dtype: bool, check: bool,
) -> None:
    """Raises ``RuntimeError`` if ``value`` cannot be written where the storage holds ``trailing``/``dtype``.

    Without ``check`` (check mode), a per-element shape that broadcasts to ``trailing`` passes, and so does
    a dtype that differs when ``strict_dtype`` is off (it is cast on write), as in TorchRL.
    """
    got = value.shape[batch_ndim:]
    suffix = " (check mode)" if check else ""
    if got != trailing and (check or not _broadcasts(value.shape, value.shape[:batch_ndim] + trailing)):
        raise RuntimeError(
            f"{where}: {what} has per-element shape {tuple(got)} (full shape {tuple(value.shape)}), but "
            f"the storage holds elements of shape {tuple(trailing)} there{suffix}. The buffer's content "
            "was not modified."
        )
    if value.dtype != dtype and (strict_dtype or check):
        raise RuntimeError(
            f"{where}: {what} has dtype {value.dtype}, but the storage holds {dtype} there{suffix}; "
            f"convert the data first (e.g. .to({dtype})). The buffer's content was not modified."
        )


class _Node:
    __slots__ = ("names", "children", "trailing")

    def __init__(self, trailing: torch.Size):
        self.names: list[str] = []
        self.children: list[int | _Node] = []  # leaf position or sub-node
        self.trailing = trailing  # batch dims of this sub-tensordict beyond the root batch dims


class Layout:
    """The leaves of a plain (possibly nested) ``TensorDict`` whose first ``ndim`` dims are storage dims."""

    def __init__(self, storage: TensorDict, ndim: int, where: str = "TensorStorage.set"):
        self.ndim = ndim
        self.where = where  # names the writer in error messages
        self.device = storage.device
        # the storage's device when it is not the CPU: writes from other devices are copied there first
        self.accelerator = storage.device if storage.device is not None and storage.device.type != "cpu" else None
        self.keys: list[tuple[str, ...]] = []
        self.leaves: list[torch.Tensor] = []
        self.trailing_shapes: list[torch.Size] = []
        self.dtypes: list[torch.dtype] = []
        self.root = self._walk(storage, (), ndim)
        self.positions = {key: i for i, key in enumerate(self.keys)}
        self.key_count = len(self.keys)

    @staticmethod
    def supports(storage: Any) -> bool:
        """Whether ``storage`` is made only of plain ``TensorDict`` nodes and tensor leaves."""
        if type(storage) is not TensorDict:
            return False
        for value in storage.values():
            if type(value) is TensorDict:
                if not Layout.supports(value):
                    return False
            elif not isinstance(value, torch.Tensor) or isinstance(value, TensorDictBase):
                return False
        return True

    def _walk(self, td: TensorDict, prefix: tuple[str, ...], root_ndim: int) -> _Node:
        node = _Node(td.batch_size[root_ndim:])
        for name, value in td.items():
            node.names.append(name)
            if type(value) is TensorDict:
                node.children.append(self._walk(value, prefix + (name,), root_ndim))
            else:
                node.children.append(len(self.leaves))
                self.keys.append(prefix + (name,))
                # plain-tensor views make indexing memory-mapped tensors as cheap as in-memory ones
                self.leaves.append(value.as_subclass(torch.Tensor) if type(value) is not torch.Tensor else value)
                self.trailing_shapes.append(value.shape[root_ndim:])
                self.dtypes.append(value.dtype)
        return node

    # ------------------------------------------------------------------ writes
    def sources(self, data: Any, batch_ndim: int, strict_dtype: bool = True, check: bool = False) -> list[torch.Tensor]:
        """The tensors of ``data`` in storage-leaf order, after checking keys, shapes and dtypes.

        ``batch_ndim`` is the number of leading dims of ``data`` that index storage positions. As in
        TorchRL, a per-element shape that broadcasts to the stored one is accepted, and a dtype that differs
        from the stored one is cast unless ``strict_dtype`` (batched writes); with ``check=True`` (check
        mode) shapes and dtypes must match exactly. Raises ``KeyError`` (missing or unexpected key),
        ``TypeError`` (not a tensor) or ``RuntimeError`` (shape, dtype) naming the full key.
        """
        out: list[torch.Tensor | None] = [None] * self.key_count
        if check:
            strict_dtype = True
        if entries(data) is not None:  # a plain TensorDict, fast paths on: walk its entry dicts
            self._collect(data, self.root, (), batch_ndim, out, strict_dtype, check)
        else:
            where = self.where
            if not isinstance(data, TensorDictBase):
                data = getattr(data, "_tensordict", data)
            if not isinstance(data, TensorDictBase):
                raise TypeError(f"{where}: expected a TensorDict, got {type(data).__name__}.")
            extra = []
            for key, value in data.items(True, True):
                key = (key,) if isinstance(key, str) else key
                pos = self.positions.get(key)
                if pos is None:
                    if key[0] not in IGNORED_KEYS:
                        extra.append(key)
                    continue
                self._check_leaf(key, value, pos, batch_ndim, strict_dtype, check)
                out[pos] = value
            missing = [self.keys[i] for i, v in enumerate(out) if v is None]
            if missing or extra:
                raise KeyError(self._key_message(where, missing, extra))
        return out

    def _collect(
        self, td: TensorDict, node: _Node, prefix: tuple, batch_ndim: int, out: list, strict_dtype: bool, check: bool
    ) -> None:
        src = entries(td)
        found = 0
        trailing = self.trailing_shapes
        dtypes = self.dtypes
        for name, child in zip(node.names, node.children):
            value = src.get(name)
            if value is None:
                continue
            found += 1
            if type(child) is int:
                if (
                    type(value) is not torch.Tensor
                    or value.shape[batch_ndim:] != trailing[child]
                    or (strict_dtype and value.dtype is not dtypes[child])
                ):
                    self._check_leaf(prefix + (name,), value, child, batch_ndim, strict_dtype, check)
                out[child] = value
            else:
                if type(value) is not TensorDict:
                    value = getattr(value, "_tensordict", value)  # a tensorclass's content
                    if type(value) is not TensorDict:
                        raise KeyError(
                            f"{self.where}: key {_key_str(prefix + (name,))} holds a {type(value).__name__}, "
                            "but the storage expects a sub-tensordict there."
                        )
                self._collect(value, child, prefix + (name,), batch_ndim, out, strict_dtype, check)
        if found != len(src) or found != len(node.names):
            missing, extra = self._diff(td, node, prefix)
            if missing or extra:
                raise KeyError(self._key_message(self.where, missing, extra))

    def _diff(self, td: TensorDict, node: _Node, prefix: tuple) -> tuple[list, list]:
        names = list(td.keys())
        missing = [prefix + (n,) for n in node.names if n not in names]
        extra = [prefix + (n,) for n in names if n not in node.names and not (not prefix and n in IGNORED_KEYS)]
        return missing, extra

    def _check_leaf(
        self, key: tuple, value: Any, pos: int, batch_ndim: int, strict_dtype: bool, check: bool
    ) -> None:
        """The slow path of the per-leaf check (only reached when something differs from the storage)."""
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{self.where}: key {_key_str(key)} holds a {type(value).__name__}, expected a tensor.")
        check_leaf(
            f"key {_key_str(key)}", value, self.trailing_shapes[pos], self.dtypes[pos], batch_ndim, self.where,
            strict_dtype=strict_dtype, check=check,
        )

    @staticmethod
    def _key_message(where: str, missing: list, extra: list) -> str:
        parts = []
        if missing:
            parts.append("missing keys " + ", ".join(_key_str(k) for k in missing))
        if extra:
            parts.append("unexpected keys " + ", ".join(_key_str(k) for k in extra))
        return (
            f"{where}: the data's keys differ from the storage's: {' and '.join(parts)}. Every write must "
            "carry exactly the keys of the first write (or empty() the buffer to change its layout). The "
            "buffer's content was not modified."
        )

    def write(self, cursor: Any, sources: list[torch.Tensor]) -> None:
        """``leaf[cursor] = source`` for every leaf; ``cursor``'s tensors must be on the storage's device.

        On an accelerator, sources from another device are first copied without blocking the host (a plain
        cross-device ``dst[cursor] = src`` is a blocking copy, which waits for every queued kernel).
        """
        device = self.accelerator
        if device is None:
            for dst, src in zip(self.leaves, sources):
                dst[cursor] = src
        else:
            for dst, src in zip(self.leaves, sources):
                dst[cursor] = to_device(src, device)

    # ------------------------------------------------------------------ reads
    def gather(self, index: Any) -> TensorDict:
        """``storage[index]`` as a new ``TensorDict`` (one index op per leaf, no re-validation)."""
        if type(index) is tuple and len(index) == 1:  # (slice samplers index as ``(idx,)``)
            index = index[0]
        if type(index) is torch.Tensor and index.ndim == 1 and index.dtype == torch.long:
            # index_select is cheaper than advanced indexing for the common 1-d index
            gathered = [leaf.index_select(0, index) for leaf in self.leaves]
        else:
            gathered = [leaf[index] for leaf in self.leaves]
        first = gathered[0]
        lead = first.shape[: first.ndim - len(self.trailing_shapes[0])]
        return self._build(self.root, gathered, lead)

    def _build(self, node: _Node, gathered: list, lead: torch.Size) -> TensorDict:
        src = {}
        for name, child in zip(node.names, node.children):
            src[name] = self._build(child, gathered, lead) if isinstance(child, _Node) else gathered[child]
        return new_td(src, lead + node.trailing, self.device, convert_dicts=False)
