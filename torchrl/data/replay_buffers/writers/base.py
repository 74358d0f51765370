"""``Writer``: decides where incoming data is written in the storage."""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Sequence

import torch

from torchrl.data.replay_buffers._utils import load_json, save_json


class Writer(ABC):
    """Base class of replay-buffer writers.

    A writer is registered to one storage; ``add(item)`` writes one element and returns its index,
    ``extend(batch)`` writes a batch and returns the indices (a tensor).

    Args:
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import Writer, LazyTensorStorage, ReplayBuffer
        >>> class AlwaysFirst(Writer):
        ...     def add(self, data):
        ...         self._storage.set(0, data)
        ...         return 0
        ...     def extend(self, data):
        ...         self._storage.set(torch.zeros(len(data), dtype=torch.long), data)
        ...         return torch.zeros(len(data), dtype=torch.long)
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(4), writer=AlwaysFirst())
        >>> _ = rb.extend(torch.tensor([1.0, 2.0, 3.0]))
        >>> len(rb), rb[0]
        (1, tensor(3.))
    """

    def __init__(self, compilable: bool = False) -> None:
        self._storage = None
        self._compilable = compilable
        self._rng: torch.Generator | None = None

    def register_storage(self, storage) -> None:
        self._storage = storage

    @abstractmethod
    def add(self, data: Any) -> int:
        ...

    @abstractmethod
    def extend(self, data: Sequence) -> torch.Tensor:
        ...

    @property
    def tracks_generations(self) -> bool:
        return False

    def generations_of(self, index: int | torch.Tensor) -> torch.Tensor:
        """The write generation of the slots at ``index`` (only writers built with ``track_generations``)."""
        raise RuntimeError(
            f"{type(self).__name__} does not track write generations; use "
            "RoundRobinWriter(track_generations=True) to get them."
        )

    def _empty(self) -> None:
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None

    def dumps(self, path):
        """Saves :meth:`state_dict` under the directory ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        state = self.state_dict()
        tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
        save_json({k: v for k, v in state.items() if k not in tensors}, path / "writer_metadata.json")
        if tensors:
            torch.save(tensors, path / "writer_tensors.pt")

    def loads(self, path):
        """Restores the state saved by :meth:`dumps`."""
        path = Path(path)
        state = load_json(path / "writer_metadata.json")
        if (path / "writer_tensors.pt").exists():
            state.update(torch.load(path / "writer_tensors.pt", weights_only=True))
        self.load_state_dict(state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
