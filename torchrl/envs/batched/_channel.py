"""The wire between a ``ParallelEnv`` and one worker: opcodes and a minimal framed channel.

Every message is one opcode byte, a 4-byte little-endian payload length and the payload (pickled
values on the cold path; nothing on the hot path). On POSIX the channel reads and writes the
connection's file descriptor directly: a 1-byte step command and its acknowledgement cost one system
call each, about ten times less than ``Connection.send_bytes``/``recv_bytes`` (which frame in Python and
read header and body separately). Elsewhere the ``Connection`` methods carry the same messages.

=========  ===========================================  =============================================
opcode     parent → worker payload                      worker → parent reply
=========  ===========================================  =============================================
``s``      (none) inputs are in the shared step buffers  ``k``; outputs are in the shared step buffers
``r``      pickle: (present input leaves, kwargs)        ``K`` + pickle: indices of missing outputs
``S``      pickle: input TensorDict (no buffers)         ``K`` + pickle: next TensorDict
``R``      pickle: (input TensorDict or None, kwargs)    ``K`` + pickle: reset TensorDict
``e``      pickle: (seed, static_seed)                   ``K`` + pickle: next seed
``g``      pickle: attribute name                        ``K`` + pickle: (is_method, value)
``c``      pickle: (method name, args, kwargs)           ``K`` + pickle: result
``x``      (none): close the env and exit               ``K`` + pickle: None
=========  ===========================================  =============================================

A worker answers any failure with ``E`` + pickle of ``(exception or None, type name, message, traceback)``
and keeps serving; the parent decides what to do.
"""
from __future__ import annotations

import os

__all__ = [
    "Channel", "OP_CALL", "OP_CLOSE", "OP_GETATTR", "OP_RESET", "OP_RESET_PICKLED", "OP_SEED", "OP_STEP",
    "OP_STEP_PICKLED", "REPLY_ERROR", "REPLY_OK", "REPLY_VALUE",
]

OP_STEP = b"s"
OP_RESET = b"r"
OP_STEP_PICKLED = b"S"
OP_RESET_PICKLED = b"R"
OP_SEED = b"e"
OP_GETATTR = b"g"
OP_CALL = b"c"
OP_CLOSE = b"x"
REPLY_OK = b"k"
REPLY_VALUE = b"K"
REPLY_ERROR = b"E"

_EMPTY = b"\x00\x00\x00\x00"
_RAW = os.name == "posix"


class Channel:
    """A framed, blocking message channel over one end of a ``multiprocessing.Pipe``.

    Args:
        conn: the ``Connection`` (kept for ``poll``, ``fileno`` and ``close``).
    """

    __slots__ = ("conn", "fd", "hot_step", "hot_ok")

    def __init__(self, conn) -> None:
        self.conn = conn
        self.fd = conn.fileno() if _RAW else None
        self.hot_step = OP_STEP + _EMPTY  # the complete wire form of a step command ...
        self.hot_ok = REPLY_OK + _EMPTY  # ... and of its acknowledgement

    def send(self, op: bytes, payload: bytes = b"") -> None:
        """Sends one message (raises ``OSError``/``BrokenPipeError`` if the other end is gone)."""
        if self.fd is None:
            self.conn.send_bytes(op + payload)
            return
        data = memoryview(op + len(payload).to_bytes(4, "little") + payload)
        while data:
            data = data[os.write(self.fd, data):]

    def send_raw(self, data: bytes) -> None:
        """Sends a message already in wire form (``hot_step``/``hot_ok``)."""
        if self.fd is None:
            self.conn.send_bytes(data[:1])
        else:
            os.write(self.fd, data)

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

    def recv(self) -> tuple[bytes, bytes]:
        """``(opcode, payload)`` of the next message (raises ``EOFError`` if the other end is gone)."""
        if self.fd is None:
            msg = self.conn.recv_bytes()
            return msg[:1], msg[1:]
        head = self._read(5)
        n = int.from_bytes(head[1:], "little")
        return head[:1], (self._read(n) if n else b"")

    def poll(self, timeout: float = 0.0) -> bool:
        return self.conn.poll(timeout)

    def fileno(self) -> int:
        return self.conn.fileno()

    def close(self) -> None:
        self.conn.close()
