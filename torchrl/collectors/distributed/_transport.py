"""``TorchDistTransport``: the ``MultiCollector`` transport whose workers are torch.distributed nodes.

The trainer is rank 0 of a process group (gloo by default) and each collection node a rank ``>= 1``,
started by a launcher (:mod:`._launch`). Commands and replies are the worker layer's messages
(:mod:`torchrl.envs._workers.wire`) carried by point-to-point sends (:class:`._wire.GlooChannel`); a node
serves them with the same loop as a local worker process (:func:`torchrl.envs._workers.serve`), so remote
calls, errors with the node's traceback, weight updates applied before the next batch and seeding work as
for :class:`~torchrl.collectors.MultiSyncCollector`. Batches travel pickled (a node may be on another
machine; there is no shared memory).

One reader thread per node receives its replies (a blocking receive addressed to that rank, which raises
as soon as the node's connection drops) and queues them; the trainer waits on the queue, so a node that
dies raises within a second, naming its rank and its exit status.
"""
from __future__ import annotations

import pickle
import queue
import threading
import time
from typing import Any, Sequence

import cloudpickle
import torch.distributed as dist
from tensordict import TensorDictBase

from torchrl.collectors._multi_worker import OP_COLLECT, OP_WEIGHTS, REPLY_PICKLED, CollectorServer, WorkerSpec
from torchrl.collectors._pool import Transport
from torchrl.collectors.distributed._launch import (
    DelayedLauncher,
    Launcher,
    ProcessLauncher,
    SubmititLauncher,
    check_no_group,
    host_address,
    host_store,
    node_main,
    rendezvous,
)
from torchrl.collectors.distributed._wire import TAG_DOWN, TAG_UP, GlooChannel
from torchrl.envs._workers import OP_CALL, OP_CLOSE, REPLY_ERROR, remote_error

__all__ = ["NodeSpec", "TorchDistTransport"]

LAUNCHERS = ("mp", "submitit", "submitit_delayed")
_DEAD = object()
_LOOK_EVERY = 0.25  # seconds between looks at the launcher while waiting for replies


class NodeServer(CollectorServer):
    """A node's server: batches go back pickled (``flatten``: reshaped to one dim, as TorchRL delivers the
    batches of a node running several envs)."""

    def __init__(self, collector: Any, idx: int, *, flatten: bool) -> None:
        super().__init__(collector, "", idx)
        self.flatten = flatten
        self.consolidate = False  # pickle batches consolidated (one storage: 3x faster round trip)
        self._it = None

    def next_batch(self) -> TensorDictBase:
        if hasattr(self.target, "rollout"):
            return self.target.rollout()
        if self._it is None:
            self._it = iter(self.target)
        return next(self._it)

    def handle(self, op: bytes, message: bytes) -> bytes | None:
        if op == OP_COLLECT and self.deferred is None:
            batch = self.next_batch()
            if self.flatten and batch.batch_dims > 1:
                batch = batch.reshape(-1)
            if self.consolidate:
                batch = batch.consolidate()
            return REPLY_PICKLED + pickle.dumps(batch)
        return super().handle(op, message)


class NodeSpec(WorkerSpec):
    """A node's collector: ``collector_class`` on the spec's env factory; a multi-process class gets
    ``num_envs`` copies of it (``num_workers_per_collector``)."""

    builds = "its collector"

    def __init__(self, spec: WorkerSpec, *, num_envs: int, extra_kwargs: dict) -> None:
        vars(self).update(vars(spec))
        self.num_envs = num_envs
        self.extra_kwargs = extra_kwargs

    def build(self, idx: int) -> NodeServer:
        from torchrl.collectors._multi import MultiCollector

        policy = self.policy_factory() if self.policy_factory is not None else self.policy
        kwargs = dict(self.collector_kwargs, **self.extra_kwargs)
        cls = self.collector_class
        multi = isinstance(cls, type) and issubclass(cls, MultiCollector)
        if multi:
            env_kwargs = [self.create_env_kwargs] * self.num_envs
            collector = cls([self.create_env_fn] * self.num_envs, policy, create_env_kwargs=env_kwargs, **kwargs)
        else:
            collector = cls(self.create_env_fn, policy, create_env_kwargs=self.create_env_kwargs, worker_idx=idx,
                            **kwargs)
        return NodeServer(collector, idx, flatten=multi)


