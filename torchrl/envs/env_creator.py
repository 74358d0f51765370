"""Environment factories for multiprocessing: ``EnvCreator``, ``EnvMetaData`` and ``get_env_metadata``.

A batched environment needs the specs of its sub-environments before any worker exists (to allocate the
shared buffers its workers write into). :class:`EnvMetaData` is that description: specs, batch size,
device and a zero-filled TensorDict, read once from one env. :class:`EnvCreator` wraps an env factory,
reads the metadata once in the main process, and keeps the env's state dict (parameters, buffers and
extra-state statistics such as a VecNorm's) in shared memory so that every env it creates (in any process)
reads and writes the same tensors.
"""
from __future__ import annotations

import multiprocessing as mp
import pickle
from collections import OrderedDict
from collections.abc import Mapping
from multiprocessing.context import get_spawning_popen
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable

import cloudpickle
import torch
from tensordict import TensorDictBase

from torchrl.data.tensor_specs import Composite
from torchrl.envs.common import EnvBase

__all__ = ["EnvCreator", "EnvMetaData", "env_creator", "get_env_metadata"]


class EnvMetaData:
    """What a process needs to know about an env without holding one: specs, batch size, device, data layout.

    Keyword Args:
        tensordict: a zero-filled TensorDict with the structure of a step (``env.fake_tensordict()``).
        specs: ``Composite(output_spec=..., input_spec=...)`` of the env.
        batch_size: the env's batch size.
        env_str: the env's ``repr`` (for messages).
        device: the env's device.
        batch_locked: whether the env is batch-locked.
        device_map: ``{leaf key: device}`` of the spec leaves.
        supports_set_state: whether the env can set its state from a TensorDict.

    Examples:
        >>> from torchrl.envs import PendulumEnv
        >>> meta = EnvMetaData.metadata_from_env(PendulumEnv())
        >>> meta.expand(4).batch_size
        torch.Size([4])
        >>> meta.expand(4).specs["output_spec", "full_observation_spec", "observation"].shape
        torch.Size([4, 3])
    """

    def __init__(
        self,
        *,
        tensordict: TensorDictBase,
        specs: Composite,
        batch_size: torch.Size,
        env_str: str,
        device: torch.device,
        batch_locked: bool,
        device_map: dict,
        supports_set_state: bool = False,
    ) -> None:
        self._fake_td = tensordict
        self._specs = specs
        self.batch_size = torch.Size(batch_size)
        self.env_str = env_str
        self.device = device
        self.batch_locked = batch_locked
        self.device_map = device_map
        self.supports_set_state = supports_set_state

    @property
    def tensordict(self) -> TensorDictBase:
        return self._fake_td

    @property
    def specs(self) -> Composite:
        return self._specs

    @staticmethod
    def metadata_from_env(env) -> "EnvMetaData":
        """Reads the metadata of ``env`` (specs are copied, so later edits of ``env`` do not leak in)."""
        if not isinstance(env, EnvBase):
            raise TypeError(f"EnvMetaData.metadata_from_env expects an EnvBase, got {type(env).__name__}.")
        specs = Composite(
            output_spec=env.output_spec.clone(), input_spec=env.input_spec.clone(), shape=env.batch_size, device=env.device
        )
        device_map = {key: leaf.device for key, leaf in specs.items(include_nested=True, leaves_only=True)}
        return EnvMetaData(
            tensordict=env.fake_tensordict(),
            specs=specs,
            batch_size=env.batch_size,
            env_str=repr(env),
            device=env.device,
            batch_locked=env.batch_locked,
            device_map=device_map,
            supports_set_state=type(env).set_state is not EnvBase.set_state,
        )

    def _replace(self, tensordict: TensorDictBase, specs: Composite, batch_size: torch.Size, device=None) -> "EnvMetaData":
        return EnvMetaData(
            tensordict=tensordict,
            specs=specs,
            batch_size=batch_size,
            env_str=self.env_str,
            device=self.device if device is None else device,
            batch_locked=self.batch_locked,
            device_map=dict(self.device_map),
            supports_set_state=self.supports_set_state,
        )

    def expand(self, *size: int) -> "EnvMetaData":
        """The metadata of a batch of these envs: ``size`` is prepended to the batch size."""
        if len(size) == 1 and not isinstance(size[0], int):
            size = tuple(size[0])
        batch = torch.Size((*size, *self.batch_size))
        td = self._fake_td.expand(batch).clone()
        return self._replace(td, self._specs.expand(batch), batch)

    def __getitem__(self, item) -> "EnvMetaData":
        td = self._fake_td[item]
        return self._replace(td, self._specs[item], td.batch_size)

    def clone(self) -> "EnvMetaData":
        return self._replace(self._fake_td.clone(), self._specs.clone(), self.batch_size)

    def to(self, device) -> "EnvMetaData":
        """The metadata with specs and data on ``device``."""
        device = torch.device(device)
        out = self._replace(self._fake_td.to(device), self._specs.to(device), self.batch_size, device=device)
        out.device_map = {k: device for k in self.device_map}
        return out

    def __repr__(self) -> str:
        return f"EnvMetaData(env_str={self.env_str!r}, batch_size={self.batch_size}, device={self.device})"


def _call_factory(fn: Callable, kwargs: dict) -> EnvBase:
    env = fn(**kwargs)
    if not isinstance(env, EnvBase):
        raise TypeError(
            f"create_env_fn must return an EnvBase, got {type(env).__name__} from {getattr(fn, '__name__', fn)!r}."
        )
    return env


def get_env_metadata(
    env_or_creator: EnvBase | Callable,
    kwargs: dict | None = None,
    *,
    env_validator: Callable[[EnvBase], None] | None = None,
) -> EnvMetaData:
    """The :class:`EnvMetaData` of an env, an :class:`EnvCreator` or an env factory.

    Args:
        env_or_creator: an env (read directly), an ``EnvCreator`` (its cached metadata, unless ``kwargs``
            differ from its own) or a callable (called with ``kwargs``; the env is closed afterwards).
        kwargs: keyword arguments for the factory.

    Keyword Args:
        env_validator: called with the created env before its metadata is read (e.g. to check specs).

    Examples:
        >>> from torchrl.envs import PendulumEnv
        >>> get_env_metadata(PendulumEnv).batch_size
        torch.Size([])
    """
    if isinstance(env_or_creator, EnvBase):
        if env_validator is not None:
            env_validator(env_or_creator)
        return EnvMetaData.metadata_from_env(env_or_creator)
    kwargs = dict(kwargs or {})
    if isinstance(env_or_creator, EnvCreator) and env_validator is None:
        if not kwargs or kwargs == env_or_creator.create_env_kwargs:
            return env_or_creator.meta_data
    if not callable(env_or_creator):
        raise TypeError(f"get_env_metadata expects an env or a callable, got {type(env_or_creator).__name__}.")
    if isinstance(env_or_creator, EnvCreator):  # a probe: the raw factory, without binding the shared state
        env = _call_factory(env_or_creator.create_env_fn, {**env_or_creator.create_env_kwargs, **kwargs})
    else:
        env = _call_factory(env_or_creator, kwargs)
    try:
        if env_validator is not None:
            env_validator(env)
        return EnvMetaData.metadata_from_env(env)
    finally:
        env.close(raise_if_closed=False)


_EXTRA = "_extra_state"
_HANDLES = "shared-memory handles"  # marks a pickled shared state that holds handles, not values


def _is_extra_state(key: str, value) -> bool:
    """A module's ``get_extra_state()`` entry holding a dict of tensors (e.g. a VecNorm's statistics)."""
    return (key == _EXTRA or key.endswith("." + _EXTRA)) and isinstance(value, Mapping)


def _owner(env: EnvBase, key: str) -> torch.nn.Module:
    """The submodule of ``env`` whose extra state is ``key`` (``"transform._extra_state"`` -> ``env.transform``)."""
    path = key[: -len(_EXTRA)].rstrip(".")
    return env.get_submodule(path) if path else env


def _shared_extra_state(value: Mapping, share: bool) -> OrderedDict:
    """A detached copy of an extra-state dict, its tensors (at any depth) moved to shared memory when ``share``."""
    out = OrderedDict()
    for name, item in value.items():
        if isinstance(item, Mapping):
            out[name] = _shared_extra_state(item, share)
        elif isinstance(item, (torch.Tensor, TensorDictBase)):
            item = item.detach() if isinstance(item, torch.Tensor) else item
            if share and item.device.type == "cpu":
                item.share_memory_()
            out[name] = item
        else:
            out[name] = item
    return out


def _bind_shared_state(env: EnvBase, shared: OrderedDict, lock) -> None:
    """Makes ``env`` *use* the tensors of ``shared`` (same storage, not a copy).

    Parameters and buffers are re-pointed at the shared tensors. Extra-state dicts are handed to their
    module's ``set_extra_state``; modules that adopt tensors in shared memory (``VecNormV2``, ``VecNorm``)
    then read and update the shared statistics, and those with a ``lock`` attribute left to ``None`` get the
    creator's ``lock`` so that updates from different processes do not interleave.
    """
    live = env.state_dict(keep_vars=True)
    for key, tensor in shared.items():
        if _is_extra_state(key, tensor):
            if key not in live:
                raise RuntimeError(
                    f"EnvCreator: the shared state has {key!r} but the new env has no such extra state; the factory "
                    f"must build envs with the same transforms."
                )
            module = _owner(env, key)
            module.set_extra_state(tensor)
            if lock is not None and getattr(module, "lock", False) is None:
                module.lock = lock
            continue
        target = live.get(key)
        if target is None or not isinstance(target, torch.Tensor):
            continue
        if target.shape != tensor.shape or target.dtype != tensor.dtype:
            raise RuntimeError(
                f"EnvCreator: state entry {key!r} has shape {tuple(target.shape)} / {target.dtype} in the new env "
                f"but {tuple(tensor.shape)} / {tensor.dtype} in the shared state; the factory must build envs with "
                f"the same state layout."
            )
        target.data = tensor


