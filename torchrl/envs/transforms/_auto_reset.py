"""Auto-resetting environments: ``AutoResetTransform`` and the ``AutoResetEnv`` that holds it.

An auto-resetting env restarts a sub-environment by itself when it is done, and the step that ends an
episode already returns the *next* episode's first observation. TorchRL's convention keeps episodes
apart: the transform stores that observation, writes fill values (or, with ``replace=False``, leaves the
data) in the step's ``"next"`` observation, and the following ``reset()`` hands the stored observation
out without calling the base env's reset. Building any env with ``auto_reset=True`` wraps it this way.
"""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import fast_get, fast_set
from torchrl.envs.common import EnvBase, register_env_hook
from torchrl.envs.transforms._compose import Compose
from torchrl.envs.transforms._transform import Transform
from torchrl.envs.transforms._transformed_env import TransformedEnv

__all__ = ["AutoResetTransform", "AutoResetEnv"]


def _fill_value(value, name: str) -> float | int | bool:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"AutoResetTransform: {name}={value!r} is not a number (e.g. 'nan', 'inf').") from None
    return value


def _as_batch_mask(done: torch.Tensor, batch: torch.Size) -> torch.Tensor:
    """A done entry reduced to one flag per sub-environment (shape ``batch``)."""
    if done.shape == batch:
        return done
    return done.reshape(*batch, -1).any(-1)


