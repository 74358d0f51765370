"""Vector gym envs under TorchRL's reset contract: step data never mixes two episodes.

TorchRL steps all sub-envs, then resets the finished ones (``"_reset"`` mask). Gym vector envs reset
finished sub-envs on their own, in one of three ways (gymnasium's ``metadata["autoreset_mode"]``):

- ``NEXT_STEP`` (the default): the step *after* the end ignores its action and returns the first
  observation of the next episode. The end step itself is right, so we restart finished sub-envs
  ourselves with ``reset(options={"reset_mask": mask})`` (gymnasium >= 1.1 ``SyncVectorEnv`` /
  ``AsyncVectorEnv``), which also cancels the pending autoreset.
- ``DISABLED``: the same partial reset, which this mode requires anyway. ``GymEnv(..., num_envs=N)``
  builds its vector envs in this mode.
- ``SAME_STEP`` (and the legacy ``gym`` 0.26 / gymnasium < 1.0 vector API): the end step already
  holds the next episode's first observation; the real last one is in ``info["final_obs"]``
  (``"final_observation"``). We put the final observation back into the step's output and keep the new
  one until TorchRL asks for the reset.
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from torchrl.envs.libs._gym_backend import lib_version
from torchrl.envs.libs._gym_utils import copy_tree, set_rows

__all__ = ["VecAutoreset", "is_vector_env"]


def is_vector_env(env: Any, lib: Any) -> bool:
    vector = getattr(lib, "vector", None)
    base = getattr(vector, "VectorEnv", None) if vector is not None else None
    return base is not None and isinstance(env, base)


def _mode_name(env: Any) -> str | None:
    mode = getattr(env, "metadata", {}).get("autoreset_mode")
    if mode is None:
        return None
    return getattr(mode, "value", str(mode))


class VecAutoreset:
    """Bookkeeping that turns a gym vector env's autoreset into TorchRL partial resets (see module docs)."""

    def __init__(self, env: Any, lib: Any) -> None:
        self.env = env
        self.num_envs = int(env.num_envs)
        mode = _mode_name(env)
        self.mode = mode or "SameStep"
        self.same_step = self.mode == "SameStep"
        self.final_key = "final_obs" if mode is not None else "final_observation"
        base = getattr(env, "unwrapped", env)
        vector = lib.vector
        maskable = ()
        if lib.__name__ == "gymnasium" and lib_version(lib) >= (1, 1):
            maskable = (vector.SyncVectorEnv, vector.AsyncVectorEnv)
        self.masked_reset = isinstance(base, maskable) or self.mode == "Disabled"
        self.pending: np.ndarray | None = None
        self.reset_obs: Any = None
        self.last_obs: Any = None

    def describe(self) -> str:
        return f"{type(getattr(self.env, 'unwrapped', self.env)).__name__} (autoreset mode {self.mode})"

    def after_step(self, obs: Any, terminated: np.ndarray, truncated: np.ndarray, info: dict) -> Any:
        """The observation to report for this step (the final one where a sub-env just finished)."""
        if not self.same_step:
            self.last_obs = obs
            return obs
        done = np.logical_or(terminated, truncated).reshape(self.num_envs)
        if not done.any():
            self.pending = None
            self.last_obs = obs
            return obs
        final = info.get(self.final_key)
        if final is None:
            raise RuntimeError(
                f"GymWrapper: the vector env {self.describe()} finished sub-envs {np.flatnonzero(done).tolist()} "
                f"but its info has no {self.final_key!r} entry, so their last observations are lost."
            )
        has_final = np.asarray(info.get("_" + self.final_key, done), dtype=bool) & done
        self.reset_obs = copy_tree(obs)
        self.pending = done
        out = set_rows(copy_tree(obs), has_final, final, per_row=True)
        self.last_obs = out
        return out

    def reset(self, mask: np.ndarray | None, seed: Any, options: dict | None) -> tuple[Any, dict]:
        """Resets the sub-envs in ``mask`` (all when ``None``); returns the whole batch's observations."""
        env = self.env
        kwargs = {} if seed is None else {"seed": seed}
        if mask is None or mask.all():
            if options:
                kwargs["options"] = options
            obs, info = env.reset(**kwargs)
            self.pending = None
            self.last_obs = obs
            return obs, info
        mask = np.asarray(mask, dtype=bool).reshape(self.num_envs)
        if not mask.any():
            return self.last_obs, {}
        pending = self.pending if (self.same_step and self.pending is not None) else np.zeros_like(mask)
        need = mask & ~pending
        info: dict = {}
        if need.any() and not self.masked_reset:
            raise RuntimeError(
                f"GymWrapper: cannot reset only sub-envs {np.flatnonzero(need).tolist()} of {self.describe()}: its "
                f"reset() restarts every sub-env. Build it with gymnasium.make_vec(..., vectorization_mode='sync') "
                f"(or 'async'), whose reset takes options={{'reset_mask': ...}}, or reset all sub-envs at once."
            )
        if not self.same_step:
            obs, info = env.reset(**kwargs, options={**(options or {}), "reset_mask": mask})
            self.last_obs = obs
            return obs, info
        out = copy_tree(self.last_obs)
        if need.any():
            fresh, info = env.reset(**kwargs, options={**(options or {}), "reset_mask": need})
            out = set_rows(out, need, fresh)
        cached = mask & pending
        if cached.any():
            out = set_rows(out, cached, self.reset_obs)
        self.pending = pending & ~mask
        self.last_obs = out
        return out, info


def gymnasium_disabled_autoreset(lib: Any) -> dict:
    """``vector_kwargs`` selecting the ``DISABLED`` autoreset mode (gymnasium >= 1.1), else ``{}``."""
    if lib.__name__ != "gymnasium" or lib_version(lib) < (1, 1):
        return {}
    return {"autoreset_mode": sys.modules["gymnasium.vector"].AutoresetMode.DISABLED}
