"""Gymnasium (and legacy gym 0.26) environments: ``GymWrapper``, ``GymEnv``, ``set_gym_backend``, ``gym_backend``.

``GymWrapper`` wraps an env object; ``GymEnv`` builds one by id. Specs come from the spaces once
(``_gym_specs``), and so do the per-step conversion closures (``_gym_utils``): a step is the gym step,
one numpy copy and one ``torch.from_numpy`` per leaf, and one TensorDict. Vector envs (``num_envs=N``,
or any ``gymnasium.vector`` env) get batch size ``(N,)``; their autoreset is mapped onto TorchRL's
partial resets by ``_gym_vec`` so that no step mixes two episodes.
"""
from __future__ import annotations

import copy
import difflib
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from torchrl._utils._check_mode import check_mode
from torchrl._utils._optional import has_module
from torchrl._fast import fast_get, new_td
from torchrl.data.tensor_specs import Bounded, Categorical, Composite, Unbounded
from torchrl.envs.common import EnvBase
from torchrl.envs.gym_like import GymLikeEnv
from torchrl.envs.libs._gym_backend import gym_backend, lib_version, library_of, set_gym_backend
from torchrl.envs.libs._gym_columns import GymColumns, row_stepper
from torchrl.envs.libs._gym_specs import gym_space_to_spec, register_gym_spec_conversion
from torchrl.envs.libs._gym_utils import action_writer, obs_reader, space_kind
from torchrl.envs.libs._gym_vec import VecAutoreset, gymnasium_disabled_autoreset, is_vector_env

__all__ = ["GymEnv", "GymWrapper"]

#: Optional-library availability flags (TorchRL's names), found without importing the libraries.
_has_gym = has_module("gymnasium") or has_module("gym")
_has_mo = has_module("mo_gymnasium")
_has_sb3 = has_module("stable_baselines3")
_has_minigrid = has_module("minigrid")
_has_isaaclab = has_module("isaaclab")

_from_numpy = torch.from_numpy
_WRAPPER_OPTIONS = ("categorical_action_encoding", "from_pixels", "pixels_only", "frame_skip", "convert_actions_to_numpy")


def _scalar(x: Any, dtype: type) -> torch.Tensor:
    """A ``(1,)`` tensor holding the scalar ``x`` (also accepts one-element arrays)."""
    a = np.array((x,), dtype)
    if a.ndim != 1:
        a = a.reshape(1)
    return _from_numpy(a)


def _inherited(cls: type, base: type, *names: str) -> bool:
    """Whether ``cls`` uses ``base``'s definitions of ``names`` (no subclass overrides them)."""
    return all(getattr(cls, name) is getattr(base, name) for name in names)


class _classproperty:
    def __init__(self, fget) -> None:
        self.fget = fget

    def __get__(self, obj: Any, owner: type) -> Any:
        return self.fget(owner)


def _registry_ids() -> list[str]:
    return list(gym_backend().envs.registry.keys())


