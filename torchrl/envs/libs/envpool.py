"""EnvPool environments: ``MultiThreadedEnvWrapper`` (wrap a pool) and ``MultiThreadedEnv`` (build one by id).

`EnvPool <https://github.com/sail-sg/envpool>`_ runs a batch of C++ environments on a thread pool; a
TorchRL env over it has batch size ``(num_envs,)``. Specs come once from the pool's gymnasium spaces
(``_gym_specs``, as for ``GymWrapper``); a step is one EnvPool step, zero-copy ``torch.from_numpy`` of
its (freshly allocated) arrays and one TensorDict.

EnvPool restarts a finished sub-env on its *next* step: that step ignores the action and returns the
first observation of a new episode. TorchRL instead resets finished sub-envs explicitly (``"_reset"``
masks), so this wrapper restarts exactly the masked sub-envs with EnvPool's ``reset(env_id)`` and
refuses to step a sub-env that finished and was not reset (that step would attach a new episode's
first observation to the old episode). ``step_and_maybe_reset`` and ``rollout`` reset for you.
"""
from __future__ import annotations

import difflib
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl import torchrl_logger
from torchrl._utils._optional import has_module
from torchrl._fast import fast_get, new_td
from torchrl.data.tensor_specs import Categorical, Composite, TensorSpec, Unbounded
from torchrl.envs._partial_reset import blend_partial_reset
from torchrl.envs._wrapper import _EnvWrapper
from torchrl.envs.libs._envpool_io import (
    PoolIO,
    copy_rows,
    fold_seed,
    import_envpool,
    is_envpool,
    pool_spaces,
    rebuild_with_seed,
    scatter_rows,
)
from torchrl.envs.libs._gym_specs import gym_space_to_spec, torch_to_numpy_dtype
from torchrl.envs.libs._gym_utils import action_writer, obs_reader, space_kind

__all__ = ["MultiThreadedEnv", "MultiThreadedEnvWrapper"]

#: Optional-library availability flags (TorchRL's names), found without importing the libraries.
_has_envpool = has_module("envpool")

_from_numpy = torch.from_numpy
_WRAPPER_OPTIONS = ("env", "categorical_action_encoding", "disable_env_checker", "frame_skip")
_BUILDER_OPTIONS = ("num_workers", "env_name", "create_env_kwargs", "categorical_action_encoding", "disable_env_checker", "frame_skip")


class _classproperty:
    def __init__(self, fget) -> None:
        self.fget = fget

    def __get__(self, obj: Any, owner: type) -> Any:
        return self.fget(owner)


def _leaf_reader(space: Any, spec: TensorSpec):
    """raw batched leaf → tensor. ``Box`` leaves of the spec's dtype are wrapped without a copy: EnvPool
    hands out a new array on every call, so nothing else ever writes to it."""
    if space_kind(space) == "Box" and np.dtype(space.dtype) == torch_to_numpy_dtype(spec.dtype):
        return _from_numpy
    return obs_reader(space, spec, 1)


def _obs_plan(space: Any, spec: TensorSpec):
    """raw observation (array or dict tree) → ``{key: tensor or dict}`` under the spec's keys."""
    if space_kind(space) != "Dict":
        read = _leaf_reader(space, spec)
        return lambda raw: read(raw)
    plan = [(ik, ok, _obs_plan(sub, spec[ok])) for (ik, sub), ok in zip(space.spaces.items(), spec.keys())]
    return lambda raw: {ok: read(raw[ik]) for ik, ok, read in plan}


def _as_td(source: dict, batch: torch.Size, device) -> TensorDict:
    for key, value in source.items():
        if isinstance(value, dict):
            source[key] = _as_td(value, batch, device)
    return new_td(source, batch, device)


def _take_rows(action: Any, rows: np.ndarray) -> Any:
    if isinstance(action, dict):
        return {k: _take_rows(v, rows) for k, v in action.items()}
    return action[rows]


