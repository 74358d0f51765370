"""Weights over ``torch.distributed.rpc``: :class:`RPCTransport` and :class:`RPCWeightSyncScheme`.

The sender calls the receiver with an asynchronous RPC that files the weights in the receiver's inbox for
that model (one per model id and process); the receiver applies the latest weights filed when it polls
(:meth:`WeightSyncScheme.receive`, which a collector calls before each batch), never in the middle of a
step. The RPC returns once the weights are filed, which is the sender's acknowledgement.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Literal

from tensordict import TensorDictBase

from torchrl.weight_update._scheme import WeightSyncScheme, receive_initial
from torchrl.weight_update._strategy import WeightStrategy, as_weights

__all__ = ["RPCTransport", "RPCWeightSyncScheme"]

_INBOXES: dict[str, "_Inbox"] = {}  # this process's receivers, by model id
_POLL = 0.002


class _Inbox:
    """The latest weights filed for one model on a receiver, and how many were filed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.weights: TensorDictBase | None = None
        self.filed = 0

    def put(self, weights: TensorDictBase) -> int:
        with self.lock:
            self.weights = weights
            self.filed += 1
            return self.filed

    def take(self) -> TensorDictBase | None:
        with self.lock:
            weights, self.weights = self.weights, None
            return weights


def _file_weights(model_id: str, weights: TensorDictBase) -> int:
    """Runs on the receiver (through RPC): files ``weights`` for ``model_id``."""
    inbox = _INBOXES.get(model_id)
    if inbox is None:
        raise RuntimeError(f"RPCWeightSyncScheme: no receiver for model {model_id!r} in this process (call "
                           f"init_on_receiver(model_id={model_id!r}, ...) there first).")
    return inbox.put(weights)


def _rpc():
    import torch.distributed.rpc as rpc

    if not rpc.is_available():
        raise RuntimeError("RPCWeightSyncScheme needs torch.distributed.rpc, which this torch build lacks.")
    return rpc


class RPCTransport:
    """One receiver's weight channel over RPC (sender side), or this process's inbox (receiver side).

    Args:
        collector_info: the receiver (a ``WorkerInfo`` or a worker name).
        collector_rref / collector_class: TorchRL's handles on a remote collector (kept for compatibility).
        worker_rank: the receiver's rank when ``collector_info`` is not given (its worker name is then
            ``"COLLECTOR_NODE_<rank>"``, TorchRL's naming).
    """

    def __init__(self, collector_info=None, collector_rref=None, collector_class=None, worker_rank=None) -> None:
        self.collector_info = collector_info
        self.collector_rref = collector_rref
        self.collector_class = collector_class
        self.worker_rank = worker_rank
        self.model_id = "policy"
        self.timeout = 3600.0
        self._future = None
        self._inbox: _Inbox | None = None

    def _destination(self):
        if self.collector_info is not None:
            return self.collector_info
        if self.worker_rank is None:
            raise ValueError("RPCTransport: give collector_info (a WorkerInfo or worker name) or worker_rank.")
        return f"COLLECTOR_NODE_{self.worker_rank}"

    # -- sender side ----------------------------------------------------------------------------------------
    def send_weights_async(self, weights: Any) -> None:
        """Starts filing ``weights`` on the receiver (returns at once; :meth:`wait_ack` waits)."""
        self.wait_ack()
        weights = as_weights(weights).detach().cpu()
        self._future = _rpc().rpc_async(self._destination(), _file_weights, args=(self.model_id, weights))

    def wait_ack(self) -> None:
        """Waits until the receiver filed the last weights sent (raises the receiver's error)."""
        future, self._future = self._future, None
        if future is not None:
            future.wait()

    def send_weights(self, weights: Any) -> None:
        self.send_weights_async(weights)
        self.wait_ack()

    def setup_connection_and_weights_on_sender(self) -> None:
        """Nothing to set up: RPC is initialized (the scheme sends the initial weights)."""

    # -- receiver side --------------------------------------------------------------------------------------
    def receive_weights(self, timeout: float | None = None, *, weights: Any = None, model: Any = None,
                        strategy: WeightStrategy | None = None) -> Any | None:
        """Applies the latest weights filed (waiting up to ``timeout`` s for some; ``None``: until they come)
        to ``model``; ``None`` if none came."""
        inbox = self._inbox
        if inbox is None:
            raise RuntimeError("RPCTransport.receive_weights: this transport is not a receiver's.")
        deadline = None if timeout is None else time.monotonic() + timeout
        got = inbox.take()
        while got is None:
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(_POLL)
            got = inbox.take()
        if model is not None:
            (strategy or WeightStrategy()).apply_weights(model, got)
        return got

    def setup_connection_and_weights_on_receiver(self, *, worker_idx: int, weights: Any = None, model: Any = None,
                                                 strategy: WeightStrategy | None = None) -> Any:
        """Waits for the sender's initial weights and applies them.

        Raises:
            TimeoutError: none came within ``timeout`` seconds.
        """
        return receive_initial(self, worker_idx, model, strategy)


