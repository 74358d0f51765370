"""``Timer``: records how long resets, env steps and the policy take, as observations."""
from __future__ import annotations

import time
from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["Timer"]


class Timer(Transform):
    """Writes the time (seconds, ``float32``) spent in the env's step, in the policy and in resets.

    - ``<time_key>_step``: from the start of the step's input processing (:meth:`inv`) to the step's output;
    - ``<time_key>_policy``: from the previous output (step or reset) to the start of this step, i.e. what the
      policy (and anything between two steps) took;
    - ``<time_key>_reset``: how long the reset took (``0`` in step outputs).

    A reset output holds its reset time and zeros for the two others. The entries are observations (shape
    of the env's batch); they depend on the wall clock, so they differ between otherwise identical runs.
    Timer needs an environment: called on stored data it raises.

    Args:
        out_keys: the three entries (step, policy, reset), in that order. Default:
            ``[f"{time_key}_step", f"{time_key}_policy", f"{time_key}_reset"]``.
        time_key: the prefix of the default ``out_keys``. Defaults to ``"time"``.

    Raises:
        TypeError: if ``out_keys`` does not name three entries.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms import Timer
        >>> env = TransformedEnv(PendulumEnv(seed=0), Timer())
        >>> data = env.rollout(3)
        >>> data["time_policy"][0].item(), data["time_step"][0].item()  # from the reset
        (0.0, 0.0)
        >>> bool((data["next", "time_step"] > 0).all()), bool((data["next", "time_reset"] == 0).all())
        (True, True)
    """

    def __init__(self, out_keys: Sequence[NestedKey] = None, time_key: str = "time") -> None:
        if out_keys is None:
            out_keys = [f"{time_key}_step", f"{time_key}_policy", f"{time_key}_reset"]
        out_keys = _key_list(out_keys)
        if len(out_keys) != 3:
            raise TypeError(f"Timer: expected three out_keys (step, policy, reset). Got out_keys={out_keys}.")
        super().__init__(in_keys=[], out_keys=out_keys)
        self.time_key = time_key
        self._last_output: float | None = None  # perf_counter at the end of the last step/reset output
        self._step_start: float | None = None  # perf_counter at the start of the current step
        self._policy_time = 0.0
        self._reset_start: float | None = None

    def _write(self, tensordict: TensorDictBase, step: float, policy: float, reset: float) -> None:
        shape, device = tensordict.batch_size, tensordict.device
        for key, value in zip(self.out_keys, (step, policy, reset)):
            tensordict.set(key, torch.full(shape, value, dtype=torch.float32, device=device))

    # -- data -------------------------------------------------------------------------------------------
    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        self._reset_start = time.perf_counter()
        return tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        now = time.perf_counter()
        reset_time = 0.0 if self._reset_start is None else now - self._reset_start
        self._reset_start = None
        self._write(tensordict_reset, 0.0, 0.0, reset_time)
        self._last_output = time.perf_counter()
        return tensordict_reset

    @property
    def _has_inverse(self) -> bool:
        return True  # inv marks the start of each step

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Marks the start of a step (the end of the policy's time); returns ``tensordict`` unchanged."""
        now = time.perf_counter()
        self._policy_time = 0.0 if self._last_output is None else now - self._last_output
        self._step_start = now
        return tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self.inv(tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        now = time.perf_counter()
        step_time = 0.0 if self._step_start is None else now - self._step_start
        self._write(next_tensordict, step_time, self._policy_time, 0.0)
        self._step_start = None
        self._last_output = time.perf_counter()
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "Timer measures environment steps and resets; it cannot be applied to stored data. Use it inside a "
            "TransformedEnv."
        )

    # -- specs ------------------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not isinstance(observation_spec, Composite):
            raise TypeError(f"Timer: expected a Composite observation spec, got {type(observation_spec).__name__}.")
        for key in self.out_keys:
            observation_spec[key] = Unbounded(
                shape=observation_spec.shape, dtype=torch.float32, device=observation_spec.device
            )
        return observation_spec

    def __repr__(self) -> str:
        return f"Timer(out_keys={self.out_keys})"