class GymWrapper(GymLikeEnv):
    """Wraps a gymnasium (or gym 0.26) environment, single or vectorized.

    Args:
        env: the environment (a ``gymnasium.Env``, a ``gymnasium.vector.VectorEnv``, or their gym 0.26
            counterparts). A vector env gives the TorchRL env a batch size of ``(num_envs,)``.
        categorical_action_encoding (bool, optional): map ``Discrete``/``MultiDiscrete`` spaces to
            ``Categorical``/``MultiCategorical`` specs (integer indices) instead of ``OneHot``/``MultiOneHot``.
            Defaults to ``False``.

    Keyword Args:
        from_pixels (bool, optional): add ``env.render()`` frames under ``"pixels"`` (uint8, ``(H, W, 3)``).
            The env must render ``"rgb_array"`` frames. Defaults to ``False``.
        pixels_only (bool, optional): with ``from_pixels``, drop the env's own observations. Defaults to
            ``False``.
        frame_skip (int, optional): repeat each action this many times, summing rewards and stopping early
            at the end of an episode. Defaults to 1.
        convert_actions_to_numpy (bool, optional): pass actions as numpy (``int`` for ``Discrete``) rather
            than tensors. Defaults to ``True``.
        device, batch_size, allow_done_after_reset, run_type_checks: as for :class:`~torchrl.envs.EnvBase`.

    Observations go under ``"observation"`` (or the keys of a ``Dict`` observation, a top-level
    ``"state"`` key being renamed ``"observation"``); dtypes are kept (float64 observations stay
    float64). ``terminated``/``truncated`` are passed on as the env reports them, ``done`` is their or.
    ``info`` is dropped unless readers are registered (:meth:`set_info_dict_reader`). ``set_seed(s)``
    resets the gym env with ``env.reset(seed=s)`` at once (as TorchRL does), so the next ``reset()`` gives the
    state that follows the seeded one.

    Raises:
        TypeError: ``env`` is not a gym env, or an option is unknown.
        ValueError: ``frame_skip < 1``; ``from_pixels`` with an env that does not render rgb arrays;
            a ``batch_size`` that contradicts the env.

    Examples:
        >>> import gymnasium
        >>> from torchrl.envs.libs.gym import GymWrapper
        >>> env = GymWrapper(gymnasium.make("Pendulum-v1"))
        >>> td = env.rand_step(env.reset())
        >>> td["next", "observation"].shape, td["next", "reward"].shape
        (torch.Size([3]), torch.Size([1]))
    """

    git_url = "https://github.com/Farama-Foundation/Gymnasium"
    libname = "gymnasium"
    # set by _check_kwargs / _make_specs; class defaults so that reads always hit
    _from_pixels: bool = False
    _vec: VecAutoreset | None = None
    _dict_action: bool = False
    _inlined_step: bool = False  # _step may take its inlined path (see _can_inline_step)
    _plain_step: bool = False  # the whole step is GymWrapper's: loops may run it without TensorDicts

    def __init__(self, env=None, categorical_action_encoding: bool = False, **kwargs) -> None:
        run_type_checks = kwargs.pop("run_type_checks", False)
        if env is not None:
            kwargs["env"] = env
        kwargs["categorical_action_encoding"] = categorical_action_encoding
        super().__init__(**kwargs)
        if run_type_checks:
            self.run_type_checks = True

    # -- construction -----------------------------------------------------------------------------------
    def _allowed_kwargs(self) -> tuple[str, ...]:
        return ("env", *_WRAPPER_OPTIONS)

    def _check_kwargs(self, kwargs: dict) -> None:
        allowed = self._allowed_kwargs()
        if allowed:
            unknown = sorted(k for k in kwargs if k not in allowed)
            if unknown:
                raise TypeError(f"{type(self).__name__}: unexpected keyword argument(s) {unknown}; accepted: {sorted(allowed)}.")
        frame_skip = kwargs.get("frame_skip")
        frame_skip = 1 if frame_skip is None else frame_skip
        if not isinstance(frame_skip, (int, np.integer)) or frame_skip < 1:
            raise ValueError(f"{type(self).__name__}: frame_skip must be an integer >= 1, got {frame_skip!r}.")
        self._frame_skip = int(frame_skip)
        self._categorical_action_encoding = bool(kwargs.get("categorical_action_encoding", False))
        self._from_pixels = bool(kwargs.get("from_pixels", False))
        self._pixels_only = bool(kwargs.get("pixels_only", False))
        self._convert_actions_to_numpy = bool(kwargs.get("convert_actions_to_numpy", True))
        if self._pixels_only and not self._from_pixels:
            raise ValueError(f"{type(self).__name__}: pixels_only=True needs from_pixels=True.")

    def _build_env(self, env=None, **options) -> Any:
        if env is None:
            raise TypeError(f"{type(self).__name__}: pass the environment to wrap, e.g. GymWrapper(gymnasium.make('CartPole-v1')).")
        if library_of(env) is None:
            raise TypeError(
                f"{type(self).__name__}: expected a gymnasium or gym environment (Env or vector.VectorEnv), got "
                f"{type(env).__module__}.{type(env).__name__}. Use GymEnv('<env id>') to build one by name."
            )
        return env

    def _make_specs(self, env: Any) -> None:
        lib = self._lib = library_of(env)
        vector = is_vector_env(env, lib)
        if vector:
            n = int(env.num_envs)
            if tuple(self.batch_size) not in ((), (n,)):
                raise ValueError(f"{type(self).__name__}: batch_size {tuple(self.batch_size)} contradicts the vector env's num_envs={n}.")
            if tuple(self.batch_size) != (n,):
                self.batch_size = torch.Size([n])
            obs_space, act_space = env.single_observation_space, env.single_action_space
            self._vec = VecAutoreset(env, lib)
        else:
            if tuple(self.batch_size):
                raise ValueError(
                    f"{type(self).__name__}: batch_size {tuple(self.batch_size)} given for a single (non-vector) env; "
                    f"wrap a vector env (gymnasium.make_vec) or use GymEnv(..., num_envs=N) for batches."
                )
            obs_space, act_space = env.observation_space, env.action_space
            self._vec = None
        batch = tuple(self.batch_size)
        nb, device = len(batch), self.device
        cat = self._categorical_action_encoding
        obs_spec = gym_space_to_spec(obs_space, categorical_action_encoding=cat, device=device, batch_size=batch)
        act_spec = gym_space_to_spec(
            act_space, categorical_action_encoding=cat, device=device, batch_size=batch, remap_state_to_observation=False
        )
        obs_is_dict = space_kind(obs_space) == "Dict"
        observation = obs_spec.clone() if obs_is_dict else Composite(observation=obs_spec, shape=batch, device=device)
        read = obs_reader(obs_space, obs_spec, nb)
        if self._from_pixels:
            frame = self._probe_render(env)
            pixels = Bounded(0, 255, shape=(*batch, *frame.shape[nb:]), dtype=torch.uint8, device=device)
            if self._pixels_only:
                observation = Composite(pixels=pixels, shape=batch, device=device)
            else:
                observation["pixels"] = pixels
        self.observation_spec = observation
        # a Dict action space: its entries are the env's action keys, at the root (as in TorchRL)
        self._dict_action = isinstance(act_spec, Composite)
        if self._dict_action:
            self.full_action_spec = act_spec
        else:
            self.action_spec = act_spec
        self.reward_spec = Unbounded(shape=(*batch, 1), dtype=torch.float32, device=device)
        self.full_done_spec = Composite(
            {k: Categorical(2, shape=(*batch, 1), dtype=torch.bool, device=device) for k in ("done", "terminated", "truncated")},
            shape=batch,
            device=device,
        )
        self._read_obs = self._compile_obs_reader(env, read, obs_is_dict, nb)
        self._write_action = action_writer(act_space, act_spec, nb) if self._convert_actions_to_numpy else (lambda t: t)
        self._inlined_step = self._can_inline_step(lib)
        # the whole step is this class's (not a subclass's): loops may then step it without TensorDicts
        self._plain_step = self._inlined_step and _inherited(type(self), GymWrapper, "_step", "_step_output")

    def _can_inline_step(self, lib: Any) -> bool:
        """Whether :meth:`_step` may take the inlined path (5-tuple step API, no frame skip, hooks as defined here)."""
        cls = type(self)
        hooks_untouched = _inherited(cls, GymWrapper, "read_obs", "read_action", "_output_transform") and _inherited(
            cls, GymLikeEnv, "read_reward", "read_done"
        )
        new_api = lib.__name__ == "gymnasium" or lib_version(lib) >= (0, 26)
        return hooks_untouched and new_api and self._frame_skip == 1 and not self._dict_action

    def _compile_obs_reader(self, env: Any, read, obs_is_dict: bool, nb: int):
        if self._from_pixels:
            render = env.render
            stack = np.stack if nb else np.array
            pixels_only = self._pixels_only

            def read_pixels(obs: Any) -> dict:
                out = {} if pixels_only else (read(obs) if obs_is_dict else {"observation": read(obs)})
                out["pixels"] = _from_numpy(stack(render()))
                return out

            return read_pixels
        if obs_is_dict:
            return read
        return lambda obs: {"observation": read(obs)}

    def _probe_render(self, env: Any) -> np.ndarray:
        mode = getattr(env, "render_mode", None)
        if mode != "rgb_array":
            raise ValueError(
                f"{type(self).__name__}: from_pixels=True needs an env that renders 'rgb_array' frames; this one has "
                f"render_mode={mode!r}. Build it with render_mode='rgb_array' (GymEnv does this for you)."
            )
        env.reset()
        frame = env.render()
        if frame is None:
            raise ValueError(f"{type(self).__name__}: env.render() returned None although render_mode='rgb_array'.")
        frame = np.stack(frame) if isinstance(frame, (tuple, list)) else np.asarray(frame)
        if frame.dtype != np.uint8:
            raise ValueError(f"{type(self).__name__}: env.render() returned {frame.dtype} frames; expected uint8 rgb arrays.")
        return frame

    # -- per-step hooks --------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self._inlined_step:
            return super()._step(tensordict)
        plan = self._plan or self._get_plan()
        obs, reward, terminated, truncated, info = self._env.step(self._write_action(fast_get(tensordict, plan.action_key)))
        vec = self._vec
        if vec is None:
            # a single env: Python/numpy scalars -> (1,) tensors, inlined (this is the hot path)
            out = self._read_obs(obs)
            out["reward"] = _scalar(reward, np.float32)
            out["terminated"] = _scalar(terminated, np.bool_)
            out["truncated"] = _scalar(truncated, np.bool_)
            out["done"] = _scalar(terminated or truncated, np.bool_)
        else:
            obs = vec.after_step(obs, terminated, truncated, info)
            out = self._read_obs(obs)
            out["reward"] = plan.reward_encode(reward)
            encode = plan.flag_encode
            out["terminated"] = encode(terminated)
            out["truncated"] = encode(truncated)
            out["done"] = encode(terminated | truncated)
        td = new_td(out, plan.batch, plan.device)
        for reader in self._info_dict_reader:
            td = reader(info, td)
        if plan.move_to is not None:
            td = td.to(plan.move_to, non_blocking=True)
        if not self._validated:
            self._validate(td, "step")
        return td

    def _step_output(self, tensordict: TensorDictBase) -> TensorDictBase:
        # Once the first step matched the specs, our outputs are complete and correctly shaped by
        # construction: EnvBase's completion of done keys and reshaping of rewards would be no-ops.
        if (self._validated or self._fast_encoding) and not self._run_type_checks:
            return self._step(tensordict)
        return super()._step_output(tensordict)

    def _column_loop(self, policy):
        if not _inherited(type(self), EnvBase, "step", "step_and_maybe_reset", "step_mdp"):
            return None  # a rollout-level override must see every step
        if check_mode():
            return None  # check mode: every action goes through step()'s checks
        return GymColumns.plan(self, policy)

    def _row_stepper(self, in_keys, in_views, out_keys, out_views):
        return row_stepper(self, in_keys, in_views, out_keys, out_views)

    def _action_from(self, tensordict: TensorDictBase) -> Any:
        if self._dict_action:
            return tensordict  # the Dict action's writer reads its keys from the root
        return super()._action_from(tensordict)

    def read_action(self, action):
        """The action as the wrapped env expects it (``int`` for ``Discrete``, numpy arrays otherwise)."""
        return self._write_action(action)

    def read_obs(self, observations):
        """``{key: tensor}`` for one observation (plus ``"pixels"`` from ``env.render()`` with ``from_pixels``)."""
        return self._read_obs(observations)

    def _output_transform(self, step_outputs: tuple) -> tuple:
        if len(step_outputs) != 5:
            return super()._output_transform(step_outputs)
        obs, reward, terminated, truncated, info = step_outputs
        vec = self._vec
        if vec is not None:
            obs = vec.after_step(obs, terminated, truncated, info)
        return obs, reward, terminated, truncated, terminated | truncated, info

    def _reset_env(self, tensordict: TensorDictBase | None, kwargs: dict) -> Any:
        seed = kwargs.pop("seed", None)
        options = kwargs.pop("options", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__}.reset: unexpected keyword argument(s) {sorted(kwargs)}; accepted: seed, options.")
        if seed is not None:
            self._seed_spaces(seed)
        vec = self._vec
        if vec is not None:
            mask = tensordict.get("_reset", None) if tensordict is not None else None
            if mask is not None:
                mask = mask.numpy(force=True).reshape(-1)
            return vec.reset(mask, seed, options)
        reset_kwargs = {}
        if seed is not None:
            reset_kwargs["seed"] = int(seed)
        if options is not None:
            reset_kwargs["options"] = options
        return self._env.reset(**reset_kwargs)

    def _seed_spaces(self, seed: int) -> None:
        for space in (getattr(self._env, "action_space", None), getattr(self._env, "observation_space", None)):
            if space is not None and hasattr(space, "seed"):
                space.seed(int(seed))

    def _set_seed(self, seed: int | None) -> None:
        """Resets the gym env with ``seed`` now (``env.reset(seed=seed)``; sub-env ``i`` of a vector env gets
        ``seed + i``), as TorchRL does: the next :meth:`reset` continues the seeded sequence."""
        if seed is not None:
            self._reset_env(None, {"seed": int(seed)})

    # -- public API ----------------------------------------------------------------------------------------
    @_classproperty
    def available_envs(cls) -> list[str]:
        """Ids of the environments registered with the current gym backend."""
        return _registry_ids()

    @property
    def lib(self):
        """The gym library (module) the wrapped env comes from."""
        return self._lib

    @staticmethod
    def get_library_name(env) -> str:
        """``"gymnasium"`` or ``"gym"``: the library ``env`` comes from."""
        lib = library_of(env)
        if lib is None:
            raise TypeError(f"GymWrapper.get_library_name: {type(env).__name__} is not a gymnasium or gym environment.")
        return lib.__name__

    def rebuild_with_kwargs(self, **new_kwargs):
        """Rebuilds the wrapped env (and the specs) with updated constructor arguments, in place."""
        kwargs = {**self._constructor_kwargs, **new_kwargs}
        self._check_kwargs(kwargs)
        old = self._env
        env = self._build_env(**kwargs)
        if old is not None and old is not env and hasattr(old, "close"):
            old.close()
        self._constructor_kwargs = kwargs
        self.set_spec_lock_(False)
        self._batch_size = torch.Size([])
        self._init_specs()
        self._env = env
        self._make_specs(env)
        for reader in self._info_dict_reader:
            self._register_info_spec(reader)
        self._validated = False
        self._post_init(spec_locked=True)

    def _probe_infos(self) -> list[dict]:
        """As the base class, but the wrapped env's random state is restored afterwards: reading the info
        layout does not move a seeded sequence of resets (see :meth:`_set_seed`)."""
        envs = [getattr(e, "unwrapped", e) for e in getattr(self._env, "envs", [self._env])]
        saved = [copy.deepcopy(e.__dict__.get("_np_random")) for e in envs]
        try:
            return super()._probe_infos()
        finally:
            for e, rng in zip(envs, saved):
                if rng is not None:
                    e.__dict__["_np_random"] = rng

    def _after_probe(self) -> None:
        vec = self._vec
        if vec is not None:
            vec.pending = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self._env}, batch_size={self.batch_size}, device={self.device})"


