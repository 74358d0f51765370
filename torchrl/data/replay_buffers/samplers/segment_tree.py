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


class _TorchOps:
    """The small kernels of :class:`PriorityTree` as torch ops (any device)."""

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

    @staticmethod
    def search(boundaries: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return torch.searchsorted(boundaries, value, right=True)

    @staticmethod
    def descend(rows: torch.Tensor, mass: torch.Tensor, node: torch.Tensor, inner: bool) -> torch.Tensor:
        k = rows.shape[-1]
        cumulated = rows.cumsum(-1)
        choice = torch.searchsorted(cumulated, mass.unsqueeze(-1), right=True)
        if inner:  # the mass left inside the chosen child
            choice.clamp_max_(k - 1)
            mass.sub_(cumulated.sub_(rows).gather(-1, choice).squeeze(-1))
        return choice.squeeze(-1).add_(node, alpha=k)

    @staticmethod
    def sort(mass: torch.Tensor) -> tuple[torch.Tensor, None]:
        return mass, None

    @staticmethod
    def unsort(node: torch.Tensor, order: None) -> torch.Tensor:
        return node

    @staticmethod
    def clamp_max_(x: torch.Tensor, bound: int) -> torch.Tensor:
        return x.clamp_max_(bound)

    @staticmethod
    def weights(value: torch.Tensor, smallest: float, beta: float) -> torch.Tensor:
        return value.clamp_min_(smallest).div_(smallest).pow_(-beta)


class _NumpyOps:
    """The same kernels on numpy views of the tree tensors (CPU only).

    A replay step runs a few dozen operations on 256-element arrays; numpy dispatches each in about 1-2 µs,
    torch in about 5-8 µs. The prefix sums and the in-row searches stay torch ops (on the same memory), which
    are faster than numpy's for those two.
    """

    name = "numpy"

    @staticmethod
    def view(tensor: torch.Tensor) -> np.ndarray:
        return tensor.numpy()

    @staticmethod
    def array(tensor: torch.Tensor, device: torch.device) -> np.ndarray:
        if tensor.requires_grad or tensor.device.type != "cpu":
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

    @staticmethod
    def search(boundaries: np.ndarray, value: np.ndarray) -> np.ndarray:
        return np.searchsorted(boundaries, value, side="right")

    @staticmethod
    def descend(rows: np.ndarray, mass: np.ndarray, node: np.ndarray, inner: bool) -> np.ndarray:
        if inner:
            return _TorchOps.descend(torch.from_numpy(rows), torch.from_numpy(mass), torch.from_numpy(node), True).numpy()
        cumulated = torch.from_numpy(rows).cumsum_(-1)  # ``rows`` is a fresh gather: summed in place
        choice = torch.searchsorted(cumulated, torch.from_numpy(mass[:, None]), right=True).numpy()
        node *= rows.shape[1]
        node += choice[:, 0]
        return node

    @staticmethod
    def sort(mass: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sorted masses make the binary searches cheaper (near-identical consecutive paths)."""
        order = np.argsort(mass)
        return mass.take(order), order

    @staticmethod
    def unsort(node: np.ndarray, order: np.ndarray) -> np.ndarray:
        out = np.empty_like(node)
        out[order] = node
        return out

    @staticmethod
    def clamp_max_(x: np.ndarray, bound: int) -> np.ndarray:
        return np.minimum(x, bound, out=x)

    @staticmethod
    def weights(value: np.ndarray, smallest: float, beta: float) -> np.ndarray:
        weight = np.maximum(value, smallest)
        if smallest > 0:
            weight /= smallest
            return np.power(weight, -beta, out=weight)
        with np.errstate(divide="ignore", invalid="ignore"):  # a written zero is the minimum: weights 0 (or nan)
            weight /= smallest
            return np.power(weight, -beta, out=weight)


def _level_sizes(size: int, k: int, top_size: int) -> list[int]:
    """Node counts per level, leaves first: every level but the top one is a whole number of ``k``-blocks."""
    n = -(size // -k) * k
    sizes = [n]
    while n > max(top_size, k):
        parents = n // k
        n = parents if parents <= top_size else -(parents // -k) * k
        sizes.append(n)
    return sizes


class PriorityTree:
    """Sums and the minimum of one set of leaves: the structure behind the prioritized samplers.

    - Sums: a segment tree as :class:`SumSegmentTreeFp32` (flat tensors per level, ``branching`` children per
      node, a top level of at most ``top_size`` nodes). The inclusive prefix sums of the top level are cached
      (``torch.cumsum`` once per batch of writes); a draw then costs one ``searchsorted`` on that cache and one
      ``[batch, branching]`` gather + cumsum + ``searchsorted`` per lower level.
    - Minimum: only the smallest *written* leaf is needed (importance-weight normalisation), so it is kept as a
      number: writes lower it, and it is recomputed exactly (one scan of the leaves, on the next read) only
      when a write overwrites a leaf that held it with a larger value. Never-written leaves are ``+inf`` in a
      separate copy of the leaves, so written zeros count.

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
        self._min_leaves = preallocate_zeros((sizes[0],), dtype, device).fill_(math.inf)
        self._span = k ** (len(sizes) - 1)  # leaves under one top node
        self._prefix = torch.zeros(sizes[-1] + 1, dtype=dtype, device=device)  # [0, cumsum(top level)]
        # [top nodes in the current prefix sums (0: stale), minimum is known, minimum]; on CPU, numpy scalars
        self._meta = torch.tensor([0.0, 1.0, math.inf], dtype=torch.float64)
        self._uniform = torch.empty(0, dtype=dtype, device=device)
        self._bind()

    def _bind(self) -> None:
        """(Re)creates the backend views of the tensors (after moving them to shared memory, or unpickling)."""
        view, k = self._ops.view, self._k
        self._a_levels = [view(level) for level in self._levels]
        self._a_rows = [level.reshape(-1, k) for level in self._a_levels[:-1]]
        self._a_min = view(self._min_leaves)
        self._a_prefix = view(self._prefix)
        self._a_meta = self._meta.numpy()

    # ------------------------------------------------------------------ reads
    @property
    def backend(self) -> str:
        return self._ops.name

    @property
    def leaves(self) -> torch.Tensor:
        return self._levels[0][: self._size]

    @property
    def min_leaves(self) -> torch.Tensor:
        """The leaves as written, ``+inf`` where nothing was written."""
        return self._min_leaves[: self._size]

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
            meta[2] = float(self._a_min.min())
            meta[1] = 1.0
        return float(meta[2])

    # ------------------------------------------------------------------ writes
    def update(self, index, value) -> None:
        """Sets ``leaves[index] = value`` (the last repeated index wins) and refreshes the ancestors.

        ``index`` (1-d integers) and ``value`` (same length, or a scalar) are tensors or backend arrays.
        """
        ops = self._ops
        if isinstance(index, torch.Tensor):
            index = self.array(index)
        if isinstance(value, torch.Tensor):
            value = self.array(value.to(self.dtype))
        elif ops is _TorchOps and not isinstance(value, torch.Tensor):
            value = torch.tensor(value, dtype=self.dtype, device=self.device)
        if ops is _TorchOps and (index.numel() > _SERIAL_SCATTER or index.device.type != "cpu"):
            # CPU scatters of up to 32k elements run serially; bigger or device ones may run in parallel
            index, value = _last_of_duplicates(index, value.expand(index.shape) if value.ndim == 0 else value)
        mins = self._a_min
        known = self._a_meta[1]
        if known:
            before = float(ops.take(mins, index).min())
        ops.put(self._a_levels[0], index, value)
        ops.put(mins, index, value)
        if known:
            self._track_min(before, float(ops.take(mins, index).min()))
        self._a_meta[0] = 0.0
        for depth in range(1, len(self._levels)):
            index = index >> self._shift if self._shift else index // self._k
            ops.put(self._a_levels[depth], index, ops.row_sums(ops.take(self._a_rows[depth - 1], index)))

    def _track_min(self, overwritten: float, written: float) -> None:
        """Keeps the cached minimum exact after a write (``overwritten``/``written``: the minima of old/new)."""
        meta = self._a_meta
        if written <= meta[2]:
            meta[2] = written
        elif overwritten <= meta[2]:  # the leaf holding the minimum got a larger value: rescan on next read
            meta[1] = 0.0

    def update_range(self, start: int, stop: int, value) -> None:
        """Sets the leaves ``[start, stop)`` to ``value`` (a scalar or ``stop - start`` values)."""
        if start >= stop:
            return
        if isinstance(value, torch.Tensor):
            value = self.array(value.to(self.dtype))
        mins = self._a_min
        known = self._a_meta[1]
        if known:
            before = float(mins[start:stop].min())
        self._a_levels[0][start:stop] = value
        mins[start:stop] = value
        if known:
            self._track_min(before, float(mins[start:stop].min()))
        self._a_meta[0] = 0.0
        k = self._k
        for depth in range(1, len(self._levels)):
            start, stop = start // k, (stop - 1) // k + 1
            self._a_levels[depth][start:stop] = self._ops.row_sums(self._a_rows[depth - 1][start:stop])

    def load(self, stored: torch.Tensor, written: torch.Tensor | None = None) -> None:
        """Replaces every leaf by ``stored``; ``written`` (bool) marks the leaves that count for the minimum."""
        self.update_range(0, self._size, stored)
        if written is not None:
            self._min_leaves[: self._size] = torch.where(written.to(self.device), self._levels[0][: self._size], math.inf)
            self._a_meta[1] = 0.0

    def reset(self) -> None:
        for level in self._levels:
            level.zero_()
        self._min_leaves.fill_(math.inf)
        self._a_meta[:] = (0.0, 1.0, math.inf)

    # ------------------------------------------------------------------ draws
    def sample(
        self, batch_size: int, *, limit: int | None = None, beta: float = 0.0, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """Draws ``batch_size`` leaves with probability proportional to their value.

        Returns ``(index, weight)`` tensors, ``weight = (value / min) ** -beta`` with ``min`` the smallest written
        leaf (ones when ``beta == 0``), or ``None`` when every leaf is zero. ``index`` is clamped to
        ``limit - 1`` (default: ``size - 1``; only float rounding can reach past the last non-zero leaf).
        """
        ops, prefix, meta = self._ops, self._a_prefix, self._a_meta
        last = (self._size if limit is None else limit) - 1
        top = last // self._span + 1  # the top nodes that hold leaves [0, limit): the prefix sums stop there
        if meta[0] != top:
            torch.cumsum(self._levels[-1][:top], 0, out=self._prefix[1 : top + 1])
            meta[0] = top
        total = float(prefix[top])
        if not total > 0:
            return None
        if self._uniform.shape[0] != batch_size:  # scratch space for the random masses, reused across draws
            self._uniform = torch.empty(batch_size, dtype=self.dtype, device=self.device)
        mass, order = ops.sort(self.array(self._uniform.uniform_(0.0, total, generator=generator)))
        node = ops.search(prefix[1:top], mass)  # the last boundary (the total) is left out: node <= top - 1
        if len(self._levels) > 1:
            mass -= ops.take(prefix, node)
            for depth in range(len(self._levels) - 2, -1, -1):
                node = ops.descend(ops.take(self._a_rows[depth], node), mass, node, depth > 0)
        node = ops.unsort(ops.clamp_max_(node, last), order)
        if beta == 0:
            weight = torch.ones(batch_size, dtype=self.dtype, device=self.device)
        else:
            weight = ops.tensor(ops.weights(ops.take(self._a_levels[0], node), self._min(), beta))
        return ops.tensor(node), weight

    # ------------------------------------------------------------------ processes
    def share_memory_(self) -> PriorityTree:
        for tensor in (*self._levels, self._min_leaves, self._prefix, self._meta):
            tensor.share_memory_()
        self._bind()
        return self

    def __getstate__(self) -> dict:
        state = {key: value for key, value in self.__dict__.items() if not key.startswith("_a_")}
        state["_uniform"] = self._uniform[:0]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._bind()
