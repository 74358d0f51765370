"""``ReplayBufferEnsemble``: samples batches made of sub-batches of several replay buffers."""
from __future__ import annotations

from typing import Any, Callable, Mapping

import torch
from tensordict import LazyStackedTensorDict, NestedKey, TensorDict, TensorDictBase

from torchrl.data.replay_buffers import _buffer_ops as ops
from torchrl.data.replay_buffers._utils import _key_str
from torchrl.data.replay_buffers._conditional import ConditionalUpdateResult
from torchrl.data.replay_buffers._replay_buffer import ReplayBuffer
from torchrl.data.replay_buffers.samplers.ensemble import SamplerEnsemble
from torchrl.data.replay_buffers.storages.ensemble import StorageEnsemble
from torchrl.data.replay_buffers.writers.ensemble import WriterEnsemble


class ReplayBufferEnsemble(ReplayBuffer):
    """An ensemble of replay buffers sampled together.

    Each batch is drawn from ``num_buffer_sampled`` members (chosen with probabilities ``p``, or all of
    them with ``sample_from_all=True``), each contributing ``batch_size // num_buffer_sampled`` elements
    read through its own transform and collate function. The result stacks the sub-batches (a
    ``[num_buffer_sampled, batch_size // num_buffer_sampled]`` tensordict, lazily stacked when the members
    hold different keys) with ``"buffer_ids"`` and ``"index"`` entries; the ensemble's own transform runs
    last.

    Writes go to the members (``ensemble[i].extend(...)``), or through the ensemble when it is built with
    ``routing_key`` (each element goes to the member named by its ``routing_key`` entry) or ``routing_dim``
    (slice ``i`` along that dim goes to member ``i``).

    Args:
        *rbs (ReplayBuffer): the members. Alternatively pass ``storages``, ``samplers`` and ``writers``.

    Keyword Args:
        storages (StorageEnsemble), samplers (SamplerEnsemble), writers (WriterEnsemble): the components,
            when no buffers are given.
        transform (Transform, optional): applied to the stacked batch.
        batch_size (int, optional): the default batch size.
        collate_fn (callable, optional): merges the list of sub-batches. Defaults to stacking them.
        collate_fns (list of callables, optional): per-member collate functions.
        p (sequence of float, optional), sample_from_all (bool), num_buffer_sampled (int): see
            :class:`SamplerEnsemble`.
        generator (torch.Generator, optional), shared (bool, optional): as :class:`ReplayBuffer`.
        routing_key (NestedKey, optional): the entry naming each element's member, for routed writes.
        routing_dim (int, optional): the dim whose slices go to the members, for routed writes.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import ReplayBufferEnsemble, TensorDictReplayBuffer, LazyTensorStorage
        >>> rb0 = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        >>> rb1 = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        >>> _ = rb0.extend(TensorDict(x=torch.zeros(5), batch_size=[5]))
        >>> _ = rb1.extend(TensorDict(x=torch.ones(5), batch_size=[5]))
        >>> ensemble = ReplayBufferEnsemble(rb0, rb1, sample_from_all=True, batch_size=4)
        >>> batch = ensemble.sample()
        >>> batch.shape, batch["x"].tolist(), batch["buffer_ids"].tolist()
        (torch.Size([2, 2]), [[0.0, 0.0], [1.0, 1.0]], [[0, 0], [1, 1]])
    """

    def __init__(
        self,
        *rbs: ReplayBuffer,
        storages: StorageEnsemble | None = None,
        samplers: SamplerEnsemble | None = None,
        writers: WriterEnsemble | None = None,
        transform: Any = None,
        batch_size: int | None = None,
        collate_fn: Callable | None = None,
        collate_fns: list[Callable] | None = None,
        p: Any = None,
        sample_from_all: bool = False,
        num_buffer_sampled: int | None = None,
        generator: torch.Generator | None = None,
        shared: bool = False,
        routing_key: NestedKey | None = None,
        routing_dim: int | None = None,
        **kwargs,
    ):
        if rbs:
            if storages is not None or samplers is not None or writers is not None:
                raise TypeError("ReplayBufferEnsemble: pass either replay buffers or storages/samplers/writers.")
            storages = StorageEnsemble(*[rb._storage for rb in rbs], transforms=[rb._transform for rb in rbs])
            writers = WriterEnsemble(*[rb._writer for rb in rbs])
            samplers = SamplerEnsemble(
                *[rb._sampler for rb in rbs], p=p, sample_from_all=sample_from_all, num_buffer_sampled=num_buffer_sampled
            )
            collate_fns = [rb._collate_fn for rb in rbs] if collate_fns is None else collate_fns
        elif storages is None or samplers is None or writers is None:
            raise TypeError("ReplayBufferEnsemble: pass replay buffers, or all of storages, samplers and writers.")
        if routing_key is not None and routing_dim is not None:
            raise TypeError("ReplayBufferEnsemble: routing_key and routing_dim are exclusive.")
        if (routing_key is not None or routing_dim is not None) and not rbs:
            raise TypeError("ReplayBufferEnsemble: routed writes need the member buffers (pass them as *rbs).")
        self._rbs = list(rbs)
        n = len(storages._storages)
        self._collate_fns = list(collate_fns) if collate_fns is not None else [ops.default_collate] * n
        self._routing_key = routing_key
        self._routing_dim = routing_dim
        super().__init__(
            storage=storages,
            sampler=samplers,
            writer=writers,
            transform=transform,
            batch_size=batch_size,
            collate_fn=collate_fn if collate_fn is not None else _stack_parts,
            generator=generator,
            shared=shared,
            **kwargs,
        )

    def __len__(self):
        return len(self._storage._storages)

    def __getitem__(self, index: int | torch.Tensor | tuple | Any) -> Any:
        if isinstance(index, int):
            return self._rbs[index] if self._rbs else self._storage[index]
        if isinstance(index, tuple) and len(index) == 2:
            buffer_id, sub_index = index
            return self._rbs[int(buffer_id)][sub_index] if self._rbs else self._storage._storages[int(buffer_id)].get(sub_index)
        raise IndexError(
            f"ReplayBufferEnsemble: index with a member number (ensemble[i]) or a (member, index) pair; got {index!r}."
        )

    def _sample(self, batch_size: int) -> tuple[Any, dict]:
        with self._lock:
            index, info = self._sampler.sample(self._storage, batch_size)
            parts = self._storage.get(index)
        for position, ((member, sub_index), part) in enumerate(zip(index, parts)):
            part = self._collate_fns[member](part)
            if isinstance(part, TensorDictBase):
                sub = torch.stack(sub_index, -1) if isinstance(sub_index, tuple) else sub_index
                part.set("buffer_ids", torch.full(part.shape[:1], member, dtype=torch.long))
                part.set("index", sub.reshape(*part.shape[:1], *sub.shape[1:]))
            parts[position] = part
        data = self._collate_fn(parts)
        info["index"] = TensorDict(
            buffer_ids=torch.stack([torch.full((len(_first(i)),), m) for m, i in index]),
            index=torch.stack([_first(i) for _, i in index]),
            batch_size=[len(index), len(_first(index[0][1]))],
        )
        if self._transform is not None and len(self._transform):
            data = ops.apply_transform(self._transform, data, inverse=False)
        return data, info

    # ---------------------------------------------------------------- routed writes
    def _route(self, data: TensorDictBase) -> list[tuple[int, Any, torch.Tensor | None]]:
        if self._routing_key is not None:
            ids = data.get(self._routing_key, None)
            if ids is None:
                raise KeyError(f"ReplayBufferEnsemble: the data has no routing entry {_key_str(self._routing_key)}.")
            ids = ids.reshape(data.shape[0], -1)[:, 0].long()
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= len(self._rbs)):
                raise ValueError(
                    f"ReplayBufferEnsemble: routing ids must lie in [0, {len(self._rbs)}); got values in "
                    f"[{int(ids.min())}, {int(ids.max())}]."
                )
            return [(m, data[ids == m], (ids == m).nonzero().squeeze(-1)) for m in ids.unique().tolist()]
        if self._routing_dim is not None:
            parts = data.unbind(self._routing_dim)
            if len(parts) != len(self._rbs):
                raise ValueError(
                    f"ReplayBufferEnsemble: dim {self._routing_dim} has {len(parts)} slices for {len(self._rbs)} members."
                )
            return [(m, part, None) for m, part in enumerate(parts)]
        raise RuntimeError(
            "ReplayBufferEnsemble: writing directly to the ensemble needs routing_key= or routing_dim=; otherwise "
            "extend the members (ensemble[i].extend(...))."
        )

    def extend(self, data: TensorDictBase, *, update_priority: bool | None = None) -> TensorDictBase:
        routes = self._route(data)
        with self._lock:
            if self._routing_dim is not None:
                results = [self._rbs[m].extend(part) for m, part, _ in routes]
                return TensorDict(
                    buffer_ids=torch.stack([torch.full_like(r, m) for (m, _, _), r in zip(routes, results)], 0),
                    index=torch.stack(results, 0),
                    batch_size=[len(results), results[0].numel()],
                )
            buffer_ids = torch.empty(data.shape[0], dtype=torch.long)
            index = torch.empty(data.shape[0], dtype=torch.long)
            for member, part, rows in routes:
                if part.shape[0] == 0:  # nothing routed to this member (an empty extend raises)
                    continue
                buffer_ids[rows] = member
                index[rows] = self._rbs[member].extend(part)
        return TensorDict(buffer_ids=buffer_ids, index=index, batch_size=[data.shape[0]])

    def add(self, data: TensorDictBase) -> TensorDictBase:
        return self.extend(data.unsqueeze(0))[0]

    def end_streams(
        self,
        *,
        end_key: NestedKey = ("next", "done"),
        terminated_key: NestedKey | None = ("next", "terminated"),
        truncated_key: NestedKey | None = ("next", "truncated"),
    ) -> None:
        """Marks the newest element of every member as the end of its trajectory (truncated, not terminated)."""
        with self._lock:
            for storage in self._storage._storages:
                if not len(storage):
                    continue
                row = storage._last_row()
                content = storage._storage
                for key, value in ((end_key, True), (truncated_key, True), (terminated_key, False)):
                    if key is not None and key in content.keys(True, True):
                        content.get(key)[row] = value
                storage._version += 1

    def stats(self) -> dict[str, int | float | bool]:
        stats = {"members": len(self), "size": sum(len(s) for s in self._storage._storages)}
        for i, rb in enumerate(self._rbs):
            stats[f"member_{i}_size"] = len(rb)
        return stats

    def update_if_present(
        self,
        *,
        index: TensorDictBase,
        generation: torch.Tensor,
        patch: Mapping[NestedKey, torch.Tensor] | TensorDictBase,
        version_key: NestedKey | None = None,
        version: int | torch.Tensor | None = None,
        require_newer: bool = False,
    ) -> ConditionalUpdateResult:
        """:meth:`ReplayBuffer.update_if_present` with ``index = TensorDict(buffer_ids=..., index=...)``."""
        buffer_ids = index.get("buffer_ids").reshape(-1)
        sub_index = index.get("index").reshape(-1)
        generation = torch.as_tensor(generation).reshape(-1)
        updated = torch.zeros(buffer_ids.shape, dtype=torch.bool)
        rejected = torch.zeros(buffer_ids.shape, dtype=torch.bool) if version_key is not None else None
        for member in buffer_ids.unique().tolist():
            rows = buffer_ids == member
            member_patch = {k: torch.as_tensor(v).reshape(buffer_ids.numel(), *torch.as_tensor(v).shape[index.ndim:])[rows]
                            for k, v in (patch.items(True, True) if isinstance(patch, TensorDictBase) else patch.items())}
            member_version = None if version is None else torch.as_tensor(version).reshape(-1).expand(buffer_ids.numel())[rows]
            result = self._rbs[member].update_if_present(
                index=sub_index[rows], generation=generation[rows], patch=member_patch, version_key=version_key,
                version=member_version, require_newer=require_newer,
            )
            updated[rows] = result.updated
            if rejected is not None:
                rejected[rows] = result.version_rejected
        return ConditionalUpdateResult(updated=updated, version_rejected=rejected, batch_size=[buffer_ids.numel()])


def _first(sub_index: Any) -> torch.Tensor:
    return sub_index[0] if isinstance(sub_index, tuple) else sub_index


def _stack_parts(parts: list) -> Any:
    if parts and all(isinstance(p, TensorDictBase) for p in parts):
        return LazyStackedTensorDict.maybe_dense_stack(parts)
    if parts and all(isinstance(p, torch.Tensor) for p in parts):
        return torch.stack(parts)
    return parts
