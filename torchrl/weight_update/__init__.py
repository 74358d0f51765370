"""``torchrl.weight_update``: how trained weights reach the models that collect data.

A :class:`WeightSyncScheme` moves ONE model's weights from the process that trains (the sender) to the
workers that run it (receivers); a :class:`WeightStrategy` reads and writes them (``"tensordict"`` or
``"state_dict"``); a transport carries them. Collectors take ``weight_sync_schemes={"policy": scheme}``
and drive the scheme from ``update_policy_weights_()``.

- :class:`SharedMemWeightSyncScheme` / :class:`SharedMemTransport`: weights in shared memory, updated in place.
- :class:`MultiProcessWeightSyncScheme` / :class:`MPTransport`: copies sent per worker (queues, or a
  collector's pipes), acknowledged.
- :class:`DistributedWeightSyncScheme` / :class:`DistributedTransport`: the ranks of a torch.distributed
  process group; point-to-point sends, announced and acknowledged through the group's store.
- :class:`RPCWeightSyncScheme` / :class:`RPCTransport`: the workers of an RPC group; weights filed on the
  receiver by an RPC, applied when it polls.
- :class:`NoWeightSyncScheme`: workers keep the weights they were built with.
"""
from __future__ import annotations

from torchrl.weight_update._distributed import DistributedTransport, DistributedWeightSyncScheme
from torchrl.weight_update._multiprocess import MPTransport, MultiProcessWeightSyncScheme
from torchrl.weight_update._no_sync import NoWeightSyncScheme
from torchrl.weight_update._rpc import RPCTransport, RPCWeightSyncScheme
from torchrl.weight_update._scheme import InitialSyncTransport, TransportBackend, WeightSyncBackend, WeightSyncScheme
from torchrl.weight_update._shared_mem import SharedMemTransport, SharedMemWeightSyncScheme
from torchrl.weight_update._strategy import WeightStrategy

__all__ = [
    "DistributedTransport",
    "DistributedWeightSyncScheme",
    "InitialSyncTransport",
    "MPTransport",
    "MultiProcessWeightSyncScheme",
    "NoWeightSyncScheme",
    "RPCTransport",
    "RPCWeightSyncScheme",
    "SharedMemTransport",
    "SharedMemWeightSyncScheme",
    "TransportBackend",
    "WeightStrategy",
    "WeightSyncBackend",
    "WeightSyncScheme",
]
