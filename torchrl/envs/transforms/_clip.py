"""``ClipTransform``: clamps outputs (observations, rewards) and inputs (actions, states) into a range."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import clip_spec, edit_leaves, INPUT_PARTS, inverse_read_pairs, key_pairs, map_keys
from torchrl.envs.transforms._reward_clipping import _bounds
from torchrl.envs.transforms._transform import Transform

__all__ = ["ClipTransform"]


class ClipTransform(Transform):
    """Clips entries into ``[low, high]``: outputs at ``in_keys`` and inputs at ``in_keys_inv``.

    One range per transform (chain several for several ranges). Either bound may be omitted, not both.
    Specs of clipped outputs become ``Bounded`` (intersected with their previous bounds); the specs of
    clipped inputs are left as the env declares them (as TorchRL: the outside may write anything in them,
    the env receives the clipped values).

    Args:
        in_keys: output entries to clip (observations, rewards).
        out_keys: where the results go (default: ``in_keys``).
        in_keys_inv: input entries the base env reads (actions, states), clipped from ``out_keys_inv``.
        out_keys_inv: the names the outside writes them under (default: ``in_keys_inv``).

    Keyword Args:
        low: lower bound (scalar or tensor).
        high: upper bound (scalar or tensor).

    Raises:
        ValueError: ``low >= high``, or neither bound is given (that error is also a TypeError, TorchRL's
            type).

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._clip import ClipTransform
        >>> env = TransformedEnv(PendulumEnv(seed=0), ClipTransform(in_keys=["observation"], low=-1.0, high=0.1))
        >>> bool((env.rollout(10)["observation"] <= 0.1).all())
        True
    """

    invertible = True

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None, *, low=None, high=None) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._check_keys()
        if len(self.in_keys_inv) != len(self.out_keys_inv):
            raise ValueError(
                f"ClipTransform: in_keys_inv {self.in_keys_inv} and out_keys_inv {self.out_keys_inv} differ in length."
            )
        low, high = _bounds(low, high, "ClipTransform")
        self.register_buffer("low", low)
        self.register_buffer("high", high)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.clamp(self.low, self.high)

    _inv_apply_transform = _apply_transform

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner="ClipTransform")

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)  # clipped rewards are absent after a reset

    @property
    def _has_inverse(self) -> bool:
        return bool(self.in_keys_inv)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        strict = not self._missing_tolerance
        return map_keys(tensordict, inverse_read_pairs(self), self._apply_transform, strict=strict, owner="ClipTransform (inverse)")

    def _clip_leaf(self, leaf: TensorSpec) -> TensorSpec:
        return clip_spec(leaf, self.low, self.high)

    def _edit(self, spec: TensorSpec, inverse: bool) -> TensorSpec:
        if not isinstance(spec, Composite):
            return self._clip_leaf(spec)
        edit_leaves(spec, (), key_pairs(self, inverse=inverse), self._clip_leaf, move=inverse)
        return spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._edit(observation_spec, False)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._edit(reward_spec, False)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        parts = ("full_observation_spec", "full_reward_spec")
        missing = edit_leaves(output_spec, parts, key_pairs(self), self._clip_leaf)
        if missing:
            raise KeyError(f"ClipTransform: in_keys {missing} are neither observations nor rewards of the env.")
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        missing = edit_leaves(input_spec, INPUT_PARTS, key_pairs(self, inverse=True), TensorSpec.clone, move=True)
        if missing:
            raise KeyError(f"ClipTransform: in_keys_inv {missing} are not in the env's action or state specs.")
        return input_spec

    def __repr__(self) -> str:
        return f"ClipTransform(in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv}, low={self.low}, high={self.high})"
