"""``Collector``: collection in the calling process (and the front door that builds process collectors)."""
from __future__ import annotations

import importlib

import inspect
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Callable, Iterator

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl._utils import name_time_dim
from torchrl._utils._deprecation import rename_kwargs
from torchrl._utils._errors import ValueRuntimeError
from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.collectors._base import BaseCollector
from torchrl.collectors._loop import _NO_POLICY, StepLoop
from torchrl.collectors._policy_call import _generic_call, make_actor
from torchrl.collectors._profile import RolloutProfiler
from torchrl.collectors._trajectories import TrajectoryAssembler
from torchrl.collectors.weight_update import VanillaWeightUpdater, WeightUpdaterBase, as_weights, attach_schemes
from torchrl.envs.common import EnvBase
from torchrl.envs.transforms import StepCounter, TransformedEnv
from torchrl.modules.tensordict_module._policy_env import apply_policy_env_transforms

__all__ = ["Collector", "register_backend", "check_unsupported", "resolve_device"]

# The collector backends: ``name -> builder(sync, args, kwargs)``, where ``args`` is ``[env factories, *rest]`` (one
# factory per collector) and ``kwargs`` the remaining options (``backend_options`` merged in). A builder returns
# the collector, or ``None`` for "this ``Collector`` itself" (the direct backend). ``"direct"`` registers below,
# ``"process"`` in ``_multi.py``; a Ray or torch.distributed transport registers the same way.
_BACKENDS: dict[str, Callable[..., Any]] = {}
# Backends that register when their module is imported (``Collector(backend=...)`` imports it on first use), and
# what to say when that fails.
_PROVIDERS = {
    "ray": ("torchrl.collectors.distributed.ray", "Ray collection needs the Ray package (pip install ray)"),
    "distributed": ("torchrl.collectors.distributed", "torch.distributed is not available in this torch build"),
    "rpc": ("torchrl.collectors.distributed", "torch.distributed.rpc is not available in this torch build"),
    "submitit": ("torchrl.collectors.distributed", "submitit collection needs the submitit package (pip install "
                                                   "submitit)"),
}
_RENAMED = {"exploration_mode": "exploration_type"}


def register_backend(name: str, builder: Callable[..., Any]) -> None:
    """Makes ``Collector(..., backend=name)`` build its collector with ``builder(sync, args, kwargs)``.

    ``args`` is ``[env factories (one per collector), policy?, ...]``, ``kwargs`` the other options with
    ``backend_options`` merged in; ``builder`` returns the collector (``None``: a ``Collector`` in this process).
    """
    _BACKENDS[name] = builder


def _builder(backend: Any) -> Callable[..., Any]:
    """The registered builder of ``backend``, importing the module that registers it on first use.

    Raises:
        ValueError: the backend is unknown, or its module cannot be imported (the reason is chained).
    """
    builder = _BACKENDS.get(backend) if isinstance(backend, str) else None
    if builder is not None:
        return builder
    provider = _PROVIDERS.get(backend) if isinstance(backend, str) else None
    if provider is None:
        raise ValueError(f"Collector: unknown backend {backend!r}; the registered backends are {sorted(_BACKENDS)}.")
    module, hint = provider
    try:
        importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"Collector: backend={backend!r} is not available: {hint} ({err}).") from err
    if backend not in _BACKENDS:
        raise ValueError(f"Collector: backend={backend!r} is not available: {module} does not register it. The "
                         f"registered backends are {sorted(_BACKENDS)}.")
    return _BACKENDS[backend]


def _build_direct(sync: bool, args: list, kwargs: dict) -> None:
    """The ``"direct"`` backend: one collector in this process (``Collector.__init__`` builds it)."""
    if len(args[0]) > 1:
        raise ValueError(
            f"Collector: backend='direct' runs one collector; got num_collectors={len(args[0])}. Use backend='process'."
        )
    return None


register_backend("direct", _build_direct)


def resolve_device(value) -> torch.device | None:
    return None if value is None else torch.device(value)


