"""Weights in shared memory: :class:`SharedMemTransport` and :class:`SharedMemWeightSyncScheme`."""
from __future__ import annotations

import time
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl.weight_update._scheme import WeightSyncScheme
from torchrl.weight_update._strategy import as_weights, copy_weights

__all__ = ["SharedMemTransport", "SharedMemWeightSyncScheme"]

_POLL = 0.005  # seconds between looks at the version counter while a receiver waits


class SharedMemTransport:
    """Weights that live in shared memory: receivers' models are rebound onto the buffer, so a send is an
    in-place copy that every receiver sees at once. A version counter (also shared) tells a receiver that
    new weights arrived.

    Examples:
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> sender_model, worker_model = nn.Linear(2, 1), nn.Linear(2, 1)
        >>> transport = SharedMemTransport()
        >>> transport.register_weights({0: TensorDict.from_module(sender_model).data.clone().share_memory_()}, {})
        >>> _ = transport.setup_connection_and_weights_on_receiver(worker_idx=0, model=worker_model)
        >>> transport.send_weights(TensorDict.from_module(sender_model))
        >>> bool((worker_model.weight == sender_model.weight).all())
        True
    """

    def __init__(self) -> None:
        self._buffers: dict[int, TensorDictBase] = {}
        self._init_queues: dict = {}
        self._per_worker = False
        self._version = torch.zeros((), dtype=torch.int64).share_memory_()
        self._seen = 0
        self._ack_queue = None
        self._buffer: TensorDictBase | None = None  # the receiver's

    def register_weights(self, params_map: dict, init_queues: dict, per_worker: bool = False) -> None:
        """Sender side: ``params_map`` maps each worker to its shared weight buffer (one buffer may serve
        several workers); ``init_queues`` (optional) are queues the buffers are handed over through at
        :meth:`setup_connection_and_weights_on_sender`."""
        for idx, buf in params_map.items():
            buf = as_weights(buf)
            if not buf.is_shared() and buf.device.type == "cpu":
                buf.share_memory_()
            self._buffers[int(idx)] = buf
        self._init_queues = dict(init_queues or {})
        self._per_worker = per_worker

    @property
    def unique_weights(self) -> list[TensorDictBase]:
        """The distinct buffers (one, unless workers hold their own weights)."""
        out, seen = [], set()
        for buf in self._buffers.values():
            if id(buf) not in seen:
                seen.add(id(buf))
                out.append(buf)
        return out

    def setup_connection_and_weights_on_sender(self) -> None:
        """Hands each worker its buffer through the init queues (when there are any)."""
        for idx, queue in self._init_queues.items():
            queue.put(self._buffers[int(idx)])

    def setup_connection_and_weights_on_receiver(self, *, worker_idx: int | None = None, weights: Any = None,
                                                 model: Any = None, strategy: Any = None,
                                                 timeout: float = 60.0) -> TensorDictBase:
        """Receiver side: takes the worker's buffer (``weights``, the registered one, or from its init queue)
        and rebinds ``model``'s parameters onto it."""
        idx = 0 if worker_idx is None else int(worker_idx)
        buf = weights
        if buf is None and idx in self._buffers:
            buf = self._buffers[idx]
        if buf is None and idx in self._init_queues:
            buf = self._init_queues[idx].get(timeout=timeout)
        if buf is None:
            raise RuntimeError(f"SharedMemTransport: no shared weights registered for worker {idx}.")
        self._buffer = buf
        if isinstance(model, torch.nn.Module):
            buf.to_module(model)
        elif isinstance(model, TensorDictBase):
            copy_weights(model, buf, where="SharedMemTransport")
        self._seen = int(self._version)
        return buf

    def send_weights(self, weights: TensorDictBase | dict[int, TensorDictBase], worker_ids: list[int] | None = None) -> None:
        """Copies ``weights`` (or ``{worker: weights}``) into the buffers in place, then bumps the version."""
        if isinstance(weights, dict) and weights and all(isinstance(k, int) for k in weights):
            for idx, w in weights.items():
                copy_weights(self._buffers[idx], as_weights(w), where="SharedMemTransport")
        else:
            weights = as_weights(weights)
            ids = list(self._buffers) if worker_ids is None else ([worker_ids] if isinstance(worker_ids, int) else worker_ids)
            done = set()
            for idx in ids:
                buf = self._buffers[int(idx)]
                if id(buf) not in done:
                    done.add(id(buf))
                    copy_weights(buf, weights, where="SharedMemTransport")
        self._version += 1

    def receive_weights(self, timeout: float | None = None, *, weights: Any = None, model: Any = None,
                        strategy: Any = None) -> Any | None:
        """The buffer if new weights arrived since the last call (waiting up to ``timeout`` seconds;
        ``None``: just look), else ``None``. The model already reads them: nothing is copied."""
        deadline = time.monotonic() + (timeout or 0.0)
        while int(self._version) == self._seen:
            if time.monotonic() >= deadline:
                return None
            time.sleep(_POLL)
        self._seen = int(self._version)
        self.send_ack()
        return self._buffer

    def send_ack(self, message: str = "updated") -> None:
        """Acknowledges an update to the sender (when an ack queue was given)."""
        if self._ack_queue is not None:
            self._ack_queue.put(message)


