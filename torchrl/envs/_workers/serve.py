"""The worker side of the worker layer: one process, one object built from a spec, one channel.

:func:`worker_main` is the only worker entry point: it builds the object its :class:`WorkerSpec` describes
(a ``ParallelEnv``'s sub-env, a process collector's :class:`~torchrl.collectors.Collector`), answers ``k``
(or the build error), then serves commands until ``x`` or until the parent is gone. What the commands do
is the :class:`Server`'s business; the loop owns the rest: Ctrl-C left to the parent, inherited pipe ends
closed, torch threads set, every failure answered with the worker's traceback while the loop keeps
serving.
"""
from __future__ import annotations

import pickle
import signal
from typing import Any

import cloudpickle
import torch

from torchrl.envs._workers.wire import (
    OP_CALL,
    OP_CLOSE,
    REPLY_OK,
    REPLY_VALUE,
    Channel,
    call_path,
    error_payload,
)

__all__ = ["Server", "WorkerSpec", "serve", "worker_main"]


class Server:
    """What a worker serves: the object it built, and the handling of its commands.

    Subclasses add their own opcodes in :meth:`handle` and fall back on this one, which serves ``m``
    (remote calls and attribute reads on :attr:`target`).

    Args:
        target: the object remote calls are addressed to.
    """

    def __init__(self, target: Any) -> None:
        self.target = target

    def resolve(self, target: Any, path: str) -> Any:
        """``target``'s attribute ``path`` (subclasses may accept dotted paths)."""
        return getattr(target, path)

    def handle(self, op: bytes, message: bytes) -> bytes | None:
        """The reply to ``message`` (``None``: the command has none); raising replies with the error."""
        if op == OP_CALL:
            path, args, kwargs, mode = cloudpickle.loads(message[1:])
            return REPLY_VALUE + pickle.dumps(call_path(self.target, path, args, kwargs, mode, self.resolve))
        raise RuntimeError(f"unknown worker command {op!r}")

    def close(self) -> None:
        """Releases what the worker built (``x``)."""


class WorkerSpec:
    """Everything one worker needs, built in the parent (pickled only with ``spawn``/``forkserver``).

    Subclasses hold their own fields and implement :meth:`build`; the fields named in ``CLOUDPICKLED``
    (factories, policies: often lambdas or local classes) travel through ``cloudpickle``, the others
    through ``pickle`` (so that shared-memory tensors stay shared).

    Attributes:
        num_threads: torch threads of the worker.
        builds: what :meth:`build` builds, for messages (``"its env"``).
    """

    CLOUDPICKLED: tuple[str, ...] = ()
    builds = "its object"
    num_threads = 1

    def build(self, idx: int) -> Server:
        """Builds worker ``idx``'s object (in the worker)."""
        raise NotImplementedError

    def __getstate__(self) -> dict:
        state = {k: v for k, v in vars(self).items() if k not in self.CLOUDPICKLED}
        state["_cloudpickled"] = cloudpickle.dumps({k: v for k, v in vars(self).items() if k in self.CLOUDPICKLED})
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        vars(self).update(cloudpickle.loads(state.pop("_cloudpickled")))
        vars(self).update(state)


def worker_main(idx: int, conn, spec: WorkerSpec, close_fds: list) -> None:
    """Entry point of every worker process: builds ``spec``'s object, then serves commands until ``x`` or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us.
    for other in close_fds:  # with fork: the parent's ends of the other workers' pipes
        try:
            other.close()
        except OSError:
            pass
    serve(Channel(conn), spec, idx)


def serve(chan: Any, spec: WorkerSpec, idx: int) -> None:
    """Builds ``spec``'s object, answers ``k`` (or the build error), then serves the commands read from
    ``chan`` until ``x`` or until the parent is gone (``chan``: anything with ``send(bytes)``,
    ``recv() -> bytes`` raising ``EOFError``/``OSError`` once the parent is gone, and ``close()``; a pipe
    :class:`Channel` here, a torch.distributed channel for the distributed collectors)."""
    torch.set_num_threads(spec.num_threads)
    try:
        server = spec.build(idx)
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
        chan.send(error_payload(err))
        chan.close()
        return
    chan.send(REPLY_OK)
    recv, send, handle = chan.recv, chan.send, server.handle
    while True:
        try:
            message = recv()
        except (EOFError, OSError):  # the parent is gone
            break
        op = message[:1]
        try:
            if op == OP_CLOSE:
                try:
                    server.close()
                finally:
                    send(REPLY_VALUE + pickle.dumps(None))
                break
            reply = handle(op, message)
            if reply is not None:
                send(reply)
        except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
            try:
                send(error_payload(err))
            except (OSError, EOFError):
                break
    chan.close()
