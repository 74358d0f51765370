"""Weight updaters: how ``collector.update_policy_weights_()`` brings new policy weights to where they run.

- :class:`WeightUpdaterBase`: the contract. Subclasses implement ``_push_weights``; ``push_weights`` (and
  calling the updater) runs it, then the post-hooks.
- :class:`VanillaWeightUpdater`: copies weights in place into one policy's parameters (the default of
  :class:`~torchrl.collectors.Collector`).
- :class:`MultiProcessedWeightUpdater`: copies weights into the shared-memory parameters that worker
  processes read (the default of the multi-process collectors).
- :class:`SchemeWeightUpdater`: drives a :class:`~torchrl.weight_update.WeightSyncScheme` (what
  ``weight_sync_schemes={"policy": scheme}`` installs, through :func:`attach_schemes`).
"""
from __future__ import annotations

import abc
import weakref
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl.weight_update._scheme import WeightSyncScheme
from torchrl.weight_update._strategy import as_weights, copy_weights

__all__ = [
    "MultiProcessedWeightUpdater",
    "SchemeWeightUpdater",
    "VanillaWeightUpdater",
    "WeightUpdaterBase",
    "as_weights",
    "attach_schemes",
    "copy_weights",
]


class WeightUpdaterBase(metaclass=abc.ABCMeta):
    """Base class of the objects that push new policy weights to a collector's policies.

    Subclasses implement :meth:`_push_weights`; :meth:`push_weights` (also ``updater(...)``) calls it and
    then every hook registered with :meth:`register_post_hook`. A collector registers itself with
    :meth:`register_collector` (held by weak reference).

    Examples:
        >>> from tensordict import TensorDict
        >>> class Recorder(WeightUpdaterBase):
        ...     def _push_weights(self, policy_or_weights=None, worker_ids=None):
        ...         self.last = policy_or_weights
        >>> updater = Recorder()
        >>> updater(TensorDict(w=1.0))
        >>> float(updater.last["w"])
        1.0
    """

    def __init__(self) -> None:
        self._collector_refs: list[weakref.ref] = []
        self._post_hooks: list[Callable[[], None]] = []

    @abc.abstractmethod
    def _push_weights(self, policy_or_weights: Any = None, worker_ids: Any = None) -> None:
        """Brings ``policy_or_weights`` (or the server's weights when ``None``) to the workers."""

    def _get_server_weights(self) -> TensorDictBase | None:
        """The weights to push when none are given (``None``: nothing to push)."""
        return None

    def _maybe_map_weights(self, weights: TensorDictBase) -> TensorDictBase:
        """Transforms server weights before distribution (identity by default)."""
        return weights

    def all_worker_ids(self) -> list[int] | list[torch.device] | None:
        """The ids of the workers this updater serves (``None``: a single local policy)."""
        return None

    @classmethod
    def from_policy(cls, policy) -> "WeightUpdaterBase | None":
        """An updater for ``policy`` (the base class builds none)."""
        return None

    def init(self, *args, **kwargs) -> None:
        """Called by ``collector.init_updater(...)`` once the collector is ready (no-op by default)."""

    def register_collector(self, collector) -> None:
        """Registers the collector this updater works for (kept by weak reference)."""
        self._collector_refs.append(weakref.ref(collector))

    @property
    def collector(self):
        """The first registered collector (``None`` if none, or if it was garbage-collected)."""
        for ref in self._collector_refs:
            obj = ref()
            if obj is not None:
                return obj
        return None

    @property
    def collectors(self) -> list | None:
        alive = [ref() for ref in self._collector_refs]
        alive = [c for c in alive if c is not None]
        return alive or None

    def register_post_hook(self, hook: Callable[[], None]) -> None:
        """Registers ``hook()`` to run after every push."""
        self._post_hooks.append(hook)

    @property
    def post_hooks(self) -> list[Callable[[], None]]:
        return self._post_hooks

    def increment_version(self) -> None:
        """Increments the policy version of the registered collector(s)."""
        for collector in self.collectors or []:
            collector.increment_version()

    def push_weights(self, policy_or_weights: Any = None, worker_ids: Any = None) -> None:
        """Pushes weights (or the server's weights when ``None``) and runs the post-hooks."""
        self._push_weights(policy_or_weights=policy_or_weights, worker_ids=worker_ids)
        for hook in self._post_hooks:
            hook()

    def __call__(self, policy_or_weights: Any = None, worker_ids: Any = None) -> None:
        self.push_weights(policy_or_weights=policy_or_weights, worker_ids=worker_ids)


class VanillaWeightUpdater(WeightUpdaterBase):
    """Copies new weights in place into the parameters of a local policy.

    Keyword Args:
        weight_getter: returns the weights to push when none are passed (e.g. the trainer's policy).
        policy_weights: the policy's weights (``TensorDict.from_module(policy)``), updated in place.

    Examples:
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> policy, trained = nn.Linear(2, 1), nn.Linear(2, 1)
        >>> updater = VanillaWeightUpdater(policy_weights=TensorDict.from_module(policy))
        >>> updater(trained)
        >>> bool((policy.weight == trained.weight).all())
        True
    """

    def __init__(self, *, weight_getter: Callable[[], TensorDictBase] | None = None, policy_weights: TensorDictBase) -> None:
        super().__init__()
        self.weight_getter = weight_getter
        self.policy_weights = as_weights(policy_weights)

    @classmethod
    def from_policy(cls, policy) -> "WeightUpdaterBase | None":
        """An updater over ``policy``'s parameters (``None`` for a policy that is not an ``nn.Module``)."""
        if not isinstance(policy, nn.Module):
            return None
        return cls(policy_weights=TensorDict.from_module(policy))

    def _get_server_weights(self) -> TensorDictBase | None:
        return self.weight_getter() if self.weight_getter is not None else None

    def _push_weights(self, policy_or_weights: Any = None, worker_ids: Any = None) -> None:
        if worker_ids is not None:
            raise ValueError("VanillaWeightUpdater updates a single local policy; worker_ids must be None.")
        weights = as_weights(policy_or_weights)
        if weights is None:
            weights = as_weights(self._get_server_weights())
        if weights is None:
            return
        copy_weights(self.policy_weights, self._maybe_map_weights(weights), where="VanillaWeightUpdater")


