"""``DistributedCollector``: collection nodes in a torch.distributed group, sync or async."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl._utils._exploration import ExplorationType
from torchrl.collectors._multi import MultiAsyncCollector, MultiCollector, MultiSyncCollector
from torchrl.collectors._single import Collector
from torchrl.collectors.distributed._transport import TorchDistTransport
from torchrl.collectors.weight_update import WeightUpdaterBase, as_weights

__all__ = ["DistributedCollector", "DistributedWeightUpdater", "NodeWeightUpdater", "resolve_collector_class"]

_CLASSES = {"single": Collector, "sync": MultiSyncCollector, "async": MultiAsyncCollector}


def resolve_collector_class(collector_class: Any, owner: str) -> type:
    """``"single"`` / ``"sync"`` / ``"async"`` (TorchRL's short names) or a collector class."""
    if isinstance(collector_class, str):
        if collector_class not in _CLASSES:
            raise ValueError(f"{owner}: collector_class must be a collector class or one of {sorted(_CLASSES)}, "
                             f"got {collector_class!r}.")
        return _CLASSES[collector_class]
    if collector_class is None:
        return Collector
    if not callable(collector_class):
        raise TypeError(f"{owner}: collector_class must be a collector class, got {type(collector_class).__name__}.")
    return collector_class


class NodeWeightUpdater(WeightUpdaterBase):
    """Pushes policy weights to the nodes of the distributed collector it is registered with: they travel
    over the collector's channel and each node applies them before its next batch. With ``sync`` the push
    returns once every targeted node applied them (a round trip after the weights, answered in order).

    Args:
        policy_weights: the trainer's weights (what ``update_policy_weights_()`` with no argument sends).
        num_workers: the number of nodes.
        sync: wait until the nodes applied the weights.
    """

    def __init__(self, policy_weights: TensorDictBase | None, num_workers: int, sync: bool = False) -> None:
        super().__init__()
        self.policy_weights = as_weights(policy_weights)
        self.num_workers = int(num_workers)
        self.sync = bool(sync)

    def all_worker_ids(self) -> list[int]:
        return list(range(self.num_workers))

    def _get_server_weights(self) -> TensorDictBase | None:
        return self.policy_weights

    def _push_weights(self, policy_or_weights: Any = None, worker_ids: Any = None) -> None:
        collector = self.collector
        if collector is None:
            raise RuntimeError(f"{type(self).__name__}: no collector registered (pass it as weight_updater= to a "
                               f"distributed collector).")
        weights = as_weights(policy_or_weights)
        if weights is None:
            weights = self._get_server_weights()
        if weights is None:
            return
        weights = self._maybe_map_weights(weights).detach().cpu()
        ids = self.all_worker_ids() if worker_ids is None else worker_ids
        ids = [int(ids)] if isinstance(ids, int) else [int(i) for i in ids]
        for i in ids:
            collector._pool.push_weights(i, weights)
        if self.sync:
            collector._call(ids, "get_policy_version")


class DistributedWeightUpdater(NodeWeightUpdater):
    """The weight updater of :class:`DistributedCollector` and :class:`DistributedSyncCollector` (see
    :class:`NodeWeightUpdater`; TorchRL's signature).

    Args:
        store: TorchRL's key-value store argument (kept for compatibility; the collector's point-to-point
            channel carries the updates).
        policy_weights: the trainer's weights.
        num_workers: the number of nodes.
        sync: wait until the nodes applied the weights.

    Examples:
        >>> from tensordict import TensorDict
        >>> updater = DistributedWeightUpdater(store=None, policy_weights=TensorDict(w=1.0), num_workers=2, sync=True)
        >>> updater.all_worker_ids()
        [0, 1]
    """

    def __init__(self, store: Any, policy_weights: TensorDictBase, num_workers: int, sync: bool) -> None:
        super().__init__(policy_weights, num_workers, sync)
        self.store = store


class DistributedCollector(MultiCollector):
    """Collects with one collector per node of a torch.distributed group; this process is rank 0.

    Each node runs ``collector_class`` (``Collector``, or a multi-process collector over
    ``num_workers_per_collector`` copies of its env factory) and serves the trainer's commands over
    point-to-point messages (gloo by default): batches, weight updates (applied before the node's next
    batch), seeding, state dicts and remote calls. Nodes are started by the ``launcher``: ``"mp"``
    (processes of this machine), ``"submitit"`` (one submitit job per node: SLURM, or submitit's local
    executor where there is no cluster), ``"submitit_delayed"`` (nodes pre-started by
    :func:`~torchrl.collectors.distributed.submitit_delayed_launcher`).

    - ``sync=True``: each batch has ``frames_per_batch`` frames, an equal share from every node, stacked:
      ``(num_nodes, frames_per_batch // num_nodes)`` (a node's own batch is flattened first).
    - ``sync=False``: batches of ``frames_per_batch`` frames from one node each, delivered as they come.

    A node that raises reports its traceback; a node that dies makes the iterator raise within a second,
    naming its rank and exit status. ``shutdown()`` stops every node and leaves the process group.

    Args:
        create_env_fn: one env factory per node.
        policy: the policy (``None``: random actions); an ``nn.Module``'s weights reach the nodes through
            :meth:`update_policy_weights_`.

    Keyword Args:
        frames_per_batch / total_frames / device / storing_device / env_device / policy_device /
            max_frames_per_traj / init_random_frames / reset_at_each_iter / postproc / split_trajs /
            exploration_type / policy_factory: as for :class:`~torchrl.collectors.Collector`
            (``split_trajs`` and ``postproc`` run in this process).
        collector_class: the nodes' collector: a class, or ``"single"``, ``"sync"``, ``"async"``.
        collector_kwargs: more options for each node's collector.
        num_workers_per_collector: envs per node when ``collector_class`` is a multi-process collector.
        sync: see above (default ``False``).
        slurm_kwargs: the submitit executor's parameters (``folder``: its log folder).
        backend: the process group's backend (``"gloo"`` or ``"nccl"``).
        update_after_each_batch: push the policy's weights before every batch.
        max_weight_update_interval: push them to a node that collected this many batches since its last
            update (``-1``: never forced).
        update_interval: push them before every ``update_interval``-th batch of a node.
        launcher: ``"mp"``, ``"submitit"`` (default, as TorchRL) or ``"submitit_delayed"``.
        tcp_port: the port of the group's store on this machine (default: a free port).
        weight_updater / weight_sync_schemes: as for :class:`~torchrl.collectors.MultiCollector` (the default
            updater is a :class:`DistributedWeightUpdater`).

    Raises:
        RuntimeError: a node raised (with its traceback) or died (naming its rank), or could not join.
        ImportError: ``launcher="submitit"`` without the submitit package.

    Examples:
        >>> from torchrl.collectors.distributed import DistributedCollector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = DistributedCollector([PendulumEnv, PendulumEnv], None, frames_per_batch=20,
        ...                                  total_frames=40, sync=True, launcher="mp")
        >>> [b.shape for b in collector]
        [torch.Size([2, 10]), torch.Size([2, 10])]
        >>> collector.shutdown()
    """

    transport_class = TorchDistTransport

    def __init__(
        self,
        create_env_fn: Sequence[Callable] | Callable,
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        policy_factory: Callable | list[Callable] | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        device: torch.device | list[torch.device] | None = None,
        storing_device: torch.device | list[torch.device] | None = None,
        env_device: torch.device | list[torch.device] | None = None,
        policy_device: torch.device | list[torch.device] | None = None,
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
        backend: str = "gloo",
        update_after_each_batch: bool = False,
        max_weight_update_interval: int = -1,
        update_interval: int | None = None,
        launcher: str = "submitit",
        tcp_port: int | None = None,
        weight_updater: WeightUpdaterBase | Callable[[], WeightUpdaterBase] | None = None,
        weight_sync_schemes: dict | None = None,
        weight_recv_schemes: dict | None = None,
    ) -> None:
        owner = type(self).__name__
        self._SYNC = bool(sync)
        self._given_devices = dict(device=device, env_device=env_device, policy_device=policy_device)
        self._node_options = dict(launcher=launcher, backend=backend, tcp_port=tcp_port, slurm_kwargs=slurm_kwargs,
                                  num_envs=int(num_workers_per_collector), extra_kwargs=dict(collector_kwargs or {}))
        intervals = [k for k in (max_weight_update_interval, update_interval) if k is not None and k > 0]
        self._push_every = min(intervals) if intervals else 0
        self._since_push: dict[int, int] = {}
        fns = self._env_fns(create_env_fn, None)
        super().__init__(
            fns, policy, policy_factory=policy_factory, frames_per_batch=frames_per_batch, total_frames=total_frames,
            device=device, storing_device=storing_device, env_device=env_device, policy_device=policy_device,
            max_frames_per_traj=max_frames_per_traj, init_random_frames=init_random_frames,
            reset_at_each_iter=reset_at_each_iter, postproc=postproc, split_trajs=split_trajs,
            exploration_type=exploration_type, collector_class=resolve_collector_class(collector_class, owner),
            update_at_each_batch=update_after_each_batch, weight_updater=weight_updater,
            weight_sync_schemes=weight_sync_schemes, weight_recv_schemes=weight_recv_schemes,
        )
        self._since_push = {i: 0 for i in range(self.num_workers)}

    def set_trainer_options(self, *, replay_buffer=None, extend_buffer: bool = True, pre_collect_hook=None,
                            post_collect_hook=None) -> None:
        """Trainer-side options of :class:`~torchrl.collectors.Collector` (``backend="distributed"``): batches
        go to ``replay_buffer`` (then ``None`` is delivered); the hooks run here, around each batch."""
        self.replay_buffer = replay_buffer
        self.extend_buffer = extend_buffer
        self._pre_collect_hook = pre_collect_hook
        self._post_collect_hook = post_collect_hook

    def _make_transport(self, owner: str) -> TorchDistTransport:
        return TorchDistTransport(owner, start_method=self.mp_start_method, **self._node_options)

    def _setup_updater(self, weight_updater, shared) -> None:
        if weight_updater is None and isinstance(self.policy, torch.nn.Module):
            weights = as_weights(self.policy)
            if weights is not None and not weights.is_empty():
                self.weight_updater = self._default_updater(weights)
                return
        super()._setup_updater(weight_updater, shared)

    def _default_updater(self, weights: TensorDictBase) -> WeightUpdaterBase:
        """The updater of a policy with weights when none is given (TorchRL's class for each collector)."""
        return DistributedWeightUpdater(None, weights, self.num_workers, sync=False)

    def _before_request(self, i: int) -> None:
        if not self._push_every:
            return
        if self._since_push[i] >= self._push_every:
            self.update_policy_weights_(worker_ids=[i])
        self._since_push[i] += 1

    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, **kwargs) -> None:
        """See :meth:`BaseCollector.update_policy_weights_`: the nodes apply the weights before their next batch."""
        super().update_policy_weights_(policy_or_weights, worker_ids=worker_ids, **kwargs)
        ids = range(self.num_workers) if worker_ids is None else ([worker_ids] if isinstance(worker_ids, int) else worker_ids)
        for i in ids:
            self._since_push[int(i)] = 0

    @property
    def storing_device(self):
        return self._storing_device

    @storing_device.setter
    def storing_device(self, value) -> None:
        self._storing_device = value

    @property
    def device(self):
        return self._given_devices["device"]

    @property
    def env_device(self):
        return self._given_devices["env_device"]

    @property
    def policy_device(self):
        return self._given_devices["policy_device"]
