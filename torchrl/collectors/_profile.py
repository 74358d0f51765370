"""Profiling hooks of collectors: :class:`ProfileConfig` and the per-rollout profiler driver."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

__all__ = ["ProfileConfig", "RolloutProfiler"]

_ACTIVITIES = {"cpu": "CPU", "cuda": "CUDA"}


@dataclass
class ProfileConfig:
    """Which collector rollouts to profile with :mod:`torch.profiler`, and where the traces go.

    Attributes:
        workers: indices of the workers to profile (multi-process collectors; a single collector is worker 0).
        num_rollouts: rollouts profiled in total, warm-up included; profiling stops afterwards.
        warmup_rollouts: leading rollouts run under the profiler but not recorded.
        save_path: where the Chrome trace is written: a ``{worker_idx}`` placeholder is filled in, otherwise
            ``_worker<idx>`` is added before the suffix. Default: ``./collector_profile_worker<idx>.json``.
        activities: ``"cpu"`` and/or ``"cuda"``.
        record_shapes, profile_memory, with_stack, with_flops: forwarded to :class:`torch.profiler.profile`.
        on_trace_ready: called with the profiler instead of writing a trace file.

    Examples:
        >>> cfg = ProfileConfig(workers=[1], save_path="/tmp/trace_{worker_idx}.json")
        >>> cfg.should_profile_worker(1), str(cfg.get_save_path(1))
        (True, '/tmp/trace_1.json')
    """

    workers: list[int] = field(default_factory=lambda: [0])
    num_rollouts: int = 3
    warmup_rollouts: int = 1
    save_path: str | Path | None = None
    activities: list[str] = field(default_factory=lambda: ["cpu"])
    record_shapes: bool = True
    profile_memory: bool = False
    with_stack: bool = True
    with_flops: bool = False
    on_trace_ready: Callable | None = None

    def __post_init__(self) -> None:
        if self.warmup_rollouts < 0 or self.num_rollouts <= self.warmup_rollouts:
            raise ValueError(
                f"ProfileConfig: need 0 <= warmup_rollouts < num_rollouts, got warmup_rollouts={self.warmup_rollouts}, "
                f"num_rollouts={self.num_rollouts}."
            )
        unknown = [a for a in self.activities if a not in _ACTIVITIES]
        if unknown:
            raise ValueError(f"ProfileConfig: unknown activities {unknown}; choose among {sorted(_ACTIVITIES)}.")

    def get_activities(self) -> list:
        return [getattr(torch.profiler.ProfilerActivity, _ACTIVITIES[a]) for a in self.activities]

    def get_save_path(self, worker_idx: int) -> Path:
        if self.save_path is None:
            return Path(f"./collector_profile_worker{worker_idx}.json")
        text = str(self.save_path)
        if "{worker_idx}" in text:
            return Path(text.format(worker_idx=worker_idx))
        path = Path(text)
        return path.with_name(f"{path.stem}_worker{worker_idx}{path.suffix or '.json'}")

    def should_profile_worker(self, worker_idx: int) -> bool:
        return worker_idx in self.workers


class RolloutProfiler:
    """Runs the first ``num_rollouts`` rollouts of one worker under :class:`torch.profiler.profile`.

    ``with profiler.rollout(): ...`` wraps one rollout; after the last profiled rollout the trace is exported
    (or handed to ``on_trace_ready``) and later rollouts run unprofiled.
    """

    def __init__(self, config: ProfileConfig, worker_idx: int) -> None:
        self.config = config
        self.worker_idx = worker_idx
        self.count = 0
        self.profiler = None
        self.done = not config.should_profile_worker(worker_idx)
        self.trace_path: Path | None = None

    def _start(self) -> None:
        cfg = self.config
        active = cfg.num_rollouts - cfg.warmup_rollouts
        self.profiler = torch.profiler.profile(
            activities=cfg.get_activities(),
            schedule=torch.profiler.schedule(wait=0, warmup=cfg.warmup_rollouts, active=active, repeat=1),
            on_trace_ready=self._ready,
            record_shapes=cfg.record_shapes,
            profile_memory=cfg.profile_memory,
            with_stack=cfg.with_stack,
            with_flops=cfg.with_flops,
        )
        self.profiler.__enter__()

    def _ready(self, prof) -> None:
        if self.config.on_trace_ready is not None:
            self.config.on_trace_ready(prof)
            return
        path = self.config.get_save_path(self.worker_idx)
        path.parent.mkdir(parents=True, exist_ok=True)
        prof.export_chrome_trace(str(path))
        self.trace_path = path

    @contextlib.contextmanager
    def rollout(self):
        if self.done:
            yield
            return
        if self.profiler is None:
            self._start()
        try:
            yield
        finally:
            self.profiler.step()
            self.count += 1
            if self.count >= self.config.num_rollouts:
                self.profiler.__exit__(None, None, None)
                self.profiler = None
                self.done = True

    def close(self) -> None:
        if self.profiler is not None:
            self.profiler.__exit__(None, None, None)
            self.profiler = None
        self.done = True
