"""``UnsqueezeTransform`` and ``SqueezeTransform``: add or remove a singleton dim of selected entries."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._deprecation import rename_kwargs
from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import INPUT_PARTS, edit_leaves, key_pairs, map_keys
from torchrl.envs.transforms.transform import Transform

__all__ = ["UnsqueezeTransform", "SqueezeTransform"]


class UnsqueezeTransform(Transform):
    """Inserts a dim of size one at ``dim`` in ``in_keys`` (and removes it from inputs at ``in_keys_inv``).

    Args:
        dim: where to insert the dim. Negative dims count from the end of each entry and work with any
            batch size. Positive dims (only with ``allow_positive_dim``) count feature dims after the
            parent env's batch dims (0 outside an env), whatever the data's batch size.

    Keyword Args:
        allow_positive_dim: accept ``dim >= 0``.
        in_keys: output entries to unsqueeze.
        out_keys: where the results go (default: ``in_keys``).
        in_keys_inv: input entries the base env reads; the outside writes them, unsqueezed, at
            ``out_keys_inv`` and they are squeezed back before the step.
        out_keys_inv: the names the outside uses (default: ``in_keys_inv``).

    ``unsqueeze_dim`` is accepted as a deprecated name of ``dim``.

    Raises:
        ValueError: ``dim`` is missing, or positive without ``allow_positive_dim``.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms.squeeze import UnsqueezeTransform
        >>> env = TransformedEnv(PendulumEnv(seed=0), UnsqueezeTransform(-2, in_keys=["observation"]))
        >>> env.rollout(4)["observation"].shape
        torch.Size([4, 1, 3])
    """

    invertible = True
    _name = "UnsqueezeTransform"

    def __init__(
        self,
        dim: int | None = None,
        *,
        allow_positive_dim: bool = False,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        **kwargs,
    ) -> None:
        kwargs = rename_kwargs(self._name, dict(kwargs, **({} if dim is None else {"dim": dim})), self._renames())
        dim = kwargs.pop("dim", None)
        if kwargs:
            raise TypeError(f"{self._name} got unexpected keyword argument(s) {sorted(kwargs)}.")
        if dim is None or not isinstance(dim, int):
            raise ValueError(f"{self._name}: dim must be an int, got {dim!r}.")
        if dim >= 0 and not allow_positive_dim:
            raise ValueError(
                f"{self._name}: dim={dim} is not negative. Negative dims count from the end and work for any batch "
                f"size; pass allow_positive_dim=True to count feature dims after the env's batch dims instead."
            )
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._check_keys()
        if len(self.in_keys_inv) != len(self.out_keys_inv):
            raise ValueError(
                f"{self._name}: in_keys_inv {self.in_keys_inv} and out_keys_inv {self.out_keys_inv} differ in length."
            )
        self._dim = dim
        self.allow_positive_dim = bool(allow_positive_dim)

    @classmethod
    def _renames(cls) -> dict:
        return {"unsqueeze_dim": "dim"}

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def unsqueeze_dim(self) -> int:
        return self._dim

    def _batch_dims(self) -> int:
        parent = self.parent
        return 0 if parent is None else len(parent.batch_size)

    def _data_dim(self) -> int:
        """The dim to use on a tensor (positive dims are shifted past the parent env's batch dims)."""
        dim = self._dim
        return dim if dim < 0 else dim + self._batch_dims()

    # -- the two directions (unsqueeze(d) and squeeze(d) undo each other for the same d) ---------------
    def _grow(self, value: torch.Tensor) -> torch.Tensor:
        return value.unsqueeze(self._data_dim())

    def _shrink(self, value: torch.Tensor) -> torch.Tensor:
        dim = self._data_dim()
        if not -value.ndim <= dim < value.ndim or value.shape[dim] != 1:
            raise RuntimeError(
                f"{self._name}: cannot squeeze dim {dim} of an entry with shape {tuple(value.shape)}: it is not a "
                f"singleton dim."
            )
        return value.squeeze(dim)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return self._grow(obs)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return self._shrink(state)

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner=self._name)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)  # e.g. rewards are absent after a reset

    @property
    def _has_inverse(self) -> bool:
        return bool(self.in_keys_inv)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        strict = not self._missing_tolerance
        return map_keys(tensordict, key_pairs(self, inverse=True), self._inv_apply_transform, strict=strict, owner=self._name)

    # -- specs ---------------------------------------------------------------------------------------
    def _spec_grow(self, leaf: TensorSpec) -> TensorSpec:
        n = self._spec_batch_dims
        dim = self._dim
        if dim < 0:
            if -dim - 1 > len(leaf.shape) - n:
                raise ValueError(
                    f"{self._name}: dim {dim} would reach into the env's batch dims of a spec of shape "
                    f"{tuple(leaf.shape)} (batch dims: {n})."
                )
            return leaf.unsqueeze(dim)
        if dim > len(leaf.shape) - n:
            raise ValueError(f"{self._name}: dim {dim} is out of range for a spec of shape {tuple(leaf.shape)}.")
        return leaf.unsqueeze(dim + n)

    def _spec_shrink(self, leaf: TensorSpec) -> TensorSpec:
        n = self._spec_batch_dims
        dim = self._dim if self._dim < 0 else self._dim + n
        d = dim + len(leaf.shape) if dim < 0 else dim
        if not n <= d < len(leaf.shape) or leaf.shape[d] != 1:
            raise ValueError(
                f"{self._name}: cannot squeeze dim {self._dim} of a spec of shape {tuple(leaf.shape)} (env batch "
                f"dims: {n}): it is not a singleton feature dim."
            )
        # indexing rather than leaf.squeeze(d): TensorSpec.squeeze fails when the result is 0-dim
        return leaf[(slice(None),) * d + (0,)]

    def _forward_spec(self, leaf: TensorSpec) -> TensorSpec:
        return self._spec_grow(leaf)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._spec_batch_dims = len(output_spec.shape)
        parts = ("full_observation_spec", "full_reward_spec")
        missing = edit_leaves(output_spec, parts, key_pairs(self), self._forward_spec)
        if missing:
            raise KeyError(f"{self._name}: in_keys {missing} are neither observations nor rewards of the env.")
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        self._spec_batch_dims = len(input_spec.shape)
        missing = edit_leaves(input_spec, INPUT_PARTS, key_pairs(self, inverse=True), self._forward_spec, move=True)
        if missing:
            raise KeyError(f"{self._name}: in_keys_inv {missing} are not in the env's action or state specs.")
        return input_spec

    def _edit(self, spec: TensorSpec, inverse: bool) -> TensorSpec:
        self._spec_batch_dims = len(spec.shape) if isinstance(spec, Composite) else 0
        if not isinstance(spec, Composite):
            return self._forward_spec(spec)
        edit_leaves(spec, (), key_pairs(self, inverse=inverse), self._forward_spec, move=inverse)
        return spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._edit(observation_spec, False)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._edit(reward_spec, False)

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        return self._edit(action_spec, True)

    def transform_state_spec(self, state_spec: TensorSpec) -> TensorSpec:
        return self._edit(state_spec, True)

    def __repr__(self) -> str:
        return f"{self._name}(dim={self._dim}, in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv})"


