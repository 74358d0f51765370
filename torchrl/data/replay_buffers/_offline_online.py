"""``OfflineToOnlineReplayBuffer``: batches mixing a fixed offline dataset with fresh online data."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl.data.replay_buffers import _buffer_ops as ops
from torchrl.data.replay_buffers._transforms import make_transform
from torchrl.data.replay_buffers._replay_buffer import ReplayBuffer
from torchrl.data.replay_buffers.storages.base import Storage
from torchrl.data.replay_buffers.storages._lazy_tensor import LazyTensorStorage
from torchrl.data.replay_buffers.storages._tensor_storage import TensorStorage
from torchrl.data.replay_buffers._tensordict_replay_buffer import TensorDictReplayBuffer
from torchrl.data.replay_buffers.writers._immutable import ImmutableDatasetWriter


class OfflineToOnlineReplayBuffer:
    """A replay buffer for offline-to-online RL: every batch mixes offline and online elements.

    ``round(batch_size * offline_fraction)`` elements come from the offline dataset and the rest from the
    online buffer (all of them from the dataset while the online buffer is empty). ``extend`` writes to the
    online buffer; :meth:`anneal` lowers the offline fraction linearly to ``0``. Batches carry an
    ``"is_offline"`` entry.

    Args:
        offline_dataset (ReplayBuffer or TensorDict): the offline data (a tensordict is wrapped in a read-only
            buffer).

    Keyword Args:
        online_storage (Storage, optional): the online storage. Defaults to
            ``LazyTensorStorage(online_capacity)``.
        online_capacity (int, optional): the online capacity when no storage is given. Defaults to the
            dataset's size.
        offline_fraction (float, optional): the initial share of offline elements. Defaults to ``0.5``.
        batch_size (int, optional): the default batch size.
        transform (Transform or callable, optional): applied to the mixed batch.
        **dataset_kwargs: forwarded to the offline buffer built from a tensordict.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import OfflineToOnlineReplayBuffer
        >>> offline = TensorDict(obs=torch.zeros(100, 2), batch_size=[100])
        >>> rb = OfflineToOnlineReplayBuffer(offline, online_capacity=50, offline_fraction=0.75, batch_size=8)
        >>> _ = rb.extend(TensorDict(obs=torch.ones(10, 2), batch_size=[10]))
        >>> rb.sample()["is_offline"].sum().item()
        6
        >>> rb.anneal(step=50, total_steps=100); rb.offline_fraction
        0.375
    """

    def __init__(
        self,
        offline_dataset,
        *,
        online_storage: Storage | None = None,
        online_capacity: int | None = None,
        offline_fraction: float = 0.5,
        batch_size: int | None = None,
        transform=None,
        **dataset_kwargs,
    ):
        if isinstance(offline_dataset, TensorDictBase):
            offline_dataset = TensorDictReplayBuffer(
                storage=TensorStorage(offline_dataset), writer=ImmutableDatasetWriter(), **dataset_kwargs
            )
        elif not isinstance(offline_dataset, ReplayBuffer):
            raise TypeError(
                "OfflineToOnlineReplayBuffer: offline_dataset must be a ReplayBuffer (e.g. a dataset) or a "
                f"TensorDict; got {type(offline_dataset).__name__}."
            )
        if not 0.0 <= offline_fraction <= 1.0:
            raise ValueError(f"OfflineToOnlineReplayBuffer: offline_fraction must lie in [0, 1], got {offline_fraction}.")
        if online_storage is None:
            online_storage = LazyTensorStorage(online_capacity or max(len(offline_dataset), 1))
        self._offline = offline_dataset
        self._online = TensorDictReplayBuffer(storage=online_storage)
        self._initial_fraction = offline_fraction
        self._offline_fraction = offline_fraction
        self._batch_size = batch_size
        self._transform = make_transform(transform)

    @property
    def offline_buffer(self) -> ReplayBuffer:
        return self._offline

    @property
    def online_buffer(self) -> ReplayBuffer:
        return self._online

    @property
    def offline_fraction(self) -> float:
        return self._offline_fraction

    def __len__(self) -> int:
        return len(self._offline) + len(self._online)

    def anneal(self, step: int, total_steps: int) -> None:
        """Sets the offline fraction to ``initial * (1 - step / total_steps)`` (clipped at 0)."""
        progress = min(max(step / max(total_steps, 1), 0.0), 1.0)
        self._offline_fraction = self._initial_fraction * (1.0 - progress)

    def extend(self, data) -> torch.Tensor:
        return self._online.extend(data)

    def sample(self, batch_size: int | None = None) -> TensorDictBase:
        batch_size = batch_size if batch_size is not None else self._batch_size
        if batch_size is None:
            raise RuntimeError("OfflineToOnlineReplayBuffer.sample: pass batch_size or build the buffer with one.")
        n_offline = batch_size if len(self._online) == 0 else round(batch_size * self._offline_fraction)
        parts = []
        if n_offline:
            part = self._offline.sample(n_offline)
            part.set("is_offline", torch.ones(part.shape[:1], dtype=torch.bool))
            parts.append(part)
        if batch_size - n_offline:
            part = self._online.sample(batch_size - n_offline)
            part.set("is_offline", torch.zeros(part.shape[:1], dtype=torch.bool))
            parts.append(part)
        keys = set.intersection(*[set(p.keys(True, True)) for p in parts])
        data = torch.cat([p.select(*keys) for p in parts], 0)
        if self._transform is not None and len(self._transform):
            data = ops.apply_transform(self._transform, data, inverse=False)
        return data

    def __repr__(self) -> str:
        return (
            f"OfflineToOnlineReplayBuffer(offline={len(self._offline)}, online={len(self._online)}, "
            f"offline_fraction={self._offline_fraction})"
        )
