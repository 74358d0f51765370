"""``Sampler``: decides which stored elements a batch is made of."""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

import torch

from torchrl._utils._deprecation import warn_once


def empty_storage_error(sampler: Any) -> RuntimeError:
    return RuntimeError(
        f"{type(sampler).__name__}: cannot sample from an empty replay buffer (it holds 0 elements); "
        "write to it with add() or extend() first."
    )


class Sampler(ABC):
    """Base class of replay-buffer samplers.

    ``sample(storage, batch_size)`` returns ``(index, info)``: the indices to read (a tensor, or a tuple of
    coordinate tensors for multi-dimensional storages) and a dict of per-sample metadata (importance
    weights, slice boundaries...). Buffers notify samplers of writes with :meth:`extend` / :meth:`add` /
    :meth:`mark_update`; samplers that do not care about writes ignore them.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import Sampler, ReplayBuffer, LazyTensorStorage
        >>> class FirstElements(Sampler):
        ...     def sample(self, storage, batch_size):
        ...         return torch.arange(batch_size), {}
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=FirstElements(), batch_size=3)
        >>> _ = rb.extend(torch.arange(10))
        >>> rb.sample()
        tensor([0, 1, 2])
    """

    _rng: torch.Generator | None = None

    @abstractmethod
    def sample(self, storage, batch_size: int) -> tuple[Any, dict]:
        ...

    def add(self, index: int) -> None:
        """Called after one element was written at ``index`` (nothing to do for uniform samplers)."""
        return None

    def extend(self, index: torch.Tensor) -> None:
        """Called after elements were written at ``index`` (nothing to do for uniform samplers)."""
        return None

    def mark_update(self, index: int | torch.Tensor, *, storage=None) -> None:
        """Called when the elements at ``index`` were overwritten through another buffer."""
        return None

    def update_priority(self, index: int | torch.Tensor, priority: float | torch.Tensor, *, storage=None) -> dict | None:
        """Only prioritized samplers use priorities: other samplers warn once and ignore the call."""
        warn_once(
            f"{type(self).__name__}.update_priority has no effect: this sampler is not prioritized.",
            category=UserWarning,
        )
        return None

    def can_sample(self, storage, batch_size: int) -> bool:
        """Whether ``sample(storage, batch_size)`` can succeed now."""
        return len(storage) > 0

    @property
    def default_priority(self) -> float:
        return 1.0

    @property
    def ran_out(self) -> bool:
        """Whether an epoch just ended (only samplers without replacement have epochs)."""
        return False

    @ran_out.setter
    def ran_out(self, value: bool) -> None:
        if value:
            raise RuntimeError(f"{type(self).__name__} has no epochs; ran_out is always False.")

    def _empty(self) -> None:
        """Forgets the state tied to the storage content (called when the buffer is emptied)."""
        return None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None

    def dumps(self, path) -> None:
        """Saves :meth:`state_dict` under the directory ``path``."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path / "sampler_state.pt")

    def loads(self, path) -> None:
        """Restores the state saved by :meth:`dumps`."""
        self.load_state_dict(torch.load(Path(path) / "sampler_state.pt", weights_only=True))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
