"""``LoggerMonitor``: polls ``stats()`` of collectors and replay buffers and logs them on a schedule.

Snapshots are pulled from the monitor's own thread (or explicit :meth:`LoggerMonitor.step` calls), so no
logging work runs on the watched objects' hot paths. Cumulative counters also yield rates
(``frames`` -> ``frames_per_second``, ...), computed between two logged snapshots.
"""
from __future__ import annotations

import math
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from torchrl.record.loggers.common import Logger

__all__ = ["Every", "LoggerMonitor"]

RATE_NAMES = {
    "frames": "frames_per_second",
    "batches": "batches_per_second",
    "write_count": "writes_per_second",
    "worker_frames": "worker_frames_per_second",
    "sample_calls": "samples_per_second",
    "samples_returned": "samples_returned_per_second",
}


@dataclass(frozen=True)
class Every:
    """A logging schedule for :class:`LoggerMonitor`; build it with :meth:`seconds` or :meth:`counter`.

    A counter schedule fires when the counter ``key`` of the watched ``stats()`` crosses a multiple of
    ``interval``; a jump over several multiples between two polls logs once; a counter that goes down
    (reset, restored state) re-baselines the schedule without logging.

    Examples:
        >>> Every.seconds(5.0)
        Every(kind='seconds', interval=5.0, key=None)
        >>> Every.counter("frames", 1000).key
        'frames'
    """

    kind: Literal["seconds", "counter"]
    interval: float
    key: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("seconds", "counter"):
            raise ValueError(f"Every: kind must be 'seconds' or 'counter', got {self.kind!r}.")
        if not self.interval > 0:
            raise ValueError(f"Every: interval must be > 0, got {self.interval}.")
        if self.kind == "counter" and not self.key:
            raise ValueError(
                "Every: a counter schedule needs the stats key to watch, e.g. Every.counter('frames', 1000)."
            )

    @classmethod
    def seconds(cls, interval: float) -> Every:
        """Fires every ``interval`` seconds of wall-clock time."""
        return cls("seconds", float(interval))

    @classmethod
    def counter(cls, key: str, interval: int) -> Every:
        """Fires when ``stats()[key]`` crosses a multiple of ``interval``."""
        return cls("counter", interval, key)


@dataclass
class _Watch:
    target: Any
    name: str
    schedule: Every | None
    step: str | None
    stats_fn: Callable[..., Mapping[str, Any]] | None
    stats_kwargs: dict[str, Any]
    rate_keys: tuple[str, ...] | None
    log_on_start: bool
    log_on_close: bool
    primed: bool = False
    bucket: int = 0
    last_time: float = 0.0
    logged: dict[str, Any] = field(default_factory=dict)
    logged_at: float | None = None
    polls: int = 0

    def snapshot(self) -> dict[str, Any]:
        if self.stats_fn is not None:
            return dict(self.stats_fn(self.target, **self.stats_kwargs))
        return dict(self.target.stats(**self.stats_kwargs))