def check_unsupported(owner: str, **options: Any) -> None:
    """Raises a ``ValueError`` naming every option that was given a value this implementation does not support."""
    messages = {
        "weight_recv_schemes": "receiver-side weight-sync schemes are taken by Collector (the collector that runs in a "
                               "worker); this one sends weights: use weight_sync_schemes= or update_policy_weights_()",
        "trajs_per_write": "trajs_per_write is not supported",
        "interruptor": "interruptors (preemption) are not supported",
        "cudagraph_policy": "CUDA-graph policies are not supported; use compile_policy=",
        "compact_obs": "compact observations are not supported",
    }
    for name, value in options.items():
        if value is not None and value is not False:
            raise ValueError(f"{owner}: {name}={value!r}: {messages[name]}.")


def _dispatch(args: tuple, kwargs: dict):
    """The collector that ``Collector(...)`` stands for, built by its backend (``None``: this one)."""
    backend = kwargs.get("backend")
    num = kwargs.get("num_collectors")
    env_fn = args[0] if args else kwargs.get("create_env_fn")
    is_list = isinstance(env_fn, Sequence) and not isinstance(env_fn, (EnvBase, str))
    if backend is None:
        backend = "process" if (num is not None or (is_list and len(env_fn) > 1)) else "direct"
    builder = _builder(backend)
    sync = kwargs.get("sync")
    kwargs = dict(kwargs)
    for name in ("backend", "num_collectors", "sync", "create_env_fn"):
        kwargs.pop(name, None)
    kwargs.update(kwargs.pop("backend_options", None) or {})
    rest = list(args[1:])
    if not is_list:
        env_fn = [env_fn] * (num or 1)
    elif num is not None and num != len(env_fn):
        raise ValueError(f"Collector: num_collectors={num} but create_env_fn lists {len(env_fn)} env factories.")
    return builder(True if sync is None else bool(sync), [env_fn, *rest], kwargs)


