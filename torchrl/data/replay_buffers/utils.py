"""Replay-buffer utilities (TorchRL's ``torchrl.data.replay_buffers.utils`` path)."""
from __future__ import annotations

from torchrl.data.replay_buffers._replay_buffer import ReplayBuffer
from torchrl.data.replay_buffers.samplers._trajectories import find_start_stop_traj

__all__ = ["find_start_stop_traj", "prefill_replay_buffer"]


def prefill_replay_buffer(
    rb: ReplayBuffer, dataset: str | ReplayBuffer, n_samples: int | None = None, chunk_size: int = 1000
) -> ReplayBuffer:
    """Copies the content of ``dataset`` (oldest first) into ``rb``, ``chunk_size`` elements at a time.

    Args:
        rb (ReplayBuffer): the buffer to fill.
        dataset (ReplayBuffer): the source (e.g. an offline dataset). Dataset names are resolved by
            ``torchrl.data.datasets``; pass the dataset object here.
        n_samples (int, optional): how many elements to copy. Defaults to all of them.
        chunk_size (int, optional): elements per ``extend`` call. Defaults to ``1000``.

    Returns:
        ``rb``.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import ReplayBuffer, LazyTensorStorage
        >>> source = ReplayBuffer(storage=LazyTensorStorage(10)); _ = source.extend(torch.arange(10))
        >>> target = prefill_replay_buffer(ReplayBuffer(storage=LazyTensorStorage(10)), source, n_samples=4, chunk_size=3)
        >>> target[torch.arange(4)]
        tensor([0, 1, 2, 3])
    """
    if isinstance(dataset, str):
        raise TypeError(
            f"prefill_replay_buffer: got the dataset name {dataset!r}; build the dataset with torchrl.data.datasets "
            "and pass the object."
        )
    if chunk_size < 1:
        raise ValueError(f"prefill_replay_buffer: chunk_size must be >= 1, got {chunk_size}.")
    content = dataset.read_all_in_order()
    total = len(content) if n_samples is None else min(n_samples, len(content))
    for start in range(0, total, chunk_size):
        rb.extend(content[start : min(start + chunk_size, total)])
    return rb
