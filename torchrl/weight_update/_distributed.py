"""Weights over torch.distributed: :class:`DistributedTransport` and :class:`DistributedWeightSyncScheme`."""
from __future__ import annotations

import time
from typing import Any

import torch.distributed as dist
from tensordict import TensorDictBase

from torchrl.weight_update._scheme import WeightSyncScheme, receive_initial
from torchrl.weight_update._strategy import WeightStrategy, as_weights, copy_weights

__all__ = ["DistributedTransport", "DistributedWeightSyncScheme"]

_TAG = 1 << 20  # tags of the weight messages (TensorDict.send numbers its leaves from there)
_POLL = 0.002  # seconds between looks at the store while a receiver or an ack waits


def _require_group() -> None:
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("DistributedWeightSyncScheme needs an initialized process group: call "
                           "torch.distributed.init_process_group(...) in every process first.")


def _default_store(model_id: str):
    """The process group's own store, under a prefix of this model (every rank can reach it)."""
    from torch.distributed.distributed_c10d import _get_default_store

    return dist.PrefixStore(f"torchrl/weight_sync/{model_id}/", _get_default_store())


class DistributedTransport:
    """One peer's weight channel over torch.distributed: the weights travel with point-to-point sends of
    ``weights_buffer``'s leaves; a store (the process group's, by default) carries the update numbers and
    the acknowledgements, so a receiver can look for new weights without blocking.

    Keyword Args:
        weights_buffer: a TensorDict shaped like the weights (the sender copies into it before sending, the
            receiver receives into it).
        store: a ``torch.distributed.Store`` shared by both sides.
        rank: the peer: the receiver's rank on the sender side, the sender's on the receiver side.
        sync: the sender waits for the receiver's acknowledgement.
    """

    def __init__(self, *, weights_buffer: TensorDictBase, store: "dist.Store" = None, rank: int | None = None,
                 sync: bool = True) -> None:
        self.weights_buffer = weights_buffer
        self.store = store
        self.rank = rank
        self.sync = sync
        self.timeout = 3600.0
        self._seq = 0
        self._works: list = []

    def _key(self, what: str, receiver: int) -> str:
        return f"{receiver}/{what}"

    # -- sender side ----------------------------------------------------------------------------------------
    def send_weights_async(self, weights: Any) -> None:
        """Copies ``weights`` into the buffer, announces update ``n + 1`` and starts sending (non-blocking)."""
        self.wait_sent()
        copy_weights(self.weights_buffer, as_weights(weights), where="DistributedTransport")
        self._seq += 1
        self.store.set(self._key("seq", self.rank), str(self._seq))
        self._works = self.weights_buffer.isend(dst=self.rank, init_tag=_TAG, return_early=True) or []

    def wait_sent(self) -> None:
        for work in self._works:
            work.wait()
        self._works = []

    def send_weights(self, weights: Any) -> None:
        """Sends ``weights`` and, when ``sync``, waits until the receiver applied them."""
        self.send_weights_async(weights)
        self.wait_ack()

    def send_initial_weights(self, weights: Any) -> None:
        self.send_weights(weights)

    def wait_ack(self) -> None:
        """Waits until the data left and, when ``sync``, until the receiver acknowledged the last update.

        Raises:
            TimeoutError: no acknowledgement within ``timeout`` seconds.
        """
        self.wait_sent()
        if not self.sync:
            return
        key = self._key("ack", self.rank)
        deadline = time.monotonic() + self.timeout
        while not (self.store.check([key]) and int(self.store.get(key)) >= self._seq):
            if time.monotonic() >= deadline:
                raise TimeoutError(f"DistributedTransport: rank {self.rank} did not acknowledge weight update "
                                   f"{self._seq} within {self.timeout} s.")
            time.sleep(_POLL)

    def setup_connection_and_weights_on_sender(self) -> None:
        """Nothing to set up: the process group exists (the scheme sends the initial weights)."""

    # -- receiver side --------------------------------------------------------------------------------------
    def receive_weights(self, timeout: float | None = None, *, weights: Any = None, model: Any = None,
                        strategy: WeightStrategy | None = None) -> Any | None:
        """Receives the next update if one was announced (waiting up to ``timeout`` s; ``None``: until one
        is), applies it to ``model`` and acknowledges it; ``None`` if none came."""
        me = dist.get_rank()
        key = self._key("seq", me)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not (self.store.check([key]) and int(self.store.get(key)) > self._seq):
            if deadline is not None and time.monotonic() >= deadline:
                return None
            time.sleep(_POLL)
        self.weights_buffer.recv(src=self.rank, init_tag=_TAG)
        self._seq += 1
        if model is not None:
            (strategy or WeightStrategy()).apply_weights(model, self.weights_buffer)
        self.store.set(self._key("ack", me), str(self._seq))
        return self.weights_buffer

    def receive_initial_weights(self) -> Any:
        return self.receive_weights(self.timeout)

    def setup_connection_and_weights_on_receiver(self, *, worker_idx: int, weights: Any = None, model: Any = None,
                                                 strategy: WeightStrategy | None = None) -> Any:
        """Receives and applies the initial weights.

        Raises:
            TimeoutError: none came within ``timeout`` seconds.
        """
        return receive_initial(self, worker_idx, model, strategy)


