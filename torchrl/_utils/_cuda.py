"""CUDA memory helpers; on a machine without CUDA they report zeros and do nothing."""
from __future__ import annotations

import torch
from torch.utils._contextlib import _DecoratorContextManager

from torchrl._utils._logging import logger

__all__ = ["cuda_memory_stats", "reset_cuda_peak_stats", "cuda_memory_profile"]

_MB = 1024.0**2


def cuda_memory_stats(device: torch.device | int | str | None = None) -> dict[str, float]:
    """Allocated/reserved/peak memory of ``device`` in MiB (all zeros without CUDA).

    Examples:
        >>> from torchrl import cuda_memory_stats
        >>> sorted(cuda_memory_stats())
        ['allocated_mb', 'max_allocated_mb', 'max_reserved_mb', 'reserved_mb']
    """
    if not torch.cuda.is_available():
        return {"allocated_mb": 0.0, "reserved_mb": 0.0, "max_allocated_mb": 0.0, "max_reserved_mb": 0.0}
    return {
        "allocated_mb": torch.cuda.memory_allocated(device) / _MB,
        "reserved_mb": torch.cuda.memory_reserved(device) / _MB,
        "max_allocated_mb": torch.cuda.max_memory_allocated(device) / _MB,
        "max_reserved_mb": torch.cuda.max_memory_reserved(device) / _MB,
    }


def reset_cuda_peak_stats(device: torch.device | int | str | None = None) -> None:
    """Resets CUDA peak-memory counters (no-op without CUDA)."""
    if torch.cuda.is_available():
        torch.cuda.reset_peak_memory_stats(device)


class cuda_memory_profile(_DecoratorContextManager):  # noqa: N801 - TorchRL's public name
    """Measures CUDA memory over a block; the result is in ``self.stats`` (and logged when ``log``).

    Examples:
        >>> from torchrl import cuda_memory_profile
        >>> with cuda_memory_profile("step", log=False) as prof:
        ...     pass
        >>> prof.stats["delta_allocated_mb"]
        0.0
    """

    def __init__(
        self, label: str, *, device: torch.device | int | str | None = None, log: bool = True, reset_peaks: bool = True
    ) -> None:
        self.label = label
        self.device = device
        self.log = log
        self.reset_peaks = reset_peaks
        self.stats: dict[str, float] = {}

    def clone(self) -> "cuda_memory_profile":
        return type(self)(self.label, device=self.device, log=self.log, reset_peaks=self.reset_peaks)

    def __enter__(self) -> "cuda_memory_profile":
        if self.reset_peaks:
            reset_cuda_peak_stats(self.device)
        self._before = cuda_memory_stats(self.device)
        return self

    def __exit__(self, *exc) -> None:
        after = cuda_memory_stats(self.device)
        self.stats = dict(after)
        self.stats["delta_allocated_mb"] = after["allocated_mb"] - self._before["allocated_mb"]
        if self.log and torch.cuda.is_available():
            logger.info(f"[{self.label}] cuda memory: {self.stats}")
