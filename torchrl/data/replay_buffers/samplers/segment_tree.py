"""Pure-torch segment trees (sum and min), vectorised over batches of indices.

TorchRL ships these as a C++ extension; here a tree is a list of flat tensors, one per level, where every
node reduces ``branching`` consecutive children, up to a top level of at most ``top_size`` nodes that is
scanned whole. With the defaults (64, 16384) a million leaves need two levels, so an update of ``B``
leaves or a prefix-sum search for ``B`` values costs a handful of tensor operations per level, whatever
``B`` is:

- ``update(index, value)``: write the leaves, then recompute each ancestor level from its children with
  one gather + reduction + scatter (ancestors are recomputed, never patched with deltas, so float sums do
  not drift);
- ``scan_lower_bound(value)``: walk down from the root: at each level take the children of the current
  nodes (a ``[B, branching]`` gather), cumulate them, and ``searchsorted`` the remaining mass;
- ``query(start, end)``: reduce the partial blocks at the range edges level by level.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from torchrl.data.replay_buffers._utils import preallocate_zeros


def _sum_last(x: torch.Tensor) -> torch.Tensor:
    return x.sum(-1)


def _min_last(x: torch.Tensor) -> torch.Tensor:
    return x.amin(-1)


def _max_last(x: torch.Tensor) -> torch.Tensor:
    return x.amax(-1)


_REDUCE = {"sum": _sum_last, "min": _min_last, "max": _max_last}
_COMBINE = {"sum": torch.add, "min": torch.minimum, "max": torch.maximum}
_IDENTITY = {"sum": 0.0, "min": math.inf, "max": -math.inf}
_SERIAL_SCATTER = 16384


class _SegmentTree:
    _op: str = "sum"
    _dtype: torch.dtype = torch.float32

    def __init__(
        self,
        size: int,
        *,
        branching: int = 64,
        top_size: int = 16384,
        device: torch.device | str | None = None,
    ):
        if size < 1:
            raise ValueError(f"{type(self).__name__}: size must be >= 1, got {size}.")
        if branching < 2:
            raise ValueError(f"{type(self).__name__}: branching must be >= 2, got {branching}.")
        self._size = int(size)
        self._k = k = int(branching)
        self._reduce = _REDUCE[self._op]
        self._combine = _COMBINE[self._op]
        identity = _IDENTITY[self._op]
        n = -(self._size // -k) * k
        levels = [preallocate_zeros((n,), self._dtype, device).fill_(identity)]
        while n > max(top_size, k):
            parents = n // k
            n = parents if parents <= top_size else -(parents // -k) * k
            levels.append(torch.full((n,), identity, dtype=self._dtype, device=device))
        self._levels = levels  # leaves first; the last level (at most ``top_size`` nodes) is scanned whole

    # ------------------------------------------------------------------ properties
    @property
    def size(self) -> int:
        """The number of leaves requested at construction."""
        return self._size

    @property
    def capacity(self) -> int:
        """The number of allocated leaves (``size`` rounded up to a multiple of the branching factor)."""
        return self._levels[0].numel()

    @property
    def identity_element(self) -> float:
        """The value of an empty leaf (``0`` for sums, ``+inf`` for minima)."""
        return _IDENTITY[self._op]

    @property
    def device(self) -> torch.device:
        return self._levels[0].device

    @property
    def leaves(self) -> torch.Tensor:
        """A view of the first ``size`` leaves."""
        return self._levels[0][: self._size]

    # ------------------------------------------------------------------ updates
    def _check_index(self, index: torch.Tensor) -> None:
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= self._size):
            raise IndexError(
                f"{type(self).__name__}: indices must lie in [0, {self._size}); got values in "
                f"[{int(index.min())}, {int(index.max())}]."
            )

    def update(self, index: Any, value: Any) -> None:
        """Sets the leaves at ``index`` to ``value`` (broadcast) and refreshes their ancestors.

        With repeated indices, the last value wins.
        """
        if isinstance(index, slice):
            start, stop, step = index.indices(self._size)
            if step == 1:
                return self.update_range(start, stop, value)
            index = torch.arange(start, stop, step)
        index = torch.as_tensor(index, device=self.device).reshape(-1).long()
        value = torch.as_tensor(value, dtype=self._dtype, device=self.device).reshape(-1)
        if value.numel() == 1 and index.numel() != 1:
            value = value.expand(index.shape)
        if index.numel() != value.numel():
            raise ValueError(
                f"{type(self).__name__}.update: got {value.numel()} values for {index.numel()} indices."
            )
        self._check_index(index)
        self._update(index, value)

    def _update(self, index: torch.Tensor, value: torch.Tensor) -> None:
        """``update`` without argument checks (``index`` is a valid 1-d long tensor)."""
        if index.numel() > _SERIAL_SCATTER or index.device.type != "cpu":
            # CPU scatters of up to 32k elements run serially (the last repeated index wins); bigger or
            # device scatters may run in parallel, so repeated indices are dropped explicitly.
            index, value = _last_of_duplicates(index, value)
        self._levels[0][index] = value
        k = self._k
        for child, parent in zip(self._levels[:-1], self._levels[1:]):
            index = index // k
            parent[index] = self._reduce(child.view(-1, k).index_select(0, index))

    def update_range(self, start: int, stop: int, value: Any) -> None:
        """Sets the contiguous leaves ``[start, stop)`` to ``value`` (broadcast)."""
        if not 0 <= start <= stop <= self._size:
            raise IndexError(f"{type(self).__name__}: range [{start}, {stop}) is outside [0, {self._size}).")
        if start == stop:
            return
        self._levels[0][start:stop] = torch.as_tensor(value, dtype=self._dtype, device=self.device)
        k = self._k
        for child, parent in zip(self._levels[:-1], self._levels[1:]):
            start, stop = start // k, (stop - 1) // k + 1
            parent[start:stop] = self._reduce(child.view(-1, k)[start:stop])

    def __setitem__(self, index: Any, value: Any) -> None:
        self.update(index, value)

    def __getitem__(self, index: Any) -> float | torch.Tensor:
        if isinstance(index, int):
            if not -self._size <= index < self._size:
                raise IndexError(f"{type(self).__name__}: index {index} out of range for size {self._size}.")
            return self._levels[0][index % self._size].item()
        return self.leaves[index]

    def __len__(self) -> int:
        return self._size

    def fill_(self, value: float) -> None:
        """Sets every leaf to ``value`` (``identity_element`` empties the tree)."""
        self.update_range(0, self._size, value)

    def reset(self) -> None:
        """Empties the tree (every leaf and node back to the identity element)."""
        for level in self._levels:
            level.fill_(self.identity_element)

    # ------------------------------------------------------------------ reads
    def reduce_all(self) -> torch.Tensor:
        """The reduction over every leaf, as a 0-d tensor (no synchronisation)."""
        return self._reduce(self._levels[-1])

    def query(self, start: Any, end: Any) -> float | torch.Tensor:
        """Reduces the leaves ``[start, end)``; ``start``/``end`` may be ints or tensors (batched)."""
        scalar = isinstance(start, int) and isinstance(end, int)
        left = torch.as_tensor(start, device=self.device).long().reshape(-1)
        right = torch.as_tensor(end, device=self.device).long().reshape(-1)
        left, right = torch.broadcast_tensors(left, right)
        left = left.clamp(0, self._size)
        right = right.clamp(0, self._size)
        result = torch.full(left.shape, self.identity_element, dtype=self._dtype, device=self.device)
        k = self._k
        offsets = torch.arange(k, device=self.device)
        for level in self._levels[:-1]:
            active = left < right
            aligned_left = -(left // -k) * k
            aligned_right = right // k * k
            within = aligned_left > aligned_right  # the range sits inside a single block
            stop_left = torch.minimum(aligned_left, right)
            start_right = torch.where(within, right, torch.maximum(aligned_right, left))
            result = self._combine(result, self._window(level, left, stop_left, offsets, active))
            result = self._combine(result, self._window(level, start_right, right, offsets, active & ~within))
            keep = active & ~within
            left = torch.where(keep, aligned_left // k, 0)
            right = torch.where(keep, aligned_right // k, 0)
        top = self._levels[-1]
        if left.numel() == 1:
            if int(left) < int(right):
                result = self._combine(result, self._reduce(top[int(left) : int(right)]))
        else:
            positions = torch.arange(top.numel(), device=self.device)
            mask = (positions >= left.unsqueeze(-1)) & (positions < right.unsqueeze(-1))
            values = torch.where(mask, top, torch.full_like(top, self.identity_element))
            result = self._combine(result, self._reduce(values))
        return result.item() if scalar else result

    def _window(self, level, start, stop, offsets, active) -> torch.Tensor:
        positions = start.unsqueeze(-1) + offsets
        mask = (positions < stop.unsqueeze(-1)) & active.unsqueeze(-1)
        values = level[positions.clamp_max(level.numel() - 1)]
        values = torch.where(mask, values, torch.full_like(values, self.identity_element))
        return self._reduce(values)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {"size": self._size, "branching": self._k, "leaves": self.leaves.clone()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if state_dict["size"] != self._size:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state holds {state_dict['size']} leaves, this "
                f"tree has {self._size}."
            )
        self.update_range(0, self._size, state_dict["leaves"].to(self.device, self._dtype))

    def share_memory_(self):
        for level in self._levels:
            level.share_memory_()
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(size={self._size}, branching={self._k})"


def _last_of_duplicates(index: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drops every repeated index but its last occurrence (so that the last write wins)."""
    unique, inverse = torch.unique(index, return_inverse=True)
    if unique.numel() == index.numel():
        return index, value
    positions = torch.arange(index.numel(), device=index.device)
    last = torch.full_like(unique, -1).scatter_reduce_(0, inverse, positions, reduce="amax")
    return unique, value[last]


