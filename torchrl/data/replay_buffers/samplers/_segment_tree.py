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

:class:`PriorityTree` (the prioritized samplers' structure) is the same sum tree tuned for a replay step
(draw a batch, then rewrite the drawn leaves): cached prefix sums of the top level, an exact running minimum
instead of a min tree, and numpy views of the same tensors on CPU, where numpy's per-call cost is a fraction
of torch's (no C++ extension involved).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
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


def _level_sizes(size: int, k: int, top_size: int) -> list[int]:
    """Node counts per level, leaves first: every level but the top one is a whole number of ``k``-blocks."""
    n = -(size // -k) * k
    sizes = [n]
    while n > max(top_size, k):
        parents = n // k
        n = parents if parents <= top_size else -(parents // -k) * k
        sizes.append(n)
    return sizes


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
        sizes = _level_sizes(self._size, k, top_size)
        # leaves first; the last level (at most ``top_size`` nodes) is scanned whole
        self._levels = [preallocate_zeros((n,), self._dtype, device).fill_(identity) for n in sizes]

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


class _TorchOps:
    """The small kernels of :class:`PriorityTree` writes as torch ops (any device)."""

    name = "torch"

    @staticmethod
    def view(tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    @staticmethod
    def array(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
        return tensor if tensor.device == device else tensor.to(device)

    tensor = view

    @staticmethod
    def take(source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return source.index_select(0, index)

    @staticmethod
    def put(target: torch.Tensor, index: torch.Tensor, value: torch.Tensor) -> None:
        target.index_put_((index,), value)

    @staticmethod
    def row_sums(rows: torch.Tensor) -> torch.Tensor:
        return rows.sum(-1)


class _NumpyOps:
    """The same kernels on numpy views of the tree tensors (CPU only).

    A replay step runs a few dozen operations on 256-element arrays; numpy dispatches each in 1-2 µs, torch in
    5-8 µs (several times more when other processes share the core and its caches). Prefix sums and in-row
    searches stay torch ops, on the same memory: they are faster than numpy's.
    """

    name = "numpy"

    @staticmethod
    def view(tensor: torch.Tensor) -> np.ndarray:
        return tensor.numpy()

    @staticmethod
    def array(tensor: torch.Tensor, device: torch.device) -> np.ndarray:
        if tensor.requires_grad or not tensor.is_cpu:
            tensor = tensor.detach().cpu()
        return tensor.numpy()

    tensor = staticmethod(torch.from_numpy)

    @staticmethod
    def take(source: np.ndarray, index: np.ndarray) -> np.ndarray:
        return source.take(index, axis=0)

    @staticmethod
    def put(target: np.ndarray, index: np.ndarray, value: np.ndarray) -> None:
        target[index] = value  # a 1-d index array is walked in order: the last repeated index wins

    @staticmethod
    def row_sums(rows: np.ndarray) -> np.ndarray:
        return np.einsum("ij->i", rows)


def _descend(rows: torch.Tensor, mass: torch.Tensor, node: torch.Tensor, inner: bool) -> torch.Tensor:
    """One level down: the child of each ``node`` (whose children are ``rows``) that holds ``mass``.

    With ``inner``, ``mass`` becomes the mass left inside that child (in place).
    """
    k = rows.shape[-1]
    cumulated = rows.cumsum(-1)
    choice = torch.searchsorted(cumulated, mass.unsqueeze(-1), right=True)
    if inner:
        choice.clamp_max_(k - 1)
        mass.sub_(cumulated.sub_(rows).gather(-1, choice).squeeze(-1))
    return choice.squeeze(-1).add_(node, alpha=k)


class _Scratch:
    """Buffers reused by every draw of one batch size: masses, gathered rows, in-row choices (no allocation)."""

    def __init__(self, batch_size: int, k: int, dtype: torch.dtype, device: torch.device, numpy: bool):
        self.mass = torch.empty(batch_size, dtype=dtype, device=device)
        self.mass_column = self.mass.view(-1, 1)
        self.rows = torch.empty(batch_size, k, dtype=dtype, device=device)
        self.choice = torch.empty(batch_size, 1, dtype=torch.long, device=device)
        if numpy:
            self.mass_np, self.rows_np, self.choice_np = self.mass.numpy(), self.rows.numpy(), self.choice.numpy()[:, 0]


class PriorityTree:
    """Sums and the minimum of one set of leaves: the structure behind the prioritized samplers.

    - Sums: a segment tree as :class:`SumSegmentTreeFp32` (flat tensors per level, ``branching`` children per
      node, a top level of at most ``top_size`` nodes). The inclusive prefix sums of the top level are cached
      (one ``torch.cumsum`` per batch of writes, over the top nodes that cover the stored elements only); a
      draw then costs one ``searchsorted`` on that cache and one ``[batch, branching]`` gather + cumsum +
      ``searchsorted`` per lower level.
    - Minimum: only the smallest *written* leaf is needed (importance-weight normalisation), so it is kept as a
      number: writes lower it, and it is recomputed exactly (one scan of the leaves, on the next read) only
      when a write gives a larger value to a leaf that held it. Never-written leaves hold ``-0.0`` (a zero for
      every sum, told apart by its sign bit), so that written zeros count and no second copy of the leaves is
      needed.

    On CPU the small kernels run on numpy views of the same tensors (``backend="numpy"``), elsewhere as torch
    ops; both give the same draws for the same random numbers up to float rounding. The cache state lives in
    a small tensor, so that trees moved to shared memory stay consistent across processes.

    Args:
        size (int): the number of leaves.

    Keyword Args:
        dtype (torch.dtype): the leaves' dtype. Defaults to ``torch.float32``.
        branching (int): children per node. Defaults to ``64``.
        top_size (int): the largest top level. Defaults to ``16384``.
        device (torch.device, optional): where the tensors live. Defaults to the CPU.
        backend (str, optional): ``"numpy"`` (CPU only) or ``"torch"``. Defaults to numpy on CPU.

    Examples:
        >>> import torch
        >>> tree = PriorityTree(4)
        >>> tree.update(torch.tensor([1, 3]), torch.tensor([1.0, 3.0]))
        >>> index, weight = tree.sample(1000, beta=1.0, generator=torch.Generator().manual_seed(0))
        >>> sorted(index.unique().tolist()), sorted(weight.unique().tolist())
        ([1, 3], [0.3333333432674408, 1.0])
        >>> float(tree.min_positive())
        1.0
    """

    def __init__(
        self,
        size: int,
        *,
        dtype: torch.dtype = torch.float32,
        branching: int = 64,
        top_size: int = 16384,
        device: torch.device | str | None = None,
        backend: str | None = None,
    ):
        if size < 1 or branching < 2:
            raise ValueError(f"PriorityTree: size must be >= 1 and branching >= 2, got {size} and {branching}.")
        device = torch.device("cpu" if device is None else device)
        if backend is None:
            backend = "numpy" if device.type == "cpu" else "torch"
        if backend not in ("numpy", "torch") or (backend == "numpy" and device.type != "cpu"):
            raise ValueError(f"PriorityTree: backend must be 'torch', or 'numpy' on CPU; got {backend!r} on {device}.")
        self._size = int(size)
        self._k = k = int(branching)
        self._shift = k.bit_length() - 1 if k & (k - 1) == 0 else 0  # parents by shifting when k is 2**n
        self.dtype = dtype
        self._ops = _NumpyOps if backend == "numpy" else _TorchOps
        sizes = _level_sizes(self._size, self._k, top_size)
        self._levels = [preallocate_zeros((n,), dtype, device) for n in sizes]  # sums, leaves first
        self._levels[0].fill_(-0.0)  # never written
        self._span = k ** (len(sizes) - 1)  # leaves under one top node
        self._prefix = torch.zeros(sizes[-1] + 1, dtype=dtype, device=device)  # [0, cumsum(top level)]
        # [top nodes in the current prefix sums (0: stale), minimum is known, minimum]; on CPU, numpy scalars
        self._meta = torch.tensor([0.0, 1.0, math.inf], dtype=torch.float64)
        self._bind()

    def _bind(self) -> None:
        """(Re)creates the backend views of the tensors (after moving them to shared memory, or unpickling)."""
        view, k = self._ops.view, self._k
        self._a_levels = [view(level) for level in self._levels]
        self._a_rows = [level.reshape(-1, k) for level in self._a_levels[:-1]]
        self._a_prefix = view(self._prefix)
        self._a_meta = self._meta.numpy()
        self._top_views: tuple = (0,)  # (top nodes, top level, prefix sums, search boundaries) for one ``top``
        self._scratch: dict[int, _Scratch] = {}  # by batch size

    # ------------------------------------------------------------------ reads
    @property
    def backend(self) -> str:
        return self._ops.name

    @property
    def leaves(self) -> torch.Tensor:
        """The leaves (never-written ones hold ``-0.0``)."""
        return self._levels[0][: self._size]

    @property
    def written(self) -> torch.Tensor:
        """Which leaves were ever written (a bool tensor)."""
        return ~torch.signbit(self.leaves)

    @property
    def device(self) -> torch.device:
        return self._levels[0].device

    def array(self, tensor: torch.Tensor):
        """``tensor`` as an array of this tree's backend (a view when possible)."""
        return self._ops.array(tensor, self.device)

    def tensor(self, array) -> torch.Tensor:
        """A backend array as a tensor (a view: no copy)."""
        return self._ops.tensor(array)

    def total(self) -> torch.Tensor:
        return self._levels[-1].sum()

    def min_positive(self) -> torch.Tensor:
        """The smallest written leaf (``+inf`` when nothing is written), as a 0-d tensor."""
        return torch.tensor(self._min(), dtype=self.dtype)

    def _min(self) -> float:
        meta = self._a_meta
        if not meta[1]:
            leaves = self.leaves
            meta[2] = float(torch.where(torch.signbit(leaves), math.inf, leaves).min()) if self._size else math.inf
            meta[1] = 1.0
        return float(meta[2])

    # ------------------------------------------------------------------ writes
    def update(self, index, value) -> None:
        """Sets ``leaves[index] = value`` (the last repeated index wins) and refreshes the ancestors.

        ``index`` (1-d integers) and ``value`` (same length, or a scalar, ``>= 0``) are tensors or backend arrays.
        Indices are not checked here (the samplers validate them).
        """
        ops = self._ops
        if isinstance(index, torch.Tensor):
            index = self.array(index)
        if isinstance(value, torch.Tensor):
            value = self.array(value.to(self.dtype))
        elif ops is _TorchOps:
            value = torch.tensor(value, dtype=self.dtype, device=self.device)
        if ops is _TorchOps and (index.numel() > _SERIAL_SCATTER or index.device.type != "cpu"):
            # CPU scatters of up to 32k elements run serially; bigger or device ones may run in parallel
            index, value = _last_of_duplicates(index, value.expand(index.shape) if value.ndim == 0 else value)
        leaves = self._a_levels[0]
        known = self._a_meta[1]
        if known:
            old = ops.take(leaves, index)
        ops.put(leaves, index, value)
        if known:  # the values now held (with repeated indices, only the last write counts)
            smallest = float(ops.take(leaves, index).min())
            self._track_min(smallest, lambda: bool((old == float(self._a_meta[2])).any()))
        self._a_meta[0] = 0.0
        for depth in range(1, len(self._levels)):
            index = index >> self._shift if self._shift else index // self._k
            ops.put(self._a_levels[depth], index, ops.row_sums(ops.take(self._a_rows[depth - 1], index)))

    def _track_min(self, smallest: float, held_minimum) -> None:
        """Keeps the cached minimum exact after a write of values whose minimum is ``smallest``.

        ``held_minimum()`` says whether an overwritten leaf held the minimum; it is only asked when the
        minimum may have grown (then the next read rescans the leaves).
        """
        meta = self._a_meta
        if smallest <= meta[2]:
            meta[2] = smallest
        elif held_minimum():
            meta[1] = 0.0

    def update_range(self, start: int, stop: int, value) -> None:
        """Sets the leaves ``[start, stop)`` to ``value`` (a scalar or ``stop - start`` values)."""
        if start >= stop:
            return
        if isinstance(value, torch.Tensor):
            value = self.array(value.to(self.dtype))
        leaves = self._a_levels[0]
        known = self._a_meta[1]
        if known:
            held = bool((leaves[start:stop] == float(self._a_meta[2])).any())
        leaves[start:stop] = value
        if known:
            self._track_min(float(leaves[start:stop].min()), lambda: held)
        self._a_meta[0] = 0.0
        k = self._k
        for depth in range(1, len(self._levels)):
            start, stop = start // k, (stop - 1) // k + 1
            self._a_levels[depth][start:stop] = self._ops.row_sums(self._a_rows[depth - 1][start:stop])

    def load(self, stored: torch.Tensor, written: torch.Tensor | None = None) -> None:
        """Replaces every leaf by ``stored``; ``written`` (bool) marks the leaves that count for the minimum."""
        if written is not None:
            stored = torch.where(written.to(stored.device), stored, -0.0)
        self.update_range(0, self._size, stored)
        self._a_meta[1] = 0.0

    def reset(self) -> None:
        for level in self._levels:
            level.zero_()
        self._levels[0].fill_(-0.0)
        self._a_meta[:] = (0.0, 1.0, math.inf)

    # ------------------------------------------------------------------ draws
    def sample(
        self, batch_size: int, *, limit: int | None = None, beta: float = 0.0, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Draws ``batch_size`` leaves with probability proportional to their value.

        Returns ``(index, weight)`` tensors, ``weight = (value / min) ** -beta`` with ``min`` the smallest written
        leaf (ones when ``beta == 0``), or ``None`` when every leaf is zero. Indices are below ``limit`` (default:
        ``size``); leaves from ``limit`` on should be zero, as in a replay buffer that stores ``limit`` elements
        (the sums only cover the top nodes that hold leaves below ``limit``; a draw past the last one, which only
        float rounding or mass written past ``limit`` can cause, is clamped to ``limit - 1``).
        """
        last = (self._size if limit is None else limit) - 1
        top = last // self._span + 1  # the top nodes that hold leaves [0, limit): the prefix sums stop there
        views = self._top_views
        if views[0] != top:  # slicing costs a few µs: slices are made once per ``top``
            views = self._top_views = (top, self._levels[-1][:top], self._prefix[1 : top + 1], self._a_prefix[1:top])
        meta = self._a_meta
        if meta[0] != top:
            torch.cumsum(views[1], 0, out=views[2])
            meta[0] = top
        total = float(self._a_prefix[top])
        if not total > 0:
            return None
        scratch = self._scratch.get(batch_size)
        if scratch is None:
            if len(self._scratch) >= 4:
                self._scratch.clear()
            numpy = self._ops is _NumpyOps
            scratch = self._scratch[batch_size] = _Scratch(batch_size, self._k, self.dtype, self.device, numpy)
        scratch.mass.uniform_(0.0, total, generator=generator)
        # the total itself is left out of the boundaries, so the top node is at most ``top - 1``
        if self._ops is _NumpyOps:
            return self._draw_numpy(scratch, views[3], last, beta)
        return self._draw_torch(scratch, views[3], last, beta)

    def _draw_numpy(self, scratch: _Scratch, boundaries: np.ndarray, last: int, beta: float):
        mass = scratch.mass_np
        node = np.searchsorted(boundaries, mass, side="right")
        if len(self._levels) > 1:
            mass -= self._a_prefix.take(node, mode="clip")  # in-bounds indices: "clip" skips the checks
            for depth in range(len(self._levels) - 2, 0, -1):  # trees over about 1M leaves
                rows = torch.from_numpy(self._a_rows[depth].take(node, axis=0, mode="clip"))
                node = _descend(rows, scratch.mass, torch.from_numpy(node), inner=True).numpy()
            self._a_rows[0].take(node, axis=0, out=scratch.rows_np, mode="clip")
            torch.searchsorted(scratch.rows.cumsum_(-1), scratch.mass_column, right=True, out=scratch.choice)
            node *= self._k
            node += scratch.choice_np
        np.minimum(node, last, out=node)  # float rounding can step past the last leaf with mass
        if beta == 0:
            return torch.from_numpy(node), torch.ones(node.shape[0], dtype=self.dtype)
        weight = self._a_levels[0].take(node, mode="clip")
        smallest = self._min()
        np.maximum(weight, smallest, out=weight)
        if smallest > 0:
            weight /= smallest
        else:
            with np.errstate(divide="ignore", invalid="ignore"):  # a written zero is the minimum: 0 (or nan)
                weight /= smallest
        return torch.from_numpy(node), torch.from_numpy(np.power(weight, -beta, out=weight))

    def _draw_torch(self, scratch: _Scratch, boundaries: torch.Tensor, last: int, beta: float):
        mass = scratch.mass
        node = torch.searchsorted(boundaries, mass, right=True)
        if len(self._levels) > 1:
            mass.sub_(self._prefix.index_select(0, node))
            for depth in range(len(self._levels) - 2, -1, -1):
                rows = self._levels[depth].view(-1, self._k).index_select(0, node)
                node = _descend(rows, mass, node, inner=depth > 0)
        node.clamp_max_(last)
        if beta == 0:
            return node, torch.ones(node.shape[0], dtype=self.dtype, device=self.device)
        smallest = self._min()
        weight = self._levels[0].index_select(0, node).clamp_min_(smallest).div_(smallest).pow_(-beta)
        return node, weight

    # ------------------------------------------------------------------ processes
    def share_memory_(self) -> PriorityTree:
        for tensor in (*self._levels, self._prefix, self._meta):
            tensor.share_memory_()
        self._bind()
        return self

    def __getstate__(self) -> dict:
        drop = ("_top_views", "_scratch")
        return {key: value for key, value in self.__dict__.items() if not key.startswith("_a_") and key not in drop}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind()
