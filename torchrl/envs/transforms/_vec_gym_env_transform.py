"""``VecGymEnvTransform``: TorchRL's reset contract on top of a vector env that resets finished sub-envs itself."""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._transform import Transform

__all__ = ["VecGymEnvTransform"]


def _row_view(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``mask`` (batch shape) viewed so that it broadcasts over ``value`` (batch shape + feature dims)."""
    return mask.reshape(mask.shape + (1,) * (value.ndim - mask.ndim))


class VecGymEnvTransform(Transform):
    """Undoes the same-step auto-reset of vector envs (gym, gymnasium, SB3), so that every step's data holds
    one episode only.

    A vector env resets its finished sub-envs inside ``step``: for those, the observation it returns is the
    first one of the *next* episode, and the real last observation sits in the step's info. The env wrapper
    stores that one under ``final_name`` (e.g. ``("final", "observation")``). This transform, after each
    step, for the sub-envs that are done:

    - saves the returned (reset) observations in a private memo,
    - writes the final observations in their place in the step's ``"next"`` data (``missing_obs_value``
      where the env gave none, as gym < 0.22 did),
    - removes the ``final_name`` entry (also from the observation spec).

    When TorchRL then resets those sub-envs (``"_reset"`` mask), the memo is written back as their reset
    observations: the env itself has already reset them, so its reset is expected to be a no-op for them.
    A reset without a ``"_reset"`` mask is a real reset of every sub-env and clears the memo.

    An env whose observation spec declares no ``final_name`` entry is left unchanged: it does not
    auto-reset behind TorchRL's back (e.g. this library's ``GymWrapper``, which already turns a vector env's
    auto-resets into TorchRL partial resets).

    With ``native_autoreset=True`` the final observations are not used: the floating-point observations
    of the done sub-envs in ``"next"`` are set to ``NaN`` (marking them invalid) and the auto-reset
    observations are still carried to the next reset output.

    This transform needs an environment: called on stored data it raises ``RuntimeError``.

    Args:
        final_name: the entry holding the final observations. Defaults to ``"final"``.
        missing_obs_value: the placeholder written where a final observation is missing. Defaults to
            ``np.nan`` (``0`` for integer and boolean observations, which cannot hold it).

    Keyword Args:
        native_autoreset: see above. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Composite, Unbounded
        >>> from torchrl.envs import EnvBase, TransformedEnv
        >>> from torchrl.envs.transforms import VecGymEnvTransform
        >>> class Vec(EnvBase):  # sub-env i lasts i + 1 steps, then restarts on its own; obs = 10 * episode + t
        ...     def __init__(self):
        ...         super().__init__(batch_size=[2])
        ...         self.observation_spec = Composite(observation=Unbounded((2, 1)),
        ...             final=Composite(observation=Unbounded((2, 1)), shape=(2,)), shape=(2,))
        ...         self.action_spec = Unbounded((2, 1))
        ...         self.reward_spec = Unbounded((2, 1))
        ...         self.t, self.episode = torch.zeros(2, 1), torch.zeros(2, 1)
        ...     def _reset(self, td):
        ...         if td is None or "_reset" not in td.keys():  # with a mask: a no-op, the env restarted already
        ...             self.t.zero_(), self.episode.zero_()
        ...         return TensorDict(observation=10 * self.episode + self.t, done=torch.zeros(2, 1, dtype=torch.bool),
        ...             final=TensorDict(observation=torch.zeros(2, 1), batch_size=[2]), batch_size=[2])
        ...     def _step(self, td):
        ...         self.t += 1
        ...         done = self.t >= torch.tensor([[1.0], [2.0]])
        ...         final = 10 * self.episode + self.t
        ...         self.t[done], self.episode[done] = 0.0, self.episode[done] + 1
        ...         return TensorDict(observation=10 * self.episode + self.t, reward=torch.zeros(2, 1), done=done,
        ...             final=TensorDict(observation=final, batch_size=[2]), batch_size=[2])
        ...     def _set_seed(self, seed):
        ...         return seed
        >>> env = TransformedEnv(Vec(), VecGymEnvTransform())
        >>> data = env.rollout(3, break_when_any_done=False)
        >>> data["next", "observation"].squeeze(-1).tolist()  # the final observations, not the restarts
        [[1.0, 11.0, 21.0], [1.0, 2.0, 11.0]]
        >>> data["observation"].squeeze(-1).tolist()  # each episode starts from the env's own restart
        [[0.0, 10.0, 20.0], [0.0, 1.0, 10.0]]
    """

    def __init__(self, final_name: str = "final", missing_obs_value: Any = np.nan, *, native_autoreset: bool = False) -> None:
        super().__init__(in_keys=[], out_keys=[])
        self.final_name = final_name
        self.missing_obs_value = missing_obs_value
        self.native_autoreset = bool(native_autoreset)
        self._obs_keys: list[NestedKey] | None = None
        self._done_keys: list[NestedKey] | None = None
        self._active: bool | None = None
        self._memo: dict[NestedKey, torch.Tensor] = {}  # key -> the reset observations the env returned
        self._pending: torch.Tensor | None = None  # sub-envs whose reset observations are in the memo

    # -- keys ---------------------------------------------------------------------------------------------
    def set_container(self, container) -> None:
        super().set_container(container)
        self._obs_keys = self._done_keys = self._active = None
        self._memo, self._pending = {}, None

    def _require_parent(self):
        parent = self.parent
        if parent is None:
            raise RuntimeError(
                "VecGymEnvTransform cannot be applied to stored data: it undoes a vector env's auto-reset and needs "
                "that environment (append it to the env, e.g. TransformedEnv(env, VecGymEnvTransform()))."
            )
        return parent

    @property
    def obs_keys(self) -> list[NestedKey]:
        """The parent env's observation entries, without those under ``final_name``."""
        if self._obs_keys is None:
            spec = self._require_parent().observation_spec
            keys = [k for k in spec.keys(True, True) if (k if isinstance(k, str) else k[0]) != self.final_name]
            self._obs_keys = keys
        return self._obs_keys

    @property
    def active(self) -> bool:
        """Whether the parent env declares ``final_name`` observations (otherwise data passes unchanged)."""
        if self._active is None:
            self._active = self.final_name in self._require_parent().observation_spec
        return self._active

    @property
    def done_keys(self) -> list[NestedKey]:
        """The parent env's done entries; a sub-env restarted when any of its root ``"done"`` entries is set."""
        if self._done_keys is None:
            self._done_keys = list(self._require_parent().done_keys)
        return self._done_keys

    def _done_mask(self, next_tensordict: TensorDictBase) -> torch.Tensor | None:
        batch = next_tensordict.batch_size
        done = None
        for key in self.done_keys:
            if (key if isinstance(key, str) else key[-1]) != "done":
                continue
            value = next_tensordict.get(key, None)
            if value is None or value.shape[: len(batch)] != batch:
                continue
            value = value.reshape(batch + (-1,)).any(-1)
            done = value if done is None else done | value
        return done

    def _placeholder(self, value: torch.Tensor) -> torch.Tensor:
        fill = self.missing_obs_value
        if not value.is_floating_point() and isinstance(fill, float) and math.isnan(fill):
            fill = 0
        return torch.full_like(value, fill)

    # -- data ---------------------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not self.active:
            return next_tensordict
        done = self._done_mask(next_tensordict)
        final = next_tensordict.get(self.final_name, None)
        if final is not None:
            next_tensordict = next_tensordict.exclude(self.final_name)
        if done is None or not done.any():
            return next_tensordict
        pending = self._pending
        self._pending = done.clone() if pending is None else (pending | done)
        for key in self.obs_keys:
            value = next_tensordict.get(key, None)
            if value is None:
                continue
            rows = _row_view(done, value)
            memo = self._memo.get(key)
            self._memo[key] = value.clone() if memo is None else torch.where(rows, value, memo)
            if self.native_autoreset:
                if value.is_floating_point():
                    next_tensordict.set(key, value.masked_fill(rows, float("nan")))
                continue
            last = final.get(key, None) if final is not None else None
            if last is None:
                last = self._placeholder(value)
            next_tensordict.set(key, torch.where(rows, last.to(value.dtype), value))
        return next_tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._require_parent()
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if not self.active:
            return tensordict_reset
        if self.final_name in tensordict_reset.keys():  # noqa: SIM118 - TensorDict.__contains__ refuses keys
            tensordict_reset = tensordict_reset.exclude(self.final_name)
        pending = self._pending
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        if mask is None:  # a full reset: every sub-env really restarted
            self._memo, self._pending = {}, None
            return tensordict_reset
        if pending is None:
            return tensordict_reset
        batch = tensordict_reset.batch_size
        mask = mask.reshape(batch + (-1,)).any(-1) if mask.shape != batch else mask
        restore = mask & pending
        if not restore.any():
            return tensordict_reset
        for key, memo in self._memo.items():
            value = tensordict_reset.get(key, None)
            if value is None:
                continue
            tensordict_reset.set(key, torch.where(_row_view(restore, value), memo.to(value.device), value))
        pending = pending & ~restore
        if pending.any():
            self._pending = pending
        else:
            self._memo, self._pending = {}, None
        return tensordict_reset

    # -- specs --------------------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if isinstance(observation_spec, Composite) and self.final_name in observation_spec:
            del observation_spec[self.final_name]
        return observation_spec

    def __repr__(self) -> str:
        return (
            f"VecGymEnvTransform(final_name={self.final_name!r}, missing_obs_value={self.missing_obs_value!r}, "
            f"native_autoreset={self.native_autoreset})"
        )
