"""``RemoveEmptySpecs``: drops empty ``Composite`` entries from an env's specs and empty sub-TensorDicts from
its data."""
from __future__ import annotations

from typing import Sequence

from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._transform import Transform

__all__ = ["RemoveEmptySpecs"]


def _drop_empty(spec: Composite) -> list[NestedKey]:
    """Removes (in place) every entry of ``spec`` that is an empty Composite once its own empty entries are
    gone; returns the removed keys (full nested keys, outermost first)."""
    removed: list[NestedKey] = []
    for key in list(spec.keys()):
        sub = spec[key]
        if not isinstance(sub, Composite):
            continue
        inner = _drop_empty(sub)
        if sub.is_empty():
            del spec[key]
            removed.append(key)
        else:
            removed.extend((key, *(k if isinstance(k, tuple) else (k,))) for k in inner)
    return removed


class RemoveEmptySpecs(Transform):
    """Removes empty ``Composite`` specs (and the empty sub-TensorDicts they describe) from an environment.

    An entry is empty when it holds no leaf, directly or through nested composites (``Composite(a=
    Composite())`` is empty). Outputs (observations, rewards, dones) and inputs (state, actions) are cleaned;
    on the input side the base env still gets the empty entries it declares: :meth:`inv` puts them back
    before each step.

    Args:
        in_keys, out_keys, in_keys_inv, out_keys_inv: accepted for TorchRL's signature; unused (every empty
            entry is removed).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import RemoveEmptySpecs
        >>> td = TensorDict(obs=torch.zeros(2), info=TensorDict(extra=TensorDict()))
        >>> list(RemoveEmptySpecs()(td).keys())
        ['obs']
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        # empty input entries removed from the specs, which the base env still expects (restored by ``inv``)
        self._removed_input_keys: list[NestedKey] = []

    # -- data -------------------------------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict.filter_empty_()

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Removes the empty sub-TensorDicts of ``next_tensordict`` (in place) and returns it."""
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset)

    @property
    def _has_inverse(self) -> bool:
        return True  # the removed input entries are known once the specs are built

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Puts back (on a shallow copy) the empty input entries the base env declares; no copy when none."""
        if not self._removed_input_keys:
            return tensordict
        return self._inv_call(tensordict.copy())

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for key in self._removed_input_keys:
            if tensordict.get(key, None) is None:
                tensordict.set(key, TensorDict(batch_size=tensordict.batch_size, device=tensordict.device))
        return tensordict

    # -- specs ------------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for part in ("full_observation_spec", "full_reward_spec", "full_done_spec"):
            sub = output_spec.get(part, None)
            if isinstance(sub, Composite):
                _drop_empty(sub)
        return output_spec

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        removed: list[NestedKey] = []
        for part in ("full_action_spec", "full_state_spec"):
            sub = input_spec.get(part, None)
            if isinstance(sub, Composite):
                removed.extend(_drop_empty(sub))
        self._removed_input_keys = removed
        return input_spec

    def __repr__(self) -> str:
        return "RemoveEmptySpecs()"