class DistributedWeightSyncScheme(WeightSyncScheme):
    """Weight synchronization between the ranks of a torch.distributed process group (gloo, NCCL).

    The sender (usually rank 0, the trainer) calls ``init_on_sender(model_id=..., model=...)`` (every other
    rank is a receiver unless ``ranks=`` says otherwise); each receiver calls ``init_on_receiver(
    model_id=..., model=..., worker_idx=...)`` (``src=`` the sender's rank, default 0). After ``connect()`` on
    every rank, ``send()`` sends the weights point to point and ``receive(timeout)`` applies them where an
    update was announced (through the process group's store, so a receiver polls without blocking).

    Args:
        backend: the process group's backend (informative: the group in use decides).
        sync: ``send()`` waits until every receiver applied the weights.
        timeout: seconds an acknowledgement or the initial weights are waited for.

    Examples:
        >>> import torch.distributed as dist
        >>> from torch import nn
        >>> dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29577", rank=0, world_size=1)
        >>> scheme = DistributedWeightSyncScheme()
        >>> scheme.init_on_sender(model_id="policy", model=nn.Linear(2, 1))  # a world of one: no receiver
        >>> scheme.connect()
        >>> scheme.send()
        >>> scheme.sender_transports
        {}
        >>> dist.destroy_process_group()
    """

    def __init__(self, backend: str = "gloo", sync: bool = True, timeout: float = 3600.0) -> None:
        super().__init__(strategy="tensordict")
        self.backend = backend
        self.sync = sync
        self.timeout = float(timeout)
        self._store = None

    def create_transport(self, **kwargs) -> DistributedTransport:
        transport = DistributedTransport(weights_buffer=kwargs["weights_buffer"], store=kwargs.get("store", self._store),
                                         rank=kwargs.get("rank"), sync=kwargs.get("sync", self.sync))
        transport.timeout = self.timeout
        return transport

    def _local_weights(self, store: Any, side: str, kwargs: dict) -> TensorDictBase:
        """Checks the options and the process group, takes the store; the model's weights (a buffer shape)."""
        if kwargs:
            raise TypeError(f"DistributedWeightSyncScheme.init_on_{side} got unexpected options {sorted(kwargs)}.")
        _require_group()
        weights = as_weights(self.model)
        if weights is None:
            raise ValueError(f"DistributedWeightSyncScheme.init_on_{side}: pass model= (the weights to "
                             f"{'send' if side == 'sender' else 'receive into'}).")
        self._store = store if store is not None else _default_store(self._model_id)
        return weights

    def _init_sender(self, ranks: list[int] | None = None, store: Any = None, **kwargs) -> None:
        weights = self._local_weights(store, "sender", kwargs)
        me = dist.get_rank()
        ranks = [r for r in range(dist.get_world_size()) if r != me] if ranks is None else list(ranks)
        for i, rank in enumerate(ranks):
            self._sender_transports[i] = self.create_transport(weights_buffer=weights.clone(), rank=rank)

    def _init_receiver(self, src: int = 0, store: Any = None, **kwargs) -> DistributedTransport:
        return self.create_transport(weights_buffer=self._local_weights(store, "receiver", kwargs).clone(), rank=src)

    def connect(self, *, worker_idx: int | None = None, weights: Any | None = None) -> None:
        """Sender: sends the current weights to every receiver (waiting for them when ``sync``). Receiver:
        receives and applies them."""
        if self._role == "sender":
            initial = self.prepare_weights(weights, self._model_id, self._strategy, self.context)
            for transport in self._sender_transports.values():
                transport.send_weights(initial)
            self._synced_sender = True
            return
        super().connect(worker_idx=worker_idx, weights=weights)

    def _crosses_processes(self) -> bool:
        return self.backend != "nccl"  # NCCL sends CUDA tensors as they are

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_store"] = None  # each rank takes its own handle on the group's store
        return state
