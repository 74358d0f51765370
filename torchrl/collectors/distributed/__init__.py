"""``torchrl.collectors.distributed``: collection on several processes or machines.

- :class:`DistributedCollector` / :class:`DistributedSyncCollector` (``generic.py``, ``sync.py``): nodes of a
  torch.distributed group under ``MultiCollector``'s iterators; the transport (``_transport.py``) carries
  the worker layer's messages over point-to-point sends (``_wire.py``); launchers and the rendezvous are in
  ``_launch.py``.
- :class:`RayCollector` (``ray.py``, transport in ``_ray.py``): nodes as Ray actors; exported lazily (importing
  this package does not import ray).
- :func:`submitit_delayed_launcher` (``utils.py``), defaults in ``default_configs.py``.
"""
from __future__ import annotations

from torchrl.collectors.distributed import _backends  # noqa: F401 - registers the Collector backends
from torchrl.collectors.distributed.default_configs import DEFAULT_SLURM_CONF
from torchrl.collectors.distributed.generic import DistributedCollector, DistributedWeightUpdater
from torchrl.collectors.distributed.rpc import RPCCollector, RPCWeightUpdater
from torchrl.collectors.distributed.sync import DistributedSyncCollector
from torchrl.collectors.distributed.utils import submitit_delayed_launcher

__all__ = [
    "DEFAULT_SLURM_CONF",
    "DistributedCollector",
    "DistributedSyncCollector",
    "DistributedWeightUpdater",
    "RPCCollector",
    "RPCWeightUpdater",
    "RayCollector",
    "RayEvalWorker",
    "submitit_delayed_launcher",
]


def __getattr__(name: str):
    if name in ("RayCollector", "RayEvalWorker"):  # lazily: ray is imported only when they start
        from torchrl.collectors.distributed import ray as _ray_module

        return getattr(_ray_module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
