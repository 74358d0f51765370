"""Shared helpers for benchmarks: interleaved best-of timing, robust to a busy machine.

Each benchmark compares our code against a raw loop *in the same run*. Candidates are timed in
alternation (A, B, A, B, ...) and each keeps its best (fastest) repetition, so a burst of load from other
processes hurts both sides alike and rarely survives the ``min``.
"""
from __future__ import annotations

import json
import time
from typing import Callable

import torch


def interleaved_best(fns: dict[str, Callable[[], object]], repeats: int = 7,
                     clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Runs every ``fn`` once to warm up, then ``repeats`` rounds in alternation.

    Each ``fn`` either returns its own elapsed seconds (a float) or anything else (then the call is timed
    around it with ``clock``: wall time by default, ``time.thread_time`` for the CPU time of this thread,
    which time slices given to other processes do not inflate).
    Returns ``{name: best seconds}``.
    """
    best = {name: float("inf") for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = clock()
            out = fn()
            elapsed = out if isinstance(out, float) else clock() - t0
            best[name] = min(best[name], elapsed)
    return best


def report(figures: dict[str, float]) -> None:
    """Prints the figures, then (last line) one JSON object with all of them."""
    for key, value in figures.items():
        print(f"{key:>48}: {value:.4g}")
    print(json.dumps({k: round(v, 4) for k, v in figures.items()}))


def single_thread() -> None:
    torch.set_num_threads(1)


def rss_mib(pid: int | None = None) -> float:
    """Resident set size of process ``pid`` (this process by default), MiB, read from ``/proc``."""
    with open(f"/proc/{pid or 'self'}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")
