"""The scheme that keeps every worker's weights as they were built: :class:`NoWeightSyncScheme`."""
from __future__ import annotations

from typing import Any, Literal

from torchrl.weight_update._scheme import WeightSyncScheme

__all__ = ["NoWeightSyncScheme"]


class _NoTransport:
    def send_weights(self, weights: Any) -> None:
        return None

    def receive_weights(self, timeout: float | None = None, *, weights: Any = None, model: Any = None,
                        strategy: Any = None) -> None:
        return None


class NoWeightSyncScheme(WeightSyncScheme):
    """No weight synchronization: each worker keeps the weights its policy had when it was built, and
    ``send``/``receive`` do nothing. In a multi-process collector the workers then hold their own copies
    (nothing is shared), so training the policy in the main process does not change what they run.

    Args:
        strategy: ``"tensordict"`` (default) or ``"state_dict"`` (unused: nothing travels).

    Examples:
        >>> from torch import nn
        >>> scheme = NoWeightSyncScheme()
        >>> scheme.init_on_sender(model_id="policy", model=nn.Linear(2, 1))
        >>> scheme.connect()
        >>> scheme.send()  # nothing to do
        >>> scheme.synchronized_on_sender
        True
    """

    def __init__(self, strategy: Literal["state_dict", "tensordict"] = "tensordict") -> None:
        super().__init__(strategy=strategy)

    def create_transport(self, **kwargs) -> _NoTransport:
        return _NoTransport()

    def init_on_sender(self, *args, **kwargs) -> None:
        model_id = kwargs.pop("model_id", args[0] if args else None)
        context = kwargs.pop("context", args[1] if len(args) > 1 else None)
        self._bind("sender", model_id, context, kwargs.pop("model", None))  # no transports: nothing travels

    def _init_receiver(self, **kwargs) -> _NoTransport:
        return _NoTransport()

    def connect(self, *, worker_idx: int | None = None) -> None:
        if self._role == "sender":
            self._synced_sender = True
        elif self._role == "receiver":
            self._synced_receiver = True
        else:
            raise RuntimeError("NoWeightSyncScheme.connect(): call init_on_sender() or init_on_receiver() first.")

    def send(self, weights: Any = None, worker_ids: int | list[int] | None = None) -> None:
        """Does nothing (this scheme does not synchronize)."""

    def receive(self, timeout: float | None = None) -> None:
        """Does nothing (this scheme does not synchronize); returns ``None``."""
        return None

