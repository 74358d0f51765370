"""The base of every weight-sync scheme (:class:`WeightSyncScheme`) and the transport protocols."""
from __future__ import annotations

import os
import weakref
from typing import Any, Literal, Protocol, runtime_checkable

from tensordict import TensorDictBase

from torchrl.weight_update._strategy import WeightStrategy, as_weights

__all__ = ["InitialSyncTransport", "TransportBackend", "WeightSyncBackend", "WeightSyncScheme", "receive_initial"]

WeightSyncBackend = Literal["none", "direct", "shared", "thread", "process", "multiprocessing", "distributed", "rpc", "ray"]


@runtime_checkable
class TransportBackend(Protocol):
    """What a scheme needs from a transport: send weights on one side, receive (and apply) them on the other."""

    def send_weights(self, weights: Any) -> None: ...

    def receive_weights(self, timeout: float | None = None, *, weights: Any = None, model: Any = None,
                        strategy: WeightStrategy | None = None) -> Any | None: ...


@runtime_checkable
class InitialSyncTransport(Protocol):
    """A transport that takes part in the initial rendez-vous (:meth:`WeightSyncScheme.connect`)."""

    def setup_connection_and_weights_on_sender(self) -> None: ...

    def setup_connection_and_weights_on_receiver(self, *, worker_idx: int, weights: Any = None, model: Any = None,
                                                 strategy: WeightStrategy | None = None) -> Any: ...


class _DirectTransport:
    """In-process transport: writes the weights into the model it serves (the ``"direct"`` backend)."""

    def __init__(self, model_getter, strategy: WeightStrategy) -> None:
        self._model_getter = model_getter
        self._strategy = strategy

    def send_weights(self, weights: Any) -> None:
        model = self._model_getter()
        if model is None:
            raise RuntimeError("the model this weight transport writes to is gone.")
        self._strategy.apply_weights(model, weights)

    def receive_weights(self, timeout: float | None = None, *, weights: Any = None, model: Any = None,
                        strategy: WeightStrategy | None = None) -> Any | None:
        return None  # what the sender writes is applied at once