class RPCWeightSyncScheme(WeightSyncScheme):
    """Weight synchronization between the workers of an RPC group (``torch.distributed.rpc.init_rpc`` done in
    every process).

    The sender calls ``init_on_sender(model_id=..., model=..., collector_infos=[...])`` (or
    ``worker_ranks=[...]``: workers named ``"COLLECTOR_NODE_<rank>"``); each receiver calls
    ``init_on_receiver(model_id=..., model=...)``. After ``connect()`` on both sides, ``send()`` files the
    weights on every receiver (returning once they are filed) and ``receive(timeout)`` applies the latest
    ones there. Inside an :class:`~torchrl.collectors.distributed.RPCCollector` the collector's own RPC
    channel carries them instead.

    Args:
        strategy: ``"tensordict"`` (default) or ``"state_dict"``.

    Examples:
        >>> from torch import nn
        >>> scheme = RPCWeightSyncScheme()
        >>> transport = scheme.create_transport(worker_rank=1)
        >>> transport._destination()
        'COLLECTOR_NODE_1'
    """

    def __init__(self, strategy: Literal["state_dict", "tensordict"] = "tensordict") -> None:
        super().__init__(strategy=strategy)
        self.timeout = 3600.0

    def create_transport(self, *, collector_info=None, collector_rref=None, collector_class=None, worker_rank=None,
                         **kwargs) -> RPCTransport:
        if kwargs:
            raise TypeError(f"RPCWeightSyncScheme.create_transport got unexpected options {sorted(kwargs)}.")
        transport = RPCTransport(collector_info, collector_rref, collector_class, worker_rank)
        transport.model_id = self._model_id or "policy"
        transport.timeout = self.timeout
        return transport

    def _init_sender(self, collector_infos: list | None = None, worker_ranks: list[int] | None = None,
                     **kwargs) -> None:
        if kwargs:
            raise TypeError(f"RPCWeightSyncScheme.init_on_sender got unexpected options {sorted(kwargs)}.")
        if (collector_infos is None) == (worker_ranks is None):
            raise ValueError("RPCWeightSyncScheme.init_on_sender: give collector_infos=[...] or worker_ranks=[...].")
        for i, info in enumerate(collector_infos or []):
            self._sender_transports[i] = self.create_transport(collector_info=info)
        for i, rank in enumerate(worker_ranks or []):
            self._sender_transports[i] = self.create_transport(worker_rank=rank)

    def _init_receiver(self, **kwargs) -> RPCTransport:
        if kwargs:
            raise TypeError(f"RPCWeightSyncScheme.init_on_receiver got unexpected options {sorted(kwargs)}.")
        transport = self.create_transport()
        transport._inbox = _INBOXES.setdefault(self._model_id, _Inbox())
        return transport

    def connect(self, *, worker_idx: int | None = None, weights: Any | None = None) -> None:
        """Sender: files the current weights on every receiver. Receiver: waits for them and applies them."""
        if self._role == "sender":
            initial = self.prepare_weights(weights, self._model_id, self._strategy, self.context)
            for transport in self._sender_transports.values():
                if isinstance(transport, RPCTransport):
                    transport.send_weights(initial)
            self._synced_sender = True
            return
        super().connect(worker_idx=worker_idx, weights=weights)