class _SumTree(_SegmentTree):
    _op = "sum"

    def scan_lower_bound(self, value: Any) -> int | torch.Tensor:
        """For each ``value``, the first leaf whose inclusive prefix sum exceeds it.

        Values at or above the total sum map to ``size``. Leaves must be non-negative.
        """
        scalar = not isinstance(value, torch.Tensor)
        mass = torch.as_tensor(value, dtype=self._dtype, device=self.device).reshape(-1)
        node, total = self._scan(mass)
        node = torch.where(mass >= total, self._size, node)
        return int(node) if scalar else node

    def _scan(self, mass: torch.Tensor, top_cumsum: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """The leaves of ``mass`` (clamped to ``size - 1``) and the total sum, without argument checks.

        ``top_cumsum`` is ``cumsum`` of the top level when the caller already computed it.
        """
        top = self._levels[-1]
        cumulated = top.cumsum(0) if top_cumsum is None else top_cumsum
        total = cumulated[-1]
        node = torch.searchsorted(cumulated, mass, right=True).clamp_max_(top.numel() - 1)
        remaining = mass - (cumulated - top).index_select(0, node)
        k = self._k
        for level in reversed(self._levels[:-1]):
            children = level.view(-1, k).index_select(0, node)
            cumulated = children.cumsum(-1)
            choice = torch.searchsorted(cumulated, remaining.unsqueeze(-1), right=True).clamp_max_(k - 1)
            remaining = remaining - (cumulated - children).gather(-1, choice).squeeze(-1)
            node = node * k + choice.squeeze(-1)
        return node.clamp_max_(self._size - 1), total


class _MinTree(_SegmentTree):
    _op = "min"


class _MaxTree(_SegmentTree):
    _op = "max"


class SumSegmentTreeFp32(_SumTree):
    """Sum segment tree over ``float32`` leaves.

    Args:
        size (int): the number of leaves.

    Keyword Args:
        branching (int, optional): children per node. Defaults to ``64``.
        top_size (int, optional): the largest top level, scanned whole. Defaults to ``16384``.
        device (torch.device, optional): where the tree lives.

    Examples:
        >>> import torch
        >>> tree = SumSegmentTreeFp32(10, branching=4)
        >>> tree[torch.arange(4)] = torch.tensor([1.0, 2.0, 3.0, 4.0])
        >>> tree.query(0, 10), tree.query(1, 3)
        (10.0, 5.0)
        >>> tree.scan_lower_bound(torch.tensor([0.5, 1.0, 5.9, 6.0]))
        tensor([0, 1, 2, 3])
    """

    _dtype = torch.float32


class SumSegmentTreeFp64(_SumTree):
    """Sum segment tree over ``float64`` leaves (see :class:`SumSegmentTreeFp32`).

    Examples:
        >>> tree = SumSegmentTreeFp64(4)
        >>> tree[2] = 0.5
        >>> tree.query(0, 4), tree.scan_lower_bound(0.25)
        (0.5, 2)
    """

    _dtype = torch.float64


class MinSegmentTreeFp32(_MinTree):
    """Min segment tree over ``float32`` leaves; empty leaves hold ``+inf``.

    Examples:
        >>> import torch
        >>> tree = MinSegmentTreeFp32(8)
        >>> tree[torch.tensor([1, 5])] = torch.tensor([3.0, 2.0])
        >>> tree.query(0, 8), tree.query(0, 4)
        (2.0, 3.0)
    """

    _dtype = torch.float32


class MinSegmentTreeFp64(_MinTree):
    """Min segment tree over ``float64`` leaves (see :class:`MinSegmentTreeFp32`).

    Examples:
        >>> tree = MinSegmentTreeFp64(3)
        >>> tree[0] = 1.5
        >>> tree.query(0, 3)
        1.5
    """

    _dtype = torch.float64


class MaxSegmentTreeFp32(_MaxTree):
    """Max segment tree over ``float32`` leaves; empty leaves hold ``-inf`` (used to track max priorities)."""

    _dtype = torch.float32


class MaxSegmentTreeFp64(_MaxTree):
    """Max segment tree over ``float64`` leaves; empty leaves hold ``-inf``."""

    _dtype = torch.float64


class PriorityTree:
    """Sum and min trees over the same leaves (the structure behind the prioritized samplers).

    The min side keeps its own copy of the leaves, ``+inf`` where nothing was written, so that
    ``min_positive()`` is the smallest priority currently stored (zeros included, as in TorchRL). Updates
    refresh both sides level by level.
    """

    def __init__(
        self,
        size: int,
        *,
        dtype: torch.dtype = torch.float32,
        branching: int = 64,
        top_size: int = 16384,
        device: torch.device | str | None = None,
    ):
        self._sum = _SumTree.__new__(_SumTree)
        self._sum._dtype = dtype
        _SumTree.__init__(self._sum, size, branching=branching, top_size=top_size, device=device)
        self._min_levels = [
            preallocate_zeros(tuple(level.shape), dtype, level.device).fill_(math.inf) for level in self._sum._levels
        ]
        self._k = branching
        self._shift = branching.bit_length() - 1 if branching & (branching - 1) == 0 else None
        self._size = size
        self.dtype = dtype

    @property
    def leaves(self) -> torch.Tensor:
        return self._sum.leaves

    @property
    def device(self) -> torch.device:
        return self._sum.device

    def total(self) -> torch.Tensor:
        return self._sum.reduce_all()

    def min_positive(self) -> torch.Tensor:
        """The smallest stored leaf (``+inf`` when nothing is stored)."""
        return self._min_levels[-1].amin()

    def _parent(self, index: torch.Tensor) -> torch.Tensor:
        return index >> self._shift if self._shift is not None else index // self._k

    def update(self, index: torch.Tensor, value: torch.Tensor) -> None:
        """Sets ``leaves[index] = value`` (the last repeated index wins) and refreshes the ancestors."""
        if index.numel() > _SERIAL_SCATTER or index.device.type != "cpu":
            index, value = _last_of_duplicates(index, value)
        sums, mins = self._sum._levels, self._min_levels
        sums[0][index] = value
        mins[0][index] = value
        k = self._k
        for depth in range(1, len(sums)):
            index = self._parent(index)
            sums[depth][index] = sums[depth - 1].view(-1, k).index_select(0, index).sum(-1)
            mins[depth][index] = mins[depth - 1].view(-1, k).index_select(0, index).amin(-1)

    def update_range(self, start: int, stop: int, value: Any) -> None:
        if start == stop:
            return
        sums, mins = self._sum._levels, self._min_levels
        value = torch.as_tensor(value, dtype=self.dtype, device=self.device)
        sums[0][start:stop] = value
        mins[0][start:stop] = value
        k = self._k
        for depth in range(1, len(sums)):
            start, stop = start // k, (stop - 1) // k + 1
            sums[depth][start:stop] = sums[depth - 1].view(-1, k)[start:stop].sum(-1)
            mins[depth][start:stop] = mins[depth - 1].view(-1, k)[start:stop].amin(-1)

    def draw(self, uniform: torch.Tensor, limit: int | None = None) -> tuple[torch.Tensor, torch.Tensor, float]:
        """Leaves drawn with probability proportional to their value, for ``uniform`` draws in ``[0, 1)``.

        Returns ``(index, leaf_value, total)``; ``index`` is clamped to ``limit - 1`` (default: ``size - 1``;
        only float rounding can reach past the last non-zero leaf). ``uniform`` is overwritten.
        """
        last = (self._size if limit is None else limit) - 1
        levels = self._sum._levels
        top = levels[-1]
        cumulated = top.cumsum(0)
        total = cumulated[-1]
        remaining = uniform.mul_(total)
        node = torch.searchsorted(cumulated, remaining, right=True).clamp_max_(top.numel() - 1)
        if len(levels) == 1:
            return node.clamp_max_(last), top.index_select(0, node), float(total)
        remaining.sub_(cumulated.sub_(top).index_select(0, node))
        k = self._k
        for depth in range(len(levels) - 2, -1, -1):
            children = levels[depth].view(-1, k).index_select(0, node)
            cumulated = children.cumsum(-1)
            choice = torch.searchsorted(cumulated, remaining.unsqueeze(-1), right=True).clamp_max_(k - 1)
            if depth:
                remaining.sub_(cumulated.sub_(children).gather(-1, choice).squeeze(-1))
            node = choice.squeeze(-1).add(node, alpha=k)
        value = children.gather(-1, choice).squeeze(-1)
        return node.clamp_max_(last), value, float(total)

    def reset(self) -> None:
        self._sum.reset()
        for level in self._min_levels:
            level.fill_(math.inf)

    @property
    def min_leaves(self) -> torch.Tensor:
        return self._min_levels[0][: self._size]

    def share_memory_(self):
        self._sum.share_memory_()
        for level in self._min_levels:
            level.share_memory_()
        return self
