"""The ``Collector(backend=...)`` builders of the distributed collectors: ``"distributed"`` (nodes started
as processes of this machine unless ``backend_options`` names another launcher) and ``"submitit"``."""
from __future__ import annotations

import inspect
from typing import Any

from torchrl.collectors._single import register_backend

__all__ = ["build_distributed"]

# options of Collector(...) that act in the trainer, not in the nodes' collectors
_TRAINER_SIDE = ("replay_buffer", "extend_buffer", "pre_collect_hook", "post_collect_hook")


def build_distributed(cls: type, sync: bool, args: list, kwargs: dict, **defaults: Any):
    """``cls(*args, sync=sync, ...)`` from ``Collector(...)``'s options: the ones ``cls`` takes go to it,
    trainer-side ones (replay buffer, hooks) to the built collector, the rest to the nodes' collectors."""
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "create_env_fn", "policy"}
    kwargs = dict(kwargs)
    trainer = {k: kwargs.pop(k) for k in _TRAINER_SIDE if k in kwargs}
    direct = {k: kwargs.pop(k) for k in list(kwargs) if k in accepted}
    for k, v in defaults.items():
        direct.setdefault(k, v)
    node_kwargs = dict(direct.pop("collector_kwargs", None) or {})
    node_kwargs.update(kwargs)
    if "sync" in accepted:
        direct["sync"] = sync
    collector = cls(*args, collector_kwargs=node_kwargs, **direct)
    collector.set_trainer_options(**trainer)
    return collector


def _distributed(sync: bool, args: list, kwargs: dict):
    from torchrl.collectors.distributed.generic import DistributedCollector

    return build_distributed(DistributedCollector, sync, args, kwargs, launcher="mp")


def _submitit(sync: bool, args: list, kwargs: dict):
    from torchrl.collectors.distributed.generic import DistributedCollector

    return build_distributed(DistributedCollector, sync, args, kwargs, launcher="submitit")


def _rpc(sync: bool, args: list, kwargs: dict):
    from torchrl.collectors.distributed.rpc import RPCCollector

    return build_distributed(RPCCollector, sync, args, kwargs, launcher="mp")


register_backend("distributed", _distributed)
register_backend("rpc", _rpc)
register_backend("submitit", _submitit)
