"""``RayTransport``: the ``MultiCollector`` transport whose workers are Ray actors.

Each node is an actor hosting a :class:`~torchrl.collectors.distributed._transport.NodeServer` (built from
the cloudpickled :class:`~torchrl.collectors.distributed._transport.NodeSpec`); every command of the worker
layer (collect, weights, remote calls, close) is one actor call ``handle(message) -> reply`` whose
``ObjectRef`` the trainer keeps. Ray runs an actor's calls in submission order, so weights pushed before a
request are applied before that batch. :meth:`RayTransport.receive_any` waits with ``ray.wait``.

Fault tolerance: a node whose actor dies (killed, its process gone) is rebuilt from the same spec, gets the
last weights pushed to it, and is asked again for the batch it owed; the dead actor's batch is never
delivered, so the collector still reaches its exact frame total. Trajectory ids of the new actor continue
after the old one's. After ``max_restarts`` restarts of one node the transport gives up with a
``RuntimeError`` naming the node.
"""
from __future__ import annotations

import os
import pickle
import sys
from typing import Any, Sequence

import cloudpickle
from tensordict import TensorDictBase

from torchrl.collectors._multi_worker import OP_COLLECT, OP_WEIGHTS, WorkerSpec
from torchrl.collectors._pool import Transport
from torchrl.collectors.distributed._transport import NodeSpec
from torchrl.envs._workers import OP_CALL, OP_CLOSE, REPLY_ERROR, remote_error
from torchrl.envs._workers.wire import REPLY_OK, error_payload

__all__ = ["RayTransport", "default_ray_init_config", "ensure_ray", "node_actor_class"]

_ACTOR = None


def default_ray_init_config() -> dict[str, Any]:
    """Options of ``ray.init`` that start a local instance fast (no dashboard, no log forwarding)."""
    return dict(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False,
                object_store_memory=200 * 1024 ** 2, configure_logging=False)


def ensure_ray(ray_init_config: dict | None) -> Any:
    """Imports ray and starts it with ``ray_init_config`` (over the fast defaults) unless it is running."""
    import ray

    if not ray.is_initialized():
        config = default_ray_init_config()
        if ray_init_config:
            if "address" in ray_init_config:  # joining a cluster: its resources are its own
                config = {k: v for k, v in config.items() if k not in ("num_cpus", "object_store_memory")}
            config.update(ray_init_config)
        previous = os.environ.get("RAY_AUTH_MODE")
        if previous is None:  # a local instance: no token setup (seconds saved), for Ray's processes only
            os.environ["RAY_AUTH_MODE"] = "disabled"
        try:
            ray.init(**config)
        finally:
            if previous is None:
                os.environ.pop("RAY_AUTH_MODE", None)
    return ray


class _NodeHost:
    """The body of a node actor: builds the node's collector and answers the worker layer's messages as
    :func:`torchrl.envs._workers.serve` does over a pipe."""

    def __init__(self, spec: bytes, idx: int, paths: list[str]) -> None:
        for path in reversed(paths):  # the driver's import paths (its test modules, scripts' folders)
            if path not in sys.path:
                sys.path.insert(0, path)
        self.spec = spec
        self.idx = idx
        self.server = None

    def build(self) -> bytes:
        import torch

        try:
            spec = cloudpickle.loads(self.spec)
            torch.set_num_threads(spec.num_threads)
            self.server = spec.build(self.idx)
            self.server.consolidate = True
        except BaseException as err:  # noqa: BLE001 - reported to the trainer, which raises it
            return error_payload(err)
        return REPLY_OK

    def pid(self) -> int:
        return os.getpid()

    def handle(self, message: bytes) -> bytes | None:
        op = message[:1]
        try:
            if op == OP_CLOSE:
                self.server.close()
                return REPLY_OK
            return self.server.handle(op, message)
        except BaseException as err:  # noqa: BLE001 - reported to the trainer, which raises it
            return error_payload(err)


def node_actor_class():
    """The Ray actor class hosting a node (made once, on first use: ray is an optional dependency)."""
    global _ACTOR
    if _ACTOR is None:
        import ray

        _ACTOR = ray.remote(max_restarts=0, max_concurrency=1)(_NodeHost)
    return _ACTOR


