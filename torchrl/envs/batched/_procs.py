"""The worker processes of a ``ParallelEnv``: start method, readiness waits, death detection, shutdown.

:class:`Workers` holds everything a started ``ParallelEnv`` owns outside Python objects (processes,
channels, shared buffers). It lives apart from the env so that a ``multiprocessing.util.Finalize`` can
shut it down when the env is garbage-collected, or at interpreter exit *before* multiprocessing joins
its children (its exit hook runs finalizers with a priority first), so no worker is ever left behind.
"""
from __future__ import annotations

import multiprocessing as mp
import select
import signal
import sys
import time
from multiprocessing.connection import wait as mp_wait

import torch

from torchrl.envs.batched._buffers import release
from torchrl.envs.batched._channel import OP_CLOSE, Channel

__all__ = ["Workers", "default_start_method", "exit_text", "JOIN_TIMEOUT"]

JOIN_TIMEOUT = 2.0  # seconds a worker gets to exit after "close" before it is terminated


def default_start_method() -> str:
    """``"fork"`` on Linux (a worker starts in milliseconds; not once CUDA is initialized), else the
    platform's default (``spawn`` on macOS and Windows)."""
    if sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods():
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return "spawn"
        return "fork"
    return mp.get_start_method(allow_none=True) or "spawn"


def exit_text(code: int | None) -> str:
    """``"exit code -9, killed by SIGKILL"`` and the like."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"exit code {code}, killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"exit code {code}"
    return f"exit code {code}"


class Workers:
    """Processes, channels and buffers of a started ``ParallelEnv``.

    Attributes:
        procs / chans: one process and one :class:`Channel` per worker.
        buffers: ``{layout name: [shared tensor per leaf]}`` or ``None`` (pickled transfers).
        pending: per worker, replies not read yet (read before the next command, so replies stay in order).
        failed: why the env cannot be used anymore (a worker died), or ``None``.
    """

    def __init__(self) -> None:
        self.procs: list = []
        self.chans: list[Channel] = []
        self.buffers: dict | None = None
        self.pending: list[int] = []
        self.failed: str | None = None
        self.poller = select.poll() if hasattr(select, "poll") else None
        self.fdmap: dict[int, tuple[bool, int]] = {}  # fd -> (is a process sentinel, worker)
        self.dead: set[int] = set()

    def add(self, proc, chan: Channel) -> None:
        idx = len(self.procs)
        self.procs.append(proc)
        self.chans.append(chan)
        self.pending.append(0)
        if self.poller is not None:
            for fd, is_sentinel in ((chan.fileno(), False), (proc.sentinel, True)):
                self.poller.register(fd, select.POLLIN)
                self.fdmap[fd] = (is_sentinel, idx)

    def forget(self, idx: int) -> None:
        """Stops watching a dead worker (its sentinel would otherwise be readable forever)."""
        self.dead.add(idx)
        if self.poller is not None:
            for fd in (self.chans[idx].fileno(), self.procs[idx].sentinel):
                if self.fdmap.pop(fd, None) is not None:
                    self.poller.unregister(fd)

    def ready(self, pending: set[int], timeout: float | None) -> list[tuple[bool, int]]:
        """``[(is_sentinel, worker)]`` readable now, waiting up to ``timeout`` seconds (``None``: forever)."""
        if self.poller is not None:
            events = self.poller.poll(None if timeout is None else max(int(timeout * 1000), 0))
            fdmap = self.fdmap
            return [fdmap[fd] for fd, _ in events if fd in fdmap]
        objs = {}
        for i in pending:
            objs[self.chans[i].conn] = (False, i)
            objs[self.procs[i].sentinel] = (True, i)
        return [objs[o] for o in mp_wait(list(objs), timeout)]

    def drain(self) -> None:
        """Reads (and drops) replies left unread by an interrupted or failed command."""
        for i in range(len(self.pending)):
            chan, proc = self.chans[i], self.procs[i]
            while self.pending[i]:
                if chan.poll(0.05):
                    try:
                        chan.recv()
                    except (EOFError, OSError):
                        pass
                    else:
                        self.pending[i] -= 1
                        continue
                if not proc.is_alive():
                    self.failed = f"worker {i} died ({exit_text(proc.exitcode)})"
                    raise RuntimeError(f"ParallelEnv {self.failed}; the env cannot continue: call close().")

    def shutdown(self) -> None:
        """Asks every worker to exit, terminates the ones that do not, releases channels and buffers."""
        chans, procs = self.chans, self.procs
        for chan, proc in zip(chans, procs):
            if proc.is_alive():
                try:
                    chan.send(OP_CLOSE)
                except (OSError, ValueError):
                    pass
        deadline = time.monotonic() + JOIN_TIMEOUT
        for proc in procs:
            proc.join(max(deadline - time.monotonic(), 0.0))
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(1.0)
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
        for chan in chans:
            try:
                chan.close()
            except OSError:
                pass
        for proc in procs:
            try:
                proc.close()
            except ValueError:
                pass
        if self.buffers:
            for bufs in self.buffers.values():
                release(bufs)
        self.procs, self.chans, self.buffers, self.poller, self.fdmap = [], [], None, None, {}


def shutdown(workers: Workers) -> None:
    """Finalizer entry point (a module-level function, so it holds no reference to the env)."""
    workers.shutdown()
