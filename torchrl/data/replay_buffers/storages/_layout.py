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

from torchrl.data.replay_buffers._utils import _key_str

# keys written by the buffers themselves: present in sampled data, never part of the stored content
IGNORED_KEYS = frozenset({"index", "priority_weight", "index_generation", "buffer_ids"})


class _Node:
    __slots__ = ("names", "children", "trailing")

    def __init__(self, trailing: torch.Size):
        self.names: list[str] = []
        self.children: list[int | _Node] = []  # leaf position or sub-node
        self.trailing = trailing  # batch dims of this sub-tensordict beyond the root batch dims


class Layout:
    """The leaves of a plain (possibly nested) ``TensorDict`` whose first ``ndim`` dims are storage dims."""

    def __init__(self, storage: TensorDict, ndim: int):
        self.ndim = ndim
        self.device = storage.device
        self.keys: list[tuple[str, ...]] = []
        self.leaves: list[torch.Tensor] = []
        self.trailing_shapes: list[torch.Size] = []
        self.root = self._walk(storage, (), ndim)
        self.positions = {key: i for i, key in enumerate(self.keys)}
        self.key_count = len(self.keys)

    @staticmethod
    def supports(storage: Any) -> bool:
        """Whether ``storage`` is made only of plain ``TensorDict`` nodes and tensor leaves."""
        if type(storage) is not TensorDict:
            return False
        for value in storage._tensordict.values():
            if type(value) is TensorDict:
                if not Layout.supports(value):
                    return False
            elif not isinstance(value, torch.Tensor) or isinstance(value, TensorDictBase):
                return False
        return True

    def _walk(self, td: TensorDict, prefix: tuple[str, ...], root_ndim: int) -> _Node:
        node = _Node(td.batch_size[root_ndim:])
        for name, value in td._tensordict.items():
            node.names.append(name)
            if type(value) is TensorDict:
                node.children.append(self._walk(value, prefix + (name,), root_ndim))
            else:
                node.children.append(len(self.leaves))
                self.keys.append(prefix + (name,))
                # plain-tensor views make indexing memory-mapped tensors as cheap as in-memory ones
                self.leaves.append(value.as_subclass(torch.Tensor) if type(value) is not torch.Tensor else value)
                self.trailing_shapes.append(value.shape[root_ndim:])
        return node

    # ------------------------------------------------------------------ writes
    def sources(self, data: Any, batch_ndim: int, where: str) -> list[torch.Tensor]:
        """The tensors of ``data`` in storage-leaf order, after checking keys and shapes.

        ``batch_ndim`` is the number of leading dims of ``data`` that index storage positions. Raises
        ``KeyError`` (missing or unexpected key) or ``RuntimeError`` (shape) naming the full key.
        """
        out: list[torch.Tensor | None] = [None] * self.key_count
        if type(data) is TensorDict:
            self._collect(data, self.root, (), batch_ndim, out, where)
        else:
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
                self._check_shape(key, value, pos, batch_ndim, where)
                out[pos] = value
            missing = [self.keys[i] for i, v in enumerate(out) if v is None]
            if missing or extra:
                raise KeyError(self._key_message(where, missing, extra))
        return out

    def _collect(self, td: TensorDict, node: _Node, prefix: tuple, batch_ndim: int, out: list, where: str) -> None:
        src = td._tensordict
        found = 0
        trailing = self.trailing_shapes
        for name, child in zip(node.names, node.children):
            value = src.get(name)
            if value is None:
                continue
            found += 1
            if type(child) is int:
                if type(value) is not torch.Tensor or value.shape[batch_ndim:] != trailing[child]:
                    self._check_shape(prefix + (name,), value, child, batch_ndim, where)
                out[child] = value
            else:
                if type(value) is not TensorDict:
                    value = getattr(value, "_tensordict", value)
                    if type(value) is not TensorDict:
                        raise KeyError(
                            f"{where}: key {_key_str(prefix + (name,))} holds a {type(value).__name__}, "
                            "but the storage expects a sub-tensordict there."
                        )
                self._collect(value, child, prefix + (name,), batch_ndim, out, where)
        if found != len(src) or found != len(node.names):
            missing, extra = self._diff(td, node, prefix)
            if missing or extra:
                raise KeyError(self._key_message(where, missing, extra))

    def _diff(self, td: TensorDict, node: _Node, prefix: tuple) -> tuple[list, list]:
        missing = [prefix + (n,) for n in node.names if n not in td._tensordict]
        extra = [
            prefix + (n,) for n in td._tensordict if n not in node.names and not (not prefix and n in IGNORED_KEYS)
        ]
        return missing, extra

    def _check_shape(self, key: tuple, value: torch.Tensor, pos: int, batch_ndim: int, where: str) -> None:
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{where}: key {_key_str(key)} holds a {type(value).__name__}, expected a tensor.")
        if value.shape[batch_ndim:] != self.trailing_shapes[pos]:
            expected = tuple(self.trailing_shapes[pos])
            raise RuntimeError(
                f"{where}: key {_key_str(key)} has per-element shape {tuple(value.shape[batch_ndim:])} "
                f"(full shape {tuple(value.shape)}), but the storage holds elements of shape {expected} "
                "for that key. The buffer's content was not modified."
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
        for dst, src in zip(self.leaves, sources):
            dst[cursor] = src

    # ------------------------------------------------------------------ reads
    def gather(self, index: Any) -> TensorDict:
        """``storage[index]`` as a new ``TensorDict`` (one index op per leaf, no re-validation)."""
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
        return TensorDict._new_unsafe(source=src, batch_size=lead + node.trailing, device=self.device, nested=False)
