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
import multiprocessing as mp
import pickle
import queue
import signal
import threading
import time
import warnings
from typing import Any

import cloudpickle
import torch.distributed.rpc as rpc

from torchrl.collectors.distributed._launch import GROUP_TIMEOUT, free_port
from torchrl.collectors.distributed._transport import _DEAD, TorchDistTransport
from torchrl.envs._workers import REPLY_VALUE, Channel, exit_text, serve
from torchrl.envs._workers.pool import _start_process

__all__ = ["Gateway", "NodeChannel", "Ordered", "RpcTransport", "TRAINER", "gateway_main", "node_name", "rpc_node_main"]

TRAINER = "TRAINER_NODE"
CLOSED = REPLY_VALUE + pickle.dumps(None)  # a node's answer to "close"
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


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def gateway_main(conn, world_size: int, addr: str, port: int, options: dict | None) -> None:
    """The trainer's RPC agent, in a process of its own (rank 0, ``"TRAINER_NODE"``).

    RPC keeps process-wide state after ``rpc.shutdown()`` (a second ``init_rpc`` in the same process hangs,
    and processes forked from it cannot join), so the trainer never joins RPC itself: this gateway does, and
    relays over its pipe. From the trainer: ``(i, message)`` (sent to node ``i + 1``), ``(-1, graceful)``
    (leave). To the trainer: ``(-1, "joined" | "error", detail)``, ``(i, "msg", message)``, ``(i, "dead",
    detail)`` (a call to node ``i + 1`` failed: it is gone).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    chan = Channel(conn)
    lock = threading.Lock()

    def tell(i: int, kind: str, payload: Any) -> None:
        with lock:
            try:
                chan.send(pickle.dumps((i, kind, payload)))
            except OSError:
                pass

    for r in range(1, world_size):
        _INBOXES[r] = Ordered(lambda msg, i=r - 1: tell(i, "msg", msg))
    try:
        _init_rpc(TRAINER, 0, world_size, addr, port, options)
    except Exception as err:  # noqa: BLE001 - reported to the trainer
        tell(-1, "error", _first_line(err))
        return
    tell(-1, "joined", None)
    seqs = {r: itertools.count() for r in range(1, world_size)}
    graceful = False
    while True:
        try:
            i, message = pickle.loads(chan.recv())
        except (EOFError, OSError):
            break
        if i < 0:
            graceful = bool(message)
            break
        fut = rpc.rpc_async(node_name(i + 1), _deliver, args=(0, next(seqs[i + 1]), message))

        def done(f, i=i):
            try:
                f.wait()
            except Exception as err:  # noqa: BLE001 - the node is gone
                tell(i, "dead", _first_line(err))

        fut.add_done_callback(done)
    rpc.shutdown(graceful=graceful)
    tell(-1, "left", None)


class GatewayChannel:
    """The trainer's side of node ``i + 1``: its messages go through the gateway's pipe."""

    def __init__(self, gateway: "Gateway", i: int) -> None:
        self.gateway = gateway
        self.i = i

    def send(self, message: bytes) -> None:
        self.gateway.send(self.i, message)

    def settle(self) -> None:
        """Nothing to wait for: the gateway owns the calls."""

    def close(self) -> None:
        """The gateway closes with the transport."""


class Gateway:
    """The trainer's handle on :func:`gateway_main`: starts it, relays, stops it."""

    def __init__(self, owner: str, world_size: int, addr: str, port: int, options: dict | None) -> None:
        self.owner = owner
        ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
        parent, child = ctx.Pipe(duplex=True)
        self.proc = ctx.Process(target=gateway_main, args=(child, world_size, addr, port, options),
                                name=f"{owner}-rpc-gateway", daemon=True)
        _start_process(self.proc, ctx.get_start_method())
        child.close()
        self.conn = parent
        self.chan = Channel(parent)
        self.lock = threading.Lock()

    def wait_joined(self, launcher, world_size: int, max_wait: float, where: str) -> None:
        """Returns once every node joined.

        Raises:
            RuntimeError: a node or the gateway died first (naming the rank), joining failed, or ``max_wait``
                seconds passed.
        """
        deadline = time.monotonic() + max_wait
        while not self.conn.poll(0.02):
            for r in range(1, world_size):
                cause = launcher.dead(r)
                if cause is not None:
                    raise RuntimeError(f"{self.owner}: collection node of rank {r} died before joining ({cause}).")
            if not self.proc.is_alive():
                raise RuntimeError(f"{self.owner}: the RPC gateway died ({exit_text(self.proc.exitcode)}).")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.owner}: the collection nodes did not join within {max_wait:.0f} s ({where}).")
        _, kind, detail = pickle.loads(self.chan.recv())
        if kind != "joined":
            raise RuntimeError(f"{self.owner}: joining RPC failed: {detail}")

    def send(self, i: int, message: bytes) -> None:
        with self.lock:
            self.chan.send(pickle.dumps((i, message)))

    def read(self, put, n: int) -> None:
        """Reader thread: files the nodes' messages with ``put((i, message | _DEAD, detail))`` until the
        gateway leaves (or dies: every node is then reported dead)."""
        while True:
            try:
                i, kind, payload = pickle.loads(self.chan.recv())
            except (EOFError, OSError):
                for j in range(n):
                    put((j, _DEAD, "the RPC gateway is gone"))
                return
            if kind == "msg":
                put((i, payload, None))
            elif kind == "dead":
                put((i, _DEAD, payload))
            elif kind == "left":
                return

    def close(self, graceful: bool, timeout: float) -> None:
        try:
            self.send(-1, graceful)
        except OSError:
            pass
        self.proc.join(timeout)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(1.0)
        self.conn.close()


