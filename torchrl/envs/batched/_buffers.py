"""Data layouts of batched envs: which leaves travel, how TensorDicts are rebuilt, where buffers live.

A :class:`Layout` is an ordered list of leaves (key, trailing shape, dtype) plus the shapes of the nested
TensorDicts that hold them. It is derived once from the specs and then used on every step to

- read the leaves of a TensorDict in a fixed order (:meth:`Layout.read`),
- build a TensorDict from a list of leaves without per-entry validation (:meth:`Layout.build`),
- size the shared buffers of a ``ParallelEnv`` (one tensor per leaf for all workers, in one
  :class:`~torchrl.envs._workers.SharedBlock`), whose rows each worker views once and writes in place.
"""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, new_td
from torchrl.data.tensor_specs import Composite

__all__ = ["Layout", "as_key"]


def as_key(key: tuple[str, ...]) -> NestedKey:
    """The fastest form of a key for :func:`~torchrl._fast.fast_get`: a string when not nested."""
    return key[0] if len(key) == 1 else key


def _tup(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


class Layout:
    """An ordered set of leaves of a batched env's data, and the structure that holds them.

    Args:
        specs: Composites (with the batched env's batch shape) whose leaves are collected, in order;
            a key present in several is kept once.
        batch_ndim: number of batch dims of the specs (the leading dims every leaf shares).
        extra: more leaves as ``(key, full shape, dtype)`` (e.g. reset masks, which have no spec).
    """

    def __init__(self, specs: Sequence[Composite], batch_ndim: int, extra: Sequence[tuple] = ()) -> None:
        self.keys: list[NestedKey] = []
        self.shapes: list[torch.Size] = []  # full shapes, batch included
        self.dtypes: list[torch.dtype] = []
        self.node_extra: dict[tuple[str, ...], torch.Size] = {}  # nested node -> dims beyond the batch
        seen: set[tuple[str, ...]] = set()
        for spec in specs:
            for key, leaf in spec.items(include_nested=True):
                tkey = _tup(key)
                if isinstance(leaf, Composite):
                    self.node_extra.setdefault(tkey, leaf.shape[batch_ndim:])
                    continue
                if leaf is None or tkey in seen or leaf.dtype is None:
                    continue
                seen.add(tkey)
                self._add(tkey, leaf.shape, leaf.dtype)
        for key, shape, dtype in extra:
            tkey = _tup(key)
            if tkey not in seen:
                seen.add(tkey)
                self._add(tkey, torch.Size(shape), dtype)
        self.batch_ndim = batch_ndim
        self._template = self._make_template()

    def _add(self, tkey: tuple[str, ...], shape: torch.Size, dtype: torch.dtype) -> None:
        self.keys.append(as_key(tkey))
        self.shapes.append(torch.Size(shape))
        self.dtypes.append(dtype)

    def _make_template(self) -> list:
        """``[(name, leaf index)]`` or ``[(name, (sub template, extra dims))]``, in first-seen order."""
        root: dict = {}
        for i, key in enumerate(self.keys):
            node = root
            tkey = _tup(key)
            for depth, part in enumerate(tkey[:-1]):
                node = node.setdefault(part, {"__extra__": self.node_extra.get(tkey[: depth + 1], torch.Size())})
            node[tkey[-1]] = i

        def convert(node: dict) -> list:
            out = []
            for name, value in node.items():
                if name == "__extra__":
                    continue
                if isinstance(value, dict):
                    out.append((name, (convert(value), value["__extra__"])))
                else:
                    out.append((name, value))
            return out

        return convert(root)

    def __len__(self) -> int:
        return len(self.keys)

    def index(self, key: NestedKey) -> int:
        return self.keys.index(as_key(_tup(key)))

    def read(self, td: TensorDictBase) -> list[torch.Tensor | None]:
        """The leaves of ``td`` in layout order (``None`` where absent)."""
        return [fast_get(td, key) for key in self.keys]

    def build(self, leaves: Sequence[torch.Tensor | None], batch: torch.Size, device=None) -> TensorDict:
        """A TensorDict over ``leaves`` (not copied; ``None`` leaves are left out) with batch size ``batch``."""
        return self._build(self._template, leaves, batch, device)

    def _build(self, template: list, leaves, batch: torch.Size, device) -> TensorDict:
        source = {}
        for name, entry in template:
            if type(entry) is int:
                value = leaves[entry]
                if value is not None:
                    source[name] = value
            else:
                sub, extra = entry
                source[name] = self._build(sub, leaves, torch.Size((*batch, *extra)) if extra else batch, device)
        return new_td(source, batch, device)

    def zeros(self, batch: torch.Size | None = None) -> list[torch.Tensor]:
        """Zero tensors with the layout's shapes (``batch`` replaces the batch dims when given)."""
        n = self.batch_ndim
        return [
            torch.zeros((*batch, *shape[n:]) if batch is not None else shape, dtype=dtype)
            for shape, dtype in zip(self.shapes, self.dtypes)
        ]
