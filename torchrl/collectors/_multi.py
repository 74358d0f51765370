"""Process collectors: ``MultiCollector`` and its sync / async forms, one worker process per env factory.

Each worker runs a :class:`~torchrl.collectors.Collector`; where it runs and how its batches come back is
the :class:`~torchrl.collectors._pool.Transport`'s business (``transport_class``). The default,
:class:`~torchrl.collectors._pool.PipeTransport`, runs it in a worker process that stacks its steps
straight into a batch buffer in shared memory; a batch costs one byte each way on the worker's pipe. Policy
weights of a CPU policy are moved to shared memory once, in place: the workers run on the very same
tensors, so an optimizer step in the trainer (or :meth:`update_policy_weights_` with new weights) is seen
by every worker before its next batch. Other policies (``policy_factory``, accelerator weights) receive
weights through their pipe, applied before the next batch.

- :class:`MultiSyncCollector`: every worker collects ``frames_per_batch / num_workers`` frames when a batch
  is requested; the results are stacked (or concatenated, ``cat_results``) into one batch. No step runs
  between batches, so each batch is collected with the weights current when it was requested.
- :class:`MultiAsyncCollector`: workers collect continuously; batches (``frames_per_batch`` frames, one
  worker each) are delivered as they come, and a worker starts its next batch as soon as its previous one
  has been copied out.
"""
from __future__ import annotations

import collections
import inspect
import multiprocessing.util as mp_util
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Callable, Iterator

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl._utils._deprecation import rename_kwargs
from torchrl._utils._errors import ValueRuntimeError
from torchrl._utils._exploration import ExplorationType
from torchrl._fast import fast_get, stack_tds
from torchrl.collectors._base import BaseCollector
from torchrl.collectors._multi_worker import WorkerSpec
from torchrl.collectors._policy_call import module_device
from torchrl.collectors._pool import PipeTransport, Transport, default_start_method
from torchrl.collectors._single import Collector, check_unsupported, register_backend
from torchrl.collectors._traj_ids import TrajIdMapper
from torchrl.collectors.weight_update import (
    MultiProcessedWeightUpdater,
    SchemeWeightUpdater,
    WeightUpdaterBase,
    as_weights,
    attach_schemes,
)
from torchrl.envs.common import EnvBase
from torchrl.weight_update import MultiProcessWeightSyncScheme, SharedMemTransport, SharedMemWeightSyncScheme

__all__ = ["AsyncCollector", "MultiAsyncCollector", "MultiCollector", "MultiSyncCollector"]

_RENAMED = {"exploration_mode": "exploration_type", "devices": "device", "passing_devices": "device",
            "storing_devices": "storing_device", "num_workers_per_collector": "num_sub_threads"}


class _PipeWeightUpdater(WeightUpdaterBase):
    """Sends weights to the workers through their pipes (for policies whose weights are not shared)."""

    def __init__(self, collector: "MultiCollector") -> None:
        super().__init__()
        self._collector = collector

    def _get_server_weights(self) -> TensorDictBase | None:
        policy = self._collector.policy
        return as_weights(policy) if isinstance(policy, nn.Module) else None

    def all_worker_ids(self) -> list[int]:
        return list(range(self._collector.num_workers))

    def _push_weights(self, policy_or_weights: Any = None, worker_ids: Any = None) -> None:
        weights = as_weights(policy_or_weights)
        if weights is None:
            weights = self._get_server_weights()
        if weights is None:
            return
        if weights.device not in (None, torch.device("cpu")):
            weights = weights.detach().cpu()
        ids = self.all_worker_ids() if worker_ids is None else worker_ids
        for i in [ids] if isinstance(ids, int) else ids:
            self._collector._pool.push_weights(int(i), weights)


