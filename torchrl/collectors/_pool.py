"""The parent side of process collectors: worker processes, their pipes, replies, deaths and shutdown.

Every wait watches each worker's pipe *and* its process sentinel, so a worker that dies (even by
``SIGKILL``) makes the parent raise instead of hanging; an exception raised in a worker comes back with
its traceback. :meth:`WorkerPool.shutdown` asks workers to exit, terminates stragglers, closes pipes and
removes shared batch files; it runs from a finalizer when the collector is garbage-collected or when the
interpreter exits (before ``multiprocessing`` joins its children).
"""
from __future__ import annotations

import multiprocessing as mp
import pickle
import time
from multiprocessing.connection import wait as mp_wait
from typing import Any

import cloudpickle

from torchrl.collectors._multi_worker import OP_CALL, OP_CLOSE, WorkerSpec, worker_main
from torchrl.collectors._shm import remove_prefixed
from torchrl.envs.batched._procs import default_start_method, exit_text as _exit_text

__all__ = ["WorkerPool", "default_start_method"]

_JOIN_TIMEOUT = 5.0  # seconds workers get to exit after "close" before they are terminated
_ERROR_GRACE = 1.0  # seconds to wait for the other workers' replies once one has failed

_MAIN_GUARD = (
    "process collectors started with mp_start_method={method!r} re-import the main script in every worker: create and "
    "use the collector under `if __name__ == \"__main__\":` (or use mp_start_method=\"fork\" where available)."
)


