"""``RewardScaling``: a fixed affine map of rewards."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import affine_spec, key_pairs, map_keys
from torchrl.envs.transforms._transform import Transform

__all__ = ["RewardScaling"]


def _as_tensor(value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() else value.to(torch.get_default_dtype())
    return torch.as_tensor(float(value), dtype=torch.get_default_dtype())


class RewardScaling(Transform):
    """Maps rewards through ``reward * scale + loc`` (or ``(reward - loc) / scale`` when ``standard_normal``).

    Args:
        loc: location of the affine map (number or tensor broadcasting against the reward).
        scale: scale of the affine map; must be non-zero when ``standard_normal``.
        in_keys: reward entries to scale (default ``["reward"]``).
        out_keys: where the results go (default: ``in_keys``).
        standard_normal: use ``(reward - loc) / scale``.

    Bounded reward specs keep (mapped) bounds; the reward spec gains ``out_keys`` when they differ from
    ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._reward_scaling import RewardScaling
        >>> t = RewardScaling(loc=1.0, scale=0.5)
        >>> t(TensorDict(reward=torch.tensor([2.0, -4.0])))["reward"].tolist()
        [2.0, -1.0]
        >>> env = TransformedEnv(PendulumEnv(seed=0), RewardScaling(loc=0.0, scale=0.1))
        >>> bool(env.rollout(5)["next", "reward"].min() >= -1.7)  # Pendulum's rewards are >= -16.3
        True
    """

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(
        self,
        loc: float | torch.Tensor,
        scale: float | torch.Tensor,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        standard_normal: bool = False,
    ) -> None:
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys, out_keys=out_keys)
        self._check_keys()
        # as TorchRL, ``standard_normal`` is a (bool tensor) buffer; the data path reads the Python flag
        self._standard_normal = bool(standard_normal)
        self.register_buffer("standard_normal", torch.tensor(bool(standard_normal)))
        loc, scale = _as_tensor(loc), _as_tensor(scale)
        if standard_normal and bool((scale == 0).any()):
            raise ValueError("RewardScaling: scale must be non-zero with standard_normal=True (it divides the reward).")
        self.register_buffer("loc", loc)
        self.register_buffer("scale", scale)

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        loc, scale = self.loc, self.scale
        if loc.dtype != reward.dtype and reward.is_floating_point():
            loc, scale = loc.to(reward.dtype), scale.to(reward.dtype)
        if self._standard_normal:
            return (reward - loc) / scale
        return torch.addcmul(loc, reward, scale)

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner="RewardScaling")

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)  # rewards are usually absent after a reset

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        if not isinstance(reward_spec, Composite):  # a lone reward leaf
            return affine_spec(reward_spec, self._apply_transform)
        for in_key, out_key in key_pairs(self):
            if in_key not in reward_spec:
                raise KeyError(
                    f"RewardScaling: in_key {in_key!r} is not a reward of the env; rewards: "
                    f"{sorted(map(str, reward_spec.keys(include_nested=True, leaves_only=True)))}."
                )
            reward_spec[out_key] = affine_spec(reward_spec[in_key], self._apply_transform)
        return reward_spec

    def __repr__(self) -> str:
        return (
            f"RewardScaling(keys={self.in_keys}, loc={self.loc.tolist()}, scale={self.scale.tolist()}, "
            f"standard_normal={self._standard_normal})"
        )
