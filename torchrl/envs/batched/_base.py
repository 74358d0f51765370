"""``BatchedEnvBase``: what ``SerialEnv`` and ``ParallelEnv`` share.

A batched env runs ``num_workers`` copies of one env (built by ``create_env_fn``) and presents them as
one env of batch size ``(num_workers, *sub_batch)``. This base class

- normalizes the construction arguments and reads the sub-env metadata once (one env per distinct
  ``(create_env_fn, create_env_kwargs)`` pair, or an :class:`~torchrl.envs.EnvCreator`'s cached one);
- requires identical spec structure across workers (a ``ValueError`` names the worker and the first
  differing key) and builds the batched specs;
- derives the data layouts once: step inputs (actions + state), step outputs (observations, rewards,
  dones), reset inputs (state + reset masks) and reset outputs (observations, dones, state);
- turns ``"_reset"`` masks into the set of workers to reset, and returns the *full* batch from
  ``_reset`` (reset rows from the workers, current values elsewhere);
- handles the lifetime (lazy ``start()`` on first use, ``close()``, ``is_closed``), seeding (a distinct
  chained seed per worker) and attribute access forwarded to the sub-envs.

Subclasses implement the executor: ``_start_workers``, ``_shutdown_workers``, ``_step``,
``_reset_workers``, ``_seed_worker``, ``_remote_getattr`` and ``_remote_call``.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Sequence

import cloudpickle
import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from torchrl._utils._errors import ValueRuntimeError
from torchrl._fast import fast_get
from torchrl.envs.batched._buffers import Layout
from torchrl.envs.batched._specs import first_difference, heterogeneous_key, stack_specs
from torchrl.envs.common import EnvBase
from torchrl.envs.env_creator import EnvMetaData, get_env_metadata

__all__ = ["BatchedEnvBase"]


def _same_kwargs(a: dict, b: dict) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # e.g. tensors inside: compare by identity only
        return False


class _WorkersTypeError(ValueError, TypeError):
    """``num_workers`` is not an int (TorchRL: TypeError)."""


class _WorkersCountError(ValueError, IndexError):
    """``num_workers`` below 1 (TorchRL: IndexError, from its first worker lookup)."""



def _normalize(num_workers: int, create_env_fn, create_env_kwargs, cls_name: str) -> tuple[list, list]:
    if not isinstance(num_workers, int) or isinstance(num_workers, bool):
        raise _WorkersTypeError(f"{cls_name}: num_workers must be a positive int, got {num_workers!r}.")
    if num_workers < 1:
        raise _WorkersCountError(f"{cls_name}: num_workers must be a positive int, got {num_workers!r}.")
    if isinstance(create_env_fn, (list, tuple)):
        fns = list(create_env_fn)
        if len(fns) != num_workers:
            raise ValueRuntimeError(
                f"{cls_name}: create_env_fn is a list of {len(fns)} callables but num_workers={num_workers}; pass one "
                f"callable per worker, or a single callable."
            )
    else:
        fns = [create_env_fn] * num_workers
    for i, fn in enumerate(fns):
        if isinstance(fn, EnvBase):
            raise TypeError(
                f"{cls_name}: create_env_fn{'' if len(set(map(id, fns))) == 1 else f'[{i}]'} is an env instance "
                f"({type(fn).__name__}); pass a function that builds a new env, e.g. `lambda: {type(fn).__name__}(...)`, "
                f"or an EnvCreator."
            )
        if not callable(fn):
            raise TypeError(f"{cls_name}: create_env_fn must be callable, got {type(fn).__name__}.")
    if create_env_kwargs is None:
        kwargs = [{} for _ in range(num_workers)]
    elif isinstance(create_env_kwargs, dict):
        kwargs = [dict(create_env_kwargs) for _ in range(num_workers)]
    else:
        kwargs = [dict(kw) for kw in create_env_kwargs]
        if len(kwargs) != num_workers:
            raise ValueRuntimeError(
                f"{cls_name}: create_env_kwargs is a list of {len(kwargs)} dicts but num_workers={num_workers}."
            )
    return fns, kwargs


def _fit(mask: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """A reset mask broadcast to ``shape`` (masks may omit trailing dims of their done group)."""
    if mask.shape == shape:
        return mask
    if mask.numel() == shape.numel():
        return mask.reshape(shape)
    return mask.reshape(*mask.shape, *([1] * (len(shape) - mask.ndim))).expand(shape)


class BatchedEnvBase(EnvBase):
    """Base class of :class:`~torchrl.envs.SerialEnv` and :class:`~torchrl.envs.ParallelEnv`.

    Args:
        num_workers: number of sub-environments.
        create_env_fn: a callable (or :class:`~torchrl.envs.EnvCreator`) returning an env, or a list
            of ``num_workers`` of them.

    Keyword Args:
        create_env_kwargs: keyword arguments for ``create_env_fn``: one dict for all workers or a list.
        pin_memory: accepted for compatibility (CPU transfer buffers live in shared memory, which torch
            cannot pin; outputs are fresh tensors that the caller may pin or move).
        share_individual_td: return a lazy stack of per-worker TensorDicts instead of one TensorDict.
        shared_memory: keep transfer buffers in shared memory (the default).
        memmap: keep transfer buffers in memory-mapped files instead (exclusive with ``shared_memory``).
        policy_proof: accepted for compatibility; no effect (outputs are exactly the spec'd entries).
        device: the batched env's device (default: the sub-envs' device).
        allow_step_when_done: accepted for compatibility (stepping a done sub-env is not checked).
        num_threads: torch threads of the main process, set when the workers start (default: unchanged).
        num_sub_threads: torch threads inside each sub-environment's process.
        serial_for_single: ``ParallelEnv(1, ...)`` returns a ``SerialEnv``.
        non_blocking: asynchronous device copies.
        mp_start_method: ``"fork"``, ``"spawn"`` or ``"forkserver"`` (``ParallelEnv``).
        use_buffers: exchange data through preallocated buffers (default True; False pickles TensorDicts).
        consolidate: accepted for compatibility (unbuffered data is pickled as is).
        daemon: run worker processes as daemons.

    Raises:
        ValueError: the sub-envs' specs differ (the message names the worker and the first differing key),
            or an argument is out of range.
        TypeError: ``create_env_fn`` is an env instance rather than a function that builds one.

    Examples:
        >>> from torchrl.envs import PendulumEnv, SerialEnv
        >>> from torchrl.envs.batched_envs import BatchedEnvBase
        >>> env = SerialEnv(2, PendulumEnv)
        >>> isinstance(env, BatchedEnvBase), env.batch_size, env.is_closed
        (True, torch.Size([2]), True)
        >>> env.reset()["observation"].shape
        torch.Size([2, 3])
        >>> env.close()
    """

    _batch_locked = True

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable | Sequence[Callable],
        *,
        create_env_kwargs: dict | Sequence[dict] | None = None,
        pin_memory: bool = False,
        share_individual_td: bool | None = None,
        shared_memory: bool = True,
        memmap: bool = False,
        policy_proof: Callable | None = None,
        device=None,
        allow_step_when_done: bool = False,
        num_threads: int | None = None,
        num_sub_threads: int = 1,
        serial_for_single: bool = False,
        non_blocking: bool = False,
        mp_start_method: str | None = None,
        use_buffers: bool | None = None,
        consolidate: bool = True,
        daemon: bool = False,
    ) -> None:
        name = type(self).__name__
        if memmap and shared_memory:
            raise ValueError(f"{name}: memmap and shared_memory are mutually exclusive; pass shared_memory=False with memmap=True.")
        fns, kwargs = _normalize(num_workers, create_env_fn, create_env_kwargs, name)
        metas = self._collect_metadata(fns, kwargs)
        ref = metas[0]
        hetero = heterogeneous_key(ref.specs)
        if hetero is not None:
            raise ValueError(
                f"{name}: the sub-env's spec {hetero!r} has a shape that varies within the env (a lazily stacked, "
                f"heterogeneous spec); batched envs need fixed leaf shapes. Step such envs one by one, or pad their "
                f"entries to a common shape with a transform."
            )
        for i, meta in enumerate(metas[1:], 1):
            if meta is ref:
                continue
            diff = first_difference(ref.specs, meta.specs)
            if diff is not None:
                raise ValueError(
                    f"{name}: worker {i}'s env has different specs from worker 0's: {diff}. All sub-environments "
                    f"of a batched env must share their spec structure (keys, spec types, shapes, dtypes)."
                )
        sub_batch = ref.batch_size
        batch = torch.Size((num_workers, *sub_batch))
        out_device = torch.device(device) if device is not None else ref.device
        super().__init__(device=out_device, batch_size=batch)
        specs = stack_specs([m.specs for m in metas], batch)
        if out_device is not None and specs.device != out_device:
            specs = specs.to(out_device)
        elif out_device is None:
            # as TorchRL: without a device, the batched spec parts take their leaves' device (CPU by default)
            leaf_devices = {leaf.device for leaf in specs.values(True, True) if leaf is not None}
            common = leaf_devices.pop() if len(leaf_devices) == 1 else (torch.device("cpu") if not leaf_devices else None)
            if common is not None:
                for root in ("output_spec", "input_spec"):
                    for part in specs[root].values():
                        part.device = common
        self.output_spec = specs["output_spec"]
        self.input_spec = specs["input_spec"]
        self._closed = True  # started lazily (or by start())
        self.num_workers = num_workers
        self.create_env_fn = create_env_fn
        self._fns = fns
        self.create_env_kwargs = self._kwargs = kwargs
        self._worker_metas = metas
        self._sub_batch = sub_batch
        self._sub_device = ref.device
        self.pin_memory = bool(pin_memory)
        self.share_individual_td = bool(share_individual_td)
        self.shared_memory = bool(shared_memory)
        self.memmap = bool(memmap)
        self.policy_proof = policy_proof
        self.allow_step_when_done = bool(allow_step_when_done)
        self.num_threads = num_threads
        self.num_sub_threads = int(num_sub_threads)
        self.serial_for_single = bool(serial_for_single)
        self.non_blocking = bool(non_blocking)
        self.mp_start_method = mp_start_method
        self._use_buffers = True if use_buffers is None else bool(use_buffers)
        self.consolidate = bool(consolidate)
        self.daemon = bool(daemon)
        self._layouts = None
        self._last_reset = None  # reset_out leaves of the last reset (full batch)
        self._last_step = None  # step_out leaves of the last step, until the next reset

    @staticmethod
    def _collect_metadata(fns: list, kwargs: list) -> list[EnvMetaData]:
        """One metadata per worker, computed once per distinct ``(fn, kwargs)`` pair."""
        known: list[tuple[Any, dict, EnvMetaData]] = []
        metas = []
        for fn, kw in zip(fns, kwargs):
            for kfn, kkw, meta in known:
                if kfn is fn and _same_kwargs(kkw, kw):
                    break
            else:
                meta = get_env_metadata(fn, kw)
                known.append((fn, kw, meta))
            metas.append(meta)
        return metas

    # -- layouts (derived once from the locked specs) -------------------------------------------------
    def _get_layouts(self) -> dict[str, Layout]:
        layouts = self._layouts
        if layouts is None:
            n = self.batch_dims
            reset_masks = []
            for group in self.done_structure.groups:
                reset_masks.append((group.reset_key, group.shape, torch.bool))
            layouts = {
                "step_in": Layout([self.full_action_spec, self.full_state_spec], n),
                "step_out": Layout([self.full_observation_spec, self.full_reward_spec, self.full_done_spec], n),
                "reset_in": Layout([self.full_state_spec], n, extra=reset_masks),
                "reset_out": Layout([self.full_observation_spec, self.full_done_spec, self.full_state_spec], n),
            }
            step_keys = layouts["step_out"].keys
            # (reset_out index, step_out index) of the leaves both carry: where a step's outputs stand in for
            # a partial reset's rows left alone (see _own_latest)
            self._reset_from_step = [
                (j, step_keys.index(key)) for j, key in enumerate(layouts["reset_out"].keys) if key in step_keys
            ]
            self._layouts = layouts
        return layouts

    # -- lifetime ----------------------------------------------------------------------------------------
    @property
    def is_closed(self) -> bool:
        """True before the workers start and after :meth:`close`."""
        return getattr(self, "_closed", True)

    def _check_open(self) -> None:
        if self._closed:
            self.start()

    def start(self) -> None:
        """Starts the sub-environments (done automatically on first use)."""
        if not self._closed:
            raise RuntimeError(f"{type(self).__name__}.start(): the env is already running; close() it first.")
        self._get_layouts()
        self._set_casts()
        if self.num_threads is not None:
            torch.set_num_threads(self.num_threads)
        self._start_workers()
        self._closed = False

    def _set_casts(self) -> None:
        """Device moves between the batched env (``self.device``) and the sub-envs (their own device)."""
        cpu = torch.device("cpu")
        sub = self._sub_device or cpu
        mine = self.device or cpu
        self._cast_in = sub if sub != mine else None
        self._cast_out = mine if sub != mine else None

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Shuts the sub-environments down (worker processes exit; ``start()`` or any use restarts them)."""
        if getattr(self, "_closed", True):
            if raise_if_closed:
                raise RuntimeError(f"{type(self).__name__} is already closed (or was never started).")
            return
        self._closed = True
        self._shutdown_workers()

    def update_kwargs(self, kwargs: dict | Sequence[dict]) -> None:
        """Updates ``create_env_kwargs`` (one dict for all workers, or one per worker).

        The new arguments are used the next time the sub-environments are created (at the first use of an
        env that is not started yet, or after ``close()``).
        """
        if isinstance(kwargs, dict):
            for kw in self._kwargs:
                kw.update(kwargs)
        else:
            kwargs = list(kwargs)
            if len(kwargs) != self.num_workers:
                raise ValueError(f"{type(self).__name__}.update_kwargs: got {len(kwargs)} dicts for {self.num_workers} workers.")
            for kw, new in zip(self._kwargs, kwargs):
                kw.update(new)

    # -- step / reset ------------------------------------------------------------------------------------
    def _step_output(self, tensordict: TensorDictBase) -> TensorDictBase:
        # The sub-envs already completed their outputs (done siblings, shapes): no second pass here.
        rows = self._rows_to_step(tensordict)
        next_td = self._step(tensordict) if rows is None else self._step(tensordict, rows=rows)
        if self._run_type_checks:
            self._type_check(next_td, self.full_observation_spec, "step")
            self._type_check(next_td, self.full_reward_spec, "step")
            self._type_check(next_td, self.full_done_spec, "step")
        if self.share_individual_td:
            next_td = LazyStackedTensorDict.lazy_stack(list(next_td.unbind(0)), 0)
        return next_td

    def _rows_to_step(self, tensordict: TensorDictBase) -> list[int] | None:
        """The workers a ``"_step"`` mask (set by ``ConditionalSkip``) asks to step (``None``: all of them).

        A worker steps when any of its rows is selected; the other workers are not stepped at all, and their
        rows of the output are left for the caller to fill (the skipped rows repeat their last outputs).
        """
        mask = fast_get(tensordict, "_step")
        if mask is None:
            return None
        mask = mask.reshape(self.num_workers, -1).any(-1)
        if bool(mask.all()):
            return None
        return mask.nonzero().squeeze(-1).tolist()

    def _workers_to_reset(self, tensordict: TensorDictBase | None) -> torch.Tensor | None:
        """``(num_workers,)`` bool mask of the workers a reset concerns (``None``: all of them)."""
        if tensordict is None:
            return None
        n = self.num_workers
        mask = None
        for key in self.reset_keys:
            value = fast_get(tensordict, key)
            if value is None:
                continue
            value = value.reshape(n, -1).any(-1)
            mask = value if mask is None else mask | value
        return mask

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        layout = self._get_layouts()["reset_out"]
        mask = self._workers_to_reset(tensordict)
        n = self.num_workers
        rows = list(range(n)) if mask is None else mask.nonzero().squeeze(-1).tolist()
        leaves = self._reset_workers(tensordict, rows, kwargs)
        if len(rows) < n:
            keep = ~mask.to(torch.bool)
            own = None
            for j, key in enumerate(layout.keys):
                leaf = leaves[j]
                if leaf is None:
                    continue
                current = fast_get(tensordict, key)
                if current is None or current.shape != leaf.shape or current.dtype != leaf.dtype:
                    # absent, or an outer transform's entry under the same key (CatFrames or ToTensorImage
                    # writing in place): this env's own latest values instead
                    if own is None:
                        own = self._own_latest(layout)
                    current = own[j]
                if current is not None:
                    leaf[keep] = current[keep].to(leaf.device)
        self._last_reset = leaves
        self._last_step = None
        out = layout.build(leaves, self.batch_size, self.device)
        if self.share_individual_td:
            out = LazyStackedTensorDict.lazy_stack(list(out.unbind(0)), 0)
        return out

    def _own_latest(self, layout: Layout) -> list[torch.Tensor | None]:
        """Per ``reset_out`` leaf, the latest values this env produced: its last step's outputs (observations,
        dones) since the last reset, else its last reset's outputs (``None`` where it has none)."""
        last_reset, last_step = self._last_reset, self._last_step
        out = list(last_reset) if last_reset is not None else [None] * len(layout)
        if last_step is not None:
            for j, i in self._reset_from_step:
                out[j] = last_step[i]
        return out

    def _reset_inputs(self, tensordict: TensorDictBase | None) -> list[torch.Tensor | None] | None:
        """Reset inputs in the ``reset_in`` layout, reset masks fitted to their group's shape.

        An entry whose shape differs from this env's spec is not this env's (an outer transform replaced it
        in place) and is left out, as if absent."""
        if tensordict is None:
            return None
        layout = self._get_layouts()["reset_in"]
        leaves = layout.read(tensordict)
        reset_keys = set(self.reset_keys)
        for j, key in enumerate(layout.keys):
            leaf = leaves[j]
            if leaf is None:
                continue
            if key in reset_keys:
                leaves[j] = _fit(leaf, layout.shapes[j])
            elif leaf.shape != layout.shapes[j]:
                leaves[j] = None
        return leaves

    # -- seeding and remote attributes ---------------------------------------------------------------------
    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds every sub-env with its own seed, chained from ``seed``; returns the seed that follows.

        Worker ``i`` receives the seed returned by worker ``i - 1``'s ``set_seed`` (``seed`` for worker 0),
        so one seed gives distinct, reproducible seeds across workers (identical ones with ``static_seed``).
        """
        self._check_open()
        for i in range(self.num_workers):
            seed = self._seed_worker(i, seed, static_seed)
        return seed

    def _set_seed(self, seed: int | None) -> None:
        self.set_seed(seed)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or "_fns" not in vars(self):  # (reading self._fns here would recurse)
                raise
        self._check_open()
        return self._remote_getattr(name)

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False, **kwargs) -> OrderedDict:
        """``{"worker0": state_dict of sub-env 0, ...}``."""
        if args:
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
        self._check_open()
        out = destination if destination is not None else OrderedDict()
        for i, sd in enumerate(self._remote_call("state_dict", (), {})):
            out[f"{prefix}worker{i}"] = sd
        return out

    def load_state_dict(self, state_dict, *args, **kwargs):
        """Loads ``state_dict["worker{i}"]`` into sub-env ``i``."""
        self._check_open()
        n = self.num_workers
        missing = [f"worker{i}" for i in range(n) if f"worker{i}" not in state_dict]
        if missing:
            raise KeyError(f"{type(self).__name__}.load_state_dict: missing entries {missing}; expected worker0..worker{n - 1}.")
        for i in range(n):
            self._remote_call("load_state_dict", (state_dict[f"worker{i}"],), {}, workers=[i])

    def to(self, device) -> "BatchedEnvBase":
        """Moves the batched env's inputs/outputs to ``device`` (sub-envs keep their own device)."""
        device = torch.device(device)
        if device == self.device:
            return self
        super().to(device)
        self._set_casts()
        return self

    # -- pickling: an unstarted env can travel to another process -----------------------------------------
    _RUNTIME_KEYS = ("_envs", "_step_fns", "_workers", "_finalizer", "_shared")

    def __getstate__(self) -> dict:
        if not self._closed:
            raise RuntimeError(
                f"{type(self).__name__}: a running env cannot be pickled (its sub-environments belong to this "
                f"process); pickle it before its first use, or close() it first."
            )
        state = {k: v for k, v in vars(self).items() if k not in self._RUNTIME_KEYS}
        state["_fns"] = cloudpickle.dumps(self._fns)
        state["create_env_fn"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        fns = state["_fns"] = cloudpickle.loads(state["_fns"])
        state["create_env_fn"] = fns if len({id(f) for f in fns}) > 1 else fns[0]
        for key in self._RUNTIME_KEYS:
            state.setdefault(key, None)
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(\n\tenv={self._worker_metas[0].env_str}, \n\tbatch_size={self.batch_size})"

    # -- executor contract ------------------------------------------------------------------------------------
    def _start_workers(self) -> None:
        raise NotImplementedError

    def _shutdown_workers(self) -> None:
        raise NotImplementedError

    def _reset_workers(self, tensordict: TensorDictBase | None, rows: list[int], kwargs: dict) -> list:
        raise NotImplementedError

    def _seed_worker(self, idx: int, seed: int | None, static_seed: bool) -> int | None:
        raise NotImplementedError

    def _remote_getattr(self, name: str):
        raise NotImplementedError

    def _remote_call(self, name: str, args: tuple, kwargs: dict, workers: list[int] | None = None) -> list:
        raise NotImplementedError