class WorkerPool:
    """Worker processes of one collector.

    Args:
        owner: the collector's class name (for messages).
        prefix: name prefix of the shared batch files (removed at shutdown).
    """

    def __init__(self, owner: str, prefix: str) -> None:
        self.owner = owner
        self.prefix = prefix
        self.procs: list = []
        self.conns: list = []
        self.failed: str | None = None
        self.closed = False

    # -- lifetime --------------------------------------------------------------------------------------------
    def start(self, specs: list[WorkerSpec], method: str) -> None:
        """Starts one worker per spec and waits until every worker has built its collector."""
        if getattr(mp.current_process(), "_inheriting", False):
            raise RuntimeError(_MAIN_GUARD.format(method=method))
        ctx = mp.get_context(method)
        for i, spec in enumerate(specs):
            parent_end, child_end = ctx.Pipe(duplex=True)
            close_fds = list(self.conns) if method == "fork" else []
            proc = ctx.Process(target=worker_main, args=(i, child_end, spec, close_fds), name=f"{self.owner}-worker-{i}")
            proc.daemon = False
            try:
                proc.start()
            except RuntimeError as err:
                child_end.close()
                parent_end.close()
                if "bootstrapping phase" in str(err):
                    raise RuntimeError(_MAIN_GUARD.format(method=method)) from err
                raise
            child_end.close()
            self.conns.append(parent_end)
            self.procs.append(proc)
        self.collect(range(len(specs)), "start (building its collector)")

    def shutdown(self, timeout: float | None = None) -> None:
        """Asks every worker to exit, terminates those that do not, closes pipes, removes shared files."""
        if self.closed:
            return
        self.closed = True
        timeout = _JOIN_TIMEOUT if timeout is None else timeout
        for conn, proc in zip(self.conns, self.procs):
            if proc.is_alive():
                try:
                    conn.send_bytes(OP_CLOSE)
                except (OSError, ValueError):
                    pass
        deadline = time.monotonic() + timeout
        for proc in self.procs:
            proc.join(max(deadline - time.monotonic(), 0.0))
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(1.0)
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
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
        remove_prefixed(self.prefix)
        self.procs, self.conns = [], []

    def __len__(self) -> int:
        return len(self.procs)

    # -- messages -----------------------------------------------------------------------------------------
    def check(self) -> None:
        if self.closed:
            raise RuntimeError(f"{self.owner} has been shut down; build a new collector.")
        if self.failed is not None:
            raise RuntimeError(f"{self.owner} cannot continue: {self.failed}. Call shutdown() and build a new collector.")

    def send(self, idx: int, payload: bytes) -> None:
        try:
            self.conns[idx].send_bytes(payload)
        except (OSError, ValueError) as err:
            self.failed = f"worker {idx} is unreachable ({_exit_text(self.procs[idx].exitcode)})"
            raise RuntimeError(f"{self.owner}: {self.failed}.") from err

    def call(self, idxs, path: str, *args, call: bool = True, **kwargs) -> dict[int, Any]:
        """Calls (or reads, with ``call=False``) ``path`` on the collectors of workers ``idxs``."""
        idxs = list(idxs)
        payload = OP_CALL + cloudpickle.dumps((path, args, kwargs, call))
        for i in idxs:
            self.send(i, payload)
        return {i: pickle.loads(msg[1:]) for i, msg in self.collect(idxs, f"{path}()" if call else path).items()}

    def wait_any(self, idxs, what: str) -> tuple[int, bytes]:
        """The first reply among workers ``idxs`` (raises if a worker failed or died)."""
        idxs = list(idxs)
        while True:
            objs = {}
            for i in idxs:
                objs[self.conns[i]] = (False, i)
                objs[self.procs[i].sentinel] = (True, i)
            ready = mp_wait(list(objs), None)
            for obj in ready:  # replies first: a worker may answer, then exit
                is_sentinel, i = objs[obj]
                if not is_sentinel:
                    msg = self._read(i, what)
                    if msg[:1] == b"E":
                        raise self._error(i, what, msg)
                    return i, msg
            for obj in ready:
                is_sentinel, i = objs[obj]
                if is_sentinel and not self.conns[i].poll():
                    raise self._death(i, what)

    def collect(self, idxs, what: str) -> dict[int, bytes]:
        """One reply from each worker in ``idxs``; raises on the first error or death (after a short grace
        period in which the other replies are read, so that the pipes stay in order)."""
        pending = set(idxs)
        replies: dict[int, bytes] = {}
        error: BaseException | None = None
        deadline = None
        while pending:
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            objs = {}
            for i in pending:
                objs[self.conns[i]] = (False, i)
                objs[self.procs[i].sentinel] = (True, i)
            ready = mp_wait(list(objs), timeout)
            if not ready and deadline is not None:
                break
            for obj in ready:
                is_sentinel, i = objs[obj]
                if i not in pending or is_sentinel:
                    continue
                pending.discard(i)
                try:
                    msg = self._read(i, what)
                except RuntimeError as err:
                    error = error or err
                    deadline = deadline or time.monotonic() + _ERROR_GRACE
                    continue
                if msg[:1] == b"E":
                    error = error or self._error(i, what, msg)
                    deadline = deadline or time.monotonic() + _ERROR_GRACE
                else:
                    replies[i] = msg
            for obj in ready:
                is_sentinel, i = objs[obj]
                if is_sentinel and i in pending and not self.conns[i].poll():
                    pending.discard(i)
                    error = error or self._death(i, what)
                    deadline = deadline or time.monotonic() + _ERROR_GRACE
        if error is not None:
            raise error
        return replies

    def _read(self, i: int, what: str) -> bytes:
        try:
            return self.conns[i].recv_bytes()
        except (EOFError, OSError):
            raise self._death(i, what) from None

    def _death(self, i: int, what: str) -> RuntimeError:
        proc = self.procs[i]
        proc.join(0.5)
        self.failed = f"worker {i} died during {what} ({_exit_text(proc.exitcode)})"
        return RuntimeError(f"{self.owner} {self.failed}; the collector cannot continue: call shutdown().")

    def _error(self, i: int, what: str, msg: bytes) -> RuntimeError:
        exc, type_name, message, tb = pickle.loads(msg[1:])
        if what.startswith(("collect", "start")):  # the batch (or the worker) is lost; a failed call is not fatal
            self.failed = f"worker {i} raised {type_name} during {what}"
        err = RuntimeError(
            f"{self.owner} worker {i} failed during {what}: {type_name}: {message}\n\nWorker {i} traceback:\n{tb}"
        )
        err.__cause__ = exc
        err.__suppress_context__ = True
        return err
