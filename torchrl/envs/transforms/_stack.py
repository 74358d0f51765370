"""``Stack``: stacks several entries into a new one (and splits it back on the input side)."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["Stack"]


def _delete(container, key: NestedKey) -> None:
    """Deletes ``key`` from a TensorDict or Composite, then the sub-containers this leaves empty."""
    del container[key]
    if isinstance(key, tuple) and len(key) > 1:
        parent = key[:-1] if len(key) > 2 else key[0]
        sub = container.get(parent)
        if len(list(sub.keys())) == 0:
            _delete(container, parent)


class Stack(Transform):
    """Stacks the entries ``in_keys`` along a new dim ``dim`` into ``out_key``.

    On the input side (``in_key_inv`` given), the stacked entry ``in_key_inv`` that the outside writes
    (e.g. one action tensor) is split along ``dim`` into ``out_keys_inv`` for the base env, and the specs
    show the stacked entry instead of the separate ones.

    Args:
        in_keys: the entries to stack (same shape and, for specs, the same spec class).
        out_key: where the stacked tensor goes.
        in_key_inv: the stacked entry split on the input side (default: no inverse).
        out_keys_inv: the entries ``in_key_inv`` is split into (one per slice along ``dim``).
        dim: the new dim; negative (counted from the end, so that batched envs agree) unless
            ``allow_positive_dim``. Defaults to ``-1``.
        allow_positive_dim: accept ``dim >= 0`` (counted from the front, batch dims included).

    Keyword Args:
        del_keys (bool): remove the stacked entries (and ``in_key_inv`` after a split). Defaults to ``True``.

    Raises:
        ValueError: for a non-negative ``dim`` without ``allow_positive_dim``, or ``in_key_inv`` without
            ``out_keys_inv``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import Stack
        >>> t = Stack(in_keys=["a", "b"], out_key="ab", in_key_inv="ab", out_keys_inv=["a", "b"])
        >>> td = t(TensorDict(a=torch.tensor([1.0, 2.0]), b=torch.tensor([3.0, 4.0])))
        >>> td["ab"].tolist(), "a" in td
        ([[1.0, 3.0], [2.0, 4.0]], False)
        >>> t.inv(td)["b"].tolist()
        [3.0, 4.0]
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_key: NestedKey,
        in_key_inv: NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        dim: int = -1,
        allow_positive_dim: bool = False,
        *,
        del_keys: bool = True,
    ) -> None:
        if dim >= 0 and not allow_positive_dim:
            raise ValueError(
                f"Stack: dim={dim} should be negative to accommodate for envs of different batch_sizes. If you "
                "need dim to be positive, set allow_positive_dim=True."
            )
        if (in_key_inv is None) != (out_keys_inv is None):
            raise ValueError(
                f"Stack: pass both in_key_inv and out_keys_inv (the stacked input entry and the entries it is "
                f"split into), or neither; got in_key_inv={in_key_inv!r}, out_keys_inv={out_keys_inv!r}."
            )
        super().__init__(
            in_keys=in_keys,
            out_keys=[out_key],
            in_keys_inv=None if in_key_inv is None else [in_key_inv],
            out_keys_inv=None if out_keys_inv is None else _key_list(out_keys_inv),
        )
        if not self.in_keys:
            raise ValueError("Stack: in_keys is empty; pass the entries to stack.")
        self.dim = dim
        self._del_keys = bool(del_keys)

    # -- data -------------------------------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        values = [next_tensordict.get(key, None) for key in self.in_keys]
        missing = [key for key, v in zip(self.in_keys, values) if v is None]
        if missing:
            if len(missing) == len(values) and (tolerant or self._missing_tolerance):
                return next_tensordict
            raise KeyError(
                f"Stack: key(s) {missing} not found; available keys: "
                f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
            )
        shapes = {tuple(v.shape) for v in values}
        if len(shapes) > 1:
            raise RuntimeError(
                f"Stack: entries {self.in_keys} have different shapes {[tuple(v.shape) for v in values]}; "
                "stacked entries must share one shape."
            )
        next_tensordict.set(self.out_keys[0], torch.stack(values, self.dim))
        if self._del_keys:
            for key in self.in_keys:
                _delete(next_tensordict, key)
        return next_tensordict

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Stacks the entries of ``next_tensordict`` (in place) and returns it."""
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)  # e.g. rewards are absent after a reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.in_keys_inv:
            return tensordict
        key = self.in_keys_inv[0]
        value = tensordict.get(key, None)
        if value is None:
            # absent and already split (e.g. raw data written to a replay buffer): nothing to do
            if self._missing_tolerance or all(tensordict.get(k, None) is not None for k in self.out_keys_inv):
                return tensordict
            raise KeyError(
                f"Stack (inverse): key {key!r} not found; available keys: "
                f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
            )
        parts = value.unbind(self.dim)
        if len(parts) != len(self.out_keys_inv):
            raise RuntimeError(
                f"Stack (inverse): {key!r} has {len(parts)} slices along dim {self.dim}, but out_keys_inv names "
                f"{len(self.out_keys_inv)} entries {self.out_keys_inv}."
            )
        for out_key, part in zip(self.out_keys_inv, parts):
            tensordict.set(out_key, part)
        if self._del_keys:
            _delete(tensordict, key)
        return tensordict

    # -- specs ------------------------------------------------------------------------------------------
    def _stack_specs(self, spec: TensorSpec, keys: list, out_key: NestedKey, owner: str) -> TensorSpec:
        if not isinstance(spec, Composite):
            return spec
        present = [key for key in keys if key in spec.keys(include_nested=True)]
        if not present:
            return spec
        if len(present) != len(keys):
            raise KeyError(
                f"{owner}: entries {[k for k in keys if k not in present]} are not in the same spec as "
                f"{present}; stacked entries must all be observations, all rewards, all dones or all inputs."
            )
        try:
            stacked = torch.stack([spec[key] for key in keys], self.dim)
        except (RuntimeError, ValueError) as err:
            raise RuntimeError(f"{owner}: the specs of {keys} cannot be stacked: {err}") from err
        if self._del_keys:
            for key in keys:
                _delete(spec, key)
        spec[out_key] = stacked
        return spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._stack_specs(observation_spec, self.in_keys, self.out_keys[0], "Stack")

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._stack_specs(reward_spec, self.in_keys, self.out_keys[0], "Stack")

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        return self._stack_specs(done_spec, self.in_keys, self.out_keys[0], "Stack")

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        if not self.in_keys_inv:
            return input_spec
        for part in ("full_action_spec", "full_state_spec"):
            input_spec[part] = self._stack_specs(
                input_spec[part], self.out_keys_inv, self.in_keys_inv[0], "Stack (inverse)"
            )
        return input_spec

    def __repr__(self) -> str:
        return f"Stack(in_keys={self.in_keys}, out_key={self.out_keys[0]}, dim={self.dim})"
