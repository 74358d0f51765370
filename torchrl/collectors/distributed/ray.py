"""``RayCollector``: collection nodes as Ray actors, sync or async, with restarts of dead actors."""
from __future__ import annotations

import contextlib
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import torch
from tensordict import TensorDictBase

from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.collectors._single import Collector, register_backend
from torchrl.collectors.distributed._backends import build_distributed
from torchrl.collectors.distributed._ray import RayTransport, ensure_ray
from torchrl.collectors.distributed.generic import DistributedCollector, NodeWeightUpdater
from torchrl.collectors.weight_update import WeightUpdaterBase, as_weights

__all__ = ["RayCollector", "RayEvalWorker", "RayWeightUpdater"]


class RayWeightUpdater(NodeWeightUpdater):
    """The weight updater of :class:`RayCollector`: weights travel to each actor as an actor call, applied
    before its next batch (see :class:`~torchrl.collectors.distributed.generic.NodeWeightUpdater`).

    Args:
        policy_weights: the trainer's weights (what ``update_policy_weights_()`` with no argument sends).
        remote_collectors: the actor handles (their number is the number of nodes).
        max_interval: TorchRL's forced-update interval (kept; the collector's ``max_weight_update_interval``
            does the forcing).

    Examples:
        >>> from tensordict import TensorDict
        >>> from torchrl.collectors import RayWeightUpdater
        >>> updater = RayWeightUpdater(TensorDict(w=1.0), remote_collectors=[None, None])
        >>> updater.all_worker_ids()
        [0, 1]
    """

    def __init__(self, policy_weights: TensorDictBase, remote_collectors: list, max_interval: int = 0) -> None:
        super().__init__(policy_weights, len(remote_collectors), sync=False)
        self.remote_collectors = remote_collectors
        self.max_interval = int(max_interval)


