"""``DistributedSyncCollector``: the synchronous distributed collector (weights pushed every few batches)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
from tensordict import TensorDictBase

from torchrl._utils._exploration import ExplorationType
from torchrl.collectors._single import Collector
from torchrl.collectors.distributed.generic import DistributedCollector

__all__ = ["DistributedSyncCollector"]


class DistributedSyncCollector(DistributedCollector):
    """A :class:`~torchrl.collectors.distributed.DistributedCollector` that always collects synchronously and
    pushes the policy's weights to every node before each ``update_interval``-th batch.

    Each batch stacks an equal share of ``frames_per_batch`` from every node: ``(num_nodes,
    frames_per_batch // num_nodes)``. The options mean what they mean for ``DistributedCollector``.

    Examples:
        >>> from torchrl.collectors.distributed import DistributedSyncCollector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = DistributedSyncCollector([PendulumEnv] * 2, None, frames_per_batch=20, total_frames=20,
        ...                                      launcher="mp")
        >>> next(iter(collector)).shape
        torch.Size([2, 10])
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
        collector_class: type | Callable = Collector,
        collector_kwargs: dict[str, Any] | None = None,
        num_workers_per_collector: int = 1,
        slurm_kwargs: dict[str, Any] | None = None,
        backend: Literal["gloo", "nccl"] = "gloo",
        max_weight_update_interval: int = -1,
        update_interval: int = 1,
        launcher: str = "submitit",
        tcp_port: str | None = None,
    ) -> None:
        super().__init__(
            create_env_fn, policy, policy_factory=policy_factory, frames_per_batch=frames_per_batch,
            total_frames=total_frames, device=device, storing_device=storing_device, env_device=env_device,
            policy_device=policy_device, max_frames_per_traj=max_frames_per_traj,
            init_random_frames=init_random_frames, reset_at_each_iter=reset_at_each_iter, postproc=postproc,
            split_trajs=split_trajs, exploration_type=exploration_type, collector_class=collector_class,
            collector_kwargs=collector_kwargs, num_workers_per_collector=num_workers_per_collector, sync=True,
            slurm_kwargs=slurm_kwargs, backend=backend, max_weight_update_interval=max_weight_update_interval,
            update_interval=update_interval, launcher=launcher, tcp_port=tcp_port,
        )

    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, wait=True, **kwargs) -> None:
        """Pushes new weights to the nodes (default: the policy's); with ``wait`` it returns once every targeted
        node applied them (nodes are idle between synchronous batches, so this is one round trip)."""
        super().update_policy_weights_(policy_or_weights, worker_ids=worker_ids, **kwargs)
        if wait and self.weight_updater is not None:
            ids = range(self.num_workers) if worker_ids is None else ([worker_ids] if isinstance(worker_ids, int) else worker_ids)
            self._call(list(ids), "get_policy_version")
