"""The RPC engine of the distributed collectors: the worker layer's messages as ``torch.distributed.rpc``
calls (TensorPipe).

Every message is one asynchronous RPC, ``_deliver(sender, seq, message)``, run on the receiver, which
puts it in an :class:`Ordered` inbox: RPCs run on a thread pool and may arrive out of order, so each
message carries its sender's sequence number and the inbox releases them in order. A node serves its
inbox with the worker layer's loop (:func:`torchrl.envs._workers.serve`) and answers with RPCs to the
trainer (``"TRAINER_NODE"``); nodes are named ``"COLLECTOR_NODE_<rank>"`` as in TorchRL. A failed RPC (the
peer is gone) reports the node's death.
"""
from __future__ import annotations

import itertools
import queue
import threading
import time
import warnings
from typing import Any

import cloudpickle
import torch.distributed.rpc as rpc

from torchrl.collectors.distributed._launch import GROUP_TIMEOUT
from torchrl.collectors.distributed._transport import _DEAD, TorchDistTransport
from torchrl.envs._workers import serve

__all__ = ["NodeChannel", "Ordered", "RpcChannel", "RpcTransport", "TRAINER", "node_name", "rpc_node_main"]

TRAINER = "TRAINER_NODE"
PING_EVERY = 5.0  # seconds an idle node waits before it checks that the trainer is still there
_INBOXES: dict[int, "Ordered"] = {}  # this process's inboxes, by sender rank


def node_name(rank: int) -> str:
    return f"COLLECTOR_NODE_{rank}"


class Ordered:
    """Releases ``(seq, item)`` pairs in ``seq`` order (0, 1, 2, ...) into ``out`` (a callable)."""

    def __init__(self, out) -> None:
        self.out = out
        self.next = 0
        self.early: dict[int, Any] = {}
        self.lock = threading.Lock()

    def put(self, seq: int, item: Any) -> None:
        with self.lock:
            self.early[seq] = item
            while self.next in self.early:
                self.out(self.early.pop(self.next))
                self.next += 1


def _ping() -> None:
    """A liveness check (runs on the trainer)."""


def _deliver(sender: int, seq: int, message: bytes) -> None:
    """Runs on the receiver: files ``message`` from rank ``sender``."""
    _INBOXES[sender].put(seq, message)


def _init_rpc(name: str, rank: int, world_size: int, addr: str, port: int, options: dict | None) -> None:
    with warnings.catch_warnings():  # torch's own rendezvous uses a deprecated call of its own API
        warnings.filterwarnings("ignore", message="You are using a Backend", category=UserWarning)
        rpc.init_rpc(name, rank=rank, world_size=world_size, rpc_backend_options=_options(addr, port, options))


def _options(addr: str, port: int, options: dict | None) -> rpc.TensorPipeRpcBackendOptions:
    kwargs = dict(options or {})
    kwargs.setdefault("rpc_timeout", GROUP_TIMEOUT.total_seconds())  # deaths are detected, not timed out
    return rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://{addr}:{port}", **kwargs)


class RpcChannel:
    """The trainer's side of node ``rank``: ``send`` is an RPC that does not wait; a failed one reports
    the death through ``on_death(detail)``."""

    def __init__(self, rank: int, on_death) -> None:
        self.rank = rank
        self.seq = itertools.count()
        self.on_death = on_death
        self.futures: list = []

    def send(self, message: bytes) -> None:
        fut = rpc.rpc_async(node_name(self.rank), _deliver, args=(0, next(self.seq), message))
        fut.add_done_callback(self._done)
        self.futures.append(fut)

    def _done(self, fut) -> None:
        try:
            fut.wait()
        except Exception as err:  # noqa: BLE001 - the node is gone
            self.on_death(str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__)

    def settle(self) -> None:
        futures, self.futures = self.futures, []
        for fut in futures:
            try:
                fut.wait()
            except Exception:  # noqa: BLE001 - reported by _done
                pass

    def close(self) -> None:
        """Nothing to close: RPC outlives the channel."""