class RayCollector(DistributedCollector):
    """Collects with one collector per Ray actor; this process drives them and receives their batches.

    Each actor runs ``collector_class`` (``Collector``, or a multi-process collector over
    ``num_workers_per_collector`` copies of its env factory). Ray is started with ``ray_init_config`` if
    it is not running (defaults that start fast: no dashboard, no log forwarding, one CPU per core). Each
    actor asks for an equal share of the cluster's CPUs (at most one) unless ``remote_configs`` says
    otherwise.

    - ``sync=True``: each batch has ``frames_per_batch`` frames, an equal share from every actor, stacked:
      ``(num_collectors, frames_per_batch // num_collectors)``.
    - ``sync=False`` (default): batches of ``frames_per_batch`` frames from one actor each, delivered as
      they come.

    An actor that dies (killed, or its process gone) is rebuilt with the same spec and the last weights
    pushed to it, and asked again for its batch: no frame is lost or delivered twice. After
    ``max_restarts`` (3) restarts of the same actor the iterator raises ``RuntimeError``.

    With a ``replay_buffer`` the batches are written into it and the iterator yields ``None``;
    :meth:`start` collects into it in the background.

    Args:
        create_env_fn: an env factory (repeated ``num_collectors`` times) or one per actor.
        policy: the policy (``None``: random actions); an ``nn.Module``'s weights reach the actors through
            :meth:`update_policy_weights_`.

    Keyword Args:
        ray_init_config: options of ``ray.init`` (used only when Ray is not running).
        remote_configs: actor options (``num_cpus``, ``num_gpus``, ``memory``...), one dict or one per actor.
        num_collectors: number of actors when ``create_env_fn`` is a single factory.
        collector_class: the actors' collector: a class, or ``"single"``, ``"sync"``, ``"async"``.
        collector_kwargs: more options for each actor's collector.
        num_workers_per_collector: envs per actor when ``collector_class`` is a multi-process collector.
        update_after_each_batch: push the policy's weights before every batch.
        max_weight_update_interval: push them to an actor that collected this many batches since its last
            update (``-1``: never forced).
        replay_buffer: batches are extended into it (the iterator then yields ``None``).
        trajs_per_batch: passed to the actors' collectors (batches of whole trajectories).
        use_env_creator: wrap the env factories in :class:`~torchrl.envs.EnvCreator`.
        pre_collect_hook / post_collect_hook: run in this process around each batch.
        (the others as for :class:`~torchrl.collectors.Collector`; ``split_trajs`` and ``postproc`` run
        in this process)

    Raises:
        RuntimeError: an actor raised (with its traceback), died more than ``max_restarts`` times, or the
            cluster has too few CPUs for the actors.

    Examples:
        >>> from torchrl.collectors.distributed import RayCollector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = RayCollector([PendulumEnv, PendulumEnv], None, frames_per_batch=20, total_frames=40,
        ...                          sync=True)
        >>> [b.shape for b in collector]
        [torch.Size([2, 10]), torch.Size([2, 10])]
        >>> collector.shutdown()
    """

    max_restarts = 3

    def __init__(
        self,
        create_env_fn: Callable | Sequence[Callable],
        policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
        *,
        policy_factory: Callable | list[Callable] | None = None,
        trust_policy: bool | None = None,
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
        collector_class: type | str = Collector,
        collector_kwargs: dict[str, Any] | list[dict] | None = None,
        num_workers_per_collector: int = 1,
        sync: bool = False,
        ray_init_config: dict[str, Any] | None = None,
        remote_configs: dict[str, Any] | list[dict[str, Any]] | None = None,
        num_collectors: int | None = None,
        update_after_each_batch: bool = False,
        max_weight_update_interval: int = -1,
        replay_buffer=None,
        weight_updater: WeightUpdaterBase | Callable[[], WeightUpdaterBase] | None = None,
        weight_sync_schemes: dict | None = None,
        weight_recv_schemes: dict | None = None,
        use_env_creator: bool = False,
        no_cuda_sync: bool | None = None,
        trajs_per_batch: int | None = None,
        pre_collect_hook: Callable[[], None] | None = None,
        post_collect_hook: Callable[[TensorDictBase], None] | None = None,
    ) -> None:
        if isinstance(create_env_fn, Sequence) and not isinstance(create_env_fn, str):
            fns = list(create_env_fn)
            if num_collectors is not None and num_collectors != len(fns):
                raise ValueError(f"RayCollector: num_collectors={num_collectors} but create_env_fn lists {len(fns)} "
                                 f"env factories.")
        else:
            fns = [create_env_fn] * (num_collectors or 1)
        if use_env_creator:
            from torchrl.envs import EnvCreator

            fns = [fn if isinstance(fn, EnvCreator) else EnvCreator(fn) for fn in fns]
        if isinstance(collector_kwargs, (list, tuple)):
            if any(dict(k) != dict(collector_kwargs[0]) for k in collector_kwargs):
                raise ValueError("RayCollector: per-collector collector_kwargs must be equal here; build one "
                                 "RayCollector per configuration.")
            collector_kwargs = dict(collector_kwargs[0]) if collector_kwargs else {}
        collector_kwargs = dict(collector_kwargs or {})
        for name, value in (("trajs_per_batch", trajs_per_batch), ("trust_policy", trust_policy),
                            ("no_cuda_sync", no_cuda_sync)):
            if value is not None:
                collector_kwargs[name] = value
        self._ray_options = dict(ray_init_config=ray_init_config, remote_configs=remote_configs)
        super().__init__(
            fns, policy, policy_factory=policy_factory, frames_per_batch=frames_per_batch, total_frames=total_frames,
            device=device, storing_device=storing_device, env_device=env_device, policy_device=policy_device,
            max_frames_per_traj=max_frames_per_traj, init_random_frames=init_random_frames,
            reset_at_each_iter=reset_at_each_iter, postproc=postproc, split_trajs=split_trajs,
            exploration_type=exploration_type, collector_class=collector_class, collector_kwargs=collector_kwargs,
            num_workers_per_collector=num_workers_per_collector, sync=sync,
            update_after_each_batch=update_after_each_batch, max_weight_update_interval=max_weight_update_interval,
            launcher="mp", weight_updater=weight_updater, weight_sync_schemes=weight_sync_schemes,
            weight_recv_schemes=weight_recv_schemes,
        )
        self.set_trainer_options(replay_buffer=replay_buffer, pre_collect_hook=pre_collect_hook,
                                 post_collect_hook=post_collect_hook)

    def _make_transport(self, owner: str) -> RayTransport:
        options = self._node_options
        return RayTransport(owner, start_method=self.mp_start_method, num_envs=options["num_envs"],
                            extra_kwargs=options["extra_kwargs"], max_restarts=self.max_restarts, **self._ray_options)

    def _default_updater(self, weights: TensorDictBase) -> RayWeightUpdater:
        return RayWeightUpdater(weights, self.remote_collectors)

    # -- TorchRL's RayCollector API ---------------------------------------------------------------------------------
    @property
    def remote_collectors(self) -> list:
        """The Ray actor handles of the nodes (a node rebuilt after a death has a new handle)."""
        return list(self._pool.actors)

    @property
    def num_workers(self) -> int:
        return self._num_workers

    @num_workers.setter
    def num_workers(self, value: int) -> None:
        self._num_workers = value

    @property
    def num_restarts(self) -> list[int]:
        """How many times each node's actor was rebuilt after dying."""
        return list(self._pool.restarts)

    def local_policy(self):
        """The policy held by this process."""
        return self.policy

    def add_collectors(self, create_env_fn, num_envs, policy, collector_kwargs, remote_configs):
        """Not supported: the actors are fixed at construction (TorchRL uses it internally)."""
        raise NotImplementedError("RayCollector.add_collectors: the actors are created at construction; build the "
                                  "collector with every env factory (or num_collectors=...).")

    def stop_remote_collectors(self) -> None:
        """Kills every actor (the collector cannot collect afterwards)."""
        self._pool.shutdown()

    def set_seed(self, seed: int, static_seed: bool = False) -> list[int]:
        """Seeds actor ``i`` with the seed returned by actor ``i - 1``; returns each actor's returned seed."""
        out = []
        for i in range(self.num_workers):
            seed = self._call([i], "set_seed", seed, static_seed=static_seed)[i]
            out.append(seed)
        return out

    def state_dict(self) -> list[OrderedDict]:
        """The state dicts of the actors' collectors, in order."""
        states = self._call(range(self.num_workers), "state_dict")
        return [states[i] for i in range(self.num_workers)]

    def load_state_dict(self, state_dict: OrderedDict | list[OrderedDict]) -> None:
        """Loads one state dict per actor (a single one goes to every actor)."""
        states = state_dict if isinstance(state_dict, (list, tuple)) else [state_dict] * self.num_workers
        if len(states) != self.num_workers:
            raise ValueError(f"RayCollector.load_state_dict: got {len(states)} state dicts for {self.num_workers} "
                             f"collectors.")
        for i, state in enumerate(states):
            self._call([i], "load_state_dict", state)

    def stats(self, workers: Literal["aggregate", "per_worker", "both"] = "aggregate", *,
              timeout: float | None = 10.0) -> dict[str, int | float | bool]:
        """This collector's counters (``per_worker`` / ``both``: each actor's too, prefixed ``worker<i>/``)."""
        return super().stats(workers)

    @contextlib.contextmanager
    def pause(self, timeout: float = 30.0, *, resume: bool = True) -> Iterator[None]:
        """Context manager: no batch is collected in the background while it is active (``resume=False``:
        background collection stays stopped afterwards)."""
        if not self.is_running():
            yield
            return
        acquired = self._bg_lock.acquire(timeout=timeout)
        if not acquired:
            raise RuntimeError(f"RayCollector.pause: the running batch did not finish within {timeout} s.")
        try:
            if not resume:
                self._bg_stop.set()
            yield
        finally:
            self._bg_lock.release()

    def shutdown(self, timeout: float | None = None, shutdown_ray: bool = False) -> None:
        """Stops the actors (they close their envs); ``shutdown_ray``: stops Ray as well."""
        super().shutdown(timeout)
        self._pool.shutdown(timeout, shutdown_ray=shutdown_ray)

    def async_shutdown(self, shutdown_ray: bool = False) -> None:
        """Stops background collection (:meth:`start`) and shuts down (re-raises a background error)."""
        self._bg_stop.set()
        thread = self._bg_thread
        if thread is not None:
            thread.join()
        self._bg_thread = None
        self.shutdown(shutdown_ray=shutdown_ray)
        if self._bg_error is not None:
            err, self._bg_error = self._bg_error, None
            raise RuntimeError(f"RayCollector: background collection failed: {err}") from err


