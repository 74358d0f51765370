"""Prioritized replay buffers (plain data and TensorDict flavours)."""
from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl.data.replay_buffers import _buffer_ops as ops
from torchrl.data.replay_buffers._replay_buffer import ReplayBuffer, _build
from torchrl.data.replay_buffers.samplers.prioritized import PrioritizedSampler
from torchrl.data.replay_buffers.storages._list_storage import ListStorage
from torchrl.data.replay_buffers._tensordict_replay_buffer import TensorDictReplayBuffer


class _Prioritized:
    """Shared by the prioritized buffers: sampler construction and the ``sync=False`` write path.

    With ``sync=False``, writes do not touch the priority trees (so writer processes sharing the buffer
    never contend on them); before every sample or priority update, the owner gives the elements written
    since the last catch-up the default priority (asynchronous prioritized writes).
    """

    def _prioritized_init(self, kwargs: dict, *, alpha, beta, eps, dtype, reduction, sampler_device, sync) -> dict:
        storage = _build(kwargs.get("storage"), lambda: ListStorage(1000))
        kwargs["storage"] = storage
        if kwargs.get("sampler") is None:
            if storage.max_size is None:
                raise ValueError(f"{type(self).__name__}: prioritized sampling needs a storage with a max_size.")
            kwargs["sampler"] = PrioritizedSampler(
                storage.max_size, alpha, beta, eps=eps, dtype=dtype, reduction=reduction, device=sampler_device
            )
        elif sampler_device is not None:
            raise TypeError(f"{type(self).__name__}: sampler_device cannot be combined with sampler=.")
        self._sync = sync
        self._seen_writes = 0
        return kwargs

    @property
    def prioritized_sampler(self) -> PrioritizedSampler:
        return self._sampler

    def _catch_up(self) -> None:
        if self._sync:
            return
        writer = self._writer
        new = writer._write_count - self._seen_writes
        if new <= 0:
            return
        capacity = self._storage._max_size_along_dim0()
        rows = torch.arange(self._storage._rows) if new >= capacity else (
            torch.arange(writer._cursor - new, writer._cursor) % capacity
        )
        if self._storage.ndim > 1:
            rows = ops.flat_element_index(self._storage, rows)
        self._sampler.extend(rows)
        self._seen_writes = writer._write_count

    def _record_write(self, index: int) -> None:
        if self._sync:
            self._sampler.add(index)

    def _record_writes(self, index: torch.Tensor) -> None:
        if self._sync:
            ReplayBuffer._record_writes(self, index)

    def _sample(self, batch_size: int):
        with self._lock:
            self._catch_up()
            return ReplayBuffer._sample(self, batch_size)

    def update_priority(self, index: int | torch.Tensor | tuple[torch.Tensor], priority: int | torch.Tensor) -> None:
        with self._lock:
            self._catch_up()
            ReplayBuffer.update_priority(self, index, priority)

    def empty(self, empty_write_count: bool = True):
        ReplayBuffer.empty(self, empty_write_count)
        self._seen_writes = self._writer._write_count

    def set_rng(self, generator) -> None:
        ReplayBuffer.set_rng(self, generator)


