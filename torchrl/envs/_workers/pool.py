"""The parent side of the worker layer: start, readiness, replies, death detection, shutdown.

:class:`WorkerPool` owns everything a started ``ParallelEnv`` or process collector holds outside Python
objects: processes, channels, and the shared files its workers map. Every wait watches each worker's
channel *and* its process sentinel, so a worker that dies (even by ``SIGKILL``) makes the parent raise
within milliseconds instead of hanging; an exception raised in a worker comes back with its traceback
(:func:`~torchrl.envs._workers.wire.remote_error`). :meth:`WorkerPool.shutdown` asks workers to exit,
terminates stragglers, closes channels and removes shared files; :meth:`WorkerPool.finalize_with` makes
it run when the owner is garbage-collected, or at interpreter exit *before* ``multiprocessing`` joins its
children, so no worker is ever left behind.
"""
from __future__ import annotations

import gc
import multiprocessing as mp
import multiprocessing.util as mp_util
import pickle
import select
import signal
import sys
import time
from multiprocessing.connection import wait as mp_wait
from typing import Any, Sequence

import cloudpickle
import torch

from torchrl.envs._workers.serve import WorkerSpec, worker_main
from torchrl.envs._workers.shared import remove_prefixed
from torchrl.envs._workers.wire import OP_CALL, OP_CLOSE, REPLY_ERROR, Channel, remote_error

__all__ = ["JOIN_TIMEOUT", "WorkerPool", "default_start_method", "exit_text", "stop_processes"]

JOIN_TIMEOUT = 2.0  # seconds workers get to exit after "close" before they are terminated
ERROR_GRACE = 1.0  # seconds to wait for the other workers' replies once one has failed

MAIN_GUARD = (
    "{owner} with mp_start_method={method!r} starts its workers by re-importing the main script, so the code "
    "that creates and uses it must run under `if __name__ == \"__main__\":` (or use mp_start_method=\"fork\" "
    "where available)."
)


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


def _start_process(proc, method: str) -> None:
    """Starts ``proc``; a forked child must not garbage-collect what it inherits.

    A forked child starts with a copy of the parent's heap, garbage included. Collecting an unreachable
    cycle there runs finalizers that own native resources of the parent (an envpool thread pool, a
    pybind11 handle): they join threads or free memory that do not exist in the child and crash it with
    SIGSEGV. Freezing the heap just before the fork (Python's documented recipe for fork without exec)
    keeps every inherited object out of the child's collector; the parent unfreezes at once and collects
    its garbage itself. It also spares the inherited pages the copy-on-write a collection would cause.
    """
    if method != "fork":
        proc.start()
        return
    gc.freeze()
    try:
        proc.start()
    finally:
        gc.unfreeze()


def stop_processes(procs, timeout: float) -> None:
    """Waits up to ``timeout`` s for ``procs`` to exit, then terminates (and at last kills) the others."""
    deadline = time.monotonic() + timeout
    for proc in procs:
        proc.join(max(deadline - time.monotonic(), 0.0))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(1.0)
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)


