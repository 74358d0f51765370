"""``WriterEnsemble``: the writers of the members of a ``ReplayBufferEnsemble``."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl.data.replay_buffers.writers.base import Writer


class WriterEnsemble(Writer):
    """Holds one writer per member storage; writes go through the members (or a routed ensemble buffer).

    Args:
        *writers (Writer): the member writers.

    Examples:
        >>> from torchrl.data.replay_buffers import WriterEnsemble, RoundRobinWriter
        >>> writers = WriterEnsemble(RoundRobinWriter(), RoundRobinWriter())
        >>> len(writers), type(writers[1]).__name__
        (2, 'RoundRobinWriter')
    """

    def __init__(self, *writers):
        super().__init__()
        self._writers = list(writers)

    def __getitem__(self, index):
        return self._writers[index]

    def __len__(self):
        return len(self._writers)

    def register_storage(self, storage) -> None:
        for writer, sub in zip(self._writers, storage._storages):
            writer.register_storage(sub)
        self._storage = storage

    def _refuse(self) -> RuntimeError:
        return RuntimeError(
            "WriterEnsemble does not write by itself: extend the member buffers (ensemble[i].extend(...)) or "
            "build the ReplayBufferEnsemble with routing_key=... ."
        )

    def add(self):
        raise self._refuse()

    def extend(self):
        raise self._refuse()

    @property
    def tracks_generations(self) -> bool:
        return all(w.tracks_generations for w in self._writers)

    def generations_of(self, index: TensorDictBase) -> torch.Tensor:
        """Generations of ``index`` = ``TensorDict(buffer_ids=..., index=...)`` in the member writers."""
        buffer_ids = index.get("buffer_ids")
        sub_index = index.get("index")
        out = torch.zeros(sub_index.shape, dtype=torch.long)
        for member in buffer_ids.unique().tolist():
            mask = buffer_ids == member
            out[mask] = self._writers[member].generations_of(sub_index[mask])
        return out

    def _empty(self) -> None:
        for w in self._writers:
            w._empty()

    def state_dict(self) -> dict[str, Any]:
        return {f"writer_{i}": w.state_dict() for i, w in enumerate(self._writers)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for i, w in enumerate(self._writers):
            w.load_state_dict(state_dict[f"writer_{i}"])

    def dumps(self, path: Path):
        for i, w in enumerate(self._writers):
            w.dumps(Path(path) / f"writer_{i}")

    def loads(self, path: Path):
        for i, w in enumerate(self._writers):
            w.loads(Path(path) / f"writer_{i}")