class SharedMemWeightSyncScheme(WeightSyncScheme):
    """Weight synchronization through shared memory: receivers run on the weights in place, so a send is
    one in-place copy, seen by every receiver at once (nothing is pickled).

    In a multi-process collector, the policy's CPU weights are moved to shared memory and every worker's
    policy is bound to them (the collectors' default); a policy whose weights cannot be shared (lazy
    modules, ``policy_factory``, another device) gets its weights through the workers' pipes instead.
    Used by hand: ``init_on_sender(model_id=..., model=..., num_workers=...)`` makes the buffer (a shared
    copy of the model's weights), the scheme is handed to the worker processes (as an argument of
    ``Process``), each calls ``init_on_receiver(model_id=..., model=..., worker_idx=...)`` and
    ``connect()``; after ``send()``, ``receive()`` returns the new weights (``None`` if none came).

    Args:
        strategy: ``"tensordict"`` (default) or ``"state_dict"``.
        sync: kept for TorchRL compatibility (a shared-memory send is complete when it returns).
        per_worker_weights: one buffer per worker (workers with distinct policies) instead of one shared.

    Examples:
        >>> from torch import nn
        >>> trained, worker = nn.Linear(2, 1), nn.Linear(2, 1)
        >>> scheme = SharedMemWeightSyncScheme()
        >>> scheme.init_on_sender(model_id="policy", model=trained, num_workers=1)
        >>> scheme.weights["weight"].is_shared()
        True
    """

    def __init__(self, strategy: str = "tensordict", sync: bool = True, per_worker_weights: bool = False) -> None:
        super().__init__(strategy=strategy)
        self.sync = sync
        self.per_worker_weights = per_worker_weights
        self._wiring: SharedMemTransport | None = None

    def create_transport(self, **kwargs) -> SharedMemTransport:
        return SharedMemTransport()

    @property
    def weights(self) -> Any | None:
        """The shared buffer (the sender's model weights when no buffer was made)."""
        if self._wiring is not None and self._wiring.unique_weights:
            return self._wiring.unique_weights[0]
        return super().weights

    def _init_sender(self, num_workers: int = 1, weights: Any = None, **kwargs) -> None:
        if kwargs:
            raise TypeError(f"{type(self).__name__}.init_on_sender got unexpected options {sorted(kwargs)}.")
        source = as_weights(weights if weights is not None else self.model)
        if source is None:
            raise ValueError(f"{type(self).__name__}.init_on_sender: pass model= (or weights=) to share.")
        transport = self.create_transport()
        if self.per_worker_weights:
            buffers = {i: source.clone().share_memory_() for i in range(num_workers)}
        else:
            shared = source.clone().share_memory_()
            buffers = {i: shared for i in range(num_workers)}
        transport.register_weights(buffers, {}, per_worker=self.per_worker_weights)
        self._wiring = self._shared_transport = transport

    def _init_receiver(self, **kwargs) -> SharedMemTransport:
        if kwargs:
            raise TypeError(f"{type(self).__name__}.init_on_receiver got unexpected options {sorted(kwargs)}.")
        if self._wiring is None:
            raise RuntimeError(f"{type(self).__name__}.init_on_receiver: this scheme carries no shared buffer; "
                               f"call init_on_sender() on the sender first, then hand the scheme to the worker.")
        return self._wiring

    def _crosses_processes(self) -> bool:
        return False  # the in-place copy moves the data to the buffer's device

    def send(self, weights: TensorDictBase | dict[int, TensorDictBase] | None = None,
             worker_ids: int | list[int] | None = None) -> None:
        """Copies ``weights`` (default: the sender model's) into the shared buffer(s)."""
        if self._role != "sender":
            raise RuntimeError(f"{type(self).__name__}.send(): call init_on_sender() first.")
        if isinstance(weights, dict) and weights and all(isinstance(k, int) for k in weights):
            if self._shared_transport is None:
                raise ValueError(f"{type(self).__name__}.send: per-worker weights need a shared buffer per worker.")
            self._shared_transport.send_weights(weights)
            return
        if self._shared_transport is not None:
            prepared = self.prepare_weights(weights, self._model_id, self._strategy, self.context)
            if prepared is not None:
                self._shared_transport.send_weights(prepared, worker_ids)
            return
        super().send(weights, worker_ids)