class _EvalHost:
    """The body of a :class:`RayEvalWorker` actor: its env and policy, and one rollout per request."""

    def __init__(self, init_fn, env_maker, policy_maker, paths: list[str]) -> None:
        for path in reversed(paths):
            if path not in sys.path:
                sys.path.insert(0, path)
        if init_fn is not None:
            init_fn()
        self.env = env_maker()
        self.policy = policy_maker(self.env)

    def evaluate(self, weights, max_steps: int, deterministic: bool, break_when_any_done: bool,
                 reward_keys: tuple) -> dict:
        if weights is not None:
            if not isinstance(self.policy, torch.nn.Module):
                raise TypeError(f"RayEvalWorker: weights were submitted but the policy is a "
                                f"{type(self.policy).__name__}, not an nn.Module.")
            as_weights(weights).to_module(self.policy)
        kind = ExplorationType.DETERMINISTIC if deterministic else ExplorationType.RANDOM
        with torch.no_grad(), set_exploration_type(kind):
            rollout = self.env.rollout(max_steps, self.policy, break_when_any_done=break_when_any_done)
        key = tuple(reward_keys) if len(reward_keys) > 1 else reward_keys[0]
        reward = rollout.get(key)
        time_dim = rollout.batch_dims - 1
        return {"reward": float(reward.sum(time_dim).mean()), "steps": int(rollout.batch_size[time_dim]),
                "frames": None}


