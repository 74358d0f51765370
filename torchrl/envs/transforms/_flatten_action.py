"""``FlattenAction``: the policy gives a flat action, the env receives its ``action_shape``."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._transform import Transform

__all__ = ["FlattenAction"]


def _spec_key(part: str, key: NestedKey) -> tuple:
    return (part, *((key,) if isinstance(key, str) else key))


class FlattenAction(Transform):
    """Exposes a flat action: dims ``first_dim..last_dim`` (inclusive) of the env's action are flattened.

    Inverse (policy -> env): the flat action is unflattened back to the env's span (known from
    ``action_shape`` or recorded from the env's action spec). Forward (env -> flat, e.g. on replay-buffer
    samples): ``torch.flatten(action, first_dim, last_dim)``. The action spec is flattened likewise.

    Args:
        first_dim: first dim to flatten (negative unless ``allow_positive_dim``).
        last_dim: last dim to flatten, inclusive (negative unless ``allow_positive_dim``).
        in_keys_inv: the actions the env reads (default ``["action"]``; the same span for each).
        out_keys_inv: where the policy writes them (default ``in_keys_inv``).
        in_keys: forward inputs (default ``in_keys_inv``).
        out_keys: forward outputs (default ``in_keys``).
        allow_positive_dim: accept positive dims (they then depend on the env's batch size).

    Keyword Args:
        action_shape: the pre-flatten shape of the span (needed outside an env).

    Raises:
        ValueError: a positive dim without ``allow_positive_dim``, or ``first_dim > last_dim``.
        RuntimeError: the inverse runs before the span's shape is known.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._flatten_action import FlattenAction
        >>> t = FlattenAction(action_shape=(2, 3))
        >>> t.inv(TensorDict(action=torch.arange(6.0)))["action"]
        tensor([[0., 1., 2.],
                [3., 4., 5.]])
    """

    def __init__(
        self,
        first_dim: int = -2,
        last_dim: int = -1,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        allow_positive_dim: bool = False,
        *,
        action_shape: Sequence[int] | None = None,
    ):
        if not allow_positive_dim:
            for name, dim in (("first_dim", first_dim), ("last_dim", last_dim)):
                if dim >= 0:
                    raise ValueError(
                        f"FlattenAction: {name} ({dim}) must be negative so that the transform works whatever the "
                        f"env's batch size; set allow_positive_dim=True to allow positive dims."
                    )
        if (first_dim >= 0) == (last_dim >= 0) and first_dim > last_dim:
            raise ValueError(f"FlattenAction: first_dim ({first_dim}) must be <= last_dim ({last_dim}).")
        in_keys_inv = ["action"] if in_keys_inv is None else list(in_keys_inv)
        out_keys_inv = list(in_keys_inv) if out_keys_inv is None else list(out_keys_inv)
        in_keys = list(in_keys_inv) if in_keys is None else list(in_keys)
        out_keys = list(in_keys) if out_keys is None else list(out_keys)
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._first_dim = int(first_dim)
        self._last_dim = int(last_dim)
        self.allow_positive_dim = allow_positive_dim
        self.action_shape = None if action_shape is None else torch.Size(action_shape)
        self._shapes: dict = {}  # in_key_inv -> span shape recorded from the env's spec

    @property
    def first_dim(self) -> int:
        return self._first_dim

    @property
    def last_dim(self) -> int:
        return self._last_dim

    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return torch.flatten(action, self._first_dim, self._last_dim)

    def _span_shape(self, key: NestedKey) -> torch.Size:
        if self.action_shape is not None:
            return self.action_shape
        shape = self._shapes.get(key)
        if shape is None:
            raise RuntimeError(
                f"FlattenAction has no stored unflatten shape for key {key!r}. Pass action_shape to the "
                f"constructor or attach the transform to a TransformedEnv whose action spec holds this key."
            )
        return shape

    def _unflatten(self, action: torch.Tensor, shape: torch.Size, key: NestedKey) -> torch.Tensor:
        dim = self._first_dim if self._first_dim >= 0 else self._last_dim
        if action.shape[dim] != shape.numel():
            raise RuntimeError(
                f"FlattenAction (inverse): action {key!r} has size {action.shape[dim]} at dim {dim}, expected "
                f"{shape.numel()} (the product of the env's span {tuple(shape)})."
            )
        return action.unflatten(dim, shape)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in self._key_pairs(self.in_keys_inv, self.out_keys_inv, "_inv"):
            value = tensordict.get(out_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(f"FlattenAction (inverse): key {out_key!r} not found.")
            tensordict.set(in_key, self._unflatten(value, self._span_shape(in_key), out_key))
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # the action lives in the step's input

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        return action_spec.flatten(self._first_dim, self._last_dim)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        for in_key, out_key in self._key_pairs(self.in_keys_inv, self.out_keys_inv, "_inv"):
            spec = input_spec.get(_spec_key("full_action_spec", in_key), None)
            if spec is None:
                raise KeyError(f"FlattenAction: in_keys_inv key {in_key!r} is not in the env's action spec.")
            first, last = self._first_dim, self._last_dim
            self._shapes[in_key] = spec.shape[first:] if last == -1 else spec.shape[first : last + 1]
            if out_key != in_key:
                del input_spec[_spec_key("full_action_spec", in_key)]
            input_spec[_spec_key("full_action_spec", out_key)] = self.transform_action_spec(spec)
        return input_spec

    def __repr__(self) -> str:
        return (
            f"FlattenAction(first_dim={self._first_dim}, last_dim={self._last_dim}, "
            f"in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv})"
        )