class _WorkerPipeTransport:
    """A weight-sync scheme's transport to one worker of a process collector: its command pipe."""

    def __init__(self, collector: "MultiCollector", worker_idx: int) -> None:
        self._collector = collector
        self._idx = worker_idx

    def send_weights(self, weights: Any) -> None:
        weights = as_weights(weights)
        if weights.device not in (None, torch.device("cpu")):
            weights = weights.detach().cpu()
        self._collector._pool.push_weights(self._idx, weights)

    def receive_weights(self, timeout=None, *, weights=None, model=None, strategy=None):
        return None  # applied by the worker before its next batch


def _shares_weights(schemes: dict | None) -> bool:
    """Whether the workers run on the policy's weights in shared memory (the default, and
    ``SharedMemWeightSyncScheme``); other schemes give each worker its own copy."""
    if not schemes or "policy" not in schemes:
        return True
    scheme = schemes["policy"]
    return isinstance(scheme, SharedMemWeightSyncScheme) and not isinstance(scheme, MultiProcessWeightSyncScheme)


class MultiCollector(BaseCollector):
    """Runs one :class:`~torchrl.collectors.Collector` per env factory, each in its own process.

    ``MultiCollector(..., sync=True)`` (the default) is a :class:`MultiSyncCollector`, ``sync=False`` a
    :class:`MultiAsyncCollector`. Create it under ``if __name__ == "__main__":`` when the start method is
    not ``fork``.

    Args:
        create_env_fn: a list with one env factory per worker (or one factory, repeated ``num_workers``
            times).
        policy: as for :class:`~torchrl.collectors.Collector`. A CPU ``nn.Module`` has its weights moved to
            shared memory (in place): the workers use the same tensors.

    Keyword Args:
        num_workers: number of workers when ``create_env_fn`` is a single factory.
        policy_factory: builds the policy in each worker (one factory, or one per worker); weights then
            reach workers through :meth:`update_policy_weights_`.
        frames_per_batch: frames per delivered batch (sync: split evenly across workers; async: per
            worker batch). A list gives each worker its own count.
        total_frames: frames to collect (``-1``: endless).
        cat_results: (sync) ``"stack"`` (default: batch ``(num_workers, *env.batch_size, T)``), ``0`` or
            ``-1`` (concatenate along that dim).
        update_at_each_batch: call :meth:`update_policy_weights_` before each batch.
        num_threads: torch threads of this process (unchanged by default); num_sub_threads: of each worker.
        mp_start_method: ``"fork"`` (default on Linux), ``"spawn"`` or ``"forkserver"``.
        collector_class: the collector class run in each worker (default :class:`Collector`).
        Other options (``device``, ``max_frames_per_traj``, ``init_random_frames``, ``split_trajs``,
        ``postproc``, ``replay_buffer``, ``exploration_type``, ``set_truncated``, ...) mean what they mean
        for :class:`~torchrl.collectors.Collector`; ``split_trajs``, ``postproc`` and the replay buffer run in
        this process.

    Raises:
        RuntimeError: a worker raised (the message names it and carries its traceback) or died.
        ValueError: unsupported options (``preemptive_threshold``, weight-sync schemes, ...).

    Examples:
        >>> from torchrl.collectors import MultiCollector, MultiSyncCollector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = MultiCollector([PendulumEnv, PendulumEnv], None, frames_per_batch=20, total_frames=40)
        >>> type(collector) is MultiSyncCollector, [b.shape for b in collector]
        (True, [torch.Size([2, 10]), torch.Size([2, 10])])
        >>> collector.shutdown()
    """

    _SYNC: bool | None = None
    transport_class: type[Transport] = PipeTransport  # where workers run and how batches come back

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        if "__init__" in cls.__dict__:  # its own options: its signature is its __init__'s, not __new__'s
            params = list(inspect.signature(cls.__init__).parameters.values())[1:]
            cls.__signature__ = inspect.Signature(params)

    def __new__(cls, *args, sync: bool | None = None, **kwargs):
        if cls is MultiCollector:
            cls = MultiSyncCollector if sync is None or sync else MultiAsyncCollector
        return super().__new__(cls)

    def __init__(
        self,
        create_env_fn: Sequence[Callable[[], EnvBase]] | Callable[[], EnvBase],
        policy: Any = None,
        *,
        num_workers: int | None = None,
        policy_factory: Callable[[], Callable] | Sequence[Callable[[], Callable]] | None = None,
        frames_per_batch: int | Sequence[int],
        total_frames: int = -1,
        device=None,
        storing_device=None,
        env_device=None,
        policy_device=None,
        create_env_kwargs: dict | Sequence[dict] | None = None,
        collector_class: type | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool | None = None,
        exploration_type: ExplorationType = ExplorationType.RANDOM,
        reset_when_done: bool = True,
        update_at_each_batch: bool = False,
        preemptive_threshold: float | None = None,
        num_threads: int | None = None,
        num_sub_threads: int = 1,
        cat_results: str | int | None = None,
        set_truncated: bool = False,
        use_buffers: bool | None = None,
        replay_buffer=None,
        extend_buffer: bool = True,
        replay_buffer_chunk: bool | None = None,
        trust_policy: bool | None = None,
        compile_policy: bool | dict | None = None,
        cudagraph_policy: bool | dict | None = None,
        no_cuda_sync: bool = False,
        weight_updater: WeightUpdaterBase | Callable[[], WeightUpdaterBase] | None = None,
        weight_sync_schemes: dict | None = None,
        weight_recv_schemes: dict | None = None,
        track_policy_version: bool = False,
        track_traj_ids: bool = True,
        auto_register_policy_transforms: bool | None = None,
        pre_collect_hook: Callable[[], None] | None = None,
        post_collect_hook: Callable[[TensorDictBase], None] | None = None,
        mp_start_method: str | None = None,
        sync: bool | None = None,
        **kwargs,
    ) -> None:
        owner = type(self).__name__
        rename_kwargs(owner, kwargs, _RENAMED)
        exploration_type = kwargs.pop("exploration_type", exploration_type)
        device = kwargs.pop("device", device)
        storing_device = kwargs.pop("storing_device", storing_device)
        num_sub_threads = kwargs.pop("num_sub_threads", num_sub_threads)
        if kwargs:
            raise TypeError(f"{owner} got unexpected keyword arguments {sorted(kwargs)}.")
        if sync is not None and self._SYNC is not None and bool(sync) != self._SYNC:
            raise ValueError(f"{owner}: sync={sync} contradicts the class; use MultiCollector(sync=...) to choose.")
        super().__init__(pre_collect_hook=pre_collect_hook, post_collect_hook=post_collect_hook)
        check_unsupported(owner, weight_recv_schemes=weight_recv_schemes, cudagraph_policy=cudagraph_policy or None)
        if weight_sync_schemes is not None and weight_updater is not None:
            raise ValueError(f"{owner}: pass either weight_updater or weight_sync_schemes, not both.")
        if not reset_when_done:
            raise ValueError("reset_when_done is deprecated. Finished sub-environments are always reset (TorchRL 0.14 raises this ValueError too); to keep stepping past the end of episodes, step the env yourself (env.rollout(..., break_when_any_done=False)).")
        if preemptive_threshold is not None:
            raise ValueError(f"{owner}: preemptive_threshold (early stop of slow workers) is not supported.")
        if policy is not None and policy_factory is not None:
            raise TypeError(f"{owner}: pass either policy or policy_factory, not both.")
        fns = self._env_fns(create_env_fn, num_workers)
        n = len(fns)
        self.num_workers = n
        self.create_env_fn = fns
        self.policy = policy
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.replay_buffer = replay_buffer
        self.extend_buffer = extend_buffer
        self.update_at_each_batch = update_at_each_batch
        # devices may be given per worker (lists of num_workers devices, as TorchRL)
        devices = {name: self._per_worker_device(value, n) for name, value in (
            ("device", device), ("env_device", env_device), ("policy_device", policy_device),
            ("storing_device", storing_device))}
        stores = [s if s is not None else d for s, d in zip(devices["storing_device"], devices["device"])]
        self.storing_device = torch.device(stores[0]) if stores[0] is not None and len(set(map(str, stores))) == 1 else None
        self.track_policy_version = track_policy_version
        self._track = track_traj_ids
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self._set_frames(frames_per_batch, total_frames, n)
        self.cat_results = self._cat_results(cat_results)
        per_kwargs = self._per_worker(create_env_kwargs, n, "create_env_kwargs", default={})
        factories = self._per_worker(policy_factory, n, "policy_factory", default=None)
        shares = self.transport_class.shares_memory and _shares_weights(weight_sync_schemes)
        shared = self._share_policy_weights(policy) if shares else None
        self._shared_weights = shared
        self._shm_transport: SharedMemTransport | None = None
        common = dict(
            total_frames=-1,
            max_frames_per_traj=max_frames_per_traj, reset_at_each_iter=reset_at_each_iter,
            exploration_type=exploration_type, reset_when_done=reset_when_done, set_truncated=set_truncated,
            use_buffers=use_buffers, trust_policy=trust_policy, compile_policy=compile_policy,
            no_cuda_sync=no_cuda_sync, track_traj_ids=track_traj_ids,
            auto_register_policy_transforms=auto_register_policy_transforms,
        )
        init = -(-(init_random_frames or 0) // n)
        specs = [
            WorkerSpec(
                create_env_fn=fns[i], create_env_kwargs=per_kwargs[i],
                policy=policy if factories[i] is None else None, policy_factory=factories[i], shared_weights=shared,
                collector_class=collector_class or Collector,
                collector_kwargs=dict(common, frames_per_batch=self._worker_frames[i], init_random_frames=init,
                                      **{name: values[i] for name, values in devices.items()}),
                num_threads=num_sub_threads,
            )
            for i in range(n)
        ]
        self.mp_start_method = mp_start_method or default_start_method()
        pool = self._make_transport(owner)
        self._pool = pool
        self._finalizer = mp_util.Finalize(self, pool.shutdown, exitpriority=10)
        self._mapper = TrajIdMapper(n)
        self._busy: set[int] = set()
        self._ready: collections.deque = collections.deque()
        try:
            pool.start(specs)
        except BaseException:
            self._finalizer()
            raise
        self._setup_updater(weight_updater, shared)
        attach_schemes(self, weight_sync_schemes)

    # -- construction helpers ---------------------------------------------------------------------------------
    def _make_transport(self, owner: str) -> Transport:
        """The transport the workers run under (subclasses with their own transport options override it)."""
        return self.transport_class(owner, start_method=self.mp_start_method)

    @staticmethod
    def _env_fns(create_env_fn, num_workers: int | None) -> list:
        if isinstance(create_env_fn, Sequence) and not isinstance(create_env_fn, (EnvBase, str)):
            fns = list(create_env_fn)
            if num_workers is not None and num_workers != len(fns):
                raise ValueError(f"num_workers={num_workers} but create_env_fn lists {len(fns)} env factories.")
        else:
            fns = [create_env_fn] * (num_workers or 1)
        if not fns:
            raise ValueError("create_env_fn lists no env factory.")
        for fn in fns:
            if not (callable(fn) or isinstance(fn, EnvBase)):
                raise TypeError(f"create_env_fn entries must be env factories (callables), got {type(fn).__name__}.")
        return fns

    @staticmethod
    def _per_worker_device(value, n: int) -> list:
        if isinstance(value, (list, tuple)):
            if len(value) != n:
                raise RuntimeError(f"The length of the devices does not match the number of workers: {n}.")
            return list(value)
        return [value] * n

    @staticmethod
    def _per_worker(value, n: int, name: str, default):
        if value is None:
            return [default] * n
        if isinstance(value, (list, tuple)):
            if len(value) != n:
                raise ValueError(f"{name} has {len(value)} entries for {n} workers.")
            return list(value)
        return [value] * n

    def _set_frames(self, frames_per_batch, total_frames: int | None, n: int) -> None:
        owner = type(self).__name__
        if isinstance(frames_per_batch, (list, tuple)):
            if len(frames_per_batch) != n or any(not isinstance(f, int) or f <= 0 for f in frames_per_batch):
                raise ValueError(f"{owner}: frames_per_batch must list one positive int per worker ({n}).")
            worker = list(frames_per_batch)
            requested = sum(worker) if self._SYNC else max(worker)
        else:
            if not isinstance(frames_per_batch, int) or frames_per_batch <= 0:  # (TorchRL: RuntimeError)
                raise ValueRuntimeError(f"{owner}: frames_per_batch must be a positive int, got {frames_per_batch!r}.")
            requested = frames_per_batch
            if self._SYNC:
                per = -(-frames_per_batch // n)
                if per * n != frames_per_batch:
                    warnings.warn(f"{owner}: frames_per_batch={frames_per_batch} is not divisible by {n} workers; each "
                                  f"worker collects {per} frames.", UserWarning)
                worker = [per] * n
            else:
                worker = [frames_per_batch] * n
        self._worker_frames = worker
        self.requested_frames_per_batch = requested
        self.frames_per_batch = sum(worker) if self._SYNC else requested
        if total_frames is None or total_frames < 0:
            total_frames = -1
        elif total_frames % requested:
            rounded = -(-total_frames // requested) * requested
            warnings.warn(f"{owner}: total_frames={total_frames} is not a multiple of frames_per_batch={requested}; "
                          f"collecting {rounded} frames.", UserWarning)
            total_frames = rounded
        self.total_frames = total_frames

    def _cat_results(self, cat_results):
        if not self._SYNC:
            if cat_results is not None:
                raise ValueError(f"{type(self).__name__}: cat_results only applies to synchronous collectors.")
            return None
        cat_results = "stack" if cat_results is None else cat_results
        if cat_results not in ("stack", 0, -1):
            raise ValueError(f"{type(self).__name__}: cat_results must be 'stack', 0 or -1, got {cat_results!r}.")
        if cat_results == "stack" and len(set(self._worker_frames)) > 1:
            raise ValueError(f"{type(self).__name__}: workers with different frames_per_batch cannot be stacked; "
                             f"use cat_results=0 or -1.")
        return cat_results

    @staticmethod
    def _share_policy_weights(policy) -> TensorDictBase | None:
        """The policy's weights, moved to shared memory in place (``None`` if they cannot be shared)."""
        if not isinstance(policy, nn.Module):
            return None
        device = module_device(policy)
        if device is None or device.type != "cpu":
            return None
        if any(nn.parameter.is_lazy(t) for t in (*policy.parameters(), *policy.buffers())):
            return None  # lazy modules build their weights in each worker; updates then go through the pipes
        try:
            weights = TensorDict.from_module(policy).data
            if weights.is_empty():
                return None
            return weights.share_memory_()
        except (RuntimeError, ValueError, TypeError) as err:  # e.g. out of shared memory: use the pipes
            warnings.warn(f"MultiCollector: the policy's weights could not be moved to shared memory ({err}); the "
                          f"workers get copies, updated by update_policy_weights_() only.", RuntimeWarning)
            return None

    def _setup_updater(self, weight_updater, shared) -> None:
        if weight_updater is not None:
            self.weight_updater = weight_updater if isinstance(weight_updater, WeightUpdaterBase) else weight_updater()
        elif shared is not None:
            self.weight_updater = MultiProcessedWeightUpdater(
                get_server_weights=lambda: as_weights(self.policy), policy_weights={torch.device("cpu"): shared}
            )
        else:
            self.weight_updater = _PipeWeightUpdater(self)

    def _weight_transport(self, scheme, worker_idx: int):
        """The transport a weight-sync scheme sends worker ``worker_idx``'s weights through: the shared
        weights (one transport for all) when the scheme shares memory and the policy's weights are shared,
        else the worker's command pipe (applied before its next batch)."""
        if self._shared_weights is not None and not isinstance(scheme, MultiProcessWeightSyncScheme):
            if self._shm_transport is None:
                self._shm_transport = SharedMemTransport()
                self._shm_transport.register_weights({i: self._shared_weights for i in range(self.num_workers)}, {})
            return self._shm_transport
        return _WorkerPipeTransport(self, worker_idx)

    # -- batches ------------------------------------------------------------------------------------------------------
    def _remap(self, i: int, batch: TensorDictBase) -> None:
        if self._track:
            ids = fast_get(batch, ("collector", "traj_ids"))
            if ids is not None:
                self._mapper.map_(i, ids)

    def _finish(self, batch: TensorDictBase) -> TensorDictBase:
        if self.storing_device is not None and batch.device != self.storing_device:
            batch = batch.to(self.storing_device)
        return batch

    def _quiesce(self) -> None:
        """Waits for the batches in flight (kept for delivery) so that workers can take commands."""
        while self._busy:
            i, batch = self._pool.receive_any(sorted(self._busy))
            self._busy.discard(i)
            self._ready.append((i, batch))

    def _call(self, idxs, path: str, *args, call: bool = True, **kwargs) -> dict[int, Any]:
        self._pool.check()
        self._quiesce()
        return self._pool.call(idxs, path, args, kwargs, mode="call" if call else "get")

    # -- control ----------------------------------------------------------------------------------------------------------
    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds worker ``i`` with the seed returned by worker ``i - 1``; returns the last one."""
        for i in range(self.num_workers):
            seed = self._call([i], "set_seed", seed, static_seed=static_seed)[i]
        return seed

    def reset(self, reset_idx: Sequence[bool] | None = None) -> None:
        """Resets the envs of every worker (or of the workers whose ``reset_idx`` entry is True)."""
        idxs = range(self.num_workers) if reset_idx is None else [i for i, r in enumerate(reset_idx) if r]
        self._call(idxs, "reset")

    def shutdown(self, timeout: float | None = None, close_env: bool = True, raise_on_error: bool = True) -> None:
        """Stops the workers (they close their envs), removes shared buffers; idempotent."""
        self._bg_stop.set()
        if self._bg_thread is not None and self._bg_thread.is_alive():
            self._bg_thread.join(timeout)
        self._ready.clear()
        self._busy.clear()
        if timeout is not None:
            self._pool.shutdown(timeout)
        self._finalizer()

    def state_dict(self) -> OrderedDict:
        states = self._call(range(self.num_workers), "state_dict")
        out = OrderedDict((f"worker{i}", states[i]) for i in range(self.num_workers))
        out["frames"] = self._frames
        out["iter"] = self._iter
        out["traj_ids"] = self._mapper.state_dict()
        return out

    def load_state_dict(self, state_dict: OrderedDict) -> None:
        for i in range(self.num_workers):
            key = f"worker{i}"
            if key in state_dict:
                self._call([i], "load_state_dict", state_dict[key])
        self._frames = int(state_dict.get("frames", self._frames))
        self._iter = int(state_dict.get("iter", self._iter))
        if "traj_ids" in state_dict:
            self._mapper.load_state_dict(state_dict["traj_ids"])
        self._iterator = None

    def _on_profile_change(self) -> None:
        cfg = self._profile_config
        if cfg is None:
            self._call(range(self.num_workers), "disable_profile")
        else:
            self._call(range(self.num_workers), "enable_profile", **asdict(cfg))

    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, **kwargs) -> None:
        """See :meth:`BaseCollector.update_policy_weights_`; weights shared in memory reach every worker at
        once (``worker_ids`` must then be ``None``)."""
        shared = isinstance(self.weight_updater, MultiProcessedWeightUpdater) or (
            isinstance(self.weight_updater, SchemeWeightUpdater) and self._shm_transport is not None)
        if worker_ids is not None and shared:
            raise ValueError(f"{type(self).__name__}: the workers share one copy of the weights; worker_ids must be None.")
        super().update_policy_weights_(policy_or_weights, worker_ids=worker_ids, **kwargs)

    # -- accessors --------------------------------------------------------------------------------------------------------
    def frames_per_batch_worker(self, *, worker_idx: int | None = None) -> int:
        """Frames each worker collects per batch (of worker ``worker_idx``, or the first one)."""
        return self._worker_frames[worker_idx or 0]

    def get_cached_weights(self, model_id: str):
        self.get_model(model_id)
        return self._shared_weights

    def get_model(self, model_id: str):
        if model_id != "policy":
            raise KeyError(f"{type(self).__name__}.get_model: unknown model_id {model_id!r}; only 'policy' exists.")
        return self.policy

    def get_distant_attr(self, attr: str) -> list[Any]:
        """The value of ``attr`` (a dotted path on the worker collectors) in every worker."""
        values = self._call(range(self.num_workers), attr, call=False)
        return [values[i] for i in range(self.num_workers)]

    def getattr_env(self, attr):
        """``attr`` of worker 0's env."""
        return self._call([0], f"env.{attr}", call=False)[0]

    def getattr_policy(self, attr):
        """``attr`` of worker 0's policy."""
        return self._call([0], f"policy.{attr}", call=False)[0]

    def getattr_rb(self, attr):
        if self.replay_buffer is None:
            raise AttributeError(f"{type(self).__name__}.getattr_rb: this collector has no replay buffer.")
        return getattr(self.replay_buffer, attr)

    def map_fn(self, method_name: str, list_of_args: list[tuple] | None = None, list_of_kwargs: list[dict] | None = None) -> list[Any]:
        """Calls ``method_name`` on the collector of worker ``i`` with ``list_of_args[i]`` / ``list_of_kwargs[i]``."""
        n = self.num_workers
        args = list_of_args or [()] * n
        kwargs = list_of_kwargs or [{}] * n
        if len(args) != n or len(kwargs) != n:
            raise ValueError(f"map_fn: expected {n} argument sets (one per worker), got {len(args)} and {len(kwargs)}.")
        return [self._call([i], method_name, *args[i], **kwargs[i])[i] for i in range(n)]

    def stats(self, workers: str = "aggregate") -> dict[str, int | float | bool]:
        """This collector's counters; ``workers="per_worker"`` / ``"both"`` add each worker's, prefixed ``worker<i>/``."""
        if workers not in ("aggregate", "per_worker", "both"):
            raise ValueError(f"stats: workers must be 'aggregate', 'per_worker' or 'both', got {workers!r}.")
        out = super().stats() if workers != "per_worker" else {}
        if workers != "aggregate":
            per = self._call(range(self.num_workers), "stats")
            for i, values in per.items():
                out.update({f"worker{i}/{k}": v for k, v in values.items()})
        return out

    def fake_tensordict(self) -> TensorDictBase:
        """A zero-filled batch shaped like a delivered one, built by worker 0 from its specs (no env step)."""
        one = self._call([0], "fake_tensordict")[0]
        if not self._SYNC:
            return self._finish(one)
        return self._finish(self._combine([one.clone() for _ in range(self.num_workers)]))

    # -- iteration ----------------------------------------------------------------------------------------------------
    def iterator(self) -> Iterator[TensorDictBase]:
        return self._iter_sync() if self._SYNC else self._iter_async()

    def _before_request(self, i: int) -> None:
        """Called before worker ``i`` is asked for a batch (subclasses push weights there)."""

    def _iter_sync(self) -> Iterator[TensorDictBase]:
        total = self.total_frames
        pool = self._pool
        while total < 0 or self._frames < total:
            pool.check()
            if self.update_at_each_batch:
                self.update_policy_weights_()
            if self._pre_collect_hook is not None:
                self._pre_collect_hook()
            n = self.num_workers
            for i in range(n):
                self._before_request(i)
                pool.request(i)
            received = pool.receive_all(range(n))
            batches = [received[i] for i in range(n)]
            for i, batch in enumerate(batches):
                self._remap(i, batch)
            batch = self._finish(self._combine(batches))
            self._frames += batch.numel()
            self._iter += 1
            yield self._deliver(batch)

    def _iter_async(self) -> Iterator[TensorDictBase]:
        total = self.total_frames
        pool = self._pool
        per = self._worker_frames
        for i in range(self.num_workers):
            if i not in self._busy and all(j != i for j, _ in self._ready) and (total < 0 or self._frames < total):
                if self._pre_collect_hook is not None:
                    self._pre_collect_hook()
                self._before_request(i)
                pool.request(i)
                self._busy.add(i)
        while total < 0 or self._frames < total:
            pool.check()
            if self._ready:
                i, batch = self._ready.popleft()
            else:
                if not self._busy:
                    return
                i, batch = pool.receive_any(sorted(self._busy))
                self._busy.discard(i)
            self._remap(i, batch)
            batch = self._finish(batch)
            self._frames += batch.numel()
            in_flight = sum(per[j] for j in self._busy)
            if total < 0 or self._frames + in_flight < total:
                if self.update_at_each_batch:
                    self.update_policy_weights_()
                if self._pre_collect_hook is not None:
                    self._pre_collect_hook()
                self._before_request(i)
                pool.request(i)
                self._busy.add(i)
            self._iter += 1
            yield self._deliver(batch)

    def _combine(self, batches: list[TensorDictBase]) -> TensorDictBase:
        if self.cat_results == "stack":
            return stack_tds(batches, 0)
        return torch.cat(batches, self.cat_results)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(num_workers={self.num_workers}, frames_per_batch={self.requested_frames_per_batch}, "
                f"total_frames={self.total_frames}, frames={self._frames})")


class MultiSyncCollector(MultiCollector):
    """Collects each batch from all workers at once (see :class:`MultiCollector`).

    A batch is requested when the iterator asks for it; every worker then collects its share and the
    shares are stacked (default; batch ``(num_workers, *env.batch_size, T)``) or concatenated. No env steps
    between batches, so each batch uses the weights current when it was requested.

    Examples:
        >>> from torchrl.collectors import MultiSyncCollector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = MultiSyncCollector([PendulumEnv] * 2, None, frames_per_batch=20, total_frames=20)
        >>> next(iter(collector))["collector", "traj_ids"][:, 0].tolist()
        [0, 1]
        >>> collector.shutdown()
    """

    _SYNC = True


class MultiAsyncCollector(MultiCollector):
    """Delivers worker batches as they come (see :class:`MultiCollector`).

    Each delivered batch has ``frames_per_batch`` frames from one worker; workers keep collecting while the
    trainer works, so a batch may have been started with the previous weights.

    Examples:
        >>> from torchrl.collectors import MultiAsyncCollector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = MultiAsyncCollector([PendulumEnv] * 2, None, frames_per_batch=10, total_frames=30)
        >>> [b.shape for b in collector]
        [torch.Size([10]), torch.Size([10]), torch.Size([10])]
        >>> collector.shutdown()
    """

    _SYNC = False


class AsyncCollector(MultiAsyncCollector):
    """One collector in a separate process, delivering batches as they come (``MultiAsyncCollector`` with
    one worker; ``create_env_fn`` may be a single env factory).

    Examples:
        >>> from torchrl.collectors import AsyncCollector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = AsyncCollector(PendulumEnv, None, frames_per_batch=10, total_frames=20)
        >>> [b.shape for b in collector]
        [torch.Size([10]), torch.Size([10])]
        >>> collector.shutdown()
    """


def _build_process_collector(sync: bool, args: list, kwargs: dict):
    cls = MultiSyncCollector if sync else MultiAsyncCollector
    return cls(*args, **kwargs)


register_backend("process", _build_process_collector)
