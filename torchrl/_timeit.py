"""``timeit``: a named timer usable as context manager, decorator, or start/stop pair, with a registry."""
from __future__ import annotations

import functools
import time
from typing import Callable

import torch

from torchrl._logging import logger

__all__ = ["timeit"]


class timeit:  # noqa: N801 - TorchRL's public name
    """Accumulates wall-clock time under ``name`` in a process-wide registry.

    Args:
        name: the registry entry to add time to.

    Keyword Args:
        sync: synchronise CUDA before reading the clock (ignored without CUDA).

    Examples:
        >>> from torchrl import timeit
        >>> with timeit("work"):
        ...     _ = sum(range(1000))
        >>> "work" in timeit.todict()
        True
        >>> timeit.erase()
    """

    _REG: dict[str, list[float]] = {}  # name -> [total seconds, calls, last duration]
    _starts: dict[str, float] = {}
    _print_counter: int = 0

    def __init__(self, name: str, *, sync: bool = False) -> None:
        self.name = name
        self.sync = sync
        self._t0: float | None = None

    def _now(self) -> float:
        if self.sync and torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with timeit(self.name, sync=self.sync):
                return fn(*args, **kwargs)

        return timed

    def start(self) -> "timeit":
        self._t0 = self._now()
        return self

    def elapsed(self) -> float:
        """Seconds since :meth:`start` (or since entering the ``with`` block)."""
        if self._t0 is None:
            raise RuntimeError(f"timeit({self.name!r}).elapsed() called before start().")
        return self._now() - self._t0

    def __enter__(self) -> "timeit":
        return self.start()

    def __exit__(self, *exc) -> None:
        self._record(self.name, self.elapsed())

    @classmethod
    def _record(cls, name: str, duration: float) -> None:
        entry = cls._REG.setdefault(name, [0.0, 0, 0.0])
        entry[0] += duration
        entry[1] += 1
        entry[2] = duration

    @classmethod
    def mark_start(cls, name: str) -> None:
        cls._starts[name] = time.perf_counter()

    @classmethod
    def mark_end(cls, name: str) -> None:
        t0 = cls._starts.pop(name, None)
        if t0 is None:
            raise KeyError(f"timeit.mark_end({name!r}) without a matching mark_start.")
        cls._record(name, time.perf_counter() - t0)

    @classmethod
    def todict(cls, percall: bool = True, prefix: str | None = None) -> dict[str, float]:
        """Registry as ``{name: seconds}`` (per call when ``percall``), keys optionally prefixed."""
        out = {}
        for name, (total, calls, _) in cls._REG.items():
            key = f"{prefix}/{name}" if prefix else name
            out[key] = total / max(calls, 1) if percall else total
        return out

    @staticmethod
    def print(prefix: str | None = None) -> str:
        lines = []
        for name, (total, calls, last) in sorted(timeit._REG.items()):
            lines.append(
                f"{prefix or ''}{name}: {total / max(calls, 1) * 1e3:.4f} ms per call, {calls} calls, {total:.4f} s total"
            )
        text = "\n".join(lines)
        for line in lines:
            logger.info(line)
        return text

    @classmethod
    def printevery(cls, num_prints: int, total_count: int, *, prefix: str | None = None, erase: bool = False) -> None:
        """Call once per iteration: prints the registry ``num_prints`` times over ``total_count`` calls."""
        interval = max(total_count // max(num_prints, 1), 1)
        cls._print_counter += 1
        if cls._print_counter % interval == 0:
            cls.print(prefix=prefix)
            if erase:
                cls.erase()

    @staticmethod
    def erase() -> None:
        """Clears all accumulated timings."""
        timeit._REG.clear()
        timeit._starts.clear()

    @classmethod
    def reset(cls) -> None:
        cls.erase()
        cls._print_counter = 0
