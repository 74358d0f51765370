"""``GymLikeEnv``: base of wrappers around envs with gym's ``reset``/``step`` API; info-dict readers.

A gym-like env returns ``obs, info`` from ``reset(seed=..., options=...)`` and ``obs, reward, terminated,
truncated, info`` from ``step(action)`` (the 4-tuple ``obs, reward, done, info`` of old gym versions is
accepted too). :class:`GymLikeEnv` turns these into TensorDicts:

- the observation goes under ``"observation"``, or under its own keys when it is a dict;
- the reward under ``"reward"``, the end of episode under ``"done"``, ``"terminated"``, ``"truncated"``;
- ``info`` is discarded unless readers are registered with :meth:`GymLikeEnv.set_info_dict_reader`.

Subclasses build the library env and its specs (see :class:`~torchrl.envs._wrapper._EnvWrapper`) and may
override the ``read_*`` hooks; everything derivable from the specs is computed once (``_GymPlan``).
"""
from __future__ import annotations

import abc
from typing import Any, Sequence, TypeVar

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

from torchrl._fast import fast_get, new_td
from torchrl.data.tensor_specs import Categorical, Composite, NonTensor, TensorSpec, Unbounded
from torchrl.envs._wrapper import _EnvWrapper
from torchrl.envs.common import EnvBase

__all__ = ["BaseInfoDictReader", "GymLikeEnv", "default_info_dict_reader"]

T = TypeVar("T", bound=EnvBase)
_from_numpy = torch.from_numpy
# Entries that vector envs add to ``info`` for their own autoreset bookkeeping; never read as data.
_VECTOR_INFO_KEYS = frozenset({"final_obs", "final_info", "final_observation"})


def _np_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty(0, dtype=dtype).numpy().dtype


def _torch_dtype(dtype: Any) -> torch.dtype:
    return _from_numpy(np.empty(0, dtype=dtype)).dtype


def _encoder(shape: Sequence[int], dtype: torch.dtype):
    """``x → tensor`` of ``shape``/``dtype`` (a copy: gym may reuse its buffers)."""
    shape = tuple(shape)
    np_dtype = _np_dtype(dtype)
    if shape == (1,):

        def encode_one(x: Any) -> torch.Tensor:
            a = np.array((x,), dtype=np_dtype)
            if a.shape != shape:
                a = a.reshape(shape)
            return _from_numpy(a)

        return encode_one

    def encode(x: Any) -> torch.Tensor:
        a = np.array(x, dtype=np_dtype)
        if a.shape != shape:
            a = a.reshape(shape)
        return _from_numpy(a)

    return encode


