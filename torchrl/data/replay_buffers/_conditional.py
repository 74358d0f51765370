"""Conditional writes: update sampled records only if their slots still hold the sampled data."""
from __future__ import annotations

from typing import Any, Mapping

import torch
from tensordict import TensorClass, TensorDictBase

from torchrl.data.replay_buffers._utils import _as_index, _key_str


class ConditionalUpdateResult(TensorClass["nocast"]):
    """The outcome of ``ReplayBuffer.update_if_present``, one row per requested index.

    Attributes:
        updated (Tensor): ``True`` where the patch was written.
        version_rejected (Tensor, optional): ``True`` where the slot was current but its stored version
            won against the given one (only with ``version_key``).

    Examples:
        >>> import torch
        >>> result = ConditionalUpdateResult(updated=torch.tensor([True, False, False]),
        ...                                  version_rejected=torch.tensor([False, True, False]), batch_size=[3])
        >>> result.updated_count, result.version_rejected_count, result.stale_count
        (1, 1, 1)
    """

    updated: torch.Tensor
    version_rejected: torch.Tensor | None = None

    @property
    def updated_count(self) -> int:
        """How many records were written."""
        return int(self.updated.sum())

    @property
    def version_rejected_count(self) -> int:
        """How many current records were left alone because of their version."""
        return 0 if self.version_rejected is None else int(self.version_rejected.sum())

    @property
    def stale_count(self) -> int:
        """How many records were left alone because their slot was overwritten since sampling."""
        return self.updated.numel() - self.updated_count - self.version_rejected_count


def update_if_present(
    rb,
    index: Any,
    generation: torch.Tensor,
    patch: Mapping | TensorDictBase,
    version_key: Any,
    version: Any,
    require_newer: bool,
) -> ConditionalUpdateResult:
    """The body of ``ReplayBuffer.update_if_present`` (the caller holds the buffer lock)."""
    writer = rb._writer
    if not writer.tracks_generations:
        raise RuntimeError(
            f"{type(rb).__name__}.update_if_present needs a writer that tracks generations: build the buffer "
            "with writer=RoundRobinWriter(track_generations=True)."
        )
    if isinstance(index, torch.Tensor) and index.ndim == 2 and rb._storage.ndim > 1:
        index = tuple(index.unbind(-1))
    rows = index[0] if isinstance(index, tuple) else _as_index(index)
    generation = torch.as_tensor(generation).reshape(-1)
    if generation.numel() != rows.numel():
        raise ValueError(
            f"{type(rb).__name__}.update_if_present: got {generation.numel()} generations for {rows.numel()} indices."
        )
    generations = writer.generations_of(rows)  # on the storage's device
    current = generations == generation.to(generations.device)
    content = rb._stored_rows()
    rejected = None
    ok = current
    if version_key is not None:
        if version is None:
            raise ValueError(f"{type(rb).__name__}.update_if_present: version_key needs version=.")
        stored = content.get(version_key)[index].reshape(rows.numel(), -1)[:, 0]
        version = torch.as_tensor(version, dtype=stored.dtype).reshape(-1).expand(rows.numel())
        wins = version > stored if require_newer else version >= stored
        rejected = current & ~wins
        ok = current & wins
    if ok.any():
        target = tuple(i[ok] for i in index) if isinstance(index, tuple) else _as_index(index)[ok]
        items = patch.items(True, True) if isinstance(patch, TensorDictBase) else patch.items()
        for key, value in items:
            if key not in content.keys(True, True):
                raise KeyError(f"{type(rb).__name__}.update_if_present: the storage has no entry {_key_str(key)}.")
            content.get(key)[target] = torch.as_tensor(value)[ok].to(content.get(key).dtype)
        if version_key is not None:
            leaf = content.get(version_key)
            leaf[target] = version[ok].reshape(-1, *([1] * (leaf.ndim - 1))).expand_as(leaf[target]).to(leaf.dtype)
        rb._storage._version += 1
    return ConditionalUpdateResult(updated=ok, version_rejected=rejected, batch_size=[rows.numel()])
