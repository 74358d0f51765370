"""Messages between the trainer (rank 0) and a collection node over torch.distributed point-to-point.

A :class:`GlooChannel` carries the worker layer's messages (``bytes``, first byte an opcode; see
:mod:`torchrl.envs._workers.wire`) between two ranks of the default process group: an ``int64`` length,
then the bytes as a ``uint8`` tensor, each direction on its own tag. A length of ``-1`` says goodbye (the
node leaves; the trainer's reader stops). A peer that dies makes a pending receive raise (gloo closes the
pair's connection), which the trainer turns into a death naming the rank.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

__all__ = ["BYE", "GlooChannel", "TAG_DOWN", "TAG_UP"]

TAG_DOWN = 7  # trainer -> node: commands
TAG_UP = 8  # node -> trainer: replies and batches
BYE = -1


class GlooChannel:
    """One direction pair (``send`` on ``out_tag``, ``recv`` on ``in_tag``) with rank ``peer``.

    Sends from the trainer are non-blocking (a node busy collecting takes its next command later): their
    buffers are kept until :meth:`settle`, called once the peer answered a later command.

    Args:
        peer: the other rank.
        out_tag / in_tag: the tags of the two directions.
        blocking: sends wait until the data left (a node's replies).
    """

    def __init__(self, peer: int, *, out_tag: int, in_tag: int, blocking: bool) -> None:
        self.peer = peer
        self.out_tag = out_tag
        self.in_tag = in_tag
        self.blocking = blocking
        self._works: list = []
        self._length = torch.empty(1, dtype=torch.int64)

    def send(self, message: bytes) -> None:
        header = torch.tensor([len(message)], dtype=torch.int64)
        payload = torch.frombuffer(bytearray(message), dtype=torch.uint8) if message else None
        if self.blocking:
            dist.send(header, self.peer, tag=self.out_tag)
            if payload is not None:
                dist.send(payload, self.peer, tag=self.out_tag)
            return
        self._works.append((dist.isend(header, self.peer, tag=self.out_tag), header))
        if payload is not None:
            self._works.append((dist.isend(payload, self.peer, tag=self.out_tag), payload))

    def bye(self) -> None:
        dist.send(torch.tensor([BYE], dtype=torch.int64), self.peer, tag=self.out_tag)

    def recv(self) -> bytes | None:
        """The next message; ``None`` once the peer said goodbye.

        Raises:
            EOFError: the peer is gone (its process died; the cause is gloo's message).
        """
        try:
            dist.recv(self._length, self.peer, tag=self.in_tag)
            n = int(self._length)
            if n == BYE:
                return None
            buf = torch.empty(n, dtype=torch.uint8)
            if n:
                dist.recv(buf, self.peer, tag=self.in_tag)
        except RuntimeError as err:
            raise EOFError(str(err).splitlines()[0]) from err
        return buf.numpy().tobytes()

    def settle(self) -> None:
        """Waits for (and releases) the sends started so far."""
        works, self._works = self._works, []
        for work, _ in works:
            work.wait()

    def close(self) -> None:
        """Nothing to close: the process group outlives the channel."""
