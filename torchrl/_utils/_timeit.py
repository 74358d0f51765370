"""``timeit``: a named timer usable as context manager, decorator, or start/stop pair, with a registry."""
from __future__ import annotations

import functools
import time
from typing import Callable

import torch

from torchrl._utils._logging import logger

__all__ = ["timeit"]


class timeit:  # noqa: N801 - TorchRL's public name
    """Accumulates wall-clock time under ``name`` in a process-wide registry.

    Each registry entry holds ``[seconds per call, total seconds, calls]``. :meth:`erase` (and :meth:`reset`)
    zero the entries but keep their names, so that a logger keeps reporting every phase it saw.

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
        >>> timeit.todict()["work"]
        0.0
    """

    _REG: dict[str, list] = {}  # name -> [seconds per call, total seconds, calls]
    _MARKS: dict[str, float] = {}
    _printevery_count: int = 0

    def __init__(self, name: str, *, sync: bool = False) -> None:
        self.name = name
        self._sync = sync

    def _now(self) -> float:
        if self._sync and torch.cuda.is_available():
            torch.cuda.synchronize()
        return time.perf_counter()

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            with timeit(self.name, sync=self._sync):
                return fn(*args, **kwargs)

        return timed

    def start(self) -> "timeit":
        """Starts the clock (what entering a ``with`` block does)."""
        self.t0 = self._now()
        return self

    def elapsed(self) -> float:
        """Seconds since :meth:`start` (or since entering the ``with`` block).

        Raises:
            AttributeError: if the timer was never started.
        """
        t0 = self.__dict__.get("t0")
        if t0 is None:
            raise AttributeError(f"timeit({self.name!r}).elapsed() called before start() (the timer has no 't0').")
        return self._now() - t0

    def __enter__(self) -> "timeit":
        return self.start()

    def __exit__(self, *exc) -> None:
        self._record(self.name, self.elapsed())

    @classmethod
    def _record(cls, name: str, duration: float) -> None:
        entry = cls._REG.get(name)
        if entry is None:
            cls._REG[name] = [duration, duration, 1]
            return
        entry[1] += duration
        entry[2] += 1
        entry[0] = entry[1] / entry[2]

    @classmethod
    def mark_start(cls, name: str) -> None:
        """Starts timing ``name`` (ended by :meth:`mark_end`), for phases that do not fit a ``with`` block."""
        cls._MARKS[name] = time.perf_counter()

    @classmethod
    def mark_end(cls, name: str) -> None:
        """Records the time since :meth:`mark_start` under ``name``.

        Raises:
            KeyError: if ``name`` was not started with :meth:`mark_start`.
        """
        try:
            t0 = cls._MARKS.pop(name)
        except KeyError:
            raise KeyError(f"timeit.mark_end({name!r}) without a matching timeit.mark_start({name!r}).") from None
        cls._record(name, time.perf_counter() - t0)

    @classmethod
    def todict(cls, percall: bool = True, prefix: str | None = None) -> dict[str, float]:
        """Registry as ``{name: seconds}`` (per call when ``percall``, else total), keys as ``"<prefix>/<name>"``."""
        out = {}
        for name, (per_call, total, _) in cls._REG.items():
            key = f"{prefix}/{name}" if prefix else name
            out[key] = per_call if percall else total
        return out

    @staticmethod
    def print(prefix: str | None = None) -> str:
        """Logs one line per entry (``"<name> took <ms> msec (total = <s> sec since last reset)."``) and
        returns the lines joined by newlines."""
        lines = []
        for name, (per_call, total, _) in timeit._REG.items():
            line = f"{name} took {per_call * 1000:.4f} msec (total = {total: 4.4f} sec since last reset)."
            if prefix is not None:
                line = f"{prefix} -- {line}"
            lines.append(line)
            logger.info(line)
        return "\n".join(lines)

    @classmethod
    def printevery(cls, num_prints: int, total_count: int, *, prefix: str | None = None, erase: bool = False) -> None:
        """Call once per iteration: prints the registry ``num_prints`` times over ``total_count`` calls."""
        interval = max(total_count // max(num_prints, 1), 1)
        cls._printevery_count += 1
        if cls._printevery_count % interval == 0:
            cls.print(prefix=prefix)
            if erase:
                cls.erase()

    @staticmethod
    def erase() -> None:
        """Zeroes every entry of the registry (the names stay)."""
        for entry in timeit._REG.values():
            entry[:] = [0.0, 0.0, 0]

    @classmethod
    def reset(cls) -> None:
        """Same as :meth:`erase`."""
        cls.erase()