class WeightSyncScheme:
    """How ONE model's weights go from where they are trained (the sender) to where they run (receivers).

    A collector holds one scheme per model id (``weight_sync_schemes={"policy": scheme}``) and drives it:
    :meth:`init_on_sender` when it starts its workers, :meth:`connect` once they run, :meth:`send` from
    ``collector.update_policy_weights_()``. Used by hand, the same object plays either side: the process
    that trains calls ``init_on_sender(model_id=..., model=...)`` (plus what the subclass needs), hands the
    scheme to each worker process, and each worker calls ``init_on_receiver(model_id=..., model=...,
    worker_idx=...)``; both sides then call :meth:`connect`, after which :meth:`send` / :meth:`receive`
    move the weights.

    Subclasses say how weights travel (:meth:`create_transport`); the scheme keeps the roles, the model,
    and the :class:`WeightStrategy` (``"tensordict"`` or ``"state_dict"``) that reads and writes weights.

    Args:
        strategy: ``"tensordict"`` (default) or ``"state_dict"``.
    """

    def __init__(self, strategy: Literal["state_dict", "tensordict"] = "tensordict") -> None:
        self._strategy = WeightStrategy(extract_as=strategy)
        self._model_id: str | None = None
        self._context_ref = None
        self._model = None
        self._worker_idx: int | None = None
        self._role: str | None = None
        self._sender_transports: dict[int, Any] = {}
        self._shared_transport = None
        self._receiver_transport = None
        self._synced_sender = False
        self._synced_receiver = False

    # -- construction from a backend name -------------------------------------------------------------------
    @classmethod
    def from_backend(cls, backend: WeightSyncBackend, **kwargs) -> "WeightSyncScheme":
        """The scheme for ``backend``: ``"none"``, ``"direct"``/``"thread"``/``"shared"`` (shared memory),
        ``"process"``/``"multiprocessing"`` (queues or the collector's pipes), ``"distributed"``
        (torch.distributed).

        Raises:
            ValueError: an unknown backend, or one whose transport this package does not ship yet.
        """
        from torchrl.weight_update._distributed import DistributedWeightSyncScheme
        from torchrl.weight_update._multiprocess import MultiProcessWeightSyncScheme
        from torchrl.weight_update._no_sync import NoWeightSyncScheme
        from torchrl.weight_update._shared_mem import SharedMemWeightSyncScheme

        table = {"none": NoWeightSyncScheme, "direct": SharedMemWeightSyncScheme, "thread": SharedMemWeightSyncScheme,
                 "shared": SharedMemWeightSyncScheme, "process": MultiProcessWeightSyncScheme,
                 "multiprocessing": MultiProcessWeightSyncScheme, "distributed": DistributedWeightSyncScheme}
        if backend in table:
            return table[backend](**kwargs)
        if backend in ("rpc", "ray"):
            raise ValueError(f"WeightSyncScheme.from_backend({backend!r}): the {backend} weight transport is not part "
                             f"of this package yet; use 'shared' or 'process'.")
        raise ValueError(f"WeightSyncScheme.from_backend: unknown backend {backend!r}; expected one of "
                         f"{sorted(table) + ['rpc', 'ray']}.")

    # -- properties -------------------------------------------------------------------------------------------
    @property
    def strategy(self) -> WeightStrategy:
        return self._strategy

    @property
    def model_id(self) -> str | None:
        return self._model_id

    @property
    def context(self) -> Any | None:
        """The object driving this scheme (a collector), if any."""
        return self._context_ref() if self._context_ref is not None else None

    @property
    def model(self) -> Any | None:
        """The model whose weights this side holds (the context's model when none was given)."""
        if self._model is not None:
            return self._model
        context = self.context
        if context is not None and self._model_id is not None and hasattr(context, "get_model"):
            return context.get_model(self._model_id)
        return None

    @property
    def weights(self) -> Any | None:
        """The current weights of :attr:`model` (in the strategy's format)."""
        return self._strategy.extract_weights(self.model)

    @property
    def worker_idx(self) -> int | None:
        return self._worker_idx

    @property
    def initialized_on_sender(self) -> bool:
        return self._role == "sender"

    @property
    def initialized_on_receiver(self) -> bool:
        return self._role == "receiver"

    @property
    def synchronized_on_sender(self) -> bool:
        return self._synced_sender

    @property
    def synchronized_on_receiver(self) -> bool:
        return self._synced_receiver

    @property
    def sender_transports(self) -> dict[int, Any]:
        return dict(self._sender_transports)

    @property
    def shared_transport(self) -> Any | None:
        return self._shared_transport

    @property
    def receiver_transport(self) -> Any | None:
        return self._receiver_transport

    # -- the two sides ---------------------------------------------------------------------------------------
    def create_transport(self, **kwargs) -> TransportBackend:
        """A transport of this scheme's kind (built by :meth:`init_on_sender` / :meth:`init_on_receiver`)."""
        raise NotImplementedError(f"{type(self).__name__} does not define create_transport().")

    def _bind(self, role: str, model_id: str | None, context: Any, model: Any) -> None:
        if self._role is not None and getattr(self, "_pid", None) != os.getpid():
            self.__dict__.update(self.__getstate__())  # a forked copy: the other process's side is not ours
        if self._role is not None and self._role != role:
            raise RuntimeError(f"{type(self).__name__} was initialized as the {self._role}; a scheme plays one side "
                               f"per process (hand a copy to the other side).")
        self._role = role
        self._pid = os.getpid()
        self._model_id = model_id if model_id is not None else (self._model_id or "policy")
        self._context_ref = None if context is None else _ref(context)
        self._model = model

    def init_on_sender(self, *args, **kwargs) -> None:
        """Sender side (the process that trains). Keyword Args: ``model_id`` (default ``"policy"``),
        ``context`` (a collector: it supplies the model and the transports), ``model`` (without a context),
        and the subclass's own options (e.g. ``num_workers``)."""
        model_id = kwargs.pop("model_id", args[0] if args else None)
        context = kwargs.pop("context", args[1] if len(args) > 1 else None)
        self._bind("sender", model_id, context, kwargs.pop("model", None))
        maker = getattr(context, "_weight_transport", None)
        if maker is not None:  # a collector knows how to reach its workers
            for idx in range(getattr(context, "num_workers", 1) or 1):
                transport = maker(self, idx)
                if transport is not None:
                    self._sender_transports[idx] = transport
            return
        self._init_sender(**kwargs)

    def _init_sender(self, **kwargs) -> None:
        """Builds the sender's transports for standalone use (subclasses)."""
        if kwargs:
            raise TypeError(f"{type(self).__name__}.init_on_sender got unexpected options {sorted(kwargs)}.")

    def init_on_receiver(self, *, model_id: str, context: Any = None, **kwargs) -> None:
        """Receiver side (a worker). Keyword Args: ``model`` (or ``context.get_model(model_id)``),
        ``worker_idx`` (default 0)."""
        model = kwargs.pop("model", None)
        if model is None and context is not None and hasattr(context, "get_model"):
            model = context.get_model(model_id)
        self._bind("receiver", model_id, context, model)
        self._worker_idx = int(kwargs.pop("worker_idx", 0) or 0)
        self._receiver_transport = self._init_receiver(**kwargs)

    def _init_receiver(self, **kwargs) -> Any:
        """The receiver's transport for standalone use (subclasses)."""
        if kwargs:
            raise TypeError(f"{type(self).__name__}.init_on_receiver got unexpected options {sorted(kwargs)}.")
        return None

    def connect(self, *, worker_idx: int | None = None, weights: Any | None = None) -> None:
        """The initial rendez-vous, once both sides are initialized: the sender hands its current weights
        over, each receiver applies them."""
        if self._role == "sender":
            for transport in self._transports():
                setup = getattr(transport, "setup_connection_and_weights_on_sender", None)
                if setup is not None:
                    setup()
            self._synced_sender = True
        elif self._role == "receiver":
            transport = self._receiver_transport
            setup = getattr(transport, "setup_connection_and_weights_on_receiver", None)
            if setup is not None:
                idx = self._worker_idx if worker_idx is None else worker_idx
                setup(worker_idx=idx, weights=weights, model=self.model, strategy=self._strategy)
            elif weights is not None:
                self.apply_weights(weights)
            self._synced_receiver = True
        else:
            raise RuntimeError(f"{type(self).__name__}.connect(): call init_on_sender() or init_on_receiver() first.")

    def _transports(self, worker_ids=None) -> list:
        if self._shared_transport is not None:
            return [self._shared_transport]
        if worker_ids is None:
            return list({id(t): t for t in self._sender_transports.values()}.values())  # one transport may serve all
        ids = [worker_ids] if isinstance(worker_ids, int) else list(worker_ids)
        unknown = [i for i in ids if i not in self._sender_transports]
        if unknown:
            raise ValueError(f"{type(self).__name__}.send: unknown worker ids {unknown}; the workers are "
                             f"{sorted(self._sender_transports)}.")
        return [self._sender_transports[i] for i in ids]

    def prepare_weights(self, weights: Any, model_id: str, strategy: WeightStrategy, context: Any = None) -> Any:
        """The weights to send: ``weights`` (a module, a TensorDict, a state_dict) as a TensorDict of plain
        tensors; ``None`` takes the current weights of the sender's model."""
        if weights is None:
            model = self.model
            if model is None and context is not None and hasattr(context, "get_model"):
                model = context.get_model(model_id)
            weights = strategy.extract_weights(model)
        if weights is None:
            return None
        weights = as_weights(weights)
        if weights.device is not None and weights.device.type != "cpu" and self._crosses_processes():
            weights = weights.cpu()
        return weights

    def _crosses_processes(self) -> bool:
        return True

    def send(self, weights: Any = None, worker_ids: int | list[int] | None = None) -> None:
        """Sends ``weights`` (default: the sender model's current weights) to every receiver (or to
        ``worker_ids``)."""
        if self._role != "sender":
            raise RuntimeError(f"{type(self).__name__}.send(): call init_on_sender() first.")
        prepared = self.prepare_weights(weights, self._model_id, self._strategy, self.context)
        if prepared is None:
            return
        targets = self._transports(worker_ids)
        for transport in targets:  # every send starts before any acknowledgement is awaited
            start = getattr(transport, "send_weights_async", None)
            start(prepared) if start is not None else transport.send_weights(prepared)
        for transport in targets:
            wait = getattr(transport, "wait_ack", None)
            if wait is not None:
                wait()

    def receive(self, timeout: float | None = None) -> TensorDictBase | None:
        """Receiver side: applies the next weights sent (``None`` if none came within ``timeout``)."""
        if self._role != "receiver":
            raise RuntimeError(f"{type(self).__name__}.receive(): call init_on_receiver() first.")
        if self._receiver_transport is None:
            return None
        return self._receiver_transport.receive_weights(timeout, model=self.model, strategy=self._strategy)

    def apply_weights(self, weights: TensorDictBase, inplace: bool = True) -> None:
        """Writes ``weights`` into this side's model."""
        model = self.model
        if model is None:
            raise RuntimeError(f"{type(self).__name__}.apply_weights(): no model (pass model= at initialization).")
        self._strategy.apply_weights(model, weights, inplace=inplace)

    def shutdown(self) -> None:
        """Releases the transports (threads, queues); idempotent."""
        for transport in [*self._sender_transports.values(), self._shared_transport, self._receiver_transport]:
            close = getattr(transport, "close", None)
            if close is not None:
                close()

    def __getstate__(self) -> dict:
        # A copy handed to another process carries the wiring (queues, shared buffers: subclass attributes)
        # but no role, model or collector: the other side initializes it as a receiver.
        state = dict(self.__dict__)
        state.update(_context_ref=None, _model=None, _role=None, _sender_transports={}, _shared_transport=None,
                     _receiver_transport=None, _synced_sender=False, _synced_receiver=False)
        return state

    def __repr__(self) -> str:
        role = self._role or "not initialized"
        return f"{type(self).__name__}(strategy={self._strategy.extract_as!r}, model_id={self._model_id!r}, {role})"


def receive_initial(transport, worker_idx: int, model: Any, strategy: WeightStrategy | None) -> Any:
    """A receiving transport's initial rendez-vous: waits (up to ``transport.timeout``) for the first weights,
    applies them to ``model``.

    Raises:
        TimeoutError: none came.
    """
    got = transport.receive_weights(transport.timeout, model=model, strategy=strategy)
    if got is None:
        raise TimeoutError(f"{type(transport).__name__}: worker {worker_idx} received no initial weights within "
                           f"{transport.timeout} s (call connect() on the sender).")
    return got


def _ref(obj: Any):
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj
