"""``RewardClipping``: clamps rewards into ``[clamp_min, clamp_max]`` (either side may stay open)."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import clip_spec, key_pairs, map_keys
from torchrl.envs.transforms._transform import Transform

__all__ = ["RewardClipping"]


class _NoBoundsError(ValueError, TypeError, RuntimeError):
    """Neither clipping bound given (TorchRL raises RuntimeError for RewardClipping, TypeError for ClipTransform)."""


def _bounds(low, high, owner: str) -> tuple:
    """Validates clipping bounds and stores them as tensors (as TorchRL: 0-dim default-dtype tensors for numbers)."""
    if low is None and high is None:
        raise _NoBoundsError(f"{owner}: give a lower bound, an upper bound or both; got neither.")
    if low is not None and high is not None and bool(torch.as_tensor(low >= high).any()):
        raise ValueError(f"{owner}: the lower bound ({low}) must be below the upper bound ({high}).")
    low = None if low is None else torch.as_tensor(low, dtype=torch.get_default_dtype())
    high = None if high is None else torch.as_tensor(high, dtype=torch.get_default_dtype())
    return low, high


class RewardClipping(Transform):
    """Clips rewards: ``reward.clamp(clamp_min, clamp_max)``; one-sided clipping leaves the other side open.

    The reward spec becomes ``Bounded`` on the clipped side(s) (intersected with existing bounds).

    Args:
        clamp_min: lowest reward (``None``: no lower bound).
        clamp_max: highest reward (``None``: no upper bound).
        in_keys: reward entries to clip (default ``["reward"]``).
        out_keys: where the results go (default: ``in_keys``).

    Raises:
        ValueError: ``clamp_min >= clamp_max``, or neither bound is given (that error is also a RuntimeError,
            TorchRL's type).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._reward_clipping import RewardClipping
        >>> t = RewardClipping(clamp_max=1.0)
        >>> t(TensorDict(reward=torch.tensor([-5.0, 0.5, 3.0])))["reward"].tolist()
        [-5.0, 0.5, 1.0]
    """

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(
        self,
        clamp_min: float | None = None,
        clamp_max: float | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys, out_keys=out_keys)
        self._check_keys()
        clamp_min, clamp_max = _bounds(clamp_min, clamp_max, "RewardClipping")
        self.register_buffer("clamp_min", clamp_min)
        self.register_buffer("clamp_max", clamp_max)

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        return reward.clamp(self.clamp_min, self.clamp_max)

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner="RewardClipping")

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        if not isinstance(reward_spec, Composite):
            return clip_spec(reward_spec, self.clamp_min, self.clamp_max)
        for in_key, out_key in key_pairs(self):
            if in_key not in reward_spec:
                raise KeyError(
                    f"RewardClipping: in_key {in_key!r} is not a reward of the env; rewards: "
                    f"{sorted(map(str, reward_spec.keys(include_nested=True, leaves_only=True)))}."
                )
            reward_spec[out_key] = clip_spec(reward_spec[in_key], self.clamp_min, self.clamp_max)
        return reward_spec

    def __repr__(self) -> str:
        return f"RewardClipping(keys={self.in_keys}, clamp_min={self.clamp_min}, clamp_max={self.clamp_max})"