class LoggerMonitor:
    """A pull-based monitor logging operational statistics of collectors and replay buffers.

    Each watched object exposes ``stats()`` (a flat mapping of scalars) or is read by ``stats_fn``. On
    each poll the monitor takes a snapshot, decides from the target's schedule whether it is due, adds
    rates of cumulative counters, and logs ``"<name>/<metric>"`` through ``logger.log_metrics``. The monitor
    owns neither the logger nor the targets: stopping it leaves both running.

    Args:
        logger: the output sink (any TorchRL logger or logger client).

    Keyword Args:
        poll_interval: seconds between polls of the background thread. Defaults to 1.0.
        background: poll from a daemon thread after :meth:`start`; with ``False`` call :meth:`step`.
        on_error: what a failing ``stats()`` or logging call does: ``"warn"`` (default), ``"raise"``
            (from :meth:`step`; the background thread stops) or ``"ignore"``.

    Examples:
        >>> import tempfile
        >>> from torchrl.record import CSVLogger, Every, LoggerMonitor
        >>> class Counter:
        ...     frames = 0
        ...     def stats(self):
        ...         return {"frames": self.frames}
        >>> target = Counter()
        >>> monitor = LoggerMonitor(CSVLogger("m", log_dir=tempfile.mkdtemp()), background=False)
        >>> monitor.watch(target, name="col", schedule=Every.counter("frames", 100), log_on_start=False)
        'col'
        >>> monitor.step()  # primes the schedule
        {}
        >>> target.frames = 150
        >>> monitor.step()["col"]["frames"]
        150.0
    """

    def __init__(
        self,
        logger: Logger,
        *,
        poll_interval: float = 1.0,
        background: bool = True,
        on_error: Literal["warn", "raise", "ignore"] = "warn",
    ) -> None:
        if on_error not in ("warn", "raise", "ignore"):
            raise ValueError(f"LoggerMonitor: on_error must be 'warn', 'raise' or 'ignore', got {on_error!r}.")
        if not poll_interval > 0:
            raise ValueError(f"LoggerMonitor: poll_interval must be > 0, got {poll_interval}.")
        self.logger = logger
        self.poll_interval = float(poll_interval)
        self.background = bool(background)
        self.on_error = on_error
        self._watches: dict[str, _Watch] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = False

    # -- registration ------------------------------------------------------------------------------------------
    def watch(
        self,
        target: Any,
        *,
        name: str | None = None,
        schedule: Every | None = None,
        step: str | None = None,
        stats_fn: Callable[..., Mapping[str, Any]] | None = None,
        stats_kwargs: dict[str, Any] | None = None,
        rate_keys: tuple[str, ...] | None = None,
        log_on_start: bool = True,
        log_on_close: bool = True,
    ) -> str:
        """Adds ``target``; returns the name its metrics are logged under.

        Keyword Args:
            name: metric prefix (default: the class name in lower case, made unique with a suffix).
            schedule: when to log (default: at every poll).
            step: a stats key whose value is the logging step (e.g. ``"frames"``); default: the number of
                snapshots logged for this target.
            stats_fn: ``stats_fn(target, **stats_kwargs)`` replaces ``target.stats(**stats_kwargs)``.
            rate_keys: counters to derive ``*_per_second`` rates from (default: the known counters present).
            log_on_start: log a snapshot when monitoring starts (or right away if it already runs).
            log_on_close: log a last snapshot on :meth:`stop` / :meth:`unwatch`.
        """
        if stats_fn is None and not callable(getattr(target, "stats", None)):
            raise TypeError(
                f"LoggerMonitor.watch: {type(target).__name__} has no stats() method; pass stats_fn= to read it."
            )
        if schedule is not None and not isinstance(schedule, Every):
            raise TypeError(f"LoggerMonitor.watch: schedule must be an Every, got {type(schedule).__name__}.")
        with self._lock:
            if name is None:
                base = type(target).__name__.lower()
                name, i = base, 1
                while name in self._watches:
                    name, i = f"{base}_{i}", i + 1
            elif name in self._watches:
                raise ValueError(f"LoggerMonitor.watch: a target is already watched as {name!r}.")
            w = _Watch(
                target, name, schedule, step, stats_fn, dict(stats_kwargs or {}),
                None if rate_keys is None else tuple(rate_keys), log_on_start, log_on_close,
            )
            self._watches[name] = w
            if self._started and log_on_start:
                self._poll(w, force=True)
        return name

    def unwatch(self, name: str) -> None:
        """Stops watching ``name`` (logging a last snapshot if it was registered with ``log_on_close``)."""
        with self._lock:
            if name not in self._watches:
                raise KeyError(
                    f"LoggerMonitor.unwatch: nothing is watched as {name!r}; watched: {sorted(self._watches)}."
                )
            w = self._watches.pop(name)
            if w.log_on_close:
                self._poll(w, force=True)

    # -- polling -----------------------------------------------------------------------------------------------
    def _due(self, w: _Watch, snap: Mapping[str, Any], now: float) -> bool:
        schedule = w.schedule
        if schedule is None:
            return True
        if schedule.kind == "seconds":
            if not w.primed:
                w.primed, w.last_time = True, now
                return False
            if now - w.last_time >= schedule.interval:
                w.last_time = now
                return True
            return False
        if schedule.key not in snap:
            raise KeyError(
                f"LoggerMonitor: schedule of {w.name!r} watches stats key {schedule.key!r}, which is not among "
                f"{sorted(snap)}."
            )
        bucket = math.floor(float(snap[schedule.key]) / schedule.interval)
        if not w.primed or bucket < w.bucket:
            w.primed, w.bucket = True, bucket
            return False
        if bucket > w.bucket:
            w.bucket = bucket
            return True
        return False

    def _metrics(self, w: _Watch, snap: Mapping[str, Any], now: float) -> dict[str, float]:
        metrics = {k: float(v) for k, v in snap.items() if isinstance(v, (bool, int, float))}
        keys = w.rate_keys if w.rate_keys is not None else tuple(k for k in RATE_NAMES if k in metrics)
        if w.logged_at is not None and now > w.logged_at:
            for key in keys:
                if key in metrics and key in w.logged:
                    delta = metrics[key] - w.logged[key]
                    if delta >= 0:
                        metrics[RATE_NAMES.get(key, f"{key}_per_second")] = delta / (now - w.logged_at)
        return metrics

    def _poll(self, w: _Watch, force: bool = False) -> dict[str, float] | None:
        try:
            snap = w.snapshot()
            now = time.monotonic()
            due = self._due(w, snap, now)
            if not (due or force):
                return None
            metrics = self._metrics(w, snap, now)
            w.logged, w.logged_at = {k: v for k, v in metrics.items() if not k.endswith("_per_second")}, now
            w.polls += 1
            step = int(metrics[w.step]) if w.step is not None and w.step in metrics else w.polls - 1
            self.logger.log_metrics({f"{w.name}/{k}": v for k, v in metrics.items()}, step=step)
            return metrics
        except Exception as err:
            if self.on_error == "raise":
                raise
            if self.on_error == "warn":
                warnings.warn(f"LoggerMonitor: monitoring {w.name!r} failed: {type(err).__name__}: {err}", stacklevel=3)
            return None

    def step(self) -> dict[str, dict[str, float]]:
        """Polls every target once; returns ``{name: metrics}`` of the targets that logged."""
        out = {}
        with self._lock:
            for w in list(self._watches.values()):
                metrics = self._poll(w)
                if metrics is not None:
                    out[w.name] = metrics
        return out

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(self.poll_interval):
            try:
                self.step()
            except Exception:
                return

    def start(self) -> LoggerMonitor:
        """Logs the ``log_on_start`` snapshots and, with ``background=True``, starts the polling thread."""
        with self._lock:
            if self._started:
                return self
            self._started = True
            for w in list(self._watches.values()):
                if w.log_on_start:
                    self._poll(w, force=True)
        if self.background:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="LoggerMonitor", daemon=True)
            self._thread.start()
        return self

    def stop(self, *, log_final: bool | None = None) -> None:
        """Stops polling; logs a last snapshot per target (``log_final`` overrides ``log_on_close``)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            for w in list(self._watches.values()):
                if log_final if log_final is not None else w.log_on_close:
                    self._poll(w, force=True)
            self._started = False

    def __enter__(self) -> LoggerMonitor:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