class MultiProcessedWeightUpdater(WeightUpdaterBase):
    """Copies new weights into the (shared-memory) weights read by worker processes, one copy per device.

    Keyword Args:
        get_server_weights: returns the weights to push when none are passed.
        policy_weights: ``{device: weights}``; each TensorDict is updated in place (for CPU workers, it lives
            in shared memory, so the workers see the update before their next batch).

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from tensordict import TensorDict
        >>> shared = TensorDict.from_module(nn.Linear(2, 1)).data.clone().share_memory_()
        >>> trained = nn.Linear(2, 1)
        >>> updater = MultiProcessedWeightUpdater(get_server_weights=None, policy_weights={torch.device("cpu"): shared})
        >>> updater(trained)
        >>> bool((shared["weight"] == trained.weight).all())
        True
    """

    def __init__(
        self,
        *,
        get_server_weights: Callable[[], TensorDictBase] | None,
        policy_weights: dict[torch.device, TensorDictBase],
    ) -> None:
        super().__init__()
        self.get_server_weights = get_server_weights
        self.policy_weights = {torch.device(k) if not isinstance(k, int) else k: as_weights(v) for k, v in policy_weights.items()}

    def all_worker_ids(self) -> list[int] | list[torch.device]:
        return list(self.policy_weights)

    def _get_server_weights(self) -> TensorDictBase | None:
        return self.get_server_weights() if self.get_server_weights is not None else None

    def _push_weights(self, policy_or_weights: Any = None, worker_ids: Any = None) -> None:
        weights = as_weights(policy_or_weights)
        if weights is None:
            weights = as_weights(self._get_server_weights())
        if weights is None:
            return
        weights = self._maybe_map_weights(weights)
        targets = self.all_worker_ids() if worker_ids is None else worker_ids
        if not isinstance(targets, (list, tuple)):
            targets = [targets]
        for target in targets:
            key = torch.device(target) if isinstance(target, str) else target
            if key not in self.policy_weights:
                raise KeyError(
                    f"MultiProcessedWeightUpdater: no weights for worker/device {target!r}; known: {self.all_worker_ids()}."
                )
            copy_weights(self.policy_weights[key], weights, where="MultiProcessedWeightUpdater")


class SchemeWeightUpdater(WeightUpdaterBase):
    """Pushes weights through a :class:`~torchrl.weight_update.WeightSyncScheme` initialized on the sender
    side (what a collector built with ``weight_sync_schemes=`` uses).

    Args:
        scheme: the scheme, already initialized with ``init_on_sender``.

    Keyword Args:
        weight_getter: returns the weights to send when none are given (``None``: the scheme's model).
    """

    def __init__(self, scheme: WeightSyncScheme, *, weight_getter: Callable[[], Any] | None = None) -> None:
        super().__init__()
        self.scheme = scheme
        self.weight_getter = weight_getter

    def _get_server_weights(self) -> Any:
        return self.weight_getter() if self.weight_getter is not None else None

    def _push_weights(self, policy_or_weights: Any = None, worker_ids: Any = None) -> None:
        weights = policy_or_weights if policy_or_weights is not None else self._get_server_weights()
        self.scheme.send(weights, worker_ids=worker_ids)


def attach_schemes(collector, schemes: dict | None, *, weight_getter: Callable[[], Any] | None = None) -> None:
    """Makes ``collector`` send its policy's weights through ``schemes["policy"]``: initializes the scheme
    on the sender side with the collector as context, connects it, and installs a
    :class:`SchemeWeightUpdater` (``collector.update_policy_weights_()`` then calls ``scheme.send``).

    Raises:
        TypeError: ``schemes`` is not a dict of :class:`~torchrl.weight_update.WeightSyncScheme`.
        KeyError: a model id other than ``"policy"`` (the only model these collectors run).
    """
    if schemes is None:
        return
    owner = type(collector).__name__
    if not isinstance(schemes, dict):
        raise TypeError(f"{owner}: weight_sync_schemes must be a dict {{model_id: WeightSyncScheme}}, got "
                        f"{type(schemes).__name__}.")
    for model_id, scheme in schemes.items():
        if not isinstance(scheme, WeightSyncScheme):
            raise TypeError(f"{owner}: weight_sync_schemes[{model_id!r}] must be a WeightSyncScheme, got "
                            f"{type(scheme).__name__}.")
        if model_id != "policy":
            raise KeyError(f"{owner}: weight_sync_schemes has a scheme for {model_id!r}; this collector only runs "
                           f"'policy'.")
    scheme = schemes["policy"]
    scheme.init_on_sender(model_id="policy", context=collector)
    scheme.connect()
    collector._weight_sync_schemes = dict(schemes)
    collector.weight_updater = SchemeWeightUpdater(scheme, weight_getter=weight_getter)
