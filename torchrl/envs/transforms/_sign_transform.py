"""``SignTransform``: replaces entries by their sign (-1, 0 or 1)."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Bounded, Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import INPUT_PARTS, edit_leaves, key_pairs, map_keys
from torchrl.envs.transforms._transform import Transform

__all__ = ["SignTransform"]


def _sign_leaf(spec: TensorSpec) -> TensorSpec:
    """The spec of ``torch.sign(x)``: bounded in ``[-1, 1]``, same shape and dtype (as TorchRL, the bounds
    are not narrowed to those of ``spec``)."""
    return Bounded(-1, 1, shape=spec.shape, device=spec.device, dtype=spec.dtype)


class SignTransform(Transform):
    """Replaces each entry by its sign: ``-1`` for negative values, ``0`` for zeros, ``1`` for positive values.

    Outputs (observations, rewards) at ``in_keys`` are mapped after each step and reset; inputs written by
    the outside at ``out_keys_inv`` are mapped into ``in_keys_inv`` before the base env reads them. The
    dtype is kept. Output specs become ``Bounded(-1, 1)`` of the same shape and dtype; input specs are left
    as the env declares them (the outside may write anything there).

    Args:
        in_keys: output entries to map (no default: pass the keys).
        out_keys: where the results go (default: ``in_keys``).
        in_keys_inv: input entries the base env reads (actions, states), mapped from ``out_keys_inv``.
        out_keys_inv: the names the outside writes them under (default: ``in_keys_inv``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._sign_transform import SignTransform
        >>> t = SignTransform(in_keys=["reward"])
        >>> t(TensorDict(reward=torch.tensor([-2.5, 0.0, 0.1])))["reward"].tolist()
        [-1.0, 0.0, 1.0]
        >>> env = TransformedEnv(PendulumEnv(seed=0), SignTransform(in_keys=["observation", "reward"]))
        >>> env.full_reward_spec["reward"].high.tolist()
        [1.0]
        >>> bool(env.rollout(3)["next", "observation"].abs().le(1).all())
        True
    """

    invertible = True

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._check_keys()
        if len(self.in_keys_inv) != len(self.out_keys_inv):
            raise ValueError(
                f"SignTransform: in_keys_inv {self.in_keys_inv} and out_keys_inv {self.out_keys_inv} differ in length."
            )

    def _apply_transform(self, value: torch.Tensor) -> torch.Tensor:
        return torch.sign(value)

    _inv_apply_transform = _apply_transform

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        return map_keys(next_tensordict, key_pairs(self), torch.sign, strict=strict, owner="SignTransform")

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)  # mapped rewards are absent after a reset

    @property
    def _has_inverse(self) -> bool:
        return bool(self.in_keys_inv)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        strict = not self._missing_tolerance
        pairs = [(out_key, in_key) for in_key, out_key in key_pairs(self, inverse=True)]  # read outside's names
        return map_keys(tensordict, pairs, torch.sign, strict=strict, owner="SignTransform (inverse)")

    def _edit(self, spec: TensorSpec) -> TensorSpec:
        if not isinstance(spec, Composite):
            return _sign_leaf(spec)
        edit_leaves(spec, (), key_pairs(self), _sign_leaf)
        return spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._edit(observation_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._edit(reward_spec)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        parts = ("full_observation_spec", "full_reward_spec")
        missing = edit_leaves(output_spec, parts, key_pairs(self), _sign_leaf)
        if missing:
            raise KeyError(f"SignTransform: in_keys {missing} are neither observations nor rewards of the env.")
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        missing = edit_leaves(input_spec, INPUT_PARTS, key_pairs(self, inverse=True), TensorSpec.clone, move=True)
        if missing:
            raise KeyError(f"SignTransform: in_keys_inv {missing} are not in the env's action or state specs.")
        return input_spec

    def __repr__(self) -> str:
        inv = f", in_keys_inv={self.in_keys_inv}" if self.in_keys_inv else ""
        return f"{super().__repr__()[:-1]}{inv})"
