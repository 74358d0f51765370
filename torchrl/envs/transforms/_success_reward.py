"""``SuccessReward``: a sparse reward from a binary success signal."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Bounded, Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import OUTPUT_PARTS, find_part, key_pairs, map_keys
from torchrl.envs.transforms._transform import Transform

__all__ = ["SuccessReward"]


class SuccessReward(Transform):
    """Writes ``scale`` as the reward where a success flag is set, ``0`` elsewhere.

    For envs (and stored data) that report task completion as a flag rather than as a reward. The flag
    (boolean, or 0/1) is read at ``success_key``; the reward, in the default float dtype, is written at
    ``reward_key`` after each step (overwriting the env's reward there) and never at reset. In an env the
    reward spec at ``reward_key`` becomes ``Bounded(min(0, scale), max(0, scale))`` shaped like the
    success entry (or like the existing reward when the success entry is not declared in the specs).

    Args:
        success_key: the success flag (default ``"success"``).
        reward_key: the reward to write (default ``"reward"``).

    Keyword Args:
        scale: the reward of a success (default ``1.0``).

    Raises:
        RuntimeError: in an env that declares neither ``success_key`` nor ``reward_key``, so that the
            reward's shape is unknown.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._success_reward import SuccessReward
        >>> t = SuccessReward(scale=2.0)
        >>> t(TensorDict(success=torch.tensor([[True], [False]]), batch_size=[2]))["reward"].squeeze(-1).tolist()
        [2.0, 0.0]
    """

    _in_keys_are_env_keys = False  # the success entry may be read from the data without a spec (as TorchRL)

    def __init__(self, success_key: NestedKey = "success", reward_key: NestedKey = "reward", *, scale: float = 1.0) -> None:
        super().__init__(in_keys=[success_key], out_keys=[reward_key])
        self.success_key = self.in_keys[0]
        self.reward_key = self.out_keys[0]
        self.scale = float(scale)

    def _apply_transform(self, success: torch.Tensor) -> torch.Tensor:
        flag = success if success.dtype == torch.bool else success != 0
        return torch.where(flag, self.scale, 0.0)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        strict = not self._missing_tolerance
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner="SuccessReward")

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset  # rewards are written at step time only

    def _reward_leaf(self, shape: torch.Size, device) -> TensorSpec:
        low, high = min(0.0, self.scale), max(0.0, self.scale)
        return Bounded(low, high, shape=shape, device=device, dtype=torch.get_default_dtype())

    def _success_leaf(self, output_spec: Composite | None) -> TensorSpec | None:
        if output_spec is None:
            return None
        part = find_part(output_spec, OUTPUT_PARTS, self.success_key)
        return None if part is None else output_spec[part][self.success_key]

    def _shape_source(self, reward_spec: Composite, output_spec: Composite | None) -> TensorSpec:
        leaf = self._success_leaf(output_spec)
        if leaf is None and self.reward_key in reward_spec:
            leaf = reward_spec[self.reward_key]
        if leaf is None:
            raise RuntimeError(
                f"SuccessReward: cannot infer the reward's shape: the success entry {self.success_key!r} is not in "
                f"the env's specs and {self.reward_key!r} is not one of its rewards "
                f"({sorted(map(str, reward_spec.keys(include_nested=True, leaves_only=True)))}). Declare the success "
                "entry in the env's observation or done spec."
            )
        return leaf

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        reward_spec = output_spec["full_reward_spec"]
        leaf = self._shape_source(reward_spec, output_spec)
        reward_spec[self.reward_key] = self._reward_leaf(leaf.shape, leaf.device)
        return output_spec

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        if not isinstance(reward_spec, Composite):  # a lone reward leaf
            return self._reward_leaf(reward_spec.shape, reward_spec.device)
        parent = self.parent
        leaf = self._shape_source(reward_spec, None if parent is None else parent.output_spec)
        reward_spec[self.reward_key] = self._reward_leaf(leaf.shape, leaf.device)
        return reward_spec

    def __repr__(self) -> str:
        return f"SuccessReward(success_key={self.success_key!r}, reward_key={self.reward_key!r}, scale={self.scale})"