# ----------------------------------------------------------------------------------------------- info readers
class BaseInfoDictReader(metaclass=abc.ABCMeta):
    """Reads entries of a gym ``info`` dict into the step's TensorDict.

    Subclasses implement ``__call__(info_dict, tensordict) -> tensordict`` and the ``info_spec`` property
    (a ``Composite`` of unbatched specs, one per entry written), which the env adds to its observation spec.
    """

    @abc.abstractmethod
    def __call__(self, info_dict: dict[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError

    @property
    @abc.abstractmethod
    def info_spec(self) -> Composite:
        raise NotImplementedError

    def reset(self) -> None:
        """Forgets what was learnt from data (default: nothing to forget)."""


def _leaves(info: dict, prefix: tuple = ()):
    for key, value in info.items():
        if isinstance(value, dict):
            yield from _leaves(value, prefix + (key,))
        else:
            yield prefix + (key,), value


def _dig(info: dict, path: tuple) -> Any:
    for key in path:
        if not isinstance(info, dict):
            return None
        info = info.get(key)
        if info is None:
            return None
    return info


def _spec_of_value(value: Any, batch_dims: int) -> TensorSpec:
    arr = np.asarray(value)
    shape = arr.shape[batch_dims:]
    if arr.dtype == np.bool_:
        return Categorical(2, shape=shape, dtype=torch.bool)
    if arr.dtype.kind in "biufc":
        return Unbounded(shape=shape, dtype=_torch_dtype(arr.dtype))
    return NonTensor(shape=shape, example_data=None)


class default_info_dict_reader(BaseInfoDictReader):
    """Copies entries of the ``info`` dict into the TensorDict (zeros where an entry is missing).

    Args:
        keys (list of str, optional): the info keys to read. Defaults to every key (seen when the reader is
            registered, or at the first call).
        spec (list / dict of TensorSpec, or Composite, optional): the unbatched spec of each key (a list is
            matched with ``keys`` in order). Keys without a spec get one inferred from the data:
            ``Unbounded`` with the value's dtype and shape (``Categorical(2)`` for booleans, ``NonTensor`` for
            strings and other objects).
        ignore_private (bool, optional): skip keys starting with ``"_"`` (vector envs' validity masks).
            Defaults to ``True``.

    Vector envs give each entry with a leading batch dim and a ``"_key"`` mask of the sub-envs that
    reported it; unreported rows are zero-filled. Nested dicts become nested keys.

    Examples:
        >>> from torchrl.envs.gym_like import default_info_dict_reader
        >>> from torchrl.envs.libs.gym import GymEnv
        >>> env = GymEnv("FrozenLake-v1").set_info_dict_reader(default_info_dict_reader(["prob"]))
        >>> data = env.rollout(3)
        >>> data["next", "prob"].dtype, data["next", "prob"].shape[-1] <= 3
        (torch.float64, True)
    """

    def __init__(
        self,
        keys: list[str] | None = None,
        spec: Sequence[TensorSpec] | dict[str, TensorSpec] | Composite | None = None,
        ignore_private: bool = True,
    ) -> None:
        if isinstance(keys, str):
            keys = [keys]
        self.keys = list(keys) if keys is not None else None
        self.ignore_private = ignore_private
        given: dict[tuple, TensorSpec] = {}
        if spec is not None:
            if isinstance(spec, (list, tuple)):
                if self.keys is None or len(self.keys) != len(spec):
                    raise ValueError(
                        f"default_info_dict_reader: a list of specs must match `keys` one to one; got "
                        f"{len(spec)} specs for keys {self.keys}."
                    )
                items = zip(self.keys, spec)
            elif isinstance(spec, Composite):
                items = spec.items(include_nested=True, leaves_only=True)
            elif isinstance(spec, dict):
                items = spec.items()
            else:
                raise TypeError(f"default_info_dict_reader: spec must be a list, dict or Composite, got {type(spec).__name__}.")
            for key, leaf in items:
                given[key if isinstance(key, tuple) else (key,)] = leaf
            if self.keys is None:
                self.keys = [k[0] for k in given]
        self._given = given
        self._specs: dict[tuple, TensorSpec] = dict(given)
        self._plan: list | None = None

    # -- specs -----------------------------------------------------------------------------------
    def _wanted(self, path: tuple) -> bool:
        top = path[0]
        if top in _VECTOR_INFO_KEYS or (self.ignore_private and any(p.startswith("_") for p in path)):
            return False
        return self.keys is None or top in self.keys

    def infer(self, infos: Sequence[dict], batch_dims: int) -> None:
        """Adds specs for the (wanted) entries of ``infos`` not known yet.

        An entry seen several times gets the dtype that holds all its values (an ``int`` at reset and a
        ``float`` after a step give float64).
        """
        seen: dict[tuple, list] = {}
        for info in infos:
            for path, value in _leaves(info or {}):
                if path not in self._specs and value is not None and self._wanted(path):
                    seen.setdefault(path, []).append(np.asarray(value))
        for path, values in seen.items():
            numeric = [v for v in values if v.dtype.kind in "biufc"]
            if len(numeric) == len(values) and len({v.dtype for v in values}) > 1:
                values = [values[0].astype(np.result_type(*values))]
            self._specs[path] = _spec_of_value(values[0], batch_dims)
        self._plan = None

    @property
    def info_spec(self) -> Composite:
        spec = Composite()
        for path, leaf in self._specs.items():
            spec[path if len(path) > 1 else path[0]] = leaf
        return spec

    def missing_keys(self) -> list[str]:
        """Requested keys with no spec yet (they need data to infer one)."""
        known = {p[0] for p in self._specs}
        return [k for k in (self.keys or []) if k not in known]

    def _declare_unseen(self) -> None:
        """Gives the requested keys that no info has shown yet TorchRL's default spec, a float32 scalar
        ``Unbounded``: they are declared and read as zeros until the env reports them."""
        for key in self.missing_keys():
            self._specs[(key,)] = Unbounded(shape=(), dtype=torch.float32)
        self._plan = None

    def reset(self) -> None:
        """Forgets the specs inferred from data (the ones passed as ``spec`` stay)."""
        self._specs = dict(self._given)
        self._plan = None

    # -- reading ---------------------------------------------------------------------------------
    def _build_plan(self) -> list:
        plan = []
        for path, leaf in self._specs.items():
            key = path if len(path) > 1 else path[0]
            mask_path = path[:-1] + ("_" + path[-1],)
            if isinstance(leaf, NonTensor):
                plan.append((path, key, mask_path, None, tuple(leaf.shape)))
            else:
                plan.append((path, key, mask_path, _np_dtype(leaf.dtype), tuple(leaf.shape)))
        return plan

    def __call__(self, info_dict: dict[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        if self._plan is None:
            if not self._specs or self.missing_keys():
                self.infer([info_dict], tensordict.batch_dims)
            self._plan = self._build_plan()
        batch = tuple(tensordict.batch_size)
        for path, key, mask_path, np_dtype, shape in self._plan:
            value = _dig(info_dict, path) if info_dict else None
            if np_dtype is None:
                if batch:
                    values = [None] * int(np.prod(batch)) if value is None else list(np.asarray(value, dtype=object).reshape(-1))
                    tensordict.set(key, NonTensorStack.from_list(values))
                else:
                    tensordict.set(key, NonTensorData(data=value, batch_size=()))
                continue
            full = batch + shape
            if value is None:
                arr = np.zeros(full, dtype=np_dtype)
            else:
                arr = np.array(value, dtype=np_dtype)
                if arr.shape != full:
                    arr = arr.reshape(full)
                mask = _dig(info_dict, mask_path) if batch else None
                if mask is not None:
                    mask = np.asarray(mask, dtype=bool)
                    if not mask.all():
                        arr[~mask.reshape(batch)] = 0
            tensordict.set(key, _from_numpy(arr))
        return tensordict


# ----------------------------------------------------------------------------------------------- GymLikeEnv
class _GymPlan:
    """Facts derived once from the specs, used on every step."""

    __slots__ = ("action_key", "reward_key", "reward_encode", "flags", "flag_encode", "reset_flags", "batch", "device", "move_to")

    def __init__(self, env: GymLikeEnv) -> None:
        self.action_key = env.action_keys[0] if len(env.action_keys) == 1 else "action"
        self.reward_key = env.reward_key
        reward_spec = env.full_reward_spec[self.reward_key]
        self.reward_encode = _encoder(reward_spec.shape, reward_spec.dtype)
        done_spec = env.full_done_spec
        self.flags = []
        for which, name in enumerate(("terminated", "truncated", "done")):
            if name in done_spec.keys():
                self.flags.append((name, _encoder(done_spec[name].shape, torch.bool), which))
        self.flag_encode = self.flags[0][1] if self.flags else None
        self.reset_flags = [(k, tuple(done_spec[k].shape)) for k in done_spec.keys(include_nested=True, leaves_only=True)]
        self.batch = env.batch_size
        device = env.device
        self.move_to = device if device is not None and device.type != "cpu" else None
        self.device = device if self.move_to is None else None


class GymLikeEnv(_EnvWrapper):
    """Base class for wrappers of envs with gym's API (``reset() -> obs, info``; ``step(a) -> obs, r, ...``).

    The observation is written under ``"observation"`` (or under its keys when the env returns a dict),
    the reward under ``"reward"``, and ``done``/``terminated``/``truncated`` as returned by the env. The
    ``info`` dict is dropped unless readers are registered (:meth:`set_info_dict_reader`). ``frame_skip``
    repeats each action (rewards are summed, the last observation is kept, an episode end stops early).

    Subclasses implement ``_build_env`` / ``_make_specs`` (see ``_EnvWrapper``) and may override
    :meth:`read_obs`, :meth:`read_action`, :meth:`read_reward`, :meth:`read_done`.

    Examples:
        >>> from torchrl.envs.gym_like import GymLikeEnv
        >>> from torchrl.envs.libs.gym import GymEnv
        >>> env = GymEnv("CartPole-v1")
        >>> isinstance(env, GymLikeEnv), sorted(env.observation_spec.keys())
        (True, ['observation'])
    """

    _frame_skip: int = 1  # set from the frame_skip option by the subclass's _check_kwargs

    def __init__(self, *args, **kwargs) -> None:
        self._info_dict_reader: list = []
        self._fast_encoding = False
        self._validated = False
        self._plan: _GymPlan | None = None
        super().__init__(*args, **kwargs)

    # -- derived facts ---------------------------------------------------------------------------------
    def set_spec_lock_(self, mode: bool = True):
        out = super().set_spec_lock_(mode)
        self._plan = None
        return out

    def _get_plan(self) -> _GymPlan:
        plan = self._plan
        if plan is None:
            plan = self._plan = _GymPlan(self)
        return plan

    @property
    def validated(self) -> bool:
        """Whether a reset and a step have been checked against the specs (or checks are off)."""
        return self._validated or self._fast_encoding

    def fast_encoding(self, mode: bool = True) -> T:
        """Skips the one-time check of the first outputs against the specs; returns the env."""
        self._fast_encoding = bool(mode)
        return self

    # -- reading hooks -----------------------------------------------------------------------------------
    def read_action(self, action):
        """The action as the wrapped env expects it (default: numpy, via the action spec)."""
        return self.action_spec.to_numpy(action)

    def read_obs(self, observations: dict[str, Any] | torch.Tensor | np.ndarray) -> dict[str, Any]:
        """``{key: tensor}`` for an observation (a dict goes key by key, anything else to ``"observation"``)."""
        spec = self.full_observation_spec
        if isinstance(observations, dict):
            return {k: spec[k].encode(v, ignore_device=True) for k, v in observations.items() if k in spec.keys()}
        return {"observation": spec["observation"].encode(observations, ignore_device=True)}

    def read_reward(self, reward):
        """The reward as a tensor of the reward spec's shape and dtype."""
        return self._get_plan().reward_encode(reward)

    def read_done(
        self,
        terminated: bool | None = None,
        truncated: bool | None = None,
        done: bool | None = None,
    ) -> tuple[bool | np.ndarray, bool | np.ndarray, bool | np.ndarray, bool]:
        """Completes ``(terminated, truncated, done)`` and says whether to stop repeating the action.

        ``done`` defaults to ``terminated | truncated``; ``terminated`` to ``done`` (minus ``truncated``);
        ``truncated`` to False.

        Returns:
            ``(terminated, truncated, done, do_break)``.
        """
        if done is None:
            if terminated is None and truncated is None:
                raise ValueError("GymLikeEnv.read_done: pass at least one of terminated, truncated and done.")
            done = terminated if truncated is None else truncated if terminated is None else terminated | truncated
        if terminated is None:
            if truncated is None:
                terminated = done
            elif isinstance(done, np.ndarray):
                terminated = done & ~np.asarray(truncated, dtype=bool)
            else:
                terminated = bool(done) and not bool(truncated)
        if truncated is None:
            truncated = np.zeros_like(done) if isinstance(done, np.ndarray) else False
        do_break = bool(done) if not isinstance(done, np.ndarray) else bool(done.any())
        return terminated, truncated, done, do_break

    def _output_transform(self, step_outputs: tuple) -> tuple:
        """``env.step`` output → ``(obs, reward, terminated, truncated, done, info)``."""
        if len(step_outputs) == 5:
            obs, reward, terminated, truncated, info = step_outputs
            return obs, reward, terminated, truncated, terminated | truncated, info
        if len(step_outputs) == 4:
            obs, reward, done, info = step_outputs
            truncated = info.get("TimeLimit.truncated", False) if isinstance(info, dict) else False
            return obs, reward, None, truncated, done, info
        raise ValueError(
            f"{type(self).__name__}: env.step returned {len(step_outputs)} values; expected 5 "
            f"(obs, reward, terminated, truncated, info) or 4 (obs, reward, done, info)."
        )

    def _reset_output_transform(self, reset_outputs: Any) -> tuple[Any, dict]:
        """``env.reset`` output → ``(obs, info)``."""
        if isinstance(reset_outputs, tuple) and len(reset_outputs) == 2 and isinstance(reset_outputs[1], dict):
            return reset_outputs
        return reset_outputs, {}

    def _reset_env(self, tensordict: TensorDictBase | None, kwargs: dict) -> Any:
        return self._env.reset(**kwargs)

    def _action_from(self, tensordict: TensorDictBase) -> Any:
        return fast_get(tensordict, self._get_plan().action_key)

    # -- step / reset ---------------------------------------------------------------------------------
    def _finish(self, out: dict, info: Any, plan: _GymPlan) -> TensorDictBase:
        td = new_td(out, plan.batch, plan.device)
        for reader in self._info_dict_reader:
            td = reader(info, td)
        if plan.move_to is not None:
            td = td.to(plan.move_to, non_blocking=True)
        return td

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        plan = self._plan or self._get_plan()
        action = self.read_action(self._action_from(tensordict))
        step = self._env.step
        reward = None
        for _ in range(self._frame_skip):
            obs, r, terminated, truncated, done, info = self._output_transform(step(action))
            reward = r if reward is None else reward + r
            terminated, truncated, done, do_break = self.read_done(terminated, truncated, done)
            if do_break:
                break
        out = self.read_obs(obs)
        out[plan.reward_key] = plan.reward_encode(reward)
        for name, encode, which in plan.flags:
            out[name] = encode(terminated if which == 0 else truncated if which == 1 else done)
        td = self._finish(out, info, plan)
        if not self._validated:
            self._validate(td, "step")
        return td

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        plan = self._get_plan()
        obs, info = self._reset_output_transform(self._reset_env(tensordict, kwargs))
        out = self.read_obs(obs)
        for key, shape in plan.reset_flags:
            out[key] = torch.zeros(shape, dtype=torch.bool)
        td = self._finish(out, info, plan)
        if not self._validated:
            self._validate(td, "reset")
        return td

    def _validate(self, td: TensorDictBase, where: str) -> None:
        """Checks the first reset and step outputs against the specs once (skipped with fast_encoding)."""
        if self._fast_encoding:
            return
        specs = [self.full_observation_spec, self.full_done_spec]
        if where == "step":
            specs.append(self.full_reward_spec)
        for spec in specs:
            for key, leaf in spec.items(include_nested=True, leaves_only=True):
                value = td.get(key, None)
                if value is None:
                    raise KeyError(
                        f"{type(self).__name__}.{where}: the output has no entry {key!r} although the specs declare "
                        f"it; keys present: {sorted(map(str, td.keys(True, True)))}."
                    )
                if isinstance(value, torch.Tensor) and (value.shape != leaf.shape or value.dtype != leaf.dtype):
                    raise ValueError(
                        f"{type(self).__name__}.{where}: entry {key!r} has shape {tuple(value.shape)} and dtype "
                        f"{value.dtype}; its spec says shape {tuple(leaf.shape)} and dtype {leaf.dtype}."
                    )
        if where == "step":
            self._validated = True

    # -- info readers ------------------------------------------------------------------------------------
    @property
    def info_dict_reader(self) -> list[BaseInfoDictReader]:
        """The registered info readers, applied in order after every reset and step."""
        return self._info_dict_reader

    @info_dict_reader.setter
    def info_dict_reader(self, value: list[BaseInfoDictReader]) -> None:
        self._info_dict_reader = list(value)

    def set_info_dict_reader(self, info_dict_reader: BaseInfoDictReader | None = None, ignore_private: bool = True) -> GymLikeEnv:
        """Registers an info reader and adds its entries to the observation spec; returns the env.

        Without a reader, a :class:`default_info_dict_reader` reading every key is registered (see
        :meth:`auto_register_info_dict`). A ``default_info_dict_reader`` with keys but no specs learns them
        from one reset and one random step, run here.

        Raises:
            TypeError: when ``info_dict_reader`` is not callable.
            KeyError: when an info key collides with an existing observation key.
        """
        if info_dict_reader is None:
            return self.auto_register_info_dict(ignore_private=ignore_private)
        if not callable(info_dict_reader):
            raise TypeError(f"{type(self).__name__}.set_info_dict_reader: expected a callable reader, got {type(info_dict_reader).__name__}.")
        if isinstance(info_dict_reader, default_info_dict_reader) and (
            info_dict_reader.keys is None or info_dict_reader.missing_keys()
        ):
            info_dict_reader.infer(self._probe_infos(), len(self.batch_size))
            info_dict_reader._declare_unseen()
        self._register_info_spec(info_dict_reader)
        self._info_dict_reader.append(info_dict_reader)
        return self

    def auto_register_info_dict(self, ignore_private: bool = True, *, info_dict_reader: BaseInfoDictReader = None) -> EnvBase:
        """Registers a reader for every info key seen in one reset and one random step; returns the env."""
        reader = info_dict_reader if info_dict_reader is not None else default_info_dict_reader(ignore_private=ignore_private)
        if isinstance(reader, default_info_dict_reader):
            reader.infer(self._probe_infos(), len(self.batch_size))
        self._register_info_spec(reader)
        self._info_dict_reader.append(reader)
        return self

    def _probe_infos(self) -> list[dict]:
        """The info dicts of one reset and one random step of the wrapped env."""
        _, info0 = self._reset_output_transform(self._reset_env(None, {}))
        action = self.read_action(self._action_from(self.full_action_spec.rand()))
        info1 = self._output_transform(self._env.step(action))[-1]
        # the wrapped env has moved on: the next reset must be a full one
        self._after_probe()
        return [info0, info1]

    def _after_probe(self) -> None:
        """Hook run after :meth:`_probe_infos` stepped the wrapped env (default: nothing)."""

    def _register_info_spec(self, reader: BaseInfoDictReader) -> None:
        spec = reader.info_spec
        batch = tuple(self.batch_size)
        locked = self.is_spec_locked
        if locked:
            self.set_spec_lock_(False)
        try:
            obs_spec = self.full_observation_spec
            existing = set(obs_spec.keys(include_nested=True, leaves_only=True))
            for key, leaf in spec.items(include_nested=True, leaves_only=True):
                if key in existing:
                    raise KeyError(
                        f"{type(self).__name__}.set_info_dict_reader: info key {key!r} is already an observation key; "
                        f"read it under another name with a custom BaseInfoDictReader."
                    )
                obs_spec[key] = leaf.expand(*batch, *leaf.shape) if batch else leaf.clone()
            self._invalidate_spec_cache()
            self._validated = False
        finally:
            if locked:
                self.set_spec_lock_(True)
