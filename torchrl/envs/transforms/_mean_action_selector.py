"""``MeanActionSelector``: lets a Gaussian belief-space policy (PILCO-style) drive a standard env."""
from __future__ import annotations

from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey, unravel_key

from torchrl.data.tensor_specs import Composite, Unbounded
from torchrl.envs.transforms._transform import Transform

__all__ = ["MeanActionSelector"]


class MeanActionSelector(Transform):
    """Wraps observations into deterministic beliefs and feeds the env the policy's mean action.

    Forward (env -> policy): the flat ``observation_key`` entry (shape ``(..., n)``) becomes a sub-tensordict
    with ``"mean"`` (the observation) and ``"var"`` (a zero covariance, ``(..., n, n)``). Inverse
    (policy -> env): ``(action_key, "mean")`` is written as the flat ``action_key`` the env reads (a flat
    action, e.g. a random one from ``rand_action``, passes through). The action spec is unchanged.

    Args:
        observation_key: the env's observation entry (default ``"observation"``).
        action_key: the env's action entry (default ``"action"``).

    Raises:
        KeyError: the observation is not in the env's observation spec.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._mean_action_selector import MeanActionSelector
        >>> t = MeanActionSelector()
        >>> t(TensorDict(observation=torch.ones(2)))["observation", "var"]
        tensor([[0., 0.],
                [0., 0.]])
        >>> t.inv(TensorDict(action=TensorDict(mean=torch.tensor([0.5]))))["action"]
        tensor([0.5000])
    """

    def __init__(self, observation_key: NestedKey = "observation", action_key: NestedKey = "action") -> None:
        # nested keys (a group's ("agents", "observation")) give flat out keys ("agents", "observation", "mean")
        super().__init__(
            in_keys=[observation_key],
            out_keys=[unravel_key((observation_key, "mean")), unravel_key((observation_key, "var"))],
            in_keys_inv=[action_key],
            out_keys_inv=[unravel_key((action_key, "mean"))],
        )
        self._observation_key = observation_key
        self._action_key = action_key

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        obs = next_tensordict.get(self._observation_key, None)
        if obs is None:
            if self._missing_tolerance:
                return next_tensordict
            raise KeyError(f"MeanActionSelector: observation key {self._observation_key!r} not found.")
        if isinstance(obs, TensorDictBase):
            return next_tensordict  # already a belief
        belief = TensorDict(mean=obs, var=obs.new_zeros((*obs.shape, obs.shape[-1])), batch_size=obs.shape[:-1])
        next_tensordict.set(self._observation_key, belief)
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get(self._action_key, None)
        if action is None:
            if self._missing_tolerance:
                return tensordict
            raise KeyError(f"MeanActionSelector (inverse): key ({self._action_key!r}, 'mean') not found.")
        if isinstance(action, TensorDictBase):
            mean = action.get("mean", None)
            if mean is None:
                raise KeyError(
                    f"MeanActionSelector (inverse): the policy output {self._action_key!r} has no 'mean' entry; "
                    f"available: {sorted(action.keys())}."
                )
            tensordict.set(self._action_key, mean)
        return tensordict  # a flat action (e.g. rand_action) passes through

    def transform_observation_spec(self, observation_spec):
        spec = observation_spec.get(self._observation_key, None)
        if spec is None:
            raise KeyError(
                f"MeanActionSelector: observation key {self._observation_key!r} not in the observation spec; "
                f"available keys: {sorted(map(str, observation_spec.keys()))}."
            )
        batch = spec.shape[:-1]
        var = Unbounded(shape=(*spec.shape, spec.shape[-1]), device=spec.device, dtype=spec.dtype)
        observation_spec[self._observation_key] = Composite(mean=spec.clone(), var=var, shape=batch, device=spec.device)
        return observation_spec

    def __repr__(self) -> str:
        return f"MeanActionSelector(keys=[{self._observation_key!r}])"