class PrioritizedReplayBuffer(_Prioritized, ReplayBuffer):
    """A :class:`ReplayBuffer` with a :class:`PrioritizedSampler` (Schaul et al., 2015).

    Keyword Args:
        alpha (float): the prioritization exponent.
        beta (float): the importance-sampling exponent.
        eps (float, optional): added to priorities. Defaults to ``1e-8``.
        dtype (torch.dtype, optional): the priority trees' dtype. Defaults to ``torch.float``.
        storage, sampler, collate_fn, pin_memory, prefetch, transform, batch_size, dim_extend, generator,
            shared, compilable, delayed_init: as :class:`ReplayBuffer`.
        sampler_device (torch.device, optional): where the priority trees live (exclusive with ``sampler``).
        sync (bool, optional): ``False`` defers the default priority of new elements to the next sample or
            priority update, so that writes (possibly from other processes) never touch the trees.
            Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage, PrioritizedReplayBuffer
        >>> rb = PrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(max_size=10000))
        >>> _ = rb.extend(TensorDict(obs=torch.randn(100, 4), batch_size=[100]))
        >>> sample, info = rb.sample(32, return_info=True)
        >>> info["index"].shape, info["priority_weight"].shape
        (torch.Size([32]), torch.Size([32]))
        >>> rb.update_priority(info["index"], torch.rand(32))
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        sampler_device: Any = None,
        sync: bool = True,
        reduction: str = "max",
        **kwargs,
    ) -> None:
        kwargs = self._prioritized_init(
            kwargs, alpha=alpha, beta=beta, eps=eps, dtype=dtype, reduction=reduction,
            sampler_device=sampler_device, sync=sync,
        )
        ReplayBuffer.__init__(self, **kwargs)

    def empty(self, empty_write_count: bool = True):
        _Prioritized.empty(self, empty_write_count)

    def update_priority(self, index: int | torch.Tensor | tuple[torch.Tensor], priority: int | torch.Tensor) -> None:
        _Prioritized.update_priority(self, index, priority)

    def set_rng(self, generator) -> None:
        _Prioritized.set_rng(self, generator)


class TensorDictPrioritizedReplayBuffer(_Prioritized, TensorDictReplayBuffer):
    """A :class:`TensorDictReplayBuffer` with a :class:`PrioritizedSampler`.

    Sampled batches carry ``"index"`` and ``"priority_weight"``; after computing new priorities into the
    batch's ``priority_key`` entry, pass it to :meth:`update_tensordict_priority`. Extending with a
    tensordict that holds ``priority_key`` uses those values as initial priorities.

    Keyword Args:
        alpha (float), beta (float), eps (float), sampler_device, sync: as :class:`PrioritizedReplayBuffer`.
        priority_key (NestedKey, optional): the entry holding priorities. Defaults to ``"td_error"``.
        reduction (str, optional): how multi-step priorities are reduced. Defaults to ``"max"``.
        other keyword arguments: as :class:`ReplayBuffer`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage, TensorDictPrioritizedReplayBuffer
        >>> rb = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(1000),
        ...                                        batch_size=8)
        >>> _ = rb.extend(TensorDict(obs=torch.randn(100, 3), batch_size=[100]))
        >>> batch = rb.sample()
        >>> batch["td_error"] = torch.rand(8)
        >>> rb.update_tensordict_priority(batch)
        >>> sorted(batch.keys())
        ['index', 'obs', 'priority_weight', 'td_error']
    """

    def __init__(
        self,
        *,
        alpha: float,
        beta: float,
        priority_key: Any = "td_error",
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        sampler_device: Any = None,
        sync: bool = True,
        reduction: str = "max",
        **kwargs,
    ) -> None:
        kwargs = self._prioritized_init(
            kwargs, alpha=alpha, beta=beta, eps=eps, dtype=dtype, reduction=reduction,
            sampler_device=sampler_device, sync=sync,
        )
        TensorDictReplayBuffer.__init__(self, priority_key=priority_key, **kwargs)

    def add(self, data: TensorDictBase) -> int:
        return TensorDictReplayBuffer.add(self, data)

    def extend(self, tensordicts: TensorDictBase, *, update_priority: bool | None = None) -> torch.Tensor:
        return TensorDictReplayBuffer.extend(self, tensordicts, update_priority=update_priority)

    def empty(self, empty_write_count: bool = True):
        _Prioritized.empty(self, empty_write_count)

    def update_priority(self, index: int | torch.Tensor | tuple[torch.Tensor], priority: int | torch.Tensor) -> None:
        _Prioritized.update_priority(self, index, priority)

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        TensorDictReplayBuffer.update_tensordict_priority(self, data)

    def set_rng(self, generator) -> None:
        _Prioritized.set_rng(self, generator)