class MultiThreadedEnvWrapper(_EnvWrapper):
    """Wraps an EnvPool pool (``envpool.make(...)``) as a batched TorchRL env.

    GitHub: https://github.com/sail-sg/envpool. Paper: https://arxiv.org/abs/2206.10558.

    Args:
        env: the pool, built with ``env_type="gymnasium"`` (``"gym"``) or ``"dm"``, in synchronous mode
            (``batch_size`` equal to ``num_envs``, EnvPool's default). The TorchRL env has batch size
            ``(num_envs,)``.
        categorical_action_encoding (bool, optional): map ``Discrete`` actions to ``Categorical`` specs
            (integer indices) instead of ``OneHot``. Defaults to ``False``.

    Keyword Args:
        frame_skip (int, optional): repeat each action this many times, summing the rewards; a sub-env whose
            episode ends stops repeating (its final observation is kept). Defaults to 1.
        disable_env_checker (bool, optional): accepted for compatibility; EnvPool has no env checker.
        device (torch.device, optional): where outputs are placed. Defaults to ``"cpu"``.
        batch_size (torch.Size, optional): must be ``(num_envs,)`` if given.
        allow_done_after_reset (bool, optional): see :class:`~torchrl.envs.EnvBase`. Defaults to ``False``.
        run_type_checks (bool, optional): check every step against the specs. Defaults to ``False``.

    Observations go under ``"observation"`` (or under the keys of a ``Dict`` observation space), rewards
    under ``"reward"``; ``terminated``/``truncated`` are EnvPool's (truncation is the ``max_episode_steps``
    time limit) and ``done`` is their or. EnvPool's ``info`` (env ids, elapsed steps) is not written.
    Float bounds that EnvPool leaves at their C++ defaults (smallest positive / largest float) are read
    as unbounded.

    Seeding: EnvPool fixes seeds when a pool is built, so ``set_seed(s)`` builds a new pool with the same
    configuration and seeds ``s, s + 1, ...`` (``s`` folded into int32 range); call ``reset()`` after it.
    ``env._env`` is then the new pool.

    Resets: a ``"_reset"`` mask restarts only the masked sub-envs (``envpool`` ``reset(env_id)``); the
    others keep their state and report their current observations.

    Raises:
        ImportError: ``envpool`` is not installed.
        TypeError: ``env`` is not an EnvPool pool, or an option is unknown.
        ValueError: an asynchronous pool (``batch_size < num_envs``), ``frame_skip < 1``, or a ``batch_size``
            that contradicts the pool.
        RuntimeError: (on ``step``) a sub-env finished its episode and was not reset, or the env was never
            reset.

    Examples:
        >>> import envpool
        >>> from torchrl.envs.libs.envpool import MultiThreadedEnvWrapper
        >>> pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, seed=0)
        >>> env = MultiThreadedEnvWrapper(pool)
        >>> env.batch_size
        torch.Size([4])
        >>> env.rollout(5, break_when_any_done=False)["next", "observation"].shape
        torch.Size([4, 5, 4])
    """

    git_url = "https://github.com/sail-sg/envpool"
    _partial_reset_outputs_hold_all_rows = True  # (_restart returns every sub-env's current entries)
    libname = "envpool"

    def __init__(self, env: Any = None, categorical_action_encoding: bool = False, **kwargs) -> None:
        run_type_checks = kwargs.pop("run_type_checks", False)
        kwargs.setdefault("device", "cpu")
        if env is not None:
            kwargs["env"] = env
        kwargs["categorical_action_encoding"] = categorical_action_encoding
        super().__init__(**kwargs)
        if run_type_checks:
            self.run_type_checks = True

    # -- construction ---------------------------------------------------------------------------------
    def _allowed_kwargs(self) -> tuple[str, ...]:
        return _WRAPPER_OPTIONS

    def _check_kwargs(self, kwargs: dict) -> None:
        allowed = self._allowed_kwargs()
        unknown = sorted(k for k in kwargs if k not in allowed)
        if unknown:
            raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) {unknown}; accepted: {sorted(allowed)}.")
        frame_skip = kwargs.get("frame_skip")
        frame_skip = 1 if frame_skip is None else frame_skip
        if not isinstance(frame_skip, (int, np.integer)) or isinstance(frame_skip, bool) or frame_skip < 1:
            raise ValueError(f"{type(self).__name__}: frame_skip must be an integer >= 1, got {frame_skip!r}.")
        self._frame_skip = int(frame_skip)
        self._categorical_action_encoding = bool(kwargs.get("categorical_action_encoding", False))

    def _build_env(self, env: Any = None, **options) -> Any:
        if env is None:
            raise TypeError(
                f"{type(self).__name__}: pass the pool to wrap, e.g. MultiThreadedEnvWrapper(envpool.make('CartPole-v1', "
                f"env_type='gymnasium', num_envs=4)), or build one by id with MultiThreadedEnv(4, 'CartPole-v1')."
            )
        if not is_envpool(env):
            raise TypeError(
                f"{type(self).__name__}: expected an EnvPool pool (from envpool.make), got "
                f"{type(env).__module__}.{type(env).__name__}."
            )
        return env

    def _make_specs(self, env: Any) -> None:
        config = env.config
        n = int(config["num_envs"])
        if int(config.get("batch_size", n)) not in (0, n):
            raise ValueError(
                f"{type(self).__name__}: the pool is asynchronous (batch_size={config['batch_size']}, num_envs={n}); "
                f"only synchronous pools are supported: build it without batch_size (or with batch_size=num_envs)."
            )
        if tuple(self.batch_size) not in ((), (n,)):
            raise ValueError(f"{type(self).__name__}: batch_size {tuple(self.batch_size)} contradicts the pool's num_envs={n}.")
        if tuple(self.batch_size) != (n,):
            self.batch_size = torch.Size([n])
        batch, device = (n,), self.device
        cat = self._categorical_action_encoding
        obs_space, act_space = pool_spaces(env)
        obs_spec = gym_space_to_spec(obs_space, categorical_action_encoding=cat, device=device, batch_size=batch)
        act_spec = gym_space_to_spec(
            act_space, categorical_action_encoding=cat, device=device, batch_size=batch, remap_state_to_observation=False
        )
        obs_is_dict = space_kind(obs_space) == "Dict"
        self.observation_spec = obs_spec.clone() if obs_is_dict else Composite(observation=obs_spec, shape=batch, device=device)
        self.action_spec = Composite(action=act_spec, shape=batch, device=device) if isinstance(act_spec, Composite) else act_spec
        reward_dtype = np.dtype(env.spec.state_array_spec["reward"].dtype)
        self.reward_spec = Unbounded(shape=(n, 1), dtype=_from_numpy(np.empty(0, reward_dtype)).dtype, device=device)
        self.full_done_spec = Composite(
            {k: Categorical(2, shape=(n, 1), dtype=torch.bool, device=device) for k in ("done", "terminated", "truncated")},
            shape=batch,
            device=device,
        )
        read = _obs_plan(obs_space, obs_spec)
        self._read_obs = read if obs_is_dict else (lambda raw: {"observation": read(raw)})
        self._write_action = action_writer(act_space, act_spec, 1)
        self._io = PoolIO(env)
        self._nested_obs = any(isinstance(v, Composite) for v in self.observation_spec.values())
        self._num_envs = n
        self._all_ids = np.arange(n, dtype=np.int32)
        self._move_to = None if device is None or device.type == "cpu" else device
        self._checked = False
        self._forget_state()

    def _forget_state(self) -> None:
        """No sub-env has been reset yet (a new pool): ``step`` refuses until ``reset``."""
        n = self._num_envs
        self._raw_obs = None
        self._terminated = np.zeros(n, dtype=bool)
        self._truncated = np.zeros(n, dtype=bool)
        self._pending_any = True

    # -- step -------------------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._pending_any:
            self._raise_pending()
        action = self._write_action(fast_get(tensordict, "action"))
        obs, reward, terminated, truncated, _ = self._io.step(action)
        if self._frame_skip > 1:
            obs, reward, terminated, truncated = self._repeat(action, obs, reward, terminated, truncated)
        done = terminated | truncated
        state = self.__dict__  # per-step state, written past nn.Module.__setattr__
        state["_raw_obs"], state["_terminated"], state["_truncated"] = obs, terminated, truncated
        if done.any():
            state["_pending_any"] = True
        out = self._read_obs(obs)
        out["reward"] = _from_numpy(reward[:, None])
        out["done"] = _from_numpy(done[:, None])
        out["terminated"] = _from_numpy(terminated[:, None])
        out["truncated"] = _from_numpy(truncated[:, None])
        return self._finish(out, "step")

    def _finish(self, out: dict, where: str) -> TensorDictBase:
        batch, device = self._batch_size, self._device
        td = _as_td(out, batch, device) if self._nested_obs else new_td(out, batch, device)
        if self._move_to is not None:
            td = td.to(self._move_to, non_blocking=True)
        if not self._checked:
            self._check_output(td, where)
        return td

    def _check_output(self, td: TensorDictBase, where: str) -> None:
        """Compares the first output's observations with the specs (then trusted: they cannot change)."""
        for key, leaf in self.full_observation_spec.items(True, True):
            value = td.get(key, None)
            if value is None or value.shape != leaf.shape or value.dtype != leaf.dtype:
                got = "missing" if value is None else f"shape {tuple(value.shape)}, dtype {value.dtype}"
                raise RuntimeError(
                    f"{type(self).__name__}.{where}: observation {key!r} from EnvPool is {got}; its spec (from the pool's "
                    f"observation space) has shape {tuple(leaf.shape)}, dtype {leaf.dtype}."
                )
        self._checked = True

    def _step_output(self, tensordict: TensorDictBase) -> TensorDictBase:
        # outputs are complete and shaped by construction: skip EnvBase's completion pass
        if self._run_type_checks:
            return super()._step_output(tensordict)
        return self._step(tensordict)

    def _repeat(self, action: Any, obs: Any, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray) -> tuple:
        """``frame_skip - 1`` more steps for the sub-envs whose episode goes on; rewards are summed."""
        io = self._io
        reward = np.array(reward, copy=True)
        terminated, truncated = terminated.copy(), truncated.copy()
        for _ in range(self._frame_skip - 1):
            alive = ~(terminated | truncated)
            if alive.all():
                o, r, te, tr, ids = io.step(action)
            elif alive.any():
                rows = np.flatnonzero(alive).astype(np.int32)
                o, r, te, tr, ids = io.step(_take_rows(action, rows), rows)
            else:
                break
            scatter_rows(obs, ids, o)  # obs is this step's own fresh array: safe to edit
            reward[ids] += r
            terminated[ids] = te
            truncated[ids] = tr
        return obs, reward, terminated, truncated

    def _raise_pending(self) -> None:
        if self._raw_obs is None:
            raise RuntimeError(
                f"{type(self).__name__}.step: the env has not been reset since its pool was built; call env.reset() "
                f"first (set_seed builds a new pool, so reset after seeding too)."
            )
        ids = np.flatnonzero(self._terminated | self._truncated).tolist()
        raise RuntimeError(
            f"{type(self).__name__}.step: sub-envs {ids} finished their episode and were not reset; EnvPool would restart "
            f"them on this step, ignore their actions and report a new episode's first observation as the outcome. "
            f"Reset them first: env.reset(td) with td['_reset'] marking them (env.step_and_maybe_reset and env.rollout "
            f"do this), or env.reset() for all."
        )

    # -- reset ------------------------------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        if kwargs:
            raise TypeError(f"{type(self).__name__}.reset: unexpected keyword argument(s) {sorted(kwargs)}.")
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        if mask is not None:
            mask = mask.numpy(force=True).reshape(-1)
        return self._finish(self._restart(mask), "reset")

    def _restart(self, mask: np.ndarray | None) -> dict:
        """Resets the sub-envs in ``mask`` (all when ``None``); returns every sub-env's current entries."""
        if mask is None or self._raw_obs is None or mask.all():
            obs, ids = self._io.reset()
            if not np.array_equal(ids, self._all_ids):
                obs = scatter_rows(copy_rows(obs), ids, obs)
            terminated = np.zeros(self._num_envs, dtype=bool)
            truncated = terminated.copy()
        else:
            rows = np.flatnonzero(mask).astype(np.int32)
            # copies: the cached rows back the tensors handed out by the previous step
            obs = copy_rows(self._raw_obs)
            terminated, truncated = self._terminated.copy(), self._truncated.copy()
            if rows.size:
                fresh, ids = self._io.reset(rows)
                scatter_rows(obs, ids, fresh)
                terminated[rows] = False
                truncated[rows] = False
        done = terminated | truncated
        state = self.__dict__  # per-episode state, written past nn.Module.__setattr__ (as in _step)
        state["_raw_obs"], state["_terminated"], state["_truncated"] = obs, terminated, truncated
        state["_pending_any"] = bool(done.any())
        out = self._read_obs(obs)
        out["done"] = _from_numpy(done[:, None])
        out["terminated"] = _from_numpy(terminated[:, None])
        out["truncated"] = _from_numpy(truncated[:, None])
        return out

    def step_and_maybe_reset(self, tensordict: TensorDictBase) -> tuple[TensorDictBase, TensorDictBase]:
        """Steps, then restarts the sub-envs whose episode ended: ``(tensordict_with_next, next_input)``.

        ``tensordict["next"]`` keeps each episode's final observation; ``next_input`` (``step_mdp`` of the
        result) holds the new episodes' first observations where a sub-env was restarted — what
        ``env.reset(next_input)`` with ``"_reset"`` masks on the finished sub-envs gives, done in one pass.
        """
        tensordict = self.step(tensordict)
        next_input = self.step_mdp(tensordict)
        if self._pending_any:
            ended = self._terminated | self._truncated
            out = self._finish(self._restart(ended), "reset")
            if not ended.all():  # as EnvBase.reset: the restarted rows' other entries (the action...) are zeroed
                blend_partial_reset(next_input, out, {(): torch.from_numpy(ended)}, outputs_hold_all_rows=True)
            next_input.update(out)
        return tensordict, next_input

    # -- seeding, info ----------------------------------------------------------------------------------
    def _set_seed(self, seed: int | None) -> None:
        """Builds a new pool seeded ``seed, seed + 1, ...`` (EnvPool seeds are fixed at construction)."""
        if seed is None:
            return
        seed = fold_seed(seed, self._num_envs)
        old = self._env
        new = rebuild_with_seed(old, seed)
        old.close()
        self._env = new
        self._io = PoolIO(new)
        self._forget_state()
        torchrl_logger.debug(f"{type(self).__name__}: rebuilt the pool with seed {seed}.")

    @property
    def lib(self):
        """The ``envpool`` module."""
        return import_envpool()

    @_classproperty
    def available_envs(cls) -> list[str]:
        """EnvPool's task ids (empty when ``envpool`` is not installed)."""
        try:
            return list(import_envpool().list_all_envs())
        except ImportError:
            return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={type(self._env).__name__}, batch_size={self.batch_size}, device={self.device})"


