"""Loggers as services: a logger living in its own process, driven through picklable clients.

The owner (:class:`ProcessLogger`) starts a process that builds the concrete logger and listens on a
local socket. Every client (the owner itself, or :meth:`ProcessLogger.client` handed to workers, which
pickles) opens its own connection in the process it is used from and sends one request at a time: the
call returns once the logger method has run there, with its return value, or raises the logger's error.
Clients expose logging calls only (``log_*``); starting, flushing and closing stay with the owner.
"""
from __future__ import annotations

import functools
import multiprocessing as mp
import os
import pickle
import shutil
import tempfile
import threading
import traceback
import weakref
from multiprocessing.connection import Client, Listener
from typing import Any

__all__ = ["ProcessLogger"]

_CLIENT_OPS = ("print_log_dir",)


def _pickable_error(err: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
        return RuntimeError(f"logger service raised {type(err).__name__}: {err}\n{text}")


def _handle(conn, logger, lock: threading.Lock, stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            op, args, kwargs = conn.recv()
        except (EOFError, OSError):
            break
        try:
            with lock:
                if op == "__close__":
                    result = getattr(logger, "close")()
                    stop.set()
                else:
                    result = getattr(logger, op)(*args, **kwargs)
            reply = (True, result)
        except BaseException as err:  # noqa: BLE001 - every error goes back to the caller
            reply = (False, _pickable_error(err))
        try:
            conn.send(reply)
        except Exception as err:  # result not picklable
            conn.send((False, RuntimeError(f"logger service: the result of {op!r} could not be sent back: {err}")))
    conn.close()


def _serve(logger_cls, args, kwargs, address: str, authkey: bytes, backlog: int, ready, parent_pid: int) -> None:
    """Service process entry point: build the logger, report readiness, answer requests until closed."""
    try:
        logger = logger_cls(*args, **kwargs)
        listener = Listener(address, family="AF_UNIX", backlog=backlog, authkey=authkey)
    except BaseException as err:  # noqa: BLE001
        ready.send((False, _pickable_error(err)))
        return
    ready.send((True, {"exp_name": getattr(logger, "exp_name", None), "log_dir": getattr(logger, "log_dir", None)}))
    lock, stop = threading.Lock(), threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn = listener.accept()
            except Exception:  # wrong authkey, or listener closed
                if stop.is_set():
                    return
                continue
            threading.Thread(target=_handle, args=(conn, logger, lock, stop), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    while not stop.wait(1.0):
        if os.getppid() != parent_pid:  # owner died without closing: finish the logger and leave
            with lock:
                logger.close()
            break
    listener.close()


class _ProcessLoggerClient:
    """A picklable handle on a logger service: ``log_*`` calls run in the service process.

    Obtained from :meth:`ProcessLogger.client`; safe to send to other processes. Each process (and each
    unpickled copy) opens its own connection on first use.
    """

    def __init__(self, address: str, authkey: bytes, info: dict) -> None:
        self._address = address
        self._authkey = authkey
        self._info = dict(info)
        self._reset_connection()

    def _reset_connection(self) -> None:
        self._conn = None
        self._pid = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"_address": self._address, "_authkey": self._authkey, "_info": self._info}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._reset_connection()

    @property
    def exp_name(self) -> str | None:
        return self._info.get("exp_name")

    @property
    def log_dir(self) -> str | None:
        return self._info.get("log_dir")

    def client(self) -> "_ProcessLoggerClient":
        """A restricted, picklable client of the same service."""
        return _ProcessLoggerClient(self._address, self._authkey, self._info)

    def _request(self, op: str, *args, _timeout: float | None = None, **kwargs) -> Any:
        with self._lock:
            if self._conn is None or self._pid != os.getpid():
                try:
                    self._conn = Client(self._address, family="AF_UNIX", authkey=self._authkey)
                except OSError as err:
                    raise RuntimeError(
                        f"the logger service at {self._address} is not running (closed or crashed); "
                        f"cannot call {op!r}."
                    ) from err
                self._pid = os.getpid()
            try:
                self._conn.send((op, args, kwargs))
                if _timeout is not None and not self._conn.poll(_timeout):
                    raise TimeoutError(f"the logger service did not answer {op!r} within {_timeout} s.")
                ok, payload = self._conn.recv()
            except (EOFError, OSError) as err:
                self._conn = None
                raise RuntimeError(f"the logger service stopped while running {op!r}.") from err
        if ok:
            return payload
        raise payload

    def __getattr__(self, name: str):
        if name.startswith("log_") or name in _CLIENT_OPS:
            return functools.partial(self._request, name)
        raise AttributeError(
            f"{type(self).__name__} has no attribute {name!r}: logger clients forward log_* calls only; "
            f"lifecycle calls (flush, close, shutdown) belong to the owner."
        )


def _cleanup(process, directory: str) -> None:
    if process.is_alive():
        process.terminate()
        process.join(1.0)
    shutil.rmtree(directory, ignore_errors=True)


class ProcessLogger(_ProcessLoggerClient):
    """Driver-owned logger service running in a dedicated process.

    ``logger_cls(*args, **kwargs)`` is built in a new process; this object (and the clients it hands out)
    forward ``log_*`` calls to it and return once they ran there. Loggers built with
    ``service_backend="process"`` return one of these.

    Args:
        logger_cls: the logger class to run (e.g. :class:`~torchrl.record.CSVLogger`).
        *args, **kwargs: its constructor arguments (picklable).

    Keyword Args:
        mp_context: multiprocessing start method or context (default ``"spawn"``).
        max_queue_size: how many connection requests may wait to be accepted.
        startup_timeout: seconds to wait for the service to build the logger.

    Raises:
        TimeoutError: the service did not start within ``startup_timeout``.
        Exception: whatever the logger constructor raised in the service process.

    Examples:
        >>> import tempfile
        >>> from torchrl.record import CSVLogger, ProcessLogger
        >>> logger = ProcessLogger(CSVLogger, exp_name="run", log_dir=tempfile.mkdtemp())
        >>> worker = logger.client()  # picklable, log_* only
        >>> worker.log_scalar("loss", 1.0, step=0)
        >>> logger.shutdown()
    """

    def __init__(
        self,
        logger_cls: type,
        *args: Any,
        mp_context: str | mp.context.BaseContext | None = None,
        max_queue_size: int = 1000,
        startup_timeout: float = 60.0,
        **kwargs: Any,
    ) -> None:
        if int(max_queue_size) < 1:
            raise ValueError(f"ProcessLogger: max_queue_size must be >= 1, got {max_queue_size}.")
        if isinstance(mp_context, str) or mp_context is None:
            mp_context = mp.get_context(mp_context or "spawn")
        directory = tempfile.mkdtemp(prefix="torchrl-logger-")
        super().__init__(os.path.join(directory, "socket"), os.urandom(16), {})
        self._logger_cls = logger_cls
        self._startup_timeout = float(startup_timeout)
        self._ready, child_end = mp_context.Pipe(duplex=False)
        self._process = mp_context.Process(
            target=_serve,
            args=(logger_cls, args, kwargs, self._address, self._authkey, int(max_queue_size), child_end, os.getpid()),
            name=f"{logger_cls.__name__}Service",
            daemon=True,
        )
        self._child_end = child_end
        self._started = False
        self._finalizer = weakref.finalize(self, _cleanup, self._process, directory)
        self.start()

    def __getstate__(self):
        raise TypeError("ProcessLogger owns its service process and cannot be pickled; send logger.client() instead.")

    @property
    def service_backend(self) -> str:
        return "process"

    @property
    def is_alive(self) -> bool:
        return self._started and self._process.is_alive()

    def start(self) -> "ProcessLogger":
        """Starts the service (done by the constructor; calling again is a no-op)."""
        if self._started:
            return self
        self._process.start()
        self._child_end.close()
        self._started = True
        if not self._ready.poll(self._startup_timeout):
            self._finalizer()
            raise TimeoutError(
                f"ProcessLogger: {self._logger_cls.__name__} did not start within {self._startup_timeout} s; "
                f"raise startup_timeout if its constructor is slow."
            )
        ok, payload = self._ready.recv()
        if not ok:
            self._process.join(5.0)
            self._finalizer()
            raise payload
        self._info = payload
        return self

    def client(self) -> _ProcessLoggerClient:
        """A picklable client exposing the ``log_*`` calls only."""
        return _ProcessLoggerClient(self._address, self._authkey, self._info)

    def flush(self, timeout: float | None = None) -> None:
        """Flushes the logger's buffers in the service process."""
        self._request("flush", _timeout=timeout)

    def state_dict(self) -> dict:
        return self._request("state_dict")

    def load_state_dict(self, state_dict) -> None:
        self._request("load_state_dict", state_dict)

    def close(self, timeout: float | None = 5.0) -> None:
        """Closes the logger in the service process and stops the service (idempotent)."""
        if self.is_alive:
            try:
                self._request("__close__", _timeout=timeout)
            except (RuntimeError, TimeoutError):
                pass
            self._process.join(timeout)
        self._finalizer()

    def shutdown(self, timeout: float | None = 5.0) -> None:
        """Same as :meth:`close`."""
        self.close(timeout)