class WorkerPool:
    """Worker processes of one owner (a ``ParallelEnv``, a process collector, an evaluator).

    Args:
        owner: the owner's name, used in every message.
        prefix: name prefix of the shared files the owner and its workers create (removed at shutdown).

    Keyword Args:
        fatal: commands whose failure (an ``E`` reply) makes the pool unusable; a death always does.
        keep: worker exception types re-raised as such at start (others become ``RuntimeError``).
        remedy: what a death message tells the user to do.
        unusable: the message :meth:`check` raises once the pool failed (``{owner}``, ``{failed}``).

    Attributes:
        procs / chans / conns: one process, :class:`Channel` and ``Connection`` per worker.
        pending: per worker, replies not read yet (:meth:`drain` reads them before the next command).
        failed: why the pool cannot be used anymore, or ``None``.
    """

    def __init__(self, owner: str, prefix: str | None = None, *, fatal: tuple[str, ...] = ("start", "collect"),
                 keep: tuple[type, ...] = (), remedy: str = "the collector cannot continue: call shutdown()",
                 unusable: str = "{owner} cannot continue: {failed}. Call shutdown() and build a new collector.") -> None:
        self.owner = owner
        self.prefix = prefix
        self.fatal = fatal
        self.keep = keep
        self.remedy = remedy
        self.unusable = unusable
        self.procs: list = []
        self.chans: list[Channel] = []
        self.conns: list = []
        self.pending: list[int] = []
        self.failed: str | None = None
        self.closed = False
        self.method: str | None = None
        self.everyone = range(0)  # every worker's index, for commands to all
        self.poller = select.poll() if hasattr(select, "poll") else None
        self.fdmap: dict[int, tuple[bool, int]] = {}  # fd -> (is a process sentinel, worker)

    # -- lifetime ------------------------------------------------------------------------------------------
    def finalize_with(self, owner: Any) -> mp_util.Finalize:
        """Shuts the pool down when ``owner`` is garbage-collected or at interpreter exit (call the returned
        finalizer to shut down now; it runs once)."""
        return mp_util.Finalize(owner, self.shutdown, exitpriority=10)

    def start(self, specs: Sequence[WorkerSpec], method: str, *, daemon: bool = False) -> None:
        """Starts one worker per spec and waits until each has built its object (raises its error, or a
        death; the caller shuts the pool down then)."""
        if getattr(mp.current_process(), "_inheriting", False):
            raise RuntimeError(MAIN_GUARD.format(owner=self.owner, method=method))
        self.method = method
        ctx = mp.get_context(method)
        for i, spec in enumerate(specs):
            parent_end, child_end = ctx.Pipe(duplex=True)
            close_fds = list(self.conns) if method == "fork" else []
            proc = ctx.Process(target=worker_main, args=(i, child_end, spec, close_fds), daemon=daemon,
                               name=f"{self.owner}-worker-{i}")
            try:
                _start_process(proc, method)
            except RuntimeError as err:
                child_end.close()
                parent_end.close()
                if "bootstrapping phase" in str(err):
                    raise RuntimeError(MAIN_GUARD.format(owner=self.owner, method=method)) from err
                raise
            except BaseException:
                child_end.close()
                parent_end.close()
                raise
            child_end.close()
            self._add(proc, parent_end)
        self.everyone = range(len(specs))
        self.collect(self.everyone, f"start (building {specs[0].builds if specs else 'its object'})")

    def _add(self, proc, conn) -> None:
        idx = len(self.procs)
        chan = Channel(conn)
        self.procs.append(proc)
        self.chans.append(chan)
        self.conns.append(conn)
        self.pending.append(1)  # the readiness reply
        if self.poller is not None:
            for fd, is_sentinel in ((conn.fileno(), False), (proc.sentinel, True)):
                self.poller.register(fd, select.POLLIN)
                self.fdmap[fd] = (is_sentinel, idx)

    def shutdown(self, timeout: float | None = None) -> None:
        """Asks every worker to exit, terminates those that do not, closes channels, removes shared files;
        idempotent."""
        if self.closed:
            return
        self.closed = True
        for chan, proc in zip(self.chans, self.procs):
            if proc.is_alive():
                try:
                    chan.send(OP_CLOSE)
                except (OSError, ValueError):
                    pass
        stop_processes(self.procs, JOIN_TIMEOUT if timeout is None else timeout)
        for conn in self.conns:
            try:
                conn.close()
            except OSError:
                pass
        for proc in self.procs:
            try:
                proc.close()
            except ValueError:
                pass
        if self.prefix is not None:
            remove_prefixed(self.prefix)
        self.procs, self.chans, self.conns, self.poller, self.fdmap = [], [], [], None, {}

    def __len__(self) -> int:
        return len(self.procs)

    # -- commands ------------------------------------------------------------------------------------------
    def check(self) -> None:
        """Raises if the pool was shut down or failed."""
        if self.failed is not None:
            raise RuntimeError(self.unusable.format(owner=self.owner, failed=self.failed))
        if self.closed:
            raise RuntimeError(f"{self.owner} has been shut down; build a new one.")

    def send(self, idx: int, message: bytes, *, reply: bool = True, what: str = "a command") -> None:
        """Sends ``message`` to worker ``idx``; ``reply``: one reply is expected (a broken channel means
        the worker died: raises)."""
        try:
            self.chans[idx].send(message)
        except (OSError, ValueError) as err:
            raise self._death(idx, what) from err
        if reply:
            self.pending[idx] += 1

    def broadcast(self, framed: bytes, what: str) -> None:
        """Sends a message already in wire form (:func:`~torchrl.envs._workers.wire.frame`) to every worker,
        each of which replies once."""
        pending = self.pending
        for i, chan in enumerate(self.chans):
            try:
                chan.send_raw(framed)
            except (OSError, ValueError) as err:
                raise self._death(i, what) from err
            pending[i] += 1

    def call(self, idxs, path: str, args: tuple = (), kwargs: dict | None = None, *, mode: str = "call") -> dict[int, Any]:
        """Calls ``path`` with ``args``/``kwargs`` on the objects the workers ``idxs`` built (``mode="get"``:
        reads it; ``"probe"``: see :func:`~torchrl.envs._workers.wire.call_path`); ``{worker: result}``."""
        idxs = list(idxs)
        message = OP_CALL + cloudpickle.dumps((path, args, kwargs or {}, mode))
        what = {"call": f"{path}()", "get": path}.get(mode, f"getattr({path!r})")
        for i in idxs:
            self.send(i, message, what=what)
        return {i: pickle.loads(msg[1:]) for i, msg in self.collect(idxs, what).items()}

    def collect(self, idxs, what: str) -> dict[int, bytes]:
        """One reply from each worker in ``idxs``; raises on the first error or death, after a grace period
        in which the other replies are read (replies still missing then stay ``pending``)."""
        replies: dict[int, bytes] = {}
        poller = self.poller
        if poller is not None and len(idxs) == len(self.chans):
            # hot path (every worker answers): read replies as they arrive; deaths and errors go slow
            fdmap, chans, pending, n = self.fdmap, self.chans, self.pending, len(idxs)
            while len(replies) < n:
                for fd, _ in poller.poll():
                    is_sentinel, i = fdmap[fd]
                    if is_sentinel or i in replies or not pending[i]:
                        return self._collect_slow(idxs, what, replies)
                    try:
                        msg = chans[i].recv()
                    except (EOFError, OSError):
                        return self._collect_slow(idxs, what, replies)
                    pending[i] -= 1
                    replies[i] = msg
                    if msg[:1] == REPLY_ERROR:
                        return self._collect_slow(idxs, what, replies)
            return replies
        return self._collect_slow(idxs, what, replies)

    def _collect_slow(self, idxs, what: str, replies: dict[int, bytes]) -> dict[int, bytes]:
        error: BaseException | None = None
        deadline = None
        waiting = set(idxs) - set(replies)
        for i, msg in list(replies.items()):
            if msg[:1] == REPLY_ERROR:
                del replies[i]
                error = error or self._error(i, what, msg)
                deadline = time.monotonic() + ERROR_GRACE
        while waiting:
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                break
            objs = {}
            for i in waiting:
                objs[self.conns[i]] = (False, i)
                objs[self.procs[i].sentinel] = (True, i)
            ready = mp_wait(list(objs), timeout)
            for obj in ready:  # replies first: a worker may answer, then exit
                is_sentinel, i = objs[obj]
                if is_sentinel or i not in waiting:
                    continue
                waiting.discard(i)
                try:
                    msg = self.chans[i].recv()
                except (EOFError, OSError):
                    error = error or self._death(i, what)
                else:
                    self.pending[i] -= 1
                    if msg[:1] != REPLY_ERROR:
                        replies[i] = msg
                        continue
                    error = error or self._error(i, what, msg)
                deadline = deadline or time.monotonic() + ERROR_GRACE
            for obj in ready:
                is_sentinel, i = objs[obj]
                if is_sentinel and i in waiting and not self.conns[i].poll():
                    waiting.discard(i)
                    error = error or self._death(i, what)
                    deadline = deadline or time.monotonic() + ERROR_GRACE
        if error is not None:
            raise error
        return replies

    def wait_any(self, idxs, what: str) -> tuple[int, bytes]:
        """The first reply among workers ``idxs`` (raises if it is an error, or if a worker died)."""
        idxs = list(idxs)
        while True:
            objs = {}
            for i in idxs:
                objs[self.conns[i]] = (False, i)
                objs[self.procs[i].sentinel] = (True, i)
            ready = mp_wait(list(objs), None)
            # workers that exited first, even when another one has a reply ready (else a dead worker goes
            # unnoticed as long as the others keep answering): its last reply if it sent one, else its death
            exited = [objs[obj][1] for obj in ready if objs[obj][0]]
            replied = [objs[obj][1] for obj in ready if not objs[obj][0]]
            for i in [*exited, *(i for i in replied if i not in exited)]:
                if i in exited and not self.conns[i].poll():
                    raise self._death(i, what)
                try:
                    msg = self.chans[i].recv()
                except (EOFError, OSError):
                    raise self._death(i, what) from None
                self.pending[i] -= 1
                if msg[:1] == REPLY_ERROR:
                    raise self._error(i, what, msg)
                return i, msg

    def drain(self) -> None:
        """Reads (and drops) replies left unread by an interrupted or failed command."""
        for i, (chan, proc) in enumerate(zip(self.chans, self.procs)):
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
                    raise self._death(i, "a previous command")

    # -- failures ----------------------------------------------------------------------------------------------
    def _death(self, i: int, what: str) -> RuntimeError:
        proc = self.procs[i]
        proc.join(0.5)
        self.failed = f"worker {i} died during {what} ({exit_text(proc.exitcode)})"
        if what.startswith("start"):
            hint = ""
            if self.method in ("spawn", "forkserver"):
                hint = " " + MAIN_GUARD.format(owner=self.owner, method=self.method)
            return RuntimeError(f"{self.owner} {self.failed}.{hint}")
        return RuntimeError(f"{self.owner} {self.failed}; {self.remedy}.")

    def _error(self, i: int, what: str, msg: bytes) -> BaseException:
        if what.startswith(self.fatal):  # the batch (or the worker) is lost; a failed call is not fatal
            self.failed = f"worker {i} raised {pickle.loads(msg[1:])[1]} during {what}"
        return remote_error(self.owner, i, what, msg, keep=self.keep if what.startswith("start") else ())