class TorchDistTransport(Transport):
    """Collection nodes in a torch.distributed group (see the module docstring).

    Args:
        owner: the collector's class name (for messages).

    Keyword Args:
        start_method: how the ``"mp"`` launcher starts processes.
        launcher: ``"mp"``, ``"submitit"`` or ``"submitit_delayed"``.
        backend: the group's backend (``"gloo"``; ``"nccl"`` moves CUDA tensors between GPUs).
        tcp_port: the port of the group's store (default: a free one).
        slurm_kwargs: the submitit executor's parameters.
        num_envs: envs per node (``num_workers_per_collector``).
        extra_kwargs: more options for each node's collector (``collector_kwargs``).
        connect_timeout: seconds the nodes have to join.
    """

    def __init__(self, owner: str, *, start_method: str, launcher: str = "mp", backend: str = "gloo",
                 tcp_port: int | str | None = None, slurm_kwargs: dict | None = None, num_envs: int = 1,
                 extra_kwargs: dict | None = None, connect_timeout: float = 1000.0) -> None:
        super().__init__(owner, start_method=start_method)
        if launcher not in LAUNCHERS:
            raise ValueError(f"{owner}: launcher must be one of {LAUNCHERS}, got {launcher!r}.")
        self.launcher_name = launcher
        self.backend = backend
        self.port = int(tcp_port) if tcp_port is not None else None
        self.slurm_kwargs = slurm_kwargs
        self.num_envs = num_envs
        self.extra_kwargs = extra_kwargs or {}
        self.connect_timeout = connect_timeout
        self.launcher: Launcher | None = None
        self._store = None
        self.chans: list[GlooChannel] = []
        self.inbox: queue.Queue = queue.Queue()
        self.held: dict[int, list] = {}
        self.pending: list[int] = []
        self.readers: list[threading.Thread] = []
        self.joined = False

    # -- lifetime ------------------------------------------------------------------------------------------
    def _make_launcher(self) -> Launcher:
        if self.launcher_name == "mp":
            return ProcessLauncher(self.start_method)
        if self.launcher_name == "submitit":
            return SubmititLauncher(self.slurm_kwargs)
        return DelayedLauncher()

    def start(self, specs: Sequence[WorkerSpec]) -> None:
        check_no_group(self.owner)
        n = len(specs)
        world = n + 1
        nodes = [NodeSpec(spec, num_envs=self.num_envs, extra_kwargs=self.extra_kwargs) for spec in specs]
        addr = "127.0.0.1" if self.launcher_name == "mp" else host_address()
        port = self._host(addr, world)
        self.launcher = launcher = self._make_launcher()
        delayed = isinstance(launcher, DelayedLauncher)
        if delayed:
            launcher.announce(addr, port)
        by_message = delayed or not self.spec_in_args
        launcher.launch(self.node_target, {r: (r, world, addr, port, self.backend, None if by_message else nodes[r - 1])
                                           for r in range(1, world)})
        self._join(world, addr, port)
        self._store = None  # the group holds it now
        self.joined = True
        self.pending = [1] * n  # the readiness replies
        self.held = {i: [] for i in range(n)}
        self.chans = self._open(n)
        if by_message:
            for i, node in enumerate(nodes):
                self.chans[i].send(cloudpickle.dumps(node))
        self.receive(range(n), "start (building its collector)")

    # -- the engine: gloo point-to-point (subclasses: another engine) -------------------------------------------
    node_target = staticmethod(node_main)
    spec_in_args = True  # the launcher hands each node its spec (else: the first message)

    def _host(self, addr: str, world: int) -> int:
        """Hosts the rendez-vous on this machine; returns its port (the one asked for, or a free one)."""
        self._store = host_store(addr, self.port or 0, world)
        return self._store.port

    def _join(self, world: int, addr: str, port: int) -> None:
        rendezvous(self.launcher, self._store, backend=self.backend, world_size=world, owner=self.owner,
                   max_wait=self.connect_timeout)

    def _open(self, n: int) -> list:
        chans = [GlooChannel(r, out_tag=TAG_DOWN, in_tag=TAG_UP, blocking=False) for r in range(1, n + 1)]
        for i in range(n):
            reader = threading.Thread(target=self._read, args=(chans[i], i), name=f"{self.owner}-node-{i + 1}-reader",
                                      daemon=True)
            reader.start()
            self.readers.append(reader)
        return chans

    def _await_closed(self, wait: float) -> None:
        """Waits up to ``wait`` s for the nodes to close (a node says goodbye: its reader ends)."""
        deadline = time.monotonic() + wait
        for reader in self.readers:
            reader.join(max(deadline - time.monotonic(), 0.0))

    def _leave(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

    def _read(self, chan: GlooChannel, i: int) -> None:
        while True:
            try:
                msg = chan.recv()
            except EOFError as err:
                self.inbox.put((i, _DEAD, str(err)))
                return
            if msg is None:
                return
            self.inbox.put((i, msg, None))

    def shutdown(self, timeout: float | None = None) -> None:
        if self.closed:
            return
        self.closed = True
        launcher = self.launcher
        if self.joined:
            for i, chan in enumerate(self.chans):
                if launcher is None or launcher.dead(i + 1) is None:
                    try:
                        chan.send(OP_CLOSE)
                    except RuntimeError:
                        pass
        wait = 5.0 if timeout is None else timeout
        self._await_closed(wait)
        for chan in self.chans:
            try:
                chan.settle()
            except RuntimeError:
                pass
        if self.joined:
            self._leave()
        if launcher is not None:
            launcher.shutdown(wait)
        self.chans, self.readers = [], []
        self.joined = False
        self._store = None

    # -- replies ---------------------------------------------------------------------------------------------
    def _death(self, i: int, what: str, detail: str | None) -> RuntimeError:
        cause = None
        if self.launcher is not None:
            for _ in range(20):  # the process may still be exiting
                cause = self.launcher.dead(i + 1)
                if cause is not None:
                    break
                time.sleep(0.05)
        cause = cause or detail or "connection lost"
        self.failed = f"collection node of rank {i + 1} (worker {i}) died during {what} ({cause})"
        return RuntimeError(f"{self.owner}: {self.failed}; the collector cannot continue: call shutdown().")

    def _look_for_deaths(self, idxs: set[int], what: str) -> None:
        if self.launcher is None:
            return
        for j in idxs:
            if self.launcher.dead(j + 1) is not None:
                raise self._death(j, what, None)

    def _next(self, idxs: set[int], what: str) -> tuple[int, bytes]:
        """The next reply among workers ``idxs`` (earlier replies of other workers are held)."""
        for i in sorted(idxs):
            if self.held[i]:
                return i, self.held[i].pop(0)
        next_look = time.monotonic() + _LOOK_EVERY
        while True:
            if time.monotonic() >= next_look:  # a busy peer must not hide a silent death (RPC has no reader)
                self._look_for_deaths(idxs, what)
                next_look = time.monotonic() + _LOOK_EVERY
            try:
                i, msg, detail = self.inbox.get(timeout=_LOOK_EVERY)
            except queue.Empty:
                continue
            self.pending[i] -= 1
            if msg is _DEAD:
                raise self._death(i, what, detail)
            self.chans[i].settle()  # it answered: every earlier command reached it
            if i in idxs:
                return i, msg
            self.held[i].append(msg)

    def _reply(self, i: int, msg: bytes, what: str) -> bytes:
        if msg[:1] == REPLY_ERROR:
            if what.startswith(("start", "collect")):
                self.failed = f"worker {i} raised {pickle.loads(msg[1:])[1]} during {what}"
            raise remote_error(self.owner, i, what, msg)
        return msg

    def receive(self, idxs, what: str) -> dict[int, bytes]:
        """One reply from each worker in ``idxs``; every reply is read before the first error is raised (a
        node always answers or dies, so no stale reply is left for the next command)."""
        waiting = set(idxs)
        out: dict[int, bytes] = {}
        error: BaseException | None = None
        while waiting:
            i, msg = self._next(waiting, what)
            waiting.discard(i)
            try:
                out[i] = self._reply(i, msg, what)
            except RuntimeError as err:
                error = error or err
        if error is not None:
            raise error
        return out

    # -- Transport interface ------------------------------------------------------------------------------------
    def _send(self, i: int, message: bytes, *, reply: bool = True) -> None:
        self.check()
        self.chans[i].send(message)
        if reply:
            self.pending[i] += 1

    def request(self, idx: int) -> None:
        self._send(idx, OP_COLLECT)

    @staticmethod
    def _decode(msg: bytes) -> TensorDictBase:
        return pickle.loads(msg[1:])

    def receive_all(self, idxs: Sequence[int]) -> dict[int, TensorDictBase]:
        return {i: self._decode(msg) for i, msg in self.receive(idxs, "collect").items()}

    def receive_any(self, idxs: Sequence[int]) -> tuple[int, TensorDictBase]:
        i, msg = self._next(set(idxs), "collect")
        return i, self._decode(self._reply(i, msg, "collect"))

    def call(self, idxs: Sequence[int], path: str, args: tuple = (), kwargs: dict | None = None, *,
             mode: str = "call") -> dict[int, Any]:
        idxs = list(idxs)
        message = OP_CALL + cloudpickle.dumps((path, args, kwargs or {}, mode))
        what = {"call": f"{path}()", "get": path}.get(mode, f"getattr({path!r})")
        for i in idxs:
            self._send(i, message)
        return {i: pickle.loads(msg[1:]) for i, msg in self.receive(idxs, what).items()}

    def push_weights(self, idx: int, weights: TensorDictBase) -> None:
        self._send(idx, OP_WEIGHTS + pickle.dumps(weights), reply=False)

