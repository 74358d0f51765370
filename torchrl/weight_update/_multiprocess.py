"""Weights sent as copies to worker processes: :class:`MPTransport` and :class:`MultiProcessWeightSyncScheme`."""
from __future__ import annotations

import multiprocessing as mp
import queue as queue_mod
import threading
import time
from typing import Any

from torchrl.weight_update._scheme import WeightSyncScheme, receive_initial
from torchrl.weight_update._shared_mem import SharedMemWeightSyncScheme
from torchrl.weight_update._strategy import as_weights

__all__ = ["MPTransport", "MultiProcessWeightSyncScheme"]


class MPTransport:
    """One worker's weight channel: a queue the sender puts ``(sequence number, model id, weights)`` on, and
    an optional queue the worker acknowledges each applied update on.

    Args:
        weight_queue: a ``multiprocessing`` queue (sender → worker).
        ack_queue: a queue (worker → sender) for acknowledgements; ``None``: sends do not wait.
        timeout: seconds :meth:`wait_ack` and the initial rendez-vous wait before raising ``TimeoutError``.

    Examples:
        >>> import queue
        >>> from torch import nn
        >>> sender_model, worker_model = nn.Linear(2, 1), nn.Linear(2, 1)
        >>> transport = MPTransport(queue.Queue(), queue.Queue())
        >>> transport.send_weights_async(sender_model)
        >>> _ = transport.receive_weights(timeout=1.0, model=worker_model)
        >>> transport.wait_ack()
        >>> bool((worker_model.weight == sender_model.weight).all())
        True
    """

    def __init__(self, weight_queue, ack_queue=None, timeout: float = 10.0) -> None:
        self.weight_queue = weight_queue
        self.ack_queue = ack_queue
        self.timeout = timeout
        self._sent = 0  # sender: last sequence number sent
        self._acked = 0  # sender: last sequence number acknowledged
        self._applied = 0  # receiver: last sequence number applied

    def send_weights_async(self, weights: Any, model_id: str = "policy") -> None:
        """Queues ``weights`` (a module, a TensorDict or a state_dict) without waiting."""
        self._sent += 1
        self.weight_queue.put((self._sent, model_id, as_weights(weights)))

    def send_weights(self, weights: Any) -> None:
        """Queues ``weights`` and waits until the worker applied them."""
        self.send_weights_async(weights)
        self.wait_ack()

    def wait_ack(self) -> None:
        """Waits until the worker acknowledged the last send.

        Raises:
            TimeoutError: no acknowledgement within ``timeout`` seconds.
        """
        if self.ack_queue is None:
            return
        deadline = time.monotonic() + self.timeout
        while self._acked < self._sent:
            left = deadline - time.monotonic()
            try:
                self._acked = max(self._acked, int(self.ack_queue.get(timeout=max(left, 0.0))))
            except queue_mod.Empty:
                raise TimeoutError(f"MPTransport: the worker did not acknowledge weight update {self._sent} within "
                                   f"{self.timeout} s (is it alive and receiving?).") from None

    def receive_weights(self, timeout: float | None = None, *, weights: Any = None, model: Any = None,
                        strategy: Any = None) -> Any | None:
        """Takes the next weights queued (waiting up to ``timeout`` s; ``None`` waits until some come),
        applies them to ``model`` with ``strategy`` and acknowledges; ``None`` if none came."""
        try:
            item = self.weight_queue.get(timeout=timeout) if timeout != 0 else self.weight_queue.get_nowait()
        except queue_mod.Empty:
            return None
        seq, _, new = item  # one update per call, in order: the initial rendez-vous takes exactly the first
        if model is not None:
            if strategy is None:
                from torchrl.weight_update._strategy import WeightStrategy

                strategy = WeightStrategy()
            strategy.apply_weights(model, new)
        self._applied = seq
        if self.ack_queue is not None:
            self.ack_queue.put(seq)
        return new

    def setup_connection_and_weights_on_sender(self) -> None:
        """Nothing to set up: the queues exist (the scheme sends the initial weights)."""

    def setup_connection_and_weights_on_receiver(self, *, worker_idx: int, weights: Any = None, model: Any = None,
                                                 strategy: Any = None) -> Any:
        """Waits for the initial weights (up to ``timeout`` s) and applies them.

        Raises:
            TimeoutError: none came.
        """
        return receive_initial(self, worker_idx, model, strategy)