def _expand_to(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    return mask.reshape(*mask.shape, *([1] * (value.ndim - mask.ndim))).expand(value.shape)


class AutoResetTransform(Transform):
    """Stores the first observation of the next episode that an auto-resetting env returns on done.

    Must be the first transform of an :class:`AutoResetEnv` (build one with ``SomeEnv(auto_reset=True)``
    or ``AutoResetEnv(env, AutoResetTransform())``). On a step where a sub-environment is done, the
    ``"next"`` observations of that sub-environment belong to the next episode: they are stored and
    replaced by fill values (NaN for floating point, -1 for integers, False for booleans by default).
    The stored observations are returned by the next ``reset()`` of those sub-environments.

    Keyword Args:
        replace: when False, the ``"next"`` observations are left as the env returned them (they are still
            stored for the next reset); this overrides the fill values. Defaults to True.
            ``SomeEnv(auto_reset=True, auto_reset_replace=False)`` passes it.
        fill_float: fill value of floating-point observations (a number or a string such as ``"nan"``).
        fill_int: fill value of integer observations.
        fill_bool: fill value of boolean observations.

    Used standalone, ``forward`` fills the ``"next"`` observations of done steps in stored data.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Composite, Unbounded
        >>> from torchrl.envs import EnvBase
        >>> import torchrl.envs.transforms._auto_reset  # registers the auto_reset= construction option
        >>> class Countdown(EnvBase):  # resets itself: done every 3 steps
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.observation_spec = Composite(obs=Unbounded((1,)))
        ...         self.action_spec = Unbounded((1,))
        ...         self.reward_spec = Unbounded((1,))
        ...         self.t = 0
        ...     def _reset(self, td=None, **kwargs):
        ...         self.t = 0
        ...         return TensorDict(obs=torch.zeros(1))
        ...     def _step(self, td):
        ...         self.t += 1
        ...         done = self.t == 3
        ...         self.t = 0 if done else self.t
        ...         return TensorDict(obs=torch.full((1,), float(self.t)), reward=torch.ones(1), done=torch.tensor([done]))
        ...     def _set_seed(self, seed):
        ...         pass
        >>> env = Countdown(auto_reset=True)
        >>> data = env.rollout(4, break_when_any_done=False)
        >>> data["next", "obs"].squeeze(-1).tolist()
        [1.0, 2.0, nan, 1.0]
        >>> data["obs"].squeeze(-1).tolist()
        [0.0, 1.0, 2.0, 0.0]
    """

    def __init__(self, *, replace: bool | None = None, fill_float="nan", fill_int=-1, fill_bool=False) -> None:
        super().__init__()
        self.replace = True if replace is None else bool(replace)
        self.fill_float = _fill_value(fill_float, "fill_float")
        self.fill_int = int(fill_int)
        self.fill_bool = bool(fill_bool)
        self._plan: tuple | None = None
        self._saved: dict | None = None  # {obs key: tensor} of the next episodes' first observations
        self._pending: torch.Tensor | None = None  # batch-shaped bool: which sub-envs have a stored observation

    def set_container(self, container) -> None:
        super().set_container(container)
        self._plan = None
        self.clear()

    def clear(self) -> None:
        """Forgets the stored observations (the next reset calls the base env's reset)."""
        self._saved = None
        self._pending = None

    # -- structure --------------------------------------------------------------------------------------
    def _get_plan(self) -> tuple:
        """``([(obs key, fill value or None)], done keys)``, computed once from the parent env."""
        plan = self._plan
        if plan is None:
            root, parent = self._chain()[0], self.parent
            if parent is None or not isinstance(root, AutoResetEnv):
                raise RuntimeError(
                    f"AutoResetTransform must be used inside an AutoResetEnv (its env is "
                    f"{type(root).__name__ if root is not None else None}): build it with SomeEnv(auto_reset=True) or "
                    f"AutoResetEnv(env, AutoResetTransform())."
                )
            # The base env's observations: entries added by transforms placed (wrongly) before this one are
            # not the env's and are left alone.
            base_obs = parent.base_env.full_observation_spec
            obs = [
                (k, self._fill_for(leaf.dtype))
                for k, leaf in parent.full_observation_spec.items(True, True)
                if k in base_obs.keys(True, True)
            ]
            done_keys = [g.done for g in parent.done_structure.groups if g.done is not None]
            plan = self._plan = (obs, done_keys)
        return plan

    def _fill_for(self, dtype: torch.dtype):
        if dtype == torch.bool:
            return self.fill_bool
        if dtype.is_floating_point or dtype.is_complex:
            return self.fill_float
        return self.fill_int

    def _done_mask(self, data: TensorDictBase, done_keys, batch: torch.Size) -> torch.Tensor | None:
        mask = None
        for key in done_keys:
            done = fast_get(data, key)
            if done is None:
                continue
            done = _as_batch_mask(done, batch)
            mask = done if mask is None else mask | done
        return mask

    # -- data -------------------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        obs, done_keys = self._get_plan()
        for key in done_keys:
            done = fast_get(next_tensordict, key)
            if done is not None and bool(done.any()):
                break
        else:
            return next_tensordict
        batch = next_tensordict.batch_size
        done = self._done_mask(next_tensordict, done_keys, batch)
        saved, pending = self._saved, self._pending
        if saved is None or pending is None or pending.shape != batch:
            saved, pending = {}, torch.zeros(batch, dtype=torch.bool, device=done.device)
        for key, fill in obs:
            value = fast_get(next_tensordict, key)
            if not isinstance(value, torch.Tensor):
                continue
            where = _expand_to(done, value)
            previous = saved.get(key)
            saved[key] = value.clone() if previous is None else torch.where(where, value, previous)
            if self.replace:
                fast_set(next_tensordict, key, value.masked_fill(where, fill))
        self._saved, self._pending = saved, pending | done
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def _requested(self, tensordict: TensorDictBase | None, reset_keys, batch: torch.Size) -> torch.Tensor | None:
        """Batch-shaped mask of the sub-environments a reset asks for (``None``: all of them)."""
        requested = None
        if tensordict is not None:
            for reset_key in reset_keys:
                mask = fast_get(tensordict, reset_key)
                if mask is not None:
                    mask = _as_batch_mask(mask, batch)
                    requested = mask if requested is None else requested | mask
        return requested

    def _stored_reset(self, tensordict: TensorDictBase | None, base_env: EnvBase) -> TensorDictBase | None:
        """The reset output built from stored observations, or ``None`` when the base env must reset."""
        batch = base_env.batch_size
        requested = self._requested(tensordict, base_env.reset_keys, batch)
        pending = self._pending
        if pending is None or pending.shape != batch:
            return None
        full = requested is None
        if full:
            requested = torch.ones(batch, dtype=torch.bool, device=pending.device)
        if not bool((pending | ~requested).all()):
            # Some requested sub-env did not restart by itself: the base env resets them all.
            self._pending = pending & ~requested
            return None
        out = TensorDict(batch_size=batch, device=base_env.device)
        saved = self._saved
        obs, _ = self._get_plan()
        for key, _ in obs:
            value = saved.get(key)
            if value is None:
                continue
            current = None if full else fast_get(tensordict, key)
            if current is not None:
                value = torch.where(_expand_to(requested, value), value, current)
            out.set(key, value)
        for key, leaf in base_env.full_done_spec.items(True, True):
            out.set(key, leaf.zero())
        self._pending = pending & ~requested
        return out

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Fills the ``"next"`` observations of done steps in stored data (``("next", "done")`` decides)."""
        nxt = tensordict.get("next")
        done = nxt.get("done")
        batch = tensordict.batch_size
        done = _as_batch_mask(done, batch)
        if not self.replace or not bool(done.any()):
            return tensordict
        keys = [k for k in nxt.keys(True, True) if k not in ("done", "terminated", "truncated", "reward")]
        for key in keys:
            value = nxt.get(key)
            if isinstance(value, torch.Tensor):
                nxt.set(key, value.masked_fill(_expand_to(done, value), self._fill_for(value.dtype)))
        return tensordict

    def __repr__(self) -> str:
        fills = "replace=False" if not self.replace else (
            f"fill_float={self.fill_float}, fill_int={self.fill_int}, fill_bool={self.fill_bool}"
        )
        return f"AutoResetTransform({fills})"


class AutoResetEnv(TransformedEnv):
    """A ``TransformedEnv`` over an auto-resetting env; its first transform is an ``AutoResetTransform``.

    ``reset()`` returns the observations stored by the transform when every sub-environment to reset
    has restarted by itself; otherwise (e.g. the very first reset) it calls the base env's reset. A
    ``TransformedEnv`` passed as ``env`` is kept whole (not flattened), so that the auto-reset transform
    sees the env's raw outputs.

    Args:
        env: the auto-resetting env.
        transform: an ``AutoResetTransform``, or a ``Compose`` that starts with one.

    Examples:
        >>> from torchrl.envs import PendulumEnv
        >>> from torchrl.envs.transforms._auto_reset import AutoResetEnv, AutoResetTransform
        >>> env = AutoResetEnv(PendulumEnv(), AutoResetTransform())
        >>> env.transform
        AutoResetTransform(fill_float=nan, fill_int=-1, fill_bool=False)
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("auto_unwrap", False)
        super().__init__(*args, **kwargs)
        if self._auto_reset_transform() is None:
            raise ValueError(
                f"AutoResetEnv: the first transform must be an AutoResetTransform, got {self.transform!r}. Build the "
                f"env with auto_reset=True, or pass AutoResetTransform() (first in a Compose)."
            )

    def _auto_reset_transform(self) -> AutoResetTransform | None:
        t = self.transform
        while isinstance(t, Compose):
            if not len(t):
                return None
            t = t[0]
        return t if isinstance(t, AutoResetTransform) else None

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        auto = self._auto_reset_transform()
        out = None
        if auto is not None:
            if kwargs:
                auto.clear()
            else:
                out = auto._stored_reset(tensordict, self.base_env)
        if out is None:
            return super()._reset(tensordict, **kwargs)
        if tensordict is None:
            tensordict = TensorDict(batch_size=out.batch_size, device=out.device)
        return self.transform._reset(tensordict, out)

    def insert_transform(self, index: int, transform: Transform) -> "AutoResetEnv":
        """Inserts ``transform`` at ``index``; nothing may go before the ``AutoResetTransform``."""
        n = len(self.transform) if isinstance(self.transform, Compose) else 1
        position = index + n if index < 0 else index
        if position <= 0:
            raise RuntimeError(
                f"AutoResetEnv.insert_transform: index {index} would put {type(transform).__name__} before the "
                f"AutoResetTransform, which must see the base env's outputs first; use an index >= 1."
            )
        return super().insert_transform(index, transform)


def _auto_reset_hook(env: EnvBase, replace: bool | None = None) -> AutoResetEnv:
    return AutoResetEnv(env, AutoResetTransform(replace=replace))


register_env_hook("auto_reset", _auto_reset_hook)
