"""``UnaryTransform``: applies a user function to entries (and its inverse to inputs)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

from tensordict import NonTensorData, NonTensorStack, TensorDictBase
from tensordict.utils import NestedKey
from torch import Tensor

from torchrl.data.tensor_specs import Composite, NonTensor, TensorSpec, Unbounded
from torchrl.envs.transforms._transform import Transform

__all__ = ["UnaryTransform"]

_OUTPUT_PARTS = ("full_observation_spec", "full_reward_spec", "full_done_spec")
_INPUT_PARTS = ("full_action_spec", "full_state_spec")


def _unwrap(value):
    """The raw content of non-tensor data (a Python object, or a list for a stack); other values unchanged."""
    if isinstance(value, NonTensorStack):
        return value.tolist()
    if isinstance(value, NonTensorData):
        return value.data
    return value


def spec_of_value(value, like: TensorSpec) -> TensorSpec:
    """A spec describing ``value`` (a tensor, a TensorDict or non-tensor data) on ``like``'s device."""
    if isinstance(value, Tensor):
        return Unbounded(shape=value.shape, dtype=value.dtype, device=like.device)
    if isinstance(value, TensorDictBase) and not isinstance(value, (NonTensorData, NonTensorStack)):
        return Composite(
            {key: spec_of_value(v, like) for key, v in value.items()}, shape=value.batch_size, device=like.device
        )
    example = _unwrap(value)
    if isinstance(example, list) and example:
        example = example[0]
    return NonTensor(shape=like.shape, device=like.device, example_data=example)


class UnaryTransform(Transform):
    """Applies ``fn`` to each ``in_keys`` entry and writes the result at the paired ``out_keys`` entry.

    On the input side, ``inv_fn`` maps each ``out_keys_inv`` entry (written by the outside) to the paired
    ``in_keys_inv`` entry for the base env. Specs are found by running ``fn`` once on a zero of the input
    spec: the output spec is ``Unbounded`` with the result's shape and dtype (a ``Composite`` for a
    TensorDict result, ``NonTensor`` for other objects). On the input side the new ``out_keys_inv`` entries
    are added next to the base env's (as TorchRL), with the spec of ``fn`` applied to the base entry.

    Args:
        in_keys: entries read (outputs of the env: observations, rewards, dones).
        out_keys: where the results go (one per ``in_keys`` entry).
        in_keys_inv: entries written for the base env by ``inv_fn``.
        out_keys_inv: entries read from the outside by ``inv_fn``.

    Keyword Args:
        fn (callable): the map applied to each entry.
        inv_fn (callable, optional): the map applied on the input side; defaults to no inverse.
        use_raw_nontensor (bool): when ``False`` (default), non-tensor entries are unwrapped before ``fn`` sees
            them (a ``NonTensorData`` gives its object, a ``NonTensorStack`` a list); when ``True``, ``fn``
            gets the ``NonTensorData``/``NonTensorStack`` itself.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms import UnaryTransform
        >>> t = UnaryTransform(in_keys=["obs"], out_keys=["obs_sq"], fn=lambda x: x ** 2)
        >>> t(TensorDict(obs=torch.tensor([1.0, -3.0])))["obs_sq"].tolist()
        [1.0, 9.0]
        >>> env = TransformedEnv(PendulumEnv(), UnaryTransform(["th"], ["th_int"], fn=lambda x: x.round().long()))
        >>> env.observation_spec["th_int"].dtype
        torch.int64
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey],
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        *,
        fn: Callable[[Any], Tensor | TensorDictBase],
        inv_fn: Callable[[Any], Any] | None = None,
        use_raw_nontensor: bool = False,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._check_keys()
        self._fn = fn
        self._inv_fn = inv_fn
        self._use_raw_nontensor = bool(use_raw_nontensor)

    # -- data -------------------------------------------------------------------------------------------
    def _prepare(self, value):
        return value if self._use_raw_nontensor else _unwrap(value)

    def _apply_transform(self, value):
        return self._fn(self._prepare(value))

    def _inv_apply_transform(self, state):
        if self._inv_fn is None:
            raise RuntimeError(
                f"{type(self).__name__}: in_keys_inv {self.in_keys_inv} are set but inv_fn is None; pass inv_fn to "
                "map the outside entries back."
            )
        return self._inv_fn(self._prepare(state))

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        # entries absent after a reset (e.g. rewards) are skipped
        tolerance = self._missing_tolerance
        self._missing_tolerance = True
        try:
            return self._call(tensordict_reset)
        finally:
            self._missing_tolerance = tolerance

    # -- specs ------------------------------------------------------------------------------------------
    def _map_specs(self, spec: TensorSpec, test: TensorDictBase, pairs) -> TensorSpec:
        if not isinstance(spec, Composite):
            return spec
        for src, dst, fn in pairs:
            if src not in spec.keys(include_nested=True):
                continue
            spec[dst] = spec_of_value(fn(self._prepare(test.get(src))), spec[src])
        return spec

    def _forward_pairs(self):
        return [(i, o, self._fn) for i, o in zip(self.in_keys, self.out_keys)]

    def _inverse_pairs(self):
        # the outside writes out_keys_inv; described by fn applied to the base env's in_keys_inv entry
        return [(i, o, self._fn) for i, o in zip(self.in_keys_inv, self.out_keys_inv)]

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for part in _OUTPUT_PARTS:
            sub = output_spec[part]
            method = getattr(self, "transform_" + part[len("full_"):])
            output_spec[part] = method(sub, sub.zero())
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        for part in _INPUT_PARTS:
            sub = input_spec[part]
            method = getattr(self, "transform_" + part[len("full_"):])
            input_spec[part] = method(sub, sub.zero())
        return input_spec

    def transform_observation_spec(self, observation_spec: TensorSpec, test_output_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(observation_spec, test_output_spec, self._forward_pairs())

    def transform_reward_spec(self, reward_spec: TensorSpec, test_output_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(reward_spec, test_output_spec, self._forward_pairs())

    def transform_done_spec(self, done_spec: TensorSpec, test_output_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(done_spec, test_output_spec, self._forward_pairs())

    def transform_action_spec(self, action_spec: TensorSpec, test_input_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(action_spec, test_input_spec, self._inverse_pairs())

    def transform_state_spec(self, state_spec: TensorSpec, test_input_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(state_spec, test_input_spec, self._inverse_pairs())

    def __repr__(self) -> str:
        return f"{type(self).__name__}(in_keys={self.in_keys}, out_keys={self.out_keys}, fn={self._fn!r})"