class Collector(BaseCollector):
    """Collects batches of ``frames_per_batch`` frames by running ``policy`` in an environment.

    Each batch has batch size ``(*env.batch_size, T)`` with ``T * env.batch_size.numel() ==
    frames_per_batch`` (time last). Finished sub-environments are reset (only those), and every frame
    carries ``("collector", "traj_ids")``, a trajectory id that stays the same across batches until the
    episode ends. The policy runs under ``torch.no_grad()`` and ``exploration_type``.

    ``Collector(...)`` also builds process collectors: with ``num_collectors=N`` (or a list of env
    factories, or ``backend="process"``) it returns a :class:`~torchrl.collectors.MultiSyncCollector`
    (``sync=True``, the default) or :class:`~torchrl.collectors.MultiAsyncCollector` (``sync=False``).
    Every ``backend`` is built through the registry (:func:`register_backend`): ``"direct"`` (this process)
    and ``"process"`` (local worker processes) are registered by this package.

    Args:
        create_env_fn: an env, or a callable returning one (an ``EnvCreator``, a class, a lambda).
        policy: a TensorDict module, a plain ``nn.Module`` (wrapped to read the observation and write the
            action), a callable on TensorDicts, or ``None`` for random actions.

    Keyword Args:
        policy_factory: builds the policy (instead of ``policy``).
        backend / num_collectors / sync / backend_options: see above (a registered backend: ``"direct"``,
            ``"process"``, or one added with :func:`register_backend`).
        frames_per_batch: frames per batch (rounded up to a multiple of the env's batch numel).
        total_frames: frames to collect before iteration stops (``-1``: endless; rounded up to a
            multiple of ``frames_per_batch``).
        device / storing_device / policy_device / env_device: where the env runs, where the policy runs
            (a copy is made if needed), and where batches are delivered; ``device`` sets all three.
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        max_frames_per_traj: episodes are truncated after this many steps (a ``StepCounter`` is added).
        init_random_frames: the first frames (rounded up to whole batches) use random actions.
        reset_at_each_iter: reset every env at the start of each batch.
        postproc: called on each batch before it is delivered.
        split_trajs: deliver batches as padded ``[n_traj, T]`` trajectories with a ``("collector", "mask")``.
        track_traj_ids: write ``("collector", "traj_ids")``.
        exploration_type: exploration type during collection (default ``RANDOM``).
        return_same_td: deliver the same TensorDict every time, overwritten in place.
        reset_when_done: reset finished sub-environments (default).
        set_truncated: mark the last step of each batch ``truncated`` (and ``done``); those envs restart.
        use_buffers: accepted for compatibility (batches are always written leaf by leaf in one pass).
        replay_buffer: each batch is written into it and ``None`` is delivered instead.
        extend_buffer: accepted for compatibility (batches are always written whole).
        trust_policy: use a non-TensorDict policy as is (no wrapping).
        compile_policy: ``torch.compile`` the policy (``True`` or a dict of compile options).
        no_cuda_sync: accepted for compatibility (nothing to synchronize on CPU).
        weight_updater: the :class:`~torchrl.collectors.WeightUpdaterBase` (or a factory of one) used by
            :meth:`update_policy_weights_`; default: in-place copy into the policy's parameters.
        track_policy_version: accepted; the version is available as :attr:`policy_version`.
        worker_idx: this collector's index inside a process collector.
        auto_register_policy_transforms: add the transforms a recurrent policy needs (``InitTracker``,
            recurrent-state primers) when the env lacks them (default ``True``).
        pre_collect_hook / post_collect_hook: see :class:`~torchrl.collectors.BaseCollector`.

    Raises:
        ValueError: an unknown or unavailable backend (the message lists the registered ones and says what
            provides a missing one: Ray, submitit, a future torch.distributed transport), an unsupported
            option (weight-sync schemes, trajectory batches, CUDA graphs) or an invalid frame count.
        TypeError: both ``policy`` and ``policy_factory``, or an env factory that returns no env.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.collectors import Collector
        >>> from torchrl.envs import PendulumEnv
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> collector = Collector(PendulumEnv(), policy, frames_per_batch=50, total_frames=100)
        >>> [batch.shape for batch in collector]
        [torch.Size([50]), torch.Size([50])]
        >>> collector.shutdown()
    """

    def __new__(cls, *args, **kwargs):
        if cls is Collector:
            built = _dispatch(args, kwargs)
            if built is not None:
                return built
        return super().__new__(cls)

    def __init__(
        self,
        create_env_fn: EnvBase | Callable[[], EnvBase] | Sequence[Callable[[], EnvBase]],
        policy: Any = None,
        *,
        policy_factory: Callable[[], Callable] | None = None,
        backend: str | None = None,
        backend_options: dict[str, Any] | None = None,
        num_collectors: int | None = None,
        sync: bool | None = None,
        frames_per_batch: int,
        total_frames: int = -1,
        device=None,
        storing_device=None,
        policy_device=None,
        env_device=None,
        create_env_kwargs: dict[str, Any] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: Callable[[TensorDictBase], TensorDictBase] | None = None,
        split_trajs: bool | None = None,
        track_traj_ids: bool = True,
        exploration_type: ExplorationType = ExplorationType.RANDOM,
        return_same_td: bool = False,
        reset_when_done: bool = True,
        interruptor=None,
        set_truncated: bool = False,
        use_buffers: bool | None = None,
        replay_buffer=None,
        extend_buffer: bool = True,
        trust_policy: bool | None = None,
        compile_policy: bool | dict[str, Any] | None = None,
        cudagraph_policy: bool | dict[str, Any] | None = None,
        no_cuda_sync: bool = False,
        weight_updater: WeightUpdaterBase | Callable[[], WeightUpdaterBase] | None = None,
        weight_sync_schemes: dict | None = None,
        weight_recv_schemes: dict | None = None,
        track_policy_version: bool = False,
        worker_idx: int | None = None,
        trajs_per_batch: int | None = None,
        trajs_per_write: int | None = None,
        traj_format: str | None = None,
        auto_register_policy_transforms: bool | None = None,
        pre_collect_hook: Callable[[], None] | None = None,
        post_collect_hook: Callable[[TensorDictBase], None] | None = None,
        compact_obs: bool = False,
        **kwargs,
    ) -> None:
        rename_kwargs("Collector", kwargs, _RENAMED)
        if "exploration_type" in kwargs:
            exploration_type = kwargs.pop("exploration_type")
        if kwargs:
            raise TypeError(f"Collector got unexpected keyword arguments {sorted(kwargs)}.")
        super().__init__(pre_collect_hook=pre_collect_hook, post_collect_hook=post_collect_hook)
        check_unsupported(
            "Collector",
            trajs_per_write=trajs_per_write, interruptor=interruptor, cudagraph_policy=cudagraph_policy or None, compact_obs=compact_obs,
        )
        if policy is not None and policy_factory is not None:
            raise TypeError("Collector: pass either policy or policy_factory, not both.")
        self._closed = False
        self._worker_idx = worker_idx
        # TorchRL's rules: ``device`` fills the others; batches stay where env and policy both run when they agree
        env_device = resolve_device(env_device if env_device is not None else device)
        policy_device = resolve_device(policy_device if policy_device is not None else device)
        storing_device = resolve_device(storing_device if storing_device is not None else device)
        if storing_device is None and env_device == policy_device:
            storing_device = env_device
        self.storing_device, self.env_device, self.policy_device = storing_device, env_device, policy_device
        self.env, self._owns_env = self._make_env(create_env_fn, create_env_kwargs)
        if policy_factory is not None:
            policy = policy_factory()
        self._given_policy = policy
        env = self.env
        if isinstance(policy, nn.Module) and auto_register_policy_transforms is not False:
            env = apply_policy_env_transforms(env, policy)
        if max_frames_per_traj is not None and max_frames_per_traj > 0:
            if isinstance(env, TransformedEnv) and (self._owns_env or env is not self.env):
                env.append_transform(StepCounter(max_steps=max_frames_per_traj))
            else:
                env = TransformedEnv(env, StepCounter(max_steps=max_frames_per_traj), auto_unwrap=False)
        if env_device is not None and env.device != env_device:
            env = env.to(env_device)
        self.env = env
        self.max_frames_per_traj = max_frames_per_traj
        self._set_frames(frames_per_batch, total_frames, init_random_frames)
        act, module, wrapped = make_actor(policy, env, trust_policy=bool(trust_policy), policy_device=policy_device,
                                          env_device=env.device)
        if compile_policy:
            options = compile_policy if isinstance(compile_policy, dict) else {}
            wrapped = torch.compile(wrapped, **options)
            act = _generic_call(wrapped)
        self.policy = wrapped
        self._policy_module = module
        self._act = act
        self.exploration_type = exploration_type
        self.reset_at_each_iter = reset_at_each_iter
        self.postproc = postproc
        self.split_trajs = bool(split_trajs)
        self.return_same_td = return_same_td
        self.replay_buffer = replay_buffer
        self.extend_buffer = extend_buffer
        self.use_buffers = use_buffers
        self.track_policy_version = track_policy_version
        # the env may step column-wise when the loop calls the policy as is (no compile, no device casts)
        direct = not compile_policy and (policy_device is None or policy_device == env.device)
        if not reset_when_done:
            raise ValueError("reset_when_done is deprecated. Finished sub-environments are always reset (TorchRL 0.14 raises this ValueError too); to keep stepping past the end of episodes, step the env yourself (env.rollout(..., break_when_any_done=False)).")
        self._loop = StepLoop(env, act, track_traj_ids=track_traj_ids, reset_when_done=reset_when_done,
                              set_truncated=set_truncated, policy=wrapped if direct else _NO_POLICY)
        self.set_truncated = set_truncated
        self._profiler: RolloutProfiler | None = None
        self._policy_extras: dict | None = None  # policy outputs besides the action (random-phase batches)
        self.trajs_per_batch = trajs_per_batch if trajs_per_batch and trajs_per_batch > 0 else None
        self._assembler = self._make_assembler(traj_format, track_traj_ids)
        self._setup_updater(weight_updater, module, policy)
        if weight_sync_schemes is not None:
            if weight_updater is not None:
                raise ValueError("Collector: pass either weight_updater or weight_sync_schemes, not both.")
            getter = None
            if isinstance(policy, nn.Module) and module is not policy:
                getter = lambda: as_weights(policy)  # noqa: E731  (the running copy lives on another device)
            attach_schemes(self, weight_sync_schemes, weight_getter=getter)
        if weight_recv_schemes is not None:
            self.register_scheme_receiver(weight_recv_schemes)

    def _weight_transport(self, scheme, worker_idx: int):
        """The transport a weight-sync scheme writes through: the running policy, in this process."""
        from torchrl.weight_update._scheme import _DirectTransport

        if self._policy_module is None:
            raise ValueError("Collector: weight_sync_schemes needs a policy with weights (an nn.Module).")
        return _DirectTransport(lambda: self._policy_module, scheme.strategy)

    # -- construction helpers -------------------------------------------------------------------------------------
    @staticmethod
    def _make_env(create_env_fn, create_env_kwargs) -> tuple[EnvBase, bool]:
        if isinstance(create_env_fn, Sequence) and not isinstance(create_env_fn, (EnvBase, str)):
            if len(create_env_fn) != 1:
                raise ValueError(
                    f"Collector: {len(create_env_fn)} env factories need a process collector (backend='process')."
                )
            create_env_fn = create_env_fn[0]
        if isinstance(create_env_fn, EnvBase):
            if create_env_kwargs:
                raise ValueError("Collector: create_env_kwargs cannot be used with an env instance.")
            return create_env_fn, False
        if not callable(create_env_fn):
            raise TypeError(f"Collector: create_env_fn must be an env or a callable, got {type(create_env_fn).__name__}.")
        env = create_env_fn(**(create_env_kwargs or {}))
        if not isinstance(env, EnvBase):
            raise TypeError(f"Collector: create_env_fn returned a {type(env).__name__}, not an EnvBase.")
        return env, True

    def _set_frames(self, frames_per_batch: int, total_frames: int | None, init_random_frames: int | None) -> None:
        if not isinstance(frames_per_batch, int) or frames_per_batch <= 0:  # (TorchRL: RuntimeError)
            raise ValueRuntimeError(f"Collector: frames_per_batch must be a positive int, got {frames_per_batch!r}.")
        n_env = self.env.batch_size.numel()
        steps = -(-frames_per_batch // n_env)
        if steps * n_env != frames_per_batch:
            warnings.warn(
                f"Collector: frames_per_batch={frames_per_batch} is not a multiple of the env's batch numel {n_env}; "
                f"each batch will hold {steps * n_env} frames ({steps} steps).",
                UserWarning,
            )
        self._steps = steps
        self.frames_per_batch = steps * n_env
        self.requested_frames_per_batch = frames_per_batch
        if total_frames is None or total_frames < 0:
            total_frames = -1
        elif total_frames % frames_per_batch:
            rounded = -(-total_frames // frames_per_batch) * frames_per_batch
            warnings.warn(
                f"Collector: total_frames={total_frames} is not a multiple of frames_per_batch={frames_per_batch}; "
                f"collecting {rounded} frames.",
                UserWarning,
            )
            total_frames = rounded
        self.total_frames = total_frames
        init = init_random_frames or 0
        self.init_random_frames = -(-init // self.frames_per_batch) * self.frames_per_batch if init > 0 else 0

    def _setup_updater(self, weight_updater, module, policy) -> None:
        if weight_updater is not None and not isinstance(weight_updater, WeightUpdaterBase):
            weight_updater = weight_updater()
        if weight_updater is None and module is not None:
            getter = None
            if isinstance(policy, nn.Module) and module is not policy:
                # the running copy lives elsewhere (another device): pull from the original
                getter = lambda: as_weights(policy)  # noqa: E731
            weight_updater = VanillaWeightUpdater(weight_getter=getter, policy_weights=TensorDict.from_module(module))
        self.weight_updater = weight_updater

    # -- collection -----------------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} has been shut down; build a new collector.")

    def rollout(self) -> TensorDictBase:
        """Collects one batch (``(*env.batch_size, T)``) and returns it (without split/postproc)."""
        self._check_open()
        if self._recv_schemes:
            self.poll_weights()
        if self._pre_collect_hook is not None:
            self._pre_collect_hook()
        loop = self._loop
        if self.reset_at_each_iter:
            if loop.td is None and self._frames == 0:  # as TorchRL: the first reset (at construction there) is trajectory 0
                loop.reset()
            loop.reset()
        random_phase = self._frames < self.init_random_frames
        act = self.env.rand_action if random_phase else None
        profiler = self._profiler
        with torch.no_grad(), set_exploration_type(self.exploration_type):
            if profiler is None or profiler.done:
                batch = loop.run(self._steps, act)
            else:
                with profiler.rollout():
                    batch = loop.run(self._steps, act)
            if random_phase:
                self._add_policy_outputs(batch)
        self._frames += self.frames_per_batch
        if self.return_same_td:
            loop.out = batch
        device = self.storing_device
        if device is not None and batch.device != device:
            batch = batch.to(device)
        return name_time_dim(batch)

    def _add_policy_outputs(self, batch: TensorDictBase) -> None:
        """Gives a random-phase batch the entries the policy writes besides the action, zero-filled, and the
        policy's dtypes for the entries it rewrites (e.g. int64 one-hot actions of a Q-value policy on a bool
        one-hot spec), as TorchRL does, so that every batch has the same keys and dtypes (``rb.extend`` into a
        tensor storage needs it).

        The entries are found once, by a call of the policy on the env's zero-filled root data."""
        extras = self._policy_extras
        if extras is None:
            extras = self._policy_extras = self._find_policy_extras()
        ndim = self.env.batch_dims
        lead = batch.batch_size[: ndim + 1]
        for key, (shape, dtype, device) in extras.items():
            if key not in batch.keys(include_nested=True):
                batch.set(key, torch.zeros((*lead, *shape), dtype=dtype, device=device))
            elif shape is None:  # an entry the policy writes with another dtype than the random one
                value = batch.get(key)
                if value.dtype != dtype:
                    batch.set(key, value.to(dtype))

    def _find_policy_extras(self) -> dict:
        if self._given_policy is None and self._policy_module is None:
            return {}
        root = self.env.fake_tensordict().exclude("next")
        before = set(root.keys(include_nested=True, leaves_only=True))
        out = self._act(root.clone())
        ndim = self.env.batch_dims
        extras = {}
        for key in out.keys(include_nested=True, leaves_only=True):
            value = out.get(key)
            if not isinstance(value, torch.Tensor):
                continue
            if key not in before:
                extras[key] = (value.shape[ndim:], value.dtype, value.device)
            elif value.dtype != root.get(key).dtype:
                extras[key] = (None, value.dtype, value.device)
        return extras

    def _make_assembler(self, traj_format: str | None, track_traj_ids: bool) -> TrajectoryAssembler | None:
        if self.trajs_per_batch is None:
            if traj_format is not None and traj_format not in ("padded", "cat"):
                raise ValueError(f"traj_format must be 'padded' or 'cat', got {traj_format!r}.")
            return None
        if not track_traj_ids:
            raise ValueError("Collector: trajs_per_batch assembles trajectories by id; it needs track_traj_ids=True.")
        if traj_format is None:
            warnings.warn(
                "Collector: trajs_per_batch is set but traj_format is not. The default layout is 'padded' "
                "(trajs_per_batch, longest) with a ('collector', 'mask') entry; TorchRL will default to 'cat' in "
                "v0.16. Pass traj_format='padded' or traj_format='cat' to choose.",
                FutureWarning,
            )
            traj_format = "padded"
        root = [k for k in self.env.done_keys if isinstance(k, str)] or list(self.env.done_keys)
        return TrajectoryAssembler(root, self.env.batch_dims, traj_format=traj_format)

    def iterator(self) -> Iterator[TensorDictBase]:
        total = self.total_frames
        assembler = self._assembler
        while total < 0 or self._frames < total:
            self._iter += 1
            if assembler is None:
                yield self._deliver(self.rollout())
                continue
            assembler.push(self.rollout())
            if self.replay_buffer is not None:  # each complete trajectory is written flat, as it completes
                while assembler.finished:
                    self._deliver(assembler.finished.pop(0), split=False)
                yield None
                continue
            while len(assembler.finished) >= self.trajs_per_batch:
                yield self._deliver(assembler.pop(self.trajs_per_batch), split=False)

    # -- control --------------------------------------------------------------------------------------------------
    def reset(self, index=None, **kwargs) -> None:
        """Resets every env (``index=None``) or the sub-envs selected by ``index`` (a mask or indices)."""
        self._check_open()
        if index is None:
            self._loop.reset(**kwargs)
            return
        batch = self.env.batch_size
        mask = torch.zeros(batch, dtype=torch.bool)
        index = torch.as_tensor(index)
        if index.dtype == torch.bool:
            mask = index.reshape(batch)
        else:
            mask.view(-1)[index.reshape(-1)] = True
        self._loop.reset(mask, **kwargs)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds the env; the next batch starts from a fresh reset. Returns the env's next seed."""
        out = self.env.set_seed(seed, static_seed=static_seed)
        self._loop.td = None
        return out

    def shutdown(self, timeout: float | None = None, close_env: bool = True, raise_on_error: bool = True) -> None:
        """Stops background collection and closes the env this collector built (an env instance passed
        by the user is left open)."""
        if self._closed:
            return
        self._bg_stop.set()
        if self._bg_thread is not None and self._bg_thread.is_alive():
            self._bg_thread.join(timeout)
        self._closed = True
        if self._profiler is not None:
            self._profiler.close()
        if close_env and self._owns_env:
            try:
                self.env.close(raise_if_closed=False)
            except Exception:
                if raise_on_error:
                    raise

    def _on_profile_change(self) -> None:
        cfg = self._profile_config
        self._profiler = RolloutProfiler(cfg, self._worker_idx or 0) if cfg is not None else None

    # -- state --------------------------------------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict:
        """Env and policy state, frame and batch counters, trajectory-id state (to resume collection)."""
        out = OrderedDict()
        out["env_state_dict"] = self.env.state_dict()
        if self._policy_module is not None:
            out["policy_state_dict"] = self._policy_module.state_dict()
        out["frames"] = self._frames
        out["iter"] = self._iter
        out["traj_pool"] = self._loop.state_dict()  # (TorchRL's name for the trajectory-id state)
        return out

    def load_state_dict(self, state_dict: OrderedDict, **kwargs) -> None:
        """Restores :meth:`state_dict`; iteration then resumes where it stopped (same ``total_frames``)."""
        if "env_state_dict" in state_dict:
            self.env.load_state_dict(state_dict["env_state_dict"], **kwargs)
        if "policy_state_dict" in state_dict and self._policy_module is not None:
            self._policy_module.load_state_dict(state_dict["policy_state_dict"], **kwargs)
        self._frames = int(state_dict.get("frames", self._frames))
        self._iter = int(state_dict.get("iter", self._iter))
        traj = state_dict.get("traj_pool", state_dict.get("loop"))
        if traj is not None:
            self._loop.load_state_dict(traj)
        self._iterator = None

    # -- data without stepping -----------------------------------------------------------------------------------------
    def fake_tensordict(self) -> TensorDictBase:
        """A zero-filled batch with exactly the structure, shapes and dtypes of a collected one.

        Built from the env's specs and one policy call on zeros; the env is not stepped (use it to size
        buffers or test a training step without running an expensive environment).
        """
        td = self.env.fake_tensordict()
        step = td.exclude("next")
        if self._given_policy is not None or self._policy_module is not None:
            with torch.no_grad(), set_exploration_type(self.exploration_type):
                step = self._act(step)
        step.set("next", td.get("next"))
        ndim = self.env.batch_dims
        batch = step.unsqueeze(ndim).expand(*self.env.batch_size, self._steps).clone().zero_()
        if self._loop.track:
            batch.set(("collector", "traj_ids"), torch.zeros(batch.batch_size, dtype=torch.int64, device=batch.device))
        if self.storing_device is not None and batch.device != self.storing_device:
            batch = batch.to(self.storing_device)
        return batch

    # -- accessors --------------------------------------------------------------------------------------------------------
    def get_model(self, model_id: str):
        if model_id != "policy":
            raise KeyError(f"Collector.get_model: unknown model_id {model_id!r}; this collector only has 'policy'.")
        return self.policy

    def getattr_env(self, attr):
        return getattr(self.env, attr)

    def getattr_policy(self, attr):
        return getattr(self.policy, attr)

    def getattr_rb(self, attr):
        if self.replay_buffer is None:
            raise AttributeError("Collector.getattr_rb: this collector has no replay buffer.")
        return getattr(self.replay_buffer, attr)

    def update_policy_weights_(self, policy_or_weights=None, *, worker_ids=None, **kwargs) -> None:
        """See :meth:`BaseCollector.update_policy_weights_`."""
        super().update_policy_weights_(policy_or_weights, worker_ids=worker_ids, **kwargs)

    def __del__(self) -> None:
        try:
            if not getattr(self, "_closed", True):
                self.shutdown(raise_on_error=False)
        except Exception:  # noqa: BLE001 - interpreter teardown
            pass


Collector.__signature__ = inspect.signature(Collector.__init__).replace(
    parameters=list(inspect.signature(Collector.__init__).parameters.values())[1:]
)
