"""The wire between a parent and one worker process: messages, opcodes, and a framed channel.

A message is ``bytes`` whose first byte is an opcode; what follows is the opcode's payload (pickled values
on the cold paths, nothing on the hot ones). Each user of the worker layer adds its own opcodes to the
common ones below (``ParallelEnv``: step and reset; process collectors: collect and weights); a worker
answers every command but the one-way ones with exactly one message, in order.

=========  =============================================  ================================================
opcode     parent -> worker                               worker -> parent
=========  =============================================  ================================================
``m``      cloudpickle ``(path, args, kwargs, mode)``     ``K`` + pickle: the result (see :func:`call_path`)
``x``      (none): close what the worker built, exit      ``K`` + pickle: ``None``
(start)    —                                              ``k`` once built, or ``E`` + error
=========  =============================================  ================================================

Any failure is answered with ``E`` + :func:`error_payload` and the worker keeps serving; the parent
decides whether it is fatal. On POSIX a :class:`Channel` reads and writes the pipe's file descriptor
directly (a 4-byte length, then the message): a 1-byte command and its 1-byte answer cost one system call
each, about ten times less than ``Connection.send_bytes``/``recv_bytes``. Elsewhere the ``Connection``
methods carry the same messages.
"""
from __future__ import annotations

import os
import pickle
import traceback
from typing import Any, Callable

import torch

__all__ = [
    "Channel", "OP_CALL", "OP_CLOSE", "REPLY_ERROR", "REPLY_OK", "REPLY_VALUE", "call_path", "error_payload",
    "frame", "remote_error",
]

OP_CALL = b"m"
OP_CLOSE = b"x"
REPLY_OK = b"k"
REPLY_VALUE = b"K"
REPLY_ERROR = b"E"

_RAW = os.name == "posix"


def frame(message: bytes) -> bytes:
    """The wire form of ``message`` (for :meth:`Channel.send_raw`: messages sent again and again)."""
    return len(message).to_bytes(4, "little") + message if _RAW else message


def error_payload(err: BaseException) -> bytes:
    """``E`` + pickle of ``(exception or None, type name, message, formatted traceback)``; the exception
    itself travels only if it survives a pickle round trip."""
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    exc: BaseException | None = err
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001 - unpicklable exceptions travel as text only
        exc = None
    try:
        return REPLY_ERROR + pickle.dumps((exc, type(err).__name__, str(err), tb))
    except Exception:  # noqa: BLE001
        return REPLY_ERROR + pickle.dumps((None, type(err).__name__, str(err), tb))


def remote_error(owner: str, idx: int, what: str, message: bytes, *, keep: tuple[type, ...] = ()) -> BaseException:
    """The parent-side exception for an ``E`` reply: names the worker and the command, carries the worker's
    traceback, and chains the worker's exception as ``__cause__``. A worker exception of a type in ``keep``
    keeps that type; any other becomes a ``RuntimeError``."""
    exc, type_name, text, tb = pickle.loads(message[1:])
    full = f"{owner} worker {idx} failed during {what}: {type_name}: {text}\n\nWorker {idx} traceback:\n{tb}"
    cls = next((k for k in keep if isinstance(exc, k)), RuntimeError)
    err = cls(full)
    err.__cause__ = exc
    err.__suppress_context__ = True
    return err


def call_path(target: Any, path: str, args: tuple, kwargs: dict, mode: str, resolve: Callable[[Any, str], Any]) -> Any:
    """What an ``m`` command returns: ``resolve(target, path)`` called with ``args``/``kwargs``
    (``mode="call"``), read (``"get"``), or probed (``"probe"``: ``(True, None)`` for a method,
    ``(False, value)`` otherwise)."""
    value = resolve(target, path)
    if mode is True or mode == "call":  # (True / False: the collectors' older form of "call" / "get")
        return value(*args, **kwargs)
    if mode == "probe":
        if callable(value) and not isinstance(value, (torch.Tensor, torch.nn.Module)):
            return True, None
        return False, value
    return value


class Channel:
    """A framed, blocking message channel over one end of a ``multiprocessing.Pipe``.

    Args:
        conn: the ``Connection`` (kept for ``poll``, ``fileno`` and ``close``).
    """

    __slots__ = ("conn", "fd")

    def __init__(self, conn) -> None:
        self.conn = conn
        self.fd = conn.fileno() if _RAW else None

    def send(self, message: bytes) -> None:
        """Sends one message (raises ``OSError``/``BrokenPipeError`` if the other end is gone)."""
        if self.fd is None:
            self.conn.send_bytes(message)
            return
        data = memoryview(len(message).to_bytes(4, "little") + message)
        while data:
            data = data[os.write(self.fd, data):]

    def send_raw(self, data: bytes) -> None:
        """Sends a message already in wire form (see :func:`frame`)."""
        if self.fd is None:
            self.conn.send_bytes(data)
            return
        data = memoryview(data)
        while data:
            data = data[os.write(self.fd, data):]

    def _read(self, n: int) -> bytes:
        data = os.read(self.fd, n)
        if len(data) == n:
            return data
        if not data:
            raise EOFError("the other end of the channel is closed")
        parts = [data]
        n -= len(data)
        while n:
            more = os.read(self.fd, n)
            if not more:
                raise EOFError("the other end of the channel is closed")
            parts.append(more)
            n -= len(more)
        return b"".join(parts)

    def recv(self) -> bytes:
        """The next message (raises ``EOFError`` if the other end is gone). Every message has at least its
        opcode, so the length and the opcode come in one read: a 1-byte message costs one system call."""
        if self.fd is None:
            return self.conn.recv_bytes()
        head = self._read(5)
        n = int.from_bytes(head[:4], "little")
        return head[4:] if n == 1 else head[4:] + self._read(n - 1)

    def poll(self, timeout: float = 0.0) -> bool:
        return self.conn.poll(timeout)

    def fileno(self) -> int:
        return self.conn.fileno()

    def close(self) -> None:
        self.conn.close()