class MultiProcessWeightSyncScheme(SharedMemWeightSyncScheme):
    """Weight synchronization by sending copies to each worker process.

    In a multi-process collector the weights travel through each worker's command pipe and are applied
    before its next batch; the workers hold their own copies (nothing is shared), so they run new weights
    only after ``update_policy_weights_()``. Used by hand: ``init_on_sender(model_id=..., model=...,
    num_workers=n)`` makes one weight queue and one acknowledgement queue per worker; hand the scheme to
    the worker processes, where ``init_on_receiver(model_id=..., model=..., worker_idx=i)`` and
    ``connect()`` apply the initial weights and start a thread that applies every later update as it
    arrives. ``send()`` waits for every worker's acknowledgement (``sync=True``) or not.

    Args:
        strategy: ``"tensordict"`` (default) or ``"state_dict"``.
        sync: ``send()`` waits until every worker applied the weights (default), else returns at once.

    Examples:
        >>> import multiprocessing as mp
        >>> from torch import nn
        >>> def worker(scheme):
        ...     policy = nn.Linear(2, 1)
        ...     scheme.init_on_receiver(model_id="policy", model=policy, worker_idx=0)
        ...     scheme.connect()  # the trainer's weights, applied
        ...     while scheme.receive(timeout=5.0) is None:  # later updates, applied by a thread
        ...         pass
        >>> trained = nn.Linear(2, 1)
        >>> scheme = MultiProcessWeightSyncScheme()
        >>> scheme.init_on_sender(model_id="policy", model=trained, num_workers=1)
        >>> proc = mp.get_context("fork").Process(target=worker, args=(scheme,))
        >>> proc.start()
        >>> scheme.connect()
        >>> scheme.send()  # returns once the worker applied the weights
        >>> proc.join()
    """

    def __init__(self, strategy: str = "tensordict", sync: bool = True) -> None:
        super().__init__(strategy=strategy, sync=sync)
        self._queues: dict[int, tuple] | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._updates = threading.Condition()
        self._latest: tuple[int, Any] = (0, None)
        self._taken = 0

    def create_transport(self, **kwargs) -> MPTransport:
        return MPTransport(kwargs["weight_queue"], kwargs.get("ack_queue"), kwargs.get("timeout", 10.0))

    def _init_sender(self, num_workers: int = 1, weights: Any = None, mp_context: Any = None,
                     timeout: float = 10.0, **kwargs) -> None:
        if kwargs:
            raise TypeError(f"{type(self).__name__}.init_on_sender got unexpected options {sorted(kwargs)}.")
        ctx = mp_context if mp_context is not None else mp.get_context()
        if isinstance(ctx, str):
            ctx = mp.get_context(ctx)
        # without sync, no acknowledgement queue: receivers do not acknowledge, sends do not wait
        self._queues = {i: (ctx.Queue(), ctx.Queue() if self.sync else None, timeout) for i in range(num_workers)}
        for i, (wq, aq, t) in self._queues.items():
            self._sender_transports[i] = self.create_transport(weight_queue=wq, ack_queue=aq, timeout=t)
        if self._model is None:
            self._model = weights

    def _init_receiver(self, **kwargs) -> MPTransport:
        if kwargs:
            raise TypeError(f"{type(self).__name__}.init_on_receiver got unexpected options {sorted(kwargs)}.")
        if not self._queues or self._worker_idx not in self._queues:
            raise RuntimeError(f"{type(self).__name__}.init_on_receiver: this scheme carries no queue for worker "
                               f"{self._worker_idx}; call init_on_sender(num_workers=...) on the sender first, then "
                               f"hand the scheme to the worker.")
        wq, aq, t = self._queues[self._worker_idx]
        return self.create_transport(weight_queue=wq, ack_queue=aq, timeout=t)

    @property
    def weights(self) -> Any | None:
        return self._strategy.extract_weights(self.model)

    def _crosses_processes(self) -> bool:
        return True

    def connect(self, *, worker_idx: int | None = None, weights: Any | None = None) -> None:
        """Sender: queues the current weights for every worker (without waiting). Receiver: applies them,
        then starts the thread that applies later updates."""
        if self._role == "sender" and self._queues is not None:
            initial = self.prepare_weights(weights, self._model_id, self._strategy, self.context)
            for transport in self._sender_transports.values():
                transport.send_weights_async(initial, self._model_id)
            self._synced_sender = True
            return
        super().connect(worker_idx=worker_idx, weights=weights)
        if self._role == "receiver" and self._thread is None:
            self._thread = threading.Thread(target=self._listen, name="torchrl-weight-receiver", daemon=True)
            self._thread.start()

    def _listen(self) -> None:
        transport = self._receiver_transport
        while not self._stop.is_set():
            try:
                got = transport.receive_weights(0.05, model=self.model, strategy=self._strategy)
            except (EOFError, OSError):  # the sender is gone
                return
            if got is not None:
                with self._updates:
                    self._latest = (transport._applied, got)
                    self._updates.notify_all()

    def send(self, weights: Any = None, worker_ids: int | list[int] | None = None) -> None:
        """Sends ``weights`` (default: the sender model's) to every worker (or ``worker_ids``); waits for
        their acknowledgements when ``sync``."""
        WeightSyncScheme.send(self, weights, worker_ids)  # copies travel: not the shared-memory send

    def receive(self, timeout: float | None = None) -> Any | None:
        """The newest weights applied since the last call (waiting up to ``timeout`` s), else ``None``."""
        if self._role != "receiver":
            raise RuntimeError(f"{type(self).__name__}.receive(): call init_on_receiver() first.")
        if self._thread is None:  # not connected yet: receive directly
            return super().receive(timeout)
        with self._updates:
            self._updates.wait_for(lambda: self._latest[0] > self._taken, timeout=timeout or 0.0)
            seq, got = self._latest
            if seq <= self._taken:
                return None
            self._taken = seq
            return got

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(1.0)
            self._thread = None
        super().shutdown()

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state.update(_thread=None, _stop=None, _updates=None, _latest=(0, None), _taken=0)
        return state

    def _bind(self, role: str, model_id, context, model) -> None:
        super()._bind(role, model_id, context, model)
        if self._stop is None:  # a forked copy (see WeightSyncScheme._bind)
            self.__setstate__({})

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._stop = threading.Event()
        self._updates = threading.Condition()