class RayTransport(Transport):
    """Collection nodes as Ray actors (see the module docstring).

    Args:
        owner: the collector's class name (for messages).

    Keyword Args:
        start_method: unused (Ray starts its own worker processes).
        ray_init_config: options of ``ray.init`` when Ray is not running yet.
        remote_configs: actor options (``num_cpus``, ``num_gpus``, ``memory``, ...), one dict for all nodes or
            one per node. Without ``num_cpus`` each node asks for an equal share of the cluster's CPUs (at most
            1), so that every node fits on a small machine.
        num_envs: envs per node (``num_workers_per_collector``).
        extra_kwargs: more options for each node's collector.
        max_restarts: restarts of one node after which the transport gives up.
    """

    def __init__(self, owner: str, *, start_method: str, ray_init_config: dict | None = None,
                 remote_configs: dict | Sequence[dict] | None = None, num_envs: int = 1,
                 extra_kwargs: dict | None = None, max_restarts: int = 3) -> None:
        super().__init__(owner, start_method=start_method)
        self.ray_init_config = ray_init_config
        self.remote_configs = remote_configs
        self.num_envs = num_envs
        self.extra_kwargs = extra_kwargs or {}
        self.max_restarts = int(max_restarts)
        self.ray = None
        self.actors: list = []
        self.specs: list[bytes] = []
        self.options: list[dict] = []
        self.inflight: dict[int, Any] = {}  # node -> ObjectRef of its requested batch
        self.weights: dict[int, bytes] = {}  # node -> last weights message (re-sent to a rebuilt actor)
        self.restarts: list[int] = []
        self.traj_base: list[int] = []  # added to a rebuilt actor's trajectory ids
        self.traj_seen: list[int] = []

    # -- lifetime ------------------------------------------------------------------------------------------------
    def _actor_options(self, n: int) -> list[dict]:
        configs = self.remote_configs
        if configs is None or isinstance(configs, dict):
            configs = [dict(configs or {}) for _ in range(n)]
        else:
            configs = [dict(c) for c in configs]
            if len(configs) != n:
                raise ValueError(f"{self.owner}: remote_configs lists {len(configs)} configs for {n} collectors.")
        cpus = float(self.ray.cluster_resources().get("CPU", 0.0))
        share = min(1.0, cpus / n) if cpus > 0 else 0.0
        for config in configs:
            if "num_cpus" not in config:
                if share < 0.01:
                    raise RuntimeError(f"{self.owner}: the Ray cluster has {cpus} CPUs, too few for {n} collectors; pass "
                                       f"remote_configs={{'num_cpus': ...}} or ray_init_config={{'num_cpus': ...}}.")
                config["num_cpus"] = share
        return configs

    def start(self, specs: Sequence[WorkerSpec]) -> None:
        self.ray = ensure_ray(self.ray_init_config)
        n = len(specs)
        self.specs = [cloudpickle.dumps(NodeSpec(s, num_envs=self.num_envs, extra_kwargs=self.extra_kwargs))
                      for s in specs]
        self.options = self._actor_options(n)
        self.restarts = [0] * n
        self.traj_base = [0] * n
        self.traj_seen = [-1] * n
        self.actors = [self._spawn(i) for i in range(n)]
        builds = [actor.build.remote() for actor in self.actors]
        for i, ref in enumerate(builds):
            self._built(i, self._get(i, ref, "start (building its collector)"))

    def _spawn(self, i: int):
        return node_actor_class().options(**self.options[i]).remote(self.specs[i], i, list(sys.path))

    def _built(self, i: int, reply: bytes) -> None:
        if reply[:1] == REPLY_ERROR:
            self.failed = f"node {i} failed to build its collector"
            raise remote_error(self.owner, i, "start (building its collector)", reply)

    def _get(self, i: int, ref, what: str):
        """The value of ``ref`` (a call on node ``i``); a dead actor raises a ``RuntimeError`` naming it."""
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.RayActorError as err:
            self.failed = f"node {i} died during {what} ({type(err).__name__})"
            raise RuntimeError(f"{self.owner}: {self.failed}; the collector cannot continue: call shutdown().") from err

    def _restart(self, i: int, cause: BaseException) -> None:
        """Rebuilds node ``i`` after its actor died, re-sends its last weights and re-asks its batch."""
        self.restarts[i] += 1
        if self.restarts[i] > self.max_restarts:
            self.failed = f"node {i} died {self.restarts[i]} times (last: {type(cause).__name__})"
            raise RuntimeError(f"{self.owner}: {self.failed}; giving up after {self.max_restarts} restarts. Call "
                               f"shutdown().") from cause
        try:
            self.ray.kill(self.actors[i], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self.actors[i] = actor = self._spawn(i)
        self._built(i, self._get(i, actor.build.remote(), "restart (building its collector)"))
        if i in self.weights:
            actor.handle.remote(self.weights[i])
        self.traj_base[i] = self.traj_seen[i] + 1
        if i in self.inflight:
            self.inflight[i] = actor.handle.remote(OP_COLLECT)

    def _await(self, i: int, ref, what: str) -> bytes:
        """Waits for ``ref`` on node ``i``, restarting the node (and re-issuing the batch) when it died."""
        while True:
            try:
                return self.ray.get(ref)
            except self.ray.exceptions.RayActorError as err:
                if i not in self.inflight:
                    raise
                self._restart(i, err)
                ref = self.inflight[i]

    def shutdown(self, timeout: float | None = None, *, shutdown_ray: bool = False) -> None:
        ray = self.ray
        self.closed = True
        if ray is not None and ray.is_initialized() and self.actors:
            closes = [actor.handle.remote(OP_CLOSE) for actor in self.actors]
            try:
                ray.wait(closes, num_returns=len(closes), timeout=5.0 if timeout is None else timeout)
            except Exception:  # noqa: BLE001 - dead actors: nothing to close
                pass
            for actor in self.actors:
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:  # noqa: BLE001
                    pass
        self.actors, self.inflight = [], {}
        if shutdown_ray and ray is not None and ray.is_initialized():
            ray.shutdown()

    # -- Transport interface ------------------------------------------------------------------------------------

    def request(self, idx: int) -> None:
        self.check()
        self.inflight[idx] = self.actors[idx].handle.remote(OP_COLLECT)

    def _batch(self, i: int, msg: bytes) -> TensorDictBase:
        if msg[:1] == REPLY_ERROR:
            self.failed = f"worker {i} raised {pickle.loads(msg[1:])[1]} during collect"
            raise remote_error(self.owner, i, "collect", msg)
        batch = pickle.loads(msg[1:])
        ids = batch.get(("collector", "traj_ids"), None)
        if ids is not None and ids.numel():
            if self.traj_base[i]:
                ids.add_(self.traj_base[i])
            self.traj_seen[i] = max(self.traj_seen[i], int(ids.max()))
        return batch

    def receive_all(self, idxs: Sequence[int]) -> dict[int, TensorDictBase]:
        out = {}
        for i in idxs:
            msg = self._await(i, self.inflight[i], "collect")
            del self.inflight[i]
            out[i] = self._batch(i, msg)
        return out

    def receive_any(self, idxs: Sequence[int]) -> tuple[int, TensorDictBase]:
        owner = {self.inflight[i]: i for i in idxs}
        ready, _ = self.ray.wait(list(owner), num_returns=1)
        i = owner[ready[0]]
        msg = self._await(i, ready[0], "collect")
        del self.inflight[i]
        return i, self._batch(i, msg)

    def call(self, idxs: Sequence[int], path: str, args: tuple = (), kwargs: dict | None = None, *,
             mode: str = "call") -> dict[int, Any]:
        self.check()
        message = OP_CALL + cloudpickle.dumps((path, args, kwargs or {}, mode))
        what = {"call": f"{path}()", "get": path}.get(mode, f"getattr({path!r})")
        refs = {i: self.actors[i].handle.remote(message) for i in idxs}
        out, error = {}, None
        for i, ref in refs.items():
            try:
                msg = self.ray.get(ref)
            except self.ray.exceptions.RayActorError as err:  # rebuild the node, then ask again
                self._restart(i, err)
                msg = self._get(i, self.actors[i].handle.remote(message), what)
            if msg[:1] == REPLY_ERROR:
                error = error or remote_error(self.owner, i, what, msg)
                continue
            out[i] = pickle.loads(msg[1:])
        if error is not None:
            raise error
        return out

    def push_weights(self, idx: int, weights: TensorDictBase) -> None:
        self.check()
        message = OP_WEIGHTS + pickle.dumps(weights)
        self.weights[idx] = message
        self.actors[idx].handle.remote(message)

    # -- introspection ------------------------------------------------------------------------------------------
    def pids(self) -> list[int]:
        """The process ids of the node actors."""
        return [self._get(i, a.pid.remote(), "pid()") for i, a in enumerate(self.actors)]