class NodeChannel:
    """A node's side: ``recv`` takes the trainer's next message, ``send`` answers with an RPC."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.seq = itertools.count()
        self.messages: queue.Queue = queue.Queue()
        _INBOXES[0] = Ordered(self.messages.put)

    def recv(self) -> bytes:
        """The trainer's next message (while none comes, the trainer is pinged every few seconds).

        Raises:
            EOFError: the trainer is gone.
        """
        while True:
            try:
                return self.messages.get(timeout=PING_EVERY)
            except queue.Empty:
                try:
                    rpc.rpc_sync(TRAINER, _ping, timeout=PING_EVERY)
                except Exception as err:  # noqa: BLE001 - any failure: the trainer is unreachable
                    raise EOFError(f"the trainer is gone ({err})") from err

    def send(self, message: bytes) -> None:
        try:
            rpc.rpc_sync(TRAINER, _deliver, args=(self.rank, next(self.seq), message))
        except RuntimeError as err:
            raise OSError(f"the trainer is gone ({err})") from err

    def close(self) -> None:
        """Nothing to close."""


def rpc_node_main(rank: int, world_size: int, addr: str, port: int, options: dict | None, spec: Any) -> None:
    """A collection node over RPC: joins, receives its spec, serves until closed, then leaves RPC."""
    chan = NodeChannel(rank)
    _init_rpc(node_name(rank), rank, world_size, addr, port, options)
    try:
        spec = cloudpickle.loads(chan.recv()) if spec is None else spec
        serve(chan, spec, rank - 1)
    finally:
        rpc.shutdown(graceful=True)


def join_as_trainer(world_size: int, addr: str, port: int, options: dict | None, inbox_put, launcher, owner: str,
                    max_wait: float) -> None:
    """Joins RPC as the trainer (rank 0); replies of node ``r`` go to ``inbox_put((r - 1, message, None))``.

    Raises:
        RuntimeError: a node died before joining (naming its rank), or ``max_wait`` seconds passed.
    """
    for r in range(1, world_size):
        _INBOXES[r] = Ordered(lambda msg, i=r - 1: inbox_put((i, msg, None)))
    error: list[BaseException] = []

    def init():
        try:
            _init_rpc(TRAINER, 0, world_size, addr, port, options)
        except BaseException as err:  # noqa: BLE001 - re-raised below
            error.append(err)

    thread = threading.Thread(target=init, name=f"{owner}-rpc-init", daemon=True)
    thread.start()
    deadline = time.monotonic() + max_wait
    while thread.is_alive():
        thread.join(0.02)
        for r in range(1, world_size):
            cause = launcher.dead(r)
            if cause is not None:
                raise RuntimeError(f"{owner}: collection node of rank {r} died before joining ({cause}).")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{owner}: the collection nodes did not join within {max_wait:.0f} s (tcp://{addr}:{port}).")
    if error:
        raise RuntimeError(f"{owner}: joining RPC failed: {error[0]}") from error[0]


class RpcTransport(TorchDistTransport):
    """:class:`~torchrl.collectors.distributed._transport.TorchDistTransport` on ``torch.distributed.rpc``.

    Keyword Args:
        tensorpipe_options: more ``TensorPipeRpcBackendOptions`` (``num_worker_threads``, ...).
        (the others as for ``TorchDistTransport``)
    """

    node_target = staticmethod(rpc_node_main)
    spec_in_args = False

    def __init__(self, owner: str, *, tensorpipe_options: dict | None = None, **kwargs) -> None:
        super().__init__(owner, **kwargs)
        self.backend = tensorpipe_options  # what the launcher hands the nodes in the backend's place
        self.failed_nodes: set[int] = set()

    def _join(self, world: int, addr: str, port: int) -> None:
        join_as_trainer(world, addr, port, self.backend, self.inbox.put, self.launcher, self.owner,
                        self.connect_timeout)

    def _open(self, n: int) -> list:
        def death(i):
            def report(detail):
                self.failed_nodes.add(i)
                self.inbox.put((i, _DEAD, detail))
            return report

        return [RpcChannel(i + 1, death(i)) for i in range(n)]

    def _leave(self) -> None:
        rpc.shutdown(graceful=not self.failed_nodes and self.failed is None)