class MultiThreadedEnv(MultiThreadedEnvWrapper):
    """EnvPool environments built by task id: ``num_workers`` sub-envs stepped on a C++ thread pool.

    An alternative to :class:`~torchrl.envs.ParallelEnv` for environments that EnvPool implements: threads
    instead of processes, no pickling, no spawning. Only EnvPool's synchronous mode is used (every step
    moves all ``num_workers`` sub-envs).

    Args:
        num_workers (int): number of sub-envs; the env's batch size is ``(num_workers,)``.
        env_name (str): an EnvPool task id (``envpool.list_all_envs()``), e.g. ``"CartPole-v1"``,
            ``"Pendulum-v1"``, ``"Pong-v5"``.

    Keyword Args:
        create_env_kwargs (dict, optional): passed to ``envpool.make`` (``seed``, ``max_episode_steps``,
            ``num_threads``, ``env_type`` — ``"gymnasium"`` by default, or ``"dm"`` —, task options).
        categorical_action_encoding, frame_skip, disable_env_checker, device, allow_done_after_reset,
        run_type_checks: see :class:`MultiThreadedEnvWrapper`.

    Raises:
        ImportError: ``envpool`` is not installed.
        TypeError: ``env_name`` is not a string, or ``create_env_kwargs`` is not a dict.
        ValueError: ``num_workers`` is not a positive integer, ``env_name`` is not an EnvPool task (the
            message lists close matches), or ``create_env_kwargs`` sets ``num_envs``/``batch_size`` to
            something other than ``num_workers``.

    Examples:
        >>> from torchrl.envs.libs.envpool import MultiThreadedEnv
        >>> env = MultiThreadedEnv(2, "Pendulum-v1", create_env_kwargs={"seed": 0})
        >>> td = env.rollout(3)
        >>> td["next", "reward"].shape, env.action_spec.shape
        (torch.Size([2, 3, 1]), torch.Size([2, 1]))
    """

    def __init__(self, num_workers: int, env_name: str, *, create_env_kwargs: dict | None = None, **kwargs) -> None:
        kwargs["num_workers"] = num_workers
        kwargs["env_name"] = env_name
        kwargs["create_env_kwargs"] = create_env_kwargs
        super().__init__(**kwargs)

    def _allowed_kwargs(self) -> tuple[str, ...]:
        return _BUILDER_OPTIONS

    def _check_kwargs(self, kwargs: dict) -> None:
        if "env" in kwargs:
            raise TypeError("MultiThreadedEnv: pass a task id, not env=...; use MultiThreadedEnvWrapper(pool) to wrap a pool.")
        num_workers, env_name = kwargs.get("num_workers"), kwargs.get("env_name")
        if not isinstance(num_workers, (int, np.integer)) or isinstance(num_workers, bool) or num_workers < 1:
            raise ValueError(f"MultiThreadedEnv: num_workers must be a positive integer, got {num_workers!r}.")
        if not isinstance(env_name, str):
            raise TypeError(f"MultiThreadedEnv: env_name must be an EnvPool task id (str), got {type(env_name).__name__}.")
        create = kwargs.get("create_env_kwargs")
        if create is not None and not isinstance(create, dict):
            raise TypeError(f"MultiThreadedEnv: create_env_kwargs must be a dict, got {type(create).__name__}.")
        for key in ("num_envs", "batch_size"):
            if create and key in create and create[key] != num_workers:
                raise ValueError(
                    f"MultiThreadedEnv: create_env_kwargs[{key!r}]={create[key]!r} contradicts num_workers={num_workers}; "
                    f"the number of sub-envs is num_workers (asynchronous pools are not supported)."
                )
        super()._check_kwargs(kwargs)

    def _build_env(self, num_workers: int, env_name: str, create_env_kwargs: dict | None = None, **options) -> Any:
        envpool = import_envpool()
        known = envpool.list_all_envs()
        if env_name not in known:
            close = difflib.get_close_matches(env_name, known, n=5)
            hint = f" Close matches: {close}." if close else " See envpool.list_all_envs()."
            raise ValueError(f"MultiThreadedEnv: {env_name!r} is not an EnvPool task id.{hint}")
        kwargs = dict(create_env_kwargs or {})
        kwargs.pop("num_envs", None)
        kwargs.setdefault("env_type", "gymnasium")
        return envpool.make(env_name, num_envs=int(num_workers), **kwargs)

    @property
    def env_name(self) -> str:
        """The task id the pool was built from."""
        return self._constructor_kwargs["env_name"]

    @property
    def num_workers(self) -> int:
        """The number of sub-envs."""
        return self._num_envs

    def __repr__(self) -> str:
        return f"MultiThreadedEnv(env={self.env_name}, num_workers={self.num_workers}, device={self.device})"