class RayEvalWorker:
    """Evaluates a policy in a Ray actor of its own, asynchronously.

    The actor calls ``init_fn()`` (process-level setup, before anything else), builds ``env_maker()`` and
    ``policy_maker(env)``. :meth:`submit` sends weights and starts a rollout; :meth:`poll` returns its
    result (``{"reward": summed reward averaged over the env's batch, "steps": rollout length, "frames":
    None}``) once it finished, else ``None``. A ``name`` registers the actor with Ray, so that another
    process can reach it with :meth:`from_name`.

    Args:
        init_fn: called first in the actor process (``None``: nothing).
        env_maker: builds the evaluation env (in the actor).
        policy_maker: builds the policy from the env (in the actor).

    Keyword Args:
        num_gpus: GPUs reserved for the actor (TorchRL's default, 1; pass 0 on a CPU machine).
        reward_keys: the reward entry of the rollout.
        name: registers the actor under this name.
        **remote_kwargs: more Ray actor options (``num_cpus``, ``memory``...).

    Raises:
        RuntimeError: the cluster has fewer GPUs than ``num_gpus``.

    Examples:
        >>> from torchrl.collectors.distributed import RayEvalWorker
        >>> from torchrl.envs import PendulumEnv
        >>> from torchrl.envs.utils import RandomPolicy
        >>> worker = RayEvalWorker(None, PendulumEnv, lambda env: RandomPolicy(env.action_spec), num_gpus=0)
        >>> worker.submit(None, max_steps=10)
        >>> import time; result = None
        >>> while result is None: result = worker.poll(timeout=1.0)
        >>> result["steps"]
        10
        >>> worker.shutdown()
    """

    def __init__(self, init_fn: Callable[[], None] | None, env_maker: Callable[[], Any],
                 policy_maker: Callable[[Any], Any], *, num_gpus: int = 1,
                 reward_keys: tuple[str, ...] = ("next", "reward"), name: str | None = None,
                 **remote_kwargs: Any) -> None:
        ray = ensure_ray(None)
        gpus = ray.cluster_resources().get("GPU", 0.0)
        if num_gpus > gpus:
            raise RuntimeError(f"RayEvalWorker: num_gpus={num_gpus} but the Ray cluster has {gpus:g} GPUs; pass "
                               f"num_gpus=0 to evaluate on CPU.")
        options = dict(remote_kwargs, num_gpus=num_gpus)
        options.setdefault("num_cpus", min(1.0, ray.cluster_resources().get("CPU", 1.0) / 4))
        if name is not None:
            options["name"] = name
        actor_class = ray.remote(max_restarts=0)(_EvalHost)
        self._actor = actor_class.options(**options).remote(init_fn, env_maker, policy_maker, list(sys.path))
        self.reward_keys = tuple(reward_keys)
        self.name = name
        self._pending = None

    @classmethod
    def from_name(cls, name: str, *, reward_keys: tuple[str, ...] = ("next", "reward")) -> RayEvalWorker:
        """A handle on the running worker registered under ``name``."""
        ray = ensure_ray(None)
        worker = cls.__new__(cls)
        worker._actor = ray.get_actor(name)
        worker.reward_keys = tuple(reward_keys)
        worker.name = name
        worker._pending = None
        return worker

    def submit(self, weights: Any, max_steps: int, *, deterministic: bool = True,
               break_when_any_done: bool = True) -> None:
        """Starts a rollout of at most ``max_steps`` steps with ``weights`` (``None``: the current ones); a
        rollout not polled yet is dropped."""
        if weights is not None:
            weights = as_weights(weights).detach().cpu()
        self._pending = self._actor.evaluate.remote(weights, int(max_steps), bool(deterministic),
                                                    bool(break_when_any_done), self.reward_keys)

    def poll(self, timeout: float = 0) -> dict | None:
        """The result of the last submitted rollout, or ``None`` if it is still running (waits up to
        ``timeout`` s). Raises the actor's error if the rollout failed."""
        if self._pending is None:
            return None
        import ray

        ready, _ = ray.wait([self._pending], timeout=timeout)
        if not ready:
            return None
        ref, self._pending = self._pending, None
        return ray.get(ref)

    def shutdown(self) -> None:
        """Kills the actor."""
        import ray

        if self._actor is not None and ray.is_initialized():
            ray.kill(self._actor, no_restart=True)
        self._actor = None
        self._pending = None


def _ray(sync: bool, args: list, kwargs: dict):
    return build_distributed(RayCollector, sync, args, kwargs)


register_backend("ray", _ray)