class SqueezeTransform(UnsqueezeTransform):
    """Removes the singleton dim ``dim`` from ``in_keys`` (and inserts it back into inputs at ``in_keys_inv``).

    The mirror image of :class:`UnsqueezeTransform`, with the same key and ``dim`` conventions
    (``squeeze_dim`` is accepted as a deprecated name of ``dim``).

    Raises:
        ValueError: ``dim`` is missing, positive without ``allow_positive_dim``, or (when specs are
            transformed) not a singleton feature dim of an entry.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms.squeeze import SqueezeTransform
        >>> env = TransformedEnv(PendulumEnv(seed=0), SqueezeTransform(-1, in_keys=["reward"]))
        >>> env.rollout(4)["next", "reward"].shape
        torch.Size([4])
    """

    _name = "SqueezeTransform"

    def __init__(
        self,
        dim: int | None = None,
        *args,
        in_keys: Sequence[str] | None = None,
        out_keys: Sequence[str] | None = None,
        in_keys_inv: Sequence[str] | None = None,
        out_keys_inv: Sequence[str] | None = None,
        **kwargs,
    ) -> None:
        if args:
            raise TypeError(f"SqueezeTransform takes dim as its only positional argument; got extra {args!r}.")
        super().__init__(dim, in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv, **kwargs)

    @classmethod
    def _renames(cls) -> dict:
        return {"squeeze_dim": "dim"}

    @property
    def squeeze_dim(self) -> int:
        return self._dim

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return self._shrink(obs)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return self._grow(state)

    def _forward_spec(self, leaf: TensorSpec) -> TensorSpec:
        return self._spec_shrink(leaf)
