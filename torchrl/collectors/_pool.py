"""The transport seam under ``MultiCollector``, and its pipe + shared-memory implementation.

A :class:`Transport` is everything ``MultiCollector`` knows about where its workers run and how batches
come back: start workers, send a command (ask for a batch, push weights, call a method), receive a
result or a batch, detect a death, shut down. ``MultiCollector`` builds ``transport_class(owner,
start_method=...)`` and talks to nothing else, so a Ray or ``torch.distributed`` transport plugs in beside
:class:`PipeTransport` without touching the front door:

.. code-block:: python

    class RayTransport(Transport):  # actors instead of processes, object refs instead of shared files
        ...

    class RayMultiSyncCollector(MultiSyncCollector):
        transport_class = RayTransport

:class:`PipeTransport` runs each worker in a process of the worker layer (:mod:`torchrl.envs._workers`):
the worker's collector stacks its steps into a TensorDict in a shared file and answers one byte; the
parent maps the file once and reads batches in place.
"""
from __future__ import annotations

import pickle
from typing import Any, Sequence

from tensordict import TensorDictBase

from torchrl.collectors._multi_worker import OP_COLLECT, OP_WEIGHTS, REPLY_NEW, REPLY_PICKLED, REPLY_SAME, WorkerSpec
from torchrl.envs._workers import ShmLayout, WorkerPool, default_start_method, new_prefix

__all__ = ["PipeTransport", "Transport", "WorkerPool", "default_start_method"]


class Transport:
    """The interface between ``MultiCollector`` and its workers (subclass it for a new backend).

    Args:
        owner: the collector's class name (for messages).

    Keyword Args:
        start_method: how workers start (the multiprocessing start method for processes; a transport may
            ignore it).

    Attributes:
        shares_memory: workers run on this machine and can read the policy's weights in shared memory
            (else weights travel with :meth:`push_weights`).

    Every method raises ``RuntimeError`` when a worker failed (the message names the worker and carries
    its traceback; the worker's exception is the ``__cause__``) or died; after that, :meth:`check` raises.
    """

    shares_memory = False

    def __init__(self, owner: str, *, start_method: str) -> None:
        self.owner = owner
        self.start_method = start_method
        self.failed: str | None = None  # why the workers cannot be used anymore
        self.closed = False

    def start(self, specs: Sequence[WorkerSpec]) -> None:
        """Starts one worker per spec; returns once each has built its collector."""
        raise NotImplementedError

    def request(self, idx: int) -> None:
        """Asks worker ``idx`` for its next batch (returns at once)."""
        raise NotImplementedError

    def receive_all(self, idxs: Sequence[int]) -> dict[int, TensorDictBase]:
        """The requested batches of workers ``idxs``; a batch may be a view that is valid until the next
        :meth:`request` to its worker."""
        raise NotImplementedError

    def receive_any(self, idxs: Sequence[int]) -> tuple[int, TensorDictBase]:
        """The first requested batch among workers ``idxs``, owned by the caller."""
        raise NotImplementedError

    def call(self, idxs: Sequence[int], path: str, args: tuple = (), kwargs: dict | None = None, *,
             mode: str = "call") -> dict[int, Any]:
        """``{worker: result}`` of calling (``mode="get"``: reading) the dotted ``path`` on the collectors of
        workers ``idxs`` (no batch may be in flight on them)."""
        raise NotImplementedError

    def push_weights(self, idx: int, weights: TensorDictBase) -> None:
        """Makes worker ``idx`` use ``weights`` from its next batch on (no reply; a failure surfaces at the
        next command)."""
        raise NotImplementedError

    def check(self) -> None:
        """Raises if the transport was shut down or a worker failed (``failed`` / ``closed``)."""
        if self.failed is not None:
            raise RuntimeError(f"{self.owner} cannot continue: {self.failed}. Call shutdown() and build a new "
                               f"collector.")
        if self.closed:
            raise RuntimeError(f"{self.owner} has been shut down; build a new one.")

    def shutdown(self, timeout: float | None = None) -> None:
        """Stops every worker (they close their envs) and releases what the transport holds; idempotent."""
        raise NotImplementedError


class PipeTransport(Transport):
    """Worker processes with a pipe each, batches in shared memory (see the module docstring).

    Attributes:
        pool: the :class:`~torchrl.envs._workers.WorkerPool`; ``procs`` are its processes.
        prefix: name prefix of the shared batch files (removed at shutdown).
    """

    shares_memory = True

    def __init__(self, owner: str, *, start_method: str) -> None:
        super().__init__(owner, start_method=start_method)
        self.prefix = new_prefix()
        self.pool = WorkerPool(owner, self.prefix)
        self.views: list[TensorDictBase | None] = []

    @property
    def procs(self) -> list:
        return self.pool.procs

    def start(self, specs: Sequence[WorkerSpec]) -> None:
        for spec in specs:
            if spec.prefix is None:
                spec.prefix = self.prefix
        self.views = [None] * len(specs)
        self.pool.start(specs, self.start_method)

    def request(self, idx: int) -> None:
        self.pool.send(idx, OP_COLLECT, what="collect")

    def _decode(self, idx: int, msg: bytes) -> TensorDictBase:
        op = msg[:1]
        if op == REPLY_SAME:
            return self.views[idx]
        if op == REPLY_NEW:
            layout: ShmLayout = pickle.loads(msg[1:])
            self.views[idx] = layout.attach()
            return self.views[idx]
        if op == REPLY_PICKLED:
            self.views[idx] = None
            return pickle.loads(msg[1:])
        raise RuntimeError(f"{self.owner}: unexpected reply {op!r} from worker {idx}.")

    def receive_all(self, idxs: Sequence[int]) -> dict[int, TensorDictBase]:
        return {i: self._decode(i, msg) for i, msg in self.pool.collect(idxs, "collect").items()}

    def receive_any(self, idxs: Sequence[int]) -> tuple[int, TensorDictBase]:
        i, msg = self.pool.wait_any(idxs, "collect")
        batch = self._decode(i, msg)
        return i, (batch.clone() if batch is self.views[i] else batch)

    def call(self, idxs: Sequence[int], path: str, args: tuple = (), kwargs: dict | None = None, *,
             mode: str = "call") -> dict[int, Any]:
        return self.pool.call(idxs, path, args, kwargs, mode=mode)

    def push_weights(self, idx: int, weights: TensorDictBase) -> None:
        self.pool.send(idx, OP_WEIGHTS + pickle.dumps(weights), reply=False, what="update_policy_weights_")

    def check(self) -> None:
        self.pool.check()

    def shutdown(self, timeout: float | None = None) -> None:
        self.views = [None] * len(self.views)
        self.pool.shutdown(timeout)
