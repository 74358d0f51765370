"""``BinarizeReward``: maps rewards to ``1`` (positive) or ``0`` (zero or negative)."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Binary, Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import key_pairs, map_keys
from torchrl.envs.transforms._transform import Transform

__all__ = ["BinarizeReward"]


class BinarizeReward(Transform):
    """Maps rewards to a binary signal: ``1`` where the reward is strictly positive, ``0`` elsewhere.

    The output is ``torch.int8`` and the reward spec becomes a :class:`~torchrl.data.Binary` spec (``int8``,
    same shape). Rewards must have a trailing singleton dimension.

    Args:
        in_keys: reward entries to binarize (default ``["reward"]``).
        out_keys: where the results go (default: ``in_keys``).

    Raises:
        RuntimeError: a reward whose last dimension is not 1.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._binarize_reward import BinarizeReward
        >>> t = BinarizeReward()
        >>> t(TensorDict(reward=torch.tensor([[2.0], [0.0], [-1.0]]), batch_size=[3]))["reward"].squeeze(-1).tolist()
        [1, 0, 0]
        >>> env = TransformedEnv(PendulumEnv(seed=0), BinarizeReward())
        >>> env.rollout(3)["next", "reward"].dtype
        torch.int8
    """

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(self, in_keys: Sequence[NestedKey] | None = None, out_keys: Sequence[NestedKey] | None = None):
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys, out_keys=out_keys)
        self._check_keys()

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        if not reward.shape or reward.shape[-1] != 1:
            raise RuntimeError(
                f"BinarizeReward: the reward's last dimension must be 1, got a reward of shape {tuple(reward.shape)}; "
                "unsqueeze it (UnsqueezeTransform(-1)) first."
            )
        return (reward > 0).to(torch.int8)

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner="BinarizeReward")

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)  # rewards are usually absent after a reset

    @staticmethod
    def _binary_leaf(spec: TensorSpec) -> TensorSpec:
        return Binary(n=spec.shape[-1] if spec.shape else 1, shape=spec.shape, device=spec.device, dtype=torch.int8)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        if not isinstance(reward_spec, Composite):  # a lone reward leaf
            return self._binary_leaf(reward_spec)
        for in_key, out_key in key_pairs(self):
            if in_key not in reward_spec:
                raise KeyError(
                    f"BinarizeReward: in_key {in_key!r} is not a reward of the env; rewards: "
                    f"{sorted(map(str, reward_spec.keys(include_nested=True, leaves_only=True)))}."
                )
            reward_spec[out_key] = self._binary_leaf(reward_spec[in_key])
        return reward_spec
