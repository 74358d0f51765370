"""``TensorDictReplayBuffer``: a replay buffer of TensorDicts that writes sample metadata into the batch."""
from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl.data.replay_buffers import _buffer_ops as ops
from torchrl.data.replay_buffers._replay_buffer import ReplayBuffer
from torchrl.data.replay_buffers.samplers.prioritized import PrioritizedSampler
from torchrl.data.replay_buffers.writers.round_robin import TensorDictRoundRobinWriter


class TensorDictReplayBuffer(ReplayBuffer):
    """A :class:`ReplayBuffer` for TensorDict data.

    Sampled batches carry the sample info as entries: ``"index"`` (the storage index of every element,
    stacked coordinates for multi-dimensional storages), ``"priority_weight"`` with prioritized samplers,
    slice boundary flags with slice samplers. As in TorchRL, elements read back carry their slot as an
    ``"index"`` entry (``rb[:]`` has it too) and the extended tensordict is left as it was; a sampled batch
    whose ``priority_key`` entry was filled (e.g. by a loss) can be passed to :meth:`update_tensordict_priority`.

    Keyword Args:
        priority_key (NestedKey, optional): the entry holding priorities. Defaults to ``"td_error"``.
        other keyword arguments: as :class:`ReplayBuffer` (the default writer is
            :class:`TensorDictRoundRobinWriter`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import TensorDictReplayBuffer, LazyTensorStorage
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
        >>> _ = rb.extend(TensorDict(obs=torch.arange(10), batch_size=[10]))
        >>> sample = rb.sample()
        >>> (sample["obs"] == sample["index"]).all()
        tensor(True)
    """

    def __init__(self, *, priority_key: Any = "td_error", **kwargs) -> None:
        if kwargs.get("writer") is None:
            kwargs["writer"] = TensorDictRoundRobinWriter
        super().__init__(**kwargs)
        self.priority_key = priority_key

    _add_unsqueezes = False  # as TorchRL's: the inverse transforms see the element as given

    def add(self, data: TensorDictBase) -> int:
        index = super().add(data)
        if (
            index is not None
            and not isinstance(index, torch.Tensor)  # an empty index: the inverse transforms kept it back
            and isinstance(self._sampler, PrioritizedSampler)
            and isinstance(data, TensorDictBase)
            and self.priority_key in data.keys(True)
        ):
            self._sampler.update_priority(index, data.get(self.priority_key), storage=self._storage)
        return index

    def extend(self, tensordicts: TensorDictBase, *, update_priority: bool | None = None) -> torch.Tensor:
        index = super().extend(tensordicts)
        if not isinstance(tensordicts, TensorDictBase) or index is None or index.numel() == 0:
            return index
        if update_priority is None:
            update_priority = isinstance(self._sampler, PrioritizedSampler) and self.priority_key in tensordicts.keys(True)
        if update_priority:
            priority = tensordicts.get(self.priority_key, None)
            if priority is not None and self._storage.ndim == 1 and tensordicts.batch_dims and (
                index.numel() == tensordicts.shape[0]
            ):  # the written slots straight from the writer (CPU, as the trees): no round trip through the data
                self.update_priority(index, priority.detach())
                return index
            if tensordicts.batch_dims and index.numel() == tensordicts.shape[0]:
                batch = tensordicts.batch_size  # the written slots, in a copy: the input stays as it was
                tensordicts = tensordicts.copy().set("index", index.reshape(-1, *([1] * (len(batch) - 1))).expand(batch))
            self.update_tensordict_priority(tensordicts)
        return index

    def __getitem__(self, index):
        """The stored elements at ``index`` with their slots as an ``"index"`` entry (as TorchRL's)."""
        if isinstance(index, tuple) and len(index) == 1 and self._storage.ndim == 1:
            index = index[0]  # a coordinate tuple, as slice samplers report in their info
        data = super().__getitem__(index)
        if isinstance(data, TensorDictBase) and "index" not in data.keys() and self._storage.ndim == 1:
            n = len(self)
            if isinstance(index, slice):
                slots = torch.arange(*index.indices(n))
            else:
                slots = torch.as_tensor(index)
                if slots.dtype == torch.bool:
                    slots = slots.nonzero().squeeze(-1)
                slots = torch.where(slots < 0, slots + n, slots)
            if slots.ndim == 1 and data.batch_dims >= 1 and data.shape[0] == slots.numel():
                slots = slots.reshape(-1, *([1] * (data.batch_dims - 1))).expand(data.batch_size)
            if slots.shape == data.batch_size:
                data.set("index", slots.to(torch.int64))
        return data

    def sample(
        self, batch_size: int | None = None, return_info: bool = False, include_info: bool | None = None
    ) -> TensorDictBase:
        data, info = self._sample_maybe_prefetched(batch_size)
        if include_info is not False and isinstance(data, TensorDictBase):
            ops.info_into_data(data, info)
        return (data, info) if return_info else data

    def update_tensordict_priority(self, data: TensorDictBase) -> None:
        """Sets priorities from ``data[priority_key]`` at ``data["index"]`` (as sampled)."""
        if "index" not in data.keys():
            raise KeyError(
                f"{type(self).__name__}.update_tensordict_priority: the tensordict has no 'index' entry; pass a "
                "batch returned by sample() (or extended through this buffer)."
            )
        priority = data.get(self.priority_key, None)
        if priority is None:
            raise KeyError(
                f"{type(self).__name__}.update_tensordict_priority: the tensordict has no {self.priority_key!r} "
                "entry holding the new priorities."
            )
        index = data.get("index")
        if self._storage.ndim > 1 and index.ndim >= 2:
            index = tuple(index.reshape(-1, index.shape[-1]).unbind(-1))
            priority = priority.reshape(index[0].numel(), -1)
        elif index.ndim > 1:
            index = index.reshape(index.shape[0], -1)[:, 0]
        self.update_priority(index, priority.detach())