class RpcTransport(TorchDistTransport):
    """:class:`~torchrl.collectors.distributed._transport.TorchDistTransport` on ``torch.distributed.rpc``:
    the nodes join RPC, and the trainer talks to them through a gateway process (see :func:`gateway_main`).

    Keyword Args:
        tensorpipe_options: more ``TensorPipeRpcBackendOptions`` (``num_worker_threads``, ...).
        (the others as for ``TorchDistTransport``)
    """

    node_target = staticmethod(rpc_node_main)
    spec_in_args = False

    def __init__(self, owner: str, *, tensorpipe_options: dict | None = None, **kwargs) -> None:
        super().__init__(owner, **kwargs)
        self.backend = tensorpipe_options  # what the launcher hands the nodes in the backend's place
        self.gateway: Gateway | None = None

    def _host(self, addr: str, world: int) -> int:
        return self.port or free_port()  # RPC's own store is hosted by the gateway

    def _join(self, world: int, addr: str, port: int) -> None:
        self.gateway = Gateway(self.owner, world, addr, port, self.backend)
        self.gateway.wait_joined(self.launcher, world, self.connect_timeout, f"tcp://{addr}:{port}")

    def _open(self, n: int) -> list:
        reader = threading.Thread(target=self.gateway.read, args=(self.inbox.put, n), name=f"{self.owner}-rpc-reader",
                                  daemon=True)
        reader.start()
        self.readers.append(reader)
        return [GatewayChannel(self.gateway, i) for i in range(n)]

    def shutdown(self, timeout: float | None = None) -> None:
        if self.closed:
            return
        if self.gateway is not None and not self.joined:  # joining failed: nobody to close
            self.gateway.close(False, 1.0)
            self.gateway = None
        super().shutdown(timeout)

    def _await_closed(self, wait: float) -> None:
        """Waits up to ``wait`` s for every live node's answer to ``close`` (other replies still in flight are
        dropped); the reader ends when the gateway leaves."""
        deadline = time.monotonic() + wait
        open_nodes = {i for i in range(len(self.chans)) if self.launcher is None or self.launcher.dead(i + 1) is None}
        while open_nodes and time.monotonic() < deadline:
            try:
                i, msg, _ = self.inbox.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                break
            if msg is _DEAD or msg == CLOSED:
                open_nodes.discard(i)

    def _leave(self) -> None:
        if self.gateway is not None:
            self.gateway.close(self.failed is None, 10.0)
            self.gateway = None
        for reader in self.readers:
            reader.join(1.0)