class EnvCreator:
    """An env factory for multiprocessing: metadata read once, state shared across every env it creates.

    At construction one env is built in the calling process to read its :class:`EnvMetaData` (batched
    envs use it to allocate buffers without building an env per worker) and its state dict, which is
    moved to shared memory. Every env the creator then builds, in this process or in a worker, uses those
    shared tensors as its own parameters and buffers: a statistic updated in one process is seen by all of
    them. Statistics a module keeps as extra state (a dict of tensors under ``"<module>._extra_state"``, as
    :class:`~torchrl.envs.transforms.VecNormV2` and :class:`~torchrl.envs.transforms.VecNorm` do) are shared
    too: each new env loads them with ``set_extra_state``, and these transforms adopt tensors in shared
    memory by reference. Such a module whose ``lock`` is ``None`` gets the creator's multiprocessing lock,
    so updates from different workers do not interleave (the lock travels to processes being started; a
    creator pickled otherwise has none).

    Args:
        create_env_fn: a callable returning an :class:`~torchrl.envs.EnvBase`.
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        share_memory: put the shared state in shared memory (``False``: envs still share parameters and
            buffers within a process, but a worker process gets its own copy, and extra-state statistics are
            copied into each env).

    Keyword Args:
        **kwargs: more keyword arguments for ``create_env_fn`` (merged into ``create_env_kwargs``).

    Examples:
        >>> from torchrl.envs import EnvCreator, PendulumEnv
        >>> creator = EnvCreator(PendulumEnv)
        >>> creator.meta_data.specs["output_spec", "full_observation_spec", "observation"].shape
        torch.Size([3])
        >>> creator().rollout(3).batch_size
        torch.Size([3])
    """

    def __init__(
        self,
        create_env_fn: Callable[..., EnvBase],
        create_env_kwargs: dict | None = None,
        share_memory: bool = True,
        **kwargs,
    ) -> None:
        if isinstance(create_env_fn, EnvCreator):
            create_env_kwargs = {**create_env_fn.create_env_kwargs, **(create_env_kwargs or {})}
            create_env_fn = create_env_fn.create_env_fn
        if isinstance(create_env_fn, EnvBase) or not callable(create_env_fn):
            raise TypeError(
                f"EnvCreator expects a callable that builds an env (e.g. `lambda: GymEnv('Pendulum-v1')`), got "
                f"{type(create_env_fn).__name__}."
            )
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = {**(create_env_kwargs or {}), **kwargs}
        self._share_memory = bool(share_memory)
        self._meta_data: EnvMetaData | None = None
        self._shared_state: OrderedDict | None = None
        self._lock = None  # guards updates of shared extra state (statistics) across processes
        self.initialized = False
        self.init_()

    def init_(self) -> "EnvCreator":
        """Builds one env to read its metadata and state (done at construction; returns ``self``)."""
        env = _call_factory(self.create_env_fn, self.create_env_kwargs)
        try:
            self._meta_data = EnvMetaData.metadata_from_env(env)
            state = OrderedDict()
            for key, value in env.state_dict().items():
                if isinstance(value, torch.Tensor):
                    state[key] = value.detach()
                elif _is_extra_state(key, value):  # e.g. a VecNorm's statistics
                    state[key] = _shared_extra_state(value, self._share_memory)
            if self._share_memory:
                self.share_memory(state)
                if any(_is_extra_state(k, v) and v for k, v in state.items()):  # statistics to guard
                    self._lock = mp.get_context("spawn").Lock()  # (a fork-context lock cannot go to spawned workers)
            self._shared_state = state
        finally:
            env.close(raise_if_closed=False)
        self.initialized = True
        return self

    @property
    def meta_data(self) -> EnvMetaData:
        """The :class:`EnvMetaData` of the envs this creator builds."""
        return self._meta_data

    def __call__(self, **kwargs) -> EnvBase:
        """Builds an env (``kwargs`` override the creator's own) that uses the shared state."""
        env = _call_factory(self.create_env_fn, {**self.create_env_kwargs, **kwargs})
        if self._shared_state:
            _bind_shared_state(env, self._shared_state, self._lock)
        return env

    def make_variant(self, **kwargs) -> "EnvCreator":
        """A creator with updated keyword arguments that shares this one's metadata and state."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        new.create_env_kwargs = {**self.create_env_kwargs, **kwargs}
        return new

    # -- shared state --------------------------------------------------------------------------------
    def state_dict(self) -> OrderedDict:
        """The shared state (the tensors themselves: writing into them updates every env)."""
        return OrderedDict(self._shared_state or {})

    def load_state_dict(self, state_dict: OrderedDict) -> None:
        """Copies ``state_dict``'s values into the shared state, in place."""
        shared = self._shared_state or {}
        unknown = [k for k in state_dict if k not in shared]
        if unknown:
            raise KeyError(f"EnvCreator.load_state_dict: unknown keys {unknown}; the shared state has {list(shared)}.")
        for key, value in state_dict.items():
            _copy_into(shared[key], value, key)

    def share_memory(self, state_dict: OrderedDict) -> None:
        """Moves the tensors of ``state_dict`` to shared memory, in place."""
        for value in state_dict.values():
            if isinstance(value, torch.Tensor) and value.device.type == "cpu":
                value.share_memory_()
            elif isinstance(value, TensorDictBase):
                value.share_memory_()

    # -- pickling: the factory goes through cloudpickle (lambdas, closures) ---------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["create_env_fn"] = cloudpickle.dumps(self.create_env_fn)
        if get_spawning_popen() is None:  # a lock only travels to a process being started
            state["_lock"] = None
        elif self._share_memory and self._shared_state:
            # a process being started (spawn, forkserver) may receive us through a plain pickler (cloudpickle),
            # which would copy the tensors: hand it shared-memory handles instead
            state["_shared_state"] = _HANDLES, bytes(ForkingPickler.dumps(self._shared_state))
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["create_env_fn"] = cloudpickle.loads(state["create_env_fn"])
        shared = state.get("_shared_state")
        if isinstance(shared, tuple) and shared and shared[0] == _HANDLES:
            state["_shared_state"] = pickle.loads(shared[1])
        self.__dict__.update(state)

    def __repr__(self) -> str:
        name = getattr(self.create_env_fn, "__name__", type(self.create_env_fn).__name__)
        return f"EnvCreator({name}(**{self.create_env_kwargs}))"


def _copy_into(target, value, key: str) -> None:
    if isinstance(target, Mapping):
        if not isinstance(value, Mapping):
            raise TypeError(f"EnvCreator.load_state_dict: {key!r} is a dict of tensors, got {type(value).__name__}.")
        for name, item in value.items():
            if name not in target:
                raise KeyError(f"EnvCreator.load_state_dict: unknown entry {name!r} of {key!r}; it has {list(target)}.")
            _copy_into(target[name], item, f"{key}/{name}")
    elif isinstance(target, (torch.Tensor, TensorDictBase)):
        target.copy_(value)
    else:
        raise TypeError(f"EnvCreator.load_state_dict: {key!r} holds no tensor ({type(target).__name__}).")


def env_creator(fun: Callable) -> EnvCreator:
    """Decorator form of :class:`EnvCreator`: ``@env_creator`` over a factory function.

    Examples:
        >>> from torchrl.envs import PendulumEnv
        >>> @env_creator
        ... def make_env():
        ...     return PendulumEnv()
        >>> make_env().batch_size
        torch.Size([])
    """
    return EnvCreator(fun)
