"""``PermuteTransform``: reorders the trailing dims of entries (and the inverse on inputs)."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import INPUT_PARTS, check_feature_dims, edit_leaves, key_pairs, map_keys
from torchrl.envs.transforms._to_tensor_image import map_image_spec
from torchrl.envs.transforms._transform import Transform

__all__ = ["PermuteTransform"]


def _permute_trailing(value: torch.Tensor, dims: Sequence[int], owner: str) -> torch.Tensor:
    n, ndim = len(dims), value.ndim
    if ndim < n:
        raise ValueError(f"{owner}: cannot permute the last {n} dims of an entry of shape {tuple(value.shape)}.")
    return value.permute(*range(ndim - n), *(ndim + d for d in dims))


class PermuteTransform(Transform):
    """Permutes the last ``len(dims)`` dims of ``in_keys`` (and applies the inverse permutation to inputs).

    ``dims`` is a reordering of ``[-len(dims), ..., -1]``: e.g. ``(-1, -3, -2)`` turns ``(..., H, W, C)``
    into ``(..., C, H, W)`` whatever the leading (batch) dims. Inputs at ``in_keys_inv`` are written by the
    outside in the permuted layout (their spec is shown permuted) and permuted back before the env sees them.

    Args:
        dims: the new order of the trailing dims, as negative indices.
        in_keys: output entries to permute (default: none).
        out_keys: where the results go (default: ``in_keys``).
        in_keys_inv: input entries the base env reads.
        out_keys_inv: the names the outside writes them under (default: ``in_keys_inv``).

    Raises:
        ValueError: ``dims`` is not a reordering of ``[-len(dims), ..., -1]``; or (when called) an entry has
            fewer than ``len(dims)`` dims.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._permute_transform import PermuteTransform
        >>> t = PermuteTransform((-1, -3, -2), in_keys=["pixels"])
        >>> t(TensorDict(pixels=torch.zeros(5, 8, 6, 3), batch_size=[5]))["pixels"].shape
        torch.Size([5, 3, 8, 6])
    """

    invertible = True
    _out_keys_default_to_in_keys = True

    def __init__(self, dims, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None) -> None:
        dims = tuple(int(d) for d in dims)
        if sorted(dims) != list(range(-len(dims), 0)):
            raise ValueError(
                f"PermuteTransform: dims must be a reordering of the trailing dims {list(range(-len(dims), 0))} "
                f"(negative indices only), got {dims}."
            )
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._check_keys()
        if len(self.in_keys_inv) != len(self.out_keys_inv):
            raise ValueError(
                f"PermuteTransform: in_keys_inv {self.in_keys_inv} and out_keys_inv {self.out_keys_inv} differ in length."
            )
        self.dims = dims
        n = len(dims)
        # position i of the output holds input dim dims[i]; the inverse puts it back
        self._inv_dims = tuple(sorted(range(-n, 0), key=lambda d: dims[d + n]))

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        return _permute_trailing(observation, self.dims, "PermuteTransform")

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return _permute_trailing(state, self._inv_dims, "PermuteTransform (inverse)")

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        strict = not self._missing_tolerance
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner="PermuteTransform")

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset)

    @property
    def _has_inverse(self) -> bool:
        return bool(self.in_keys_inv)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        strict = not self._missing_tolerance
        return map_keys(
            tensordict, key_pairs(self, inverse=True), self._inv_apply_transform, strict=strict, owner="PermuteTransform (inverse)"
        )

    # -- specs: outputs and inputs are both shown in the permuted layout --------------------------------------
    def _leaf_spec(self, leaf: TensorSpec) -> TensorSpec:
        return map_image_spec(leaf, self._apply_transform)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not isinstance(observation_spec, Composite):
            return self._leaf_spec(observation_spec)
        check_feature_dims(observation_spec, key_pairs(self), len(self.dims), "PermuteTransform", "permuting")
        edit_leaves(observation_spec, (), key_pairs(self), self._leaf_spec)
        return observation_spec

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        for part in INPUT_PARTS:
            if isinstance(input_spec.get(part, None), Composite):
                check_feature_dims(input_spec[part], key_pairs(self, inverse=True), len(self.dims), "PermuteTransform", "permuting")
        missing = edit_leaves(input_spec, INPUT_PARTS, key_pairs(self, inverse=True), self._leaf_spec, move=True)
        if missing:
            raise KeyError(f"PermuteTransform: in_keys_inv {missing} are not in the env's action or state specs.")
        return input_spec

    def __repr__(self) -> str:
        return f"PermuteTransform(dims={self.dims}, in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv})"
