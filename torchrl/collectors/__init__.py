"""``torchrl.collectors``: the interaction loop between policies and environments.

- :class:`Collector` (``_single.py``, loop in ``_loop.py``, policy calls in ``_policy_call.py``): collection in
  this process; also the front door that builds any registered backend (``backend=``, ``num_collectors=``):
  ``"direct"`` and ``"process"`` are registered here, others plug in with :func:`register_backend`.
- :class:`MultiSyncCollector`, :class:`MultiAsyncCollector`, :class:`AsyncCollector` (``_multi.py``): where
  their workers run is a :class:`~torchrl.collectors._pool.Transport`'s business (``_pool.py``;
  ``PipeTransport``: processes of the worker layer ``torchrl/envs/_workers/``, the per-worker collector
  server in ``_multi_worker.py``, batches in shared memory).
- :class:`BaseCollector` (``_base.py``), :class:`ProfileConfig` (``_profile.py``), weight updaters
  (``weight_update.py``), :class:`Evaluator` (``_evaluator.py``), :func:`split_trajectories` (``utils.py``).

The old names ``SyncDataCollector``, ``MultiSyncDataCollector``, ``MultiaSyncDataCollector`` and
``aSyncDataCollector`` still work (they warn once and build the new classes).
"""
from __future__ import annotations

from torchrl._utils._deprecation import deprecated_alias
from torchrl.collectors._base import BaseCollector
from torchrl.collectors._evaluator import Evaluator
from torchrl.collectors._multi import AsyncCollector, MultiAsyncCollector, MultiCollector, MultiSyncCollector
from torchrl.collectors._profile import ProfileConfig
from torchrl.collectors._single import Collector, register_backend
from torchrl.collectors.utils import split_trajectories
from torchrl.collectors.weight_update import MultiProcessedWeightUpdater, VanillaWeightUpdater, WeightUpdaterBase
from torchrl.envs.utils import RandomPolicy

SyncDataCollector = deprecated_alias(Collector, "SyncDataCollector", module=__name__)
MultiSyncDataCollector = deprecated_alias(MultiSyncCollector, "MultiSyncDataCollector", module=__name__)
MultiaSyncDataCollector = deprecated_alias(MultiAsyncCollector, "MultiaSyncDataCollector", module=__name__)
aSyncDataCollector = deprecated_alias(AsyncCollector, "aSyncDataCollector", module=__name__)

__all__ = [
    "AsyncCollector",
    "BaseCollector",
    "Collector",
    "Evaluator",
    "MultiAsyncCollector",
    "MultiCollector",
    "MultiProcessedWeightUpdater",
    "MultiSyncCollector",
    "MultiSyncDataCollector",
    "MultiaSyncDataCollector",
    "ProfileConfig",
    "RandomPolicy",
    "RayWeightUpdater",
    "SyncDataCollector",
    "VanillaWeightUpdater",
    "WeightUpdaterBase",
    "aSyncDataCollector",
    "register_backend",
    "split_trajectories",
]


def __getattr__(name: str):
    if name == "RayWeightUpdater":  # lives with RayCollector; importing it here would load the distributed stack
        from torchrl.collectors.distributed.ray import RayWeightUpdater

        return RayWeightUpdater
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
