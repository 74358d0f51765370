"""``PrioritizedSampler``: prioritized experience replay over pure-torch segment trees."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from torchrl.data.replay_buffers._utils import _as_index, ravel_index, to_device, unravel_index
from torchrl.data.replay_buffers.samplers.base import Sampler, empty_storage_error
from torchrl.data.replay_buffers.samplers._segment_tree import MaxSegmentTreeFp32, MaxSegmentTreeFp64, PriorityTree

# unsigned integer view and the bit pattern of the largest finite float, by float width in bytes
_FLOAT_BITS = {4: (np.uint32, np.uint32(0x7F7FFFFF)), 8: (np.uint64, np.uint64(0x7FEFFFFFFFFFFFFF))}


def _median_last(x: torch.Tensor) -> torch.Tensor:
    return x.median(-1).values


_REDUCTIONS = {"max": torch.amax, "min": torch.amin, "mean": torch.mean, "median": _median_last}


class PrioritizedSampler(Sampler):
    """Prioritized experience replay (Schaul et al., 2015, https://arxiv.org/abs/1511.05952).

    Element ``i`` with priority :math:`p_i` is stored as :math:`q_i = (p_i + \\epsilon)^\\alpha` and drawn
    with probability :math:`P(i) = q_i / \\sum_j q_j`. Each sample comes with its importance weight
    :math:`w_i = (N P(i))^{-\\beta} / \\max_j w_j = (q_i / \\min_j q_j)^{-\\beta}` under the info key
    ``"priority_weight"``. New elements get the default priority: the largest priority seen so far (or,
    with ``max_priority_within_buffer=True``, the largest one currently stored), ``1`` at first.

    Sampling and updates run on a sum tree of plain tensors with an exact running minimum, vectorised over
    the batch (see :class:`~torchrl.data.replay_buffers.samplers._segment_tree.PriorityTree`).

    Devices: the trees live on the CPU by default (``device=``), whatever the storage's device. Drawn indices
    and importance weights are copied once to the storage's device, without blocking the host (the draw
    itself reads the trees on the host, which costs no device synchronisation when they are on the CPU).
    :meth:`update_priority` accepts indices and priorities on any device; priorities computed on a GPU are
    copied to the trees, and that copy waits for the kernels that computed them (the one synchronisation of
    a prioritized replay step, as in TorchRL, whose trees are CPU-only).

    Args:
        max_capacity (int): the capacity of the storage it samples from.
        alpha (float): the prioritization exponent (``0`` is uniform sampling).
        beta (float): the importance-sampling exponent (``0`` gives unit weights).
        eps (float, optional): added to every priority so none is zero. Defaults to ``1e-8``.
        dtype (torch.dtype, optional): ``torch.float`` or ``torch.double`` trees. Defaults to ``torch.float``.
        reduction (str, optional): how per-step priorities of a multi-step element (shape
            ``[B, T]``) are reduced: ``"max"``, ``"min"``, ``"mean"`` or ``"median"``. Defaults to ``"max"``.
        max_priority_within_buffer (bool, optional): track the maximum priority among the stored elements
            instead of the maximum ever seen. Defaults to ``False``.

    Keyword Args:
        device (torch.device, optional): where the priority trees live. Defaults to the CPU.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import ReplayBuffer, LazyTensorStorage, PrioritizedSampler
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10),
        ...                   sampler=PrioritizedSampler(max_capacity=10, alpha=1.0, beta=1.0))
        >>> _ = rb.extend(TensorDict(obs=torch.arange(2), batch_size=[2]))
        >>> rb.update_priority(torch.tensor([0, 1]), torch.tensor([0.0, 1000.0]))
        >>> sample, info = rb.sample(10, return_info=True)
        >>> sample["obs"].tolist() == [1] * 10
        True
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
        max_priority_within_buffer: bool = False,
        *,
        device: torch.device | str | None = None,
    ) -> None:
        if alpha < 0:
            raise ValueError(f"PrioritizedSampler: alpha must be >= 0, got {alpha}.")
        if beta < 0:
            raise ValueError(f"PrioritizedSampler: beta must be >= 0, got {beta}.")
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"PrioritizedSampler: reduction must be one of {sorted(_REDUCTIONS)}, got {reduction!r}."
            )
        if dtype not in (torch.float32, torch.float64):
            raise ValueError(f"PrioritizedSampler: dtype must be torch.float or torch.double, got {dtype}.")
        self._max_capacity = int(max_capacity)
        self._alpha = float(alpha)
        self._beta = float(beta)
        self._eps = float(eps)
        self.dtype = dtype
        self.reduction = reduction
        self._max_priority_within_buffer = max_priority_within_buffer
        fp64 = dtype == torch.float64
        self._tree = PriorityTree(self._max_capacity, dtype=dtype, device=device)
        self._tree_device = self._tree.device
        self._max_tree = (MaxSegmentTreeFp64 if fp64 else MaxSegmentTreeFp32)(self._max_capacity, device=device) if (
            max_priority_within_buffer
        ) else None
        self._max_priority: float | None = None
        self._inner_shape: tuple[int, ...] = ()

    # ------------------------------------------------------------------ hyper-parameters
    @property
    def alpha(self) -> float:
        return self._alpha

    @alpha.setter
    def alpha(self, value: float) -> None:
        self._alpha = float(value)

    @property
    def beta(self) -> float:
        return self._beta

    @beta.setter
    def beta(self, value: float) -> None:
        self._beta = float(value)

    @property
    def max_size(self) -> int:
        return self._max_capacity

    @property
    def device(self) -> torch.device:
        return self._tree_device

    @property
    def default_priority(self) -> float:
        """The stored value :math:`(p_{max} + \\epsilon)^\\alpha` given to new elements."""
        if self._max_tree is not None:
            stored = float(self._max_tree.reduce_all())
            if stored > float("-inf"):
                return stored
            return (1.0 + self._eps) ** self._alpha
        max_priority = 1.0 if self._max_priority is None else self._max_priority
        return (max_priority + self._eps) ** self._alpha

    # ------------------------------------------------------------------ writes
    def _set_stored(self, index, value) -> None:
        """Writes stored values; ``index`` is a slice or a backend array (see ``PriorityTree.array``)."""
        if isinstance(index, slice):
            self._tree.update_range(index.start, index.stop, value)
            if self._max_tree is not None:
                self._max_tree.update_range(index.start, index.stop, value)
            return
        self._tree.update(index, value)
        if self._max_tree is not None:
            tensor = self._tree.tensor(index)
            value = self._tree.tensor(value) if not isinstance(value, float) else torch.tensor(value, dtype=self.dtype)
            self._max_tree._update(tensor, value.to(self._max_tree.device).expand(tensor.shape))

    def _write_default(self, index: Any) -> None:
        index = self._tree.array(self._flat(index))
        n = index.shape[0]
        if n == 0:
            return
        lo, hi = int(index.min()), int(index.max())
        if lo < 0 or hi >= self._max_capacity:
            raise IndexError(
                f"{type(self).__name__}: written indices must lie in [0, {self._max_capacity}) (max_capacity); "
                f"got values in [{lo}, {hi}]. Build the sampler with the storage's capacity."
            )
        if n > 64 and hi - lo == n - 1 and bool((index[1:] - index[:-1] == 1).all()):
            self._set_stored(slice(lo, hi + 1), self.default_priority)
        else:
            self._set_stored(index, self.default_priority)

    def add(self, index: torch.Tensor | int) -> None:
        self._write_default(index)

    def extend(self, index: torch.Tensor | tuple) -> None:
        self._write_default(index)

    def mark_update(self, index: int | torch.Tensor, *, storage=None) -> None:
        self._write_default(index)

    def _flat(self, index: Any) -> torch.Tensor:
        if type(index) is torch.Tensor and index.dtype == torch.long and index.ndim == 1:
            return index
        if isinstance(index, tuple):
            return ravel_index(tuple(_as_index(i) for i in index), (0, *self._inner_shape))
        return _as_index(index, self.device)

    # ------------------------------------------------------------------ sampling
    def sample(self, storage, batch_size: int) -> torch.Tensor:
        n = len(storage)
        if n == 0:
            raise empty_storage_error(self)
        index, weight = self._draw(n, batch_size)
        device = storage._index_device
        if device is not None or index.device.type != "cpu":  # the trees' device is not the storage's
            index, weight = to_device(index, device), to_device(weight, device)
        if storage.ndim > 1:
            self._inner_shape = tuple(storage.shape[1 : storage.ndim])
            index = unravel_index(index, storage.shape[: storage.ndim])
        return index, {"priority_weight": weight}

    def _draw(self, n: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        drawn = self._tree.sample(batch_size, limit=n, beta=self._beta, generator=self._rng)
        if drawn is None:
            raise RuntimeError(
                f"{type(self).__name__}: every stored priority is zero, so no element can be drawn. Use eps > 0 "
                "or update the priorities with positive values."
            )
        return drawn

    # ------------------------------------------------------------------ priorities
    def update_priority(
        self, index: int | torch.Tensor, priority: float | torch.Tensor, *, storage=None
    ) -> None:
        """Sets the priorities of the elements at ``index``.

        Args:
            index (int, tensor or tuple of tensors): the elements (as returned in ``info["index"]``).
            priority (float or tensor): one priority per element, or one for all. Priorities with more
                dims than ``index`` (per-step priorities of multi-step elements) are reduced with
                ``reduction``.

        Keyword Args:
            storage (Storage, optional): when given, indices must point at stored elements.

        Raises:
            ValueError: the numbers of indices and priorities differ, or a priority is negative, NaN or
                infinite. Nothing is updated then.
            IndexError: an index is outside the storage.
        """
        if storage is not None and storage.ndim > 1:
            self._inner_shape = tuple(storage.shape[1 : storage.ndim])
        index = self._flat(index)
        if not isinstance(priority, torch.Tensor) or priority.dtype != self.dtype:
            priority = torch.as_tensor(priority, dtype=self.dtype, device=self.device)
        n = index.numel()
        if priority.numel() != n or priority.ndim > 1:
            priority = self._match(priority, n)
        if n == 0:
            return
        # numpy views on CPU (see PriorityTree): a handful of ~1 µs operations, and no tensor is copied
        tree = self._tree
        flat, values = tree.array(index), tree.array(priority)
        limit = len(storage) if storage is not None else self._max_capacity
        pmax = self._checked_max(values, priority)
        if tree.backend == "numpy":  # one reduction: negative indices are huge as unsigned integers
            bad_index = int(flat.view(np.uint64).max()) >= limit
        else:
            bad_index = int(flat.min()) < 0 or int(flat.max()) >= limit
        if bad_index:
            raise IndexError(
                f"{type(self).__name__}.update_priority: indices must lie in [0, {limit}) (the "
                f"{'stored elements' if storage is not None else 'capacity'}); got values in [{int(flat.min())}, "
                f"{int(flat.max())}]. No priority was updated."
            )
        if self._max_tree is None and (self._max_priority is None or pmax > self._max_priority):
            self._max_priority = pmax
        stored = values + self._eps  # a new array: the caller's priorities are never written to
        if self._alpha != 1.0:
            stored **= self._alpha
        self._set_stored(flat, stored)

    def _checked_max(self, values, priority: torch.Tensor) -> float:
        """The largest priority; raises if any is negative, NaN or infinite.

        On numpy arrays this is one reduction: seen as unsigned integers of the same width, non-negative
        finite floats keep their order and every other value (sign bit set, inf, NaN) is larger than the
        largest finite float.
        """
        if self._tree.backend == "numpy":
            bits, largest = _FLOAT_BITS[values.dtype.itemsize]
            top = values.view(bits).max()
            if top <= largest:
                return float(top.view(values.dtype))
        pmin, pmax = float(values.min()), float(values.max())  # also accepts -0.0
        if not (pmin >= 0 and pmax < math.inf):
            self._raise_bad_priority(priority)
        return pmax

    def _reduce(self, priority: torch.Tensor) -> torch.Tensor:
        reduce = _REDUCTIONS[self.reduction]
        return reduce(priority) if reduce is _median_last else reduce(priority, -1)

    def _match(self, priority: torch.Tensor, n: int) -> torch.Tensor:
        """One priority per index: reduces per-step priorities, broadcasts a single one."""
        if priority.numel() == 1:
            return priority.reshape(1).expand(n)
        if priority.ndim > 1 and priority.shape[0] == n:
            return self._reduce(priority.reshape(n, -1))
        if priority.ndim == 1 and n and priority.numel() > n and priority.numel() % n == 0:
            return self._reduce(priority.reshape(n, -1))
        if priority.numel() == n:
            return priority.reshape(n)
        raise ValueError(
            f"{type(self).__name__}.update_priority: got {priority.numel()} priorities (shape "
            f"{tuple(priority.shape)}) for {n} indices; pass one priority per index (or a single one for all)."
        )

    def _raise_bad_priority(self, priority: torch.Tensor) -> None:
        nan = torch.isnan(priority)
        negative = priority < 0
        infinite = torch.isinf(priority)
        problems = []
        for name, mask in (("NaN", nan), ("negative", negative), ("infinite", infinite)):
            if mask.any():
                positions = mask.nonzero().squeeze(-1)[:5].tolist()
                problems.append(f"{int(mask.sum())} {name} (at positions {positions})")
        raise ValueError(
            f"{type(self).__name__}.update_priority: priorities must be finite and >= 0; got "
            f"{', '.join(problems)}. No priority was updated."
        )

    # ------------------------------------------------------------------ state
    def _empty(self) -> None:
        self._tree.reset()
        if self._max_tree is not None:
            self._max_tree.reset()
        self._max_priority = None

    def _share(self) -> None:
        for tree in (self._tree, self._max_tree):
            if tree is not None:
                tree.share_memory_()

    def state_dict(self) -> dict[str, Any]:
        return {
            "_alpha": torch.tensor(self._alpha, dtype=torch.float64),
            "_beta": torch.tensor(self._beta, dtype=torch.float64),
            "_eps": torch.tensor(self._eps, dtype=torch.float64),
            "_max_priority": torch.tensor(
                float("nan") if self._max_priority is None else self._max_priority, dtype=torch.float64
            ),
            "_stored": self._tree.leaves.abs(),  # never-written leaves hold -0.0 in the tree
            "_written": self._tree.written,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._alpha = float(state_dict["_alpha"])
        self._beta = float(state_dict["_beta"])
        self._eps = float(state_dict["_eps"])
        max_priority = float(state_dict["_max_priority"])
        self._max_priority = None if max_priority != max_priority else max_priority
        stored = state_dict["_stored"].to(self.device, self.dtype)
        if stored.numel() != self._max_capacity:
            raise ValueError(
                f"{type(self).__name__}.load_state_dict: the state holds {stored.numel()} priorities, this "
                f"sampler has max_capacity={self._max_capacity}."
            )
        self._tree.load(stored, state_dict.get("_written"))  # without it, every leaf counts for the minimum
        if self._max_tree is not None:
            self._max_tree.update_range(0, self._max_capacity, torch.where(stored > 0, stored, float("-inf")))

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(max_capacity={self._max_capacity}, alpha={self._alpha}, beta={self._beta}, "
            f"eps={self._eps}, reduction={self.reduction!r})"
        )
