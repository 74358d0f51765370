"""``SamplerEnsemble``: samples from the members of a ``StorageEnsemble``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from torchrl.data.replay_buffers.samplers.base import Sampler


class SamplerEnsemble(Sampler):
    """Chooses which member buffers a batch comes from, then samples each with its own sampler.

    Each call draws ``num_buffer_sampled`` members (all of them with ``sample_from_all=True``), with
    probabilities ``p`` (uniform by default, with replacement), and splits the batch evenly between the
    draws. The index is a list of ``(member_id, member_index)`` pairs; ``info["buffer_ids"]`` lists the
    drawn members and ``info["infos"]`` each member sampler's info.

    Args:
        *samplers (Sampler): one sampler per member storage.

    Keyword Args:
        p (sequence of float, optional): the probability of drawing each member.
        sample_from_all (bool, optional): draw every member once per batch. Exclusive with ``p`` and
            ``num_buffer_sampled``. Defaults to ``False``.
        num_buffer_sampled (int, optional): members drawn per batch. Defaults to the number of members.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import SamplerEnsemble, RandomSampler, StorageEnsemble
        >>> from torchrl.data.replay_buffers import LazyTensorStorage
        >>> storages = StorageEnsemble(LazyTensorStorage(4), LazyTensorStorage(4))
        >>> storages[0].set(torch.arange(4), torch.zeros(4)); storages[1].set(torch.arange(4), torch.ones(4))
        >>> sampler = SamplerEnsemble(RandomSampler(), RandomSampler(), sample_from_all=True)
        >>> index, info = sampler.sample(storages, 6)
        >>> info["buffer_ids"].tolist(), [len(i) for _, i in index]
        ([0, 1], [3, 3])
    """

    def __init__(
        self,
        *samplers: Sampler,
        p: Any = None,
        sample_from_all: bool = False,
        num_buffer_sampled: int | None = None,
    ):
        if not samplers:
            raise ValueError("SamplerEnsemble needs at least one sampler.")
        if sample_from_all and (p is not None or num_buffer_sampled is not None):
            raise ValueError("SamplerEnsemble: sample_from_all=True excludes p and num_buffer_sampled.")
        self._samplers = list(samplers)
        self._sample_from_all = sample_from_all
        self.p = p
        self.num_buffer_sampled = num_buffer_sampled

    @property
    def p(self) -> torch.Tensor | None:
        return self._p

    @p.setter
    def p(self, value: Any) -> None:
        if value is None:
            self._p = None
            return
        p = torch.as_tensor(value, dtype=torch.float)
        if p.shape != (len(self._samplers),) or (p < 0).any() or p.sum() <= 0:
            raise ValueError(
                f"SamplerEnsemble: p must hold {len(self._samplers)} non-negative weights with a positive sum; "
                f"got {value!r}."
            )
        self._p = p / p.sum()

    @property
    def num_buffer_sampled(self) -> int:
        return self._num_buffer_sampled if self._num_buffer_sampled is not None else len(self._samplers)

    @num_buffer_sampled.setter
    def num_buffer_sampled(self, value: int | None) -> None:
        self._num_buffer_sampled = value

    def __getitem__(self, index):
        return self._samplers[index]

    def __len__(self):
        return len(self._samplers)

    def _draw_members(self) -> torch.Tensor:
        if self._sample_from_all:
            return torch.arange(len(self._samplers))
        p = self._p if self._p is not None else torch.full((len(self._samplers),), 1.0 / len(self._samplers))
        return torch.multinomial(p, self.num_buffer_sampled, replacement=True, generator=self._rng)

    def sample(self, storage, batch_size):
        members = self._draw_members()
        if batch_size % members.numel():
            raise ValueError(
                f"SamplerEnsemble: batch_size={batch_size} must be a multiple of the {members.numel()} members "
                "sampled per batch."
            )
        per_member = batch_size // members.numel()
        index, infos = [], []
        for member in members.tolist():
            sub_index, sub_info = self._samplers[member].sample(storage[member], per_member)
            index.append((member, sub_index))
            infos.append(sub_info)
        return index, {"buffer_ids": members, "infos": infos}

    def can_sample(self, storage, batch_size: int) -> bool:
        return all(s.can_sample(storage[i], batch_size) for i, s in enumerate(self._samplers))

    @property
    def ran_out(self) -> bool:
        return any(s.ran_out for s in self._samplers)

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        for s in self._samplers:
            if s.ran_out != value and hasattr(s, "_ran_out"):
                s.ran_out = value

    def _empty(self) -> None:
        for s in self._samplers:
            s._empty()

    def state_dict(self) -> dict[str, Any]:
        return {f"sampler_{i}": s.state_dict() for i, s in enumerate(self._samplers)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for i, s in enumerate(self._samplers):
            s.load_state_dict(state_dict[f"sampler_{i}"])

    def dumps(self, path: Path):
        for i, s in enumerate(self._samplers):
            s.dumps(Path(path) / f"sampler_{i}")

    def loads(self, path: Path):
        for i, s in enumerate(self._samplers):
            s.loads(Path(path) / f"sampler_{i}")
