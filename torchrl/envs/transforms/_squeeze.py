"""``UnsqueezeTransform`` and ``SqueezeTransform``: add or remove a singleton dim of selected entries."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._utils._deprecation import rename_kwargs
from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import edit_leaves, INPUT_PARTS, inverse_read_pairs, key_pairs, map_keys
from torchrl.envs.transforms._transform import Transform

__all__ = ["UnsqueezeTransform", "SqueezeTransform"]


class _DimError(ValueError, TypeError):
    """A missing or non-int ``dim`` (TorchRL raises TypeError)."""


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

    Entries follow ``torch.unsqueeze``/``torch.squeeze``: a dim out of range raises ``IndexError``, and
    squeezing a dim that is not of size one leaves the entry unchanged (as TorchRL's transforms do).

    Raises:
        ValueError: ``dim`` is missing.
        RuntimeError: ``dim`` is not negative and ``allow_positive_dim`` is off; or (when called) the dim
            would be added to or removed from the tensordict's batch dims.
        IndexError: (when called) ``dim`` is out of range for an entry.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._squeeze import UnsqueezeTransform
        >>> env = TransformedEnv(PendulumEnv(seed=0), UnsqueezeTransform(-2, in_keys=["observation"]))
        >>> env.rollout(4)["observation"].shape
        torch.Size([4, 1, 3])
    """

    invertible = True
    _name = "UnsqueezeTransform"
    _td_batch_dims = 0  # batch dims of the tensordict being transformed (set by _call / _inv_call)

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

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
            raise _DimError(f"{self._name}: dim must be an int, got {dim!r}.")
        if dim >= 0 and not allow_positive_dim:
            raise RuntimeError(
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
    def _position(self, dim: int, ndim: int, shape, what: str) -> int:
        """``dim`` as a non-negative position among ``ndim`` dims (``IndexError`` when out of range)."""
        if not -ndim <= dim < ndim:
            raise IndexError(
                f"{self._name}: dim {self._dim} is out of range for {what} of shape {tuple(shape)} (expected a dim "
                f"in [{-ndim}, {ndim - 1}])."
            )
        return dim + ndim if dim < 0 else dim

    def _batch_error(self, shape, action: str) -> RuntimeError:
        return RuntimeError(
            f"{self._name}: {action} dim {self._dim} of an entry with shape {tuple(shape)} would change the "
            f"tensordict's {self._td_batch_dims} batch dims; use a dim among the entry's feature dims."
        )

    def _grow(self, value: torch.Tensor) -> torch.Tensor:
        pos = self._position(self._data_dim(), value.ndim + 1, value.shape, "an entry")
        if pos < self._td_batch_dims:
            raise self._batch_error(value.shape, "unsqueezing")
        return value.unsqueeze(pos)

    def _shrink(self, value: torch.Tensor) -> torch.Tensor:
        pos = self._position(self._data_dim(), value.ndim, value.shape, "an entry")
        if value.shape[pos] != 1:
            return value  # torch.squeeze semantics: a dim that is not of size one stays
        if pos < self._td_batch_dims:
            raise self._batch_error(value.shape, "squeezing")
        return value.squeeze(pos)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return self._grow(obs)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return self._shrink(state)

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        self._td_batch_dims = next_tensordict.batch_dims
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner=self._name)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)  # e.g. rewards are absent after a reset

    @property
    def _has_inverse(self) -> bool:
        return bool(self.in_keys_inv)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        strict = not self._missing_tolerance
        self._td_batch_dims = tensordict.batch_dims
        return map_keys(tensordict, inverse_read_pairs(self), self._inv_apply_transform, strict=strict, owner=self._name)

    # -- specs ---------------------------------------------------------------------------------------
    def _spec_dim(self) -> int:
        """``dim`` for a spec: positive dims count after the parent env's batch dims (none without parent)."""
        dim = self._dim
        return dim if dim < 0 else dim + self._batch_dims()

    def _spec_batch_error(self, leaf: TensorSpec, action: str) -> ValueError:
        return ValueError(
            f"{self._name}: {action} dim {self._dim} of a spec of shape {tuple(leaf.shape)} would change the "
            f"{self._spec_batch_dims} batch dims of the Composite holding it; use a feature dim."
        )

    def _spec_grow(self, leaf: TensorSpec) -> TensorSpec:
        pos = self._position(self._spec_dim(), len(leaf.shape) + 1, leaf.shape, "a spec")
        if pos < self._spec_batch_dims:
            raise self._spec_batch_error(leaf, "unsqueezing")
        return leaf.unsqueeze(pos)

    def _spec_shrink(self, leaf: TensorSpec) -> TensorSpec:
        pos = self._position(self._spec_dim(), len(leaf.shape), leaf.shape, "a spec")
        if leaf.shape[pos] != 1:
            return leaf  # torch.squeeze semantics, as for the data
        if pos < self._spec_batch_dims:
            raise self._spec_batch_error(leaf, "squeezing")
        # indexing rather than leaf.squeeze(pos): TensorSpec.squeeze fails when the result is 0-dim
        return leaf[(slice(None),) * pos + (0,)]

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

    As ``torch.squeeze``, a dim that is not of size one leaves the entry (and its spec) unchanged.

    Raises:
        ValueError: ``dim`` is missing, or (when specs are transformed) the squeezed dim is a batch dim of
            the Composite holding the entry.
        RuntimeError: ``dim`` is positive without ``allow_positive_dim``.
        IndexError: (when called) ``dim`` is out of range for an entry.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._squeeze import SqueezeTransform
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
