"""``RPCCollector``: collection nodes driven through ``torch.distributed.rpc``."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl._utils._exploration import ExplorationType
from torchrl.collectors._single import Collector
from torchrl.collectors.distributed._rpc import RpcTransport
from torchrl.collectors.distributed.generic import DistributedCollector, NodeWeightUpdater
from torchrl.collectors.weight_update import WeightUpdaterBase

__all__ = ["RPCCollector", "RPCWeightUpdater"]


class RPCWeightUpdater(NodeWeightUpdater):
    """The weight updater of :class:`RPCCollector` (see
    :class:`~torchrl.collectors.distributed.generic.NodeWeightUpdater`; TorchRL's signature).

    Args:
        collector_infos / collector_class / collector_rrefs: TorchRL's handles on the remote collectors (kept
            for compatibility; the collector's RPC channel carries the updates).
        policy_weights: the trainer's weights.
        num_workers: the number of nodes.

    Examples:
        >>> from tensordict import TensorDict
        >>> updater = RPCWeightUpdater(None, None, None, policy_weights=TensorDict(w=1.0), num_workers=3)
        >>> updater.all_worker_ids()
        [0, 1, 2]
    """

    def __init__(self, collector_infos, collector_class, collector_rrefs, policy_weights: TensorDictBase,
                 num_workers: int) -> None:
        super().__init__(policy_weights, num_workers, sync=False)
        self.collector_infos = collector_infos
        self.collector_class = collector_class
        self.collector_rrefs = collector_rrefs

    def push_weights(self, weights: TensorDictBase | None = None, worker_ids=None, **kwargs) -> None:
        """Sends ``weights`` (default: the trainer's) to the nodes ``worker_ids`` (default: all)."""
        weights = kwargs.pop("policy_or_weights", weights)
        if kwargs:
            raise TypeError(f"RPCWeightUpdater.push_weights got unexpected keyword arguments {sorted(kwargs)}.")
        super().push_weights(policy_or_weights=weights, worker_ids=worker_ids)


class RPCCollector(DistributedCollector):
    """Collects with one collector per node, each driven through ``torch.distributed.rpc`` (TensorPipe).

    Same model as :class:`~torchrl.collectors.distributed.DistributedCollector` (launchers, node collectors,
    weight updates applied before a node's next batch, errors with the node's traceback, deaths naming the
    rank), with RPC calls as the messages. ``sync=True`` batches concatenate an equal share from every node
    (``(frames_per_batch,)``); ``sync=False`` delivers each node's batch as it comes.

    Keyword Args:
        tensorpipe_options: more ``TensorPipeRpcBackendOptions`` (e.g. ``num_worker_threads``).
        visible_devices: devices the nodes may use (recorded; each node's collector picks its own device).
        trajs_per_batch: passed to the nodes' collectors (batches of whole trajectories).
        (the others as for ``DistributedCollector``)

    Examples:
        >>> from torchrl.collectors.distributed import RPCCollector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = RPCCollector([PendulumEnv, PendulumEnv], None, frames_per_batch=20, total_frames=40,
        ...                          sync=True, launcher="mp")
        >>> [b.shape for b in collector]
        [torch.Size([20]), torch.Size([20])]
        >>> collector.shutdown()
    """

    def __init__(
        self,
        create_env_fn: Sequence[Callable] | Callable,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        policy_factory: Callable | list[Callable] | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        device: torch.device | list[torch.device] = None,
        storing_device: torch.device | list[torch.device] = None,
        env_device: torch.device | list[torch.device] = None,
        policy_device: torch.device | list[torch.device] = None,
        max_frames_per_traj: int = -1,
        init_random_frames: int = -1,
        reset_at_each_iter: bool = False,
        postproc: Callable | None = None,
        split_trajs: bool = False,
        exploration_type: ExplorationType = ExplorationType.RANDOM,
        collector_class: type = Collector,
        collector_kwargs: dict[str, Any] | None = None,
        num_workers_per_collector: int = 1,
        sync: bool = False,
        slurm_kwargs: dict[str, Any] | None = None,
        update_after_each_batch: bool = False,
        max_weight_update_interval: int = -1,
        launcher: str = "submitit",
        tcp_port: str | None = None,
        backend: str = "gloo",
        visible_devices: list[torch.device] | None = None,
        tensorpipe_options: dict[str, Any] | None = None,
        weight_updater: WeightUpdaterBase | Callable[[], WeightUpdaterBase] | None = None,
        weight_sync_schemes: dict | None = None,
        weight_recv_schemes: dict | None = None,
        trajs_per_batch: int | None = None,
    ) -> None:
        self.visible_devices = visible_devices
        self.tensorpipe_options = dict(tensorpipe_options or {})
        collector_kwargs = dict(collector_kwargs or {})
        if trajs_per_batch is not None:
            collector_kwargs["trajs_per_batch"] = trajs_per_batch
        super().__init__(
            create_env_fn, policy, policy_factory=policy_factory, frames_per_batch=frames_per_batch,
            total_frames=total_frames, device=device, storing_device=storing_device, env_device=env_device,
            policy_device=policy_device, max_frames_per_traj=max_frames_per_traj,
            init_random_frames=init_random_frames, reset_at_each_iter=reset_at_each_iter, postproc=postproc,
            split_trajs=split_trajs, exploration_type=exploration_type, collector_class=collector_class,
            collector_kwargs=collector_kwargs, num_workers_per_collector=num_workers_per_collector, sync=sync,
            slurm_kwargs=slurm_kwargs, backend=backend, update_after_each_batch=update_after_each_batch,
            max_weight_update_interval=max_weight_update_interval, launcher=launcher, tcp_port=tcp_port,
            weight_updater=weight_updater, weight_sync_schemes=weight_sync_schemes,
            weight_recv_schemes=weight_recv_schemes,
        )

    def _make_transport(self, owner: str) -> RpcTransport:
        options = dict(self._node_options)
        options.pop("backend")
        return RpcTransport(owner, start_method=self.mp_start_method, tensorpipe_options=self.tensorpipe_options,
                            **options)

    def _cat_results(self, cat_results):
        return 0 if self._SYNC else None

    def _default_updater(self, weights: TensorDictBase) -> RPCWeightUpdater:
        return RPCWeightUpdater(None, None, None, weights, self.num_workers)