class GymEnv(GymWrapper):
    """A gymnasium (or gym 0.26) environment built by id.

    Args:
        env_name (str): the id registered with gym (``"CartPole-v1"``, ``"HalfCheetah-v5"``, ...).
        categorical_action_encoding (bool, optional): see :class:`GymWrapper`. Defaults to ``False``.

    Keyword Args:
        num_envs (int, optional): build a vector env of this many sub-envs (batch size ``(num_envs,)``).
            Defaults to ``None`` (a single env).
        vectorization_mode (str, optional): ``"async"`` (the default; sub-envs in worker processes) or
            ``"sync"``, for ``num_envs``.
        disable_env_checker (bool, optional): skip gym's env checker. Defaults to ``True``.
        render_mode (str, optional): passed to ``gym.make``; ``from_pixels`` sets it to ``"rgb_array"``.
        from_pixels, pixels_only, frame_skip, convert_actions_to_numpy, device, batch_size,
        allow_done_after_reset: see :class:`GymWrapper`.
        **kwargs: anything else goes to ``gym.make`` (e.g. ``max_episode_steps``, ``g=9.81``).

    Raises:
        TypeError: ``env_name`` is not a string.
        gymnasium.error.Error: unknown id (the message lists close matches); other errors of ``gym.make``.

    Examples:
        >>> from torchrl.envs.libs.gym import GymEnv
        >>> env = GymEnv("CartPole-v1")
        >>> env.observation_spec["observation"].shape[-1], env.action_spec.shape
        (4, torch.Size([2]))
        >>> env.rollout(10, break_when_any_done=False).batch_size
        torch.Size([10])
        >>> GymEnv("CartPole-v1", num_envs=2, vectorization_mode="sync").rollout(3).batch_size
        torch.Size([2, 3])
    """

    def __init__(self, env_name: str | None = None, categorical_action_encoding: bool = False, **kwargs) -> None:
        if env_name is None:
            env_name = kwargs.pop("env_name", None)
        kwargs["env_name"] = env_name
        super().__init__(categorical_action_encoding=categorical_action_encoding, **kwargs)

    def _allowed_kwargs(self) -> tuple[str, ...]:
        return ()  # anything else is a gym.make argument

    def _check_kwargs(self, kwargs: dict) -> None:
        name = kwargs.get("env_name")
        if not isinstance(name, str):
            raise TypeError(f"GymEnv: env_name must be a registered environment id (str), got {type(name).__name__}.")
        if "env" in kwargs:
            raise TypeError("GymEnv: pass an env id, not env=...; use GymWrapper(env) to wrap an existing env.")
        num_envs = kwargs.get("num_envs")
        if num_envs is not None and (not isinstance(num_envs, (int, np.integer)) or num_envs < 1):
            raise ValueError(f"GymEnv: num_envs must be a positive integer, got {num_envs!r}.")
        super()._check_kwargs(kwargs)

    def _build_env(self, env_name: str, **kwargs) -> Any:
        for key in _WRAPPER_OPTIONS:
            kwargs.pop(key, None)
        num_envs = kwargs.pop("num_envs", None)
        mode = kwargs.pop("vectorization_mode", None)
        kwargs.setdefault("disable_env_checker", True)
        if self._from_pixels:
            kwargs.setdefault("render_mode", "rgb_array")
        lib = gym_backend()
        self._lib = lib
        try:
            if num_envs is None:
                return lib.make(env_name, **kwargs)
            return self._make_vector(lib, env_name, int(num_envs), mode, kwargs)
        except getattr(lib.error, "Error", Exception) as err:
            close = difflib.get_close_matches(env_name, _registry_ids(), n=5)
            if close and env_name not in close:
                err.add_note(f"GymEnv: {env_name!r} is not a registered id; close matches: {close}.")
            raise

    @staticmethod
    def _make_vector(lib, env_name: str, num_envs: int, mode: str | None, kwargs: dict) -> Any:
        mode = mode or "async"
        if mode not in ("async", "sync"):
            raise ValueError(f"GymEnv: vectorization_mode must be 'async' or 'sync', got {mode!r}.")
        if hasattr(lib, "make_vec"):
            vector_kwargs = gymnasium_disabled_autoreset(lib)
            if lib_version(lib) >= (1, 0):
                return lib.make_vec(env_name, num_envs=num_envs, vectorization_mode=mode, vector_kwargs=vector_kwargs, **kwargs)
        return lib.vector.make(env_name, num_envs=num_envs, asynchronous=mode == "async", **kwargs)

    @property
    def env_name(self) -> str:
        """The id the env was built from."""
        return self._constructor_kwargs["env_name"]

    def __repr__(self) -> str:
        return f"GymEnv(env={self.env_name}, batch_size={self.batch_size}, device={self.device})"
