"""``DTypeCastTransform`` and ``DoubleToFloat``: cast entries between dtypes on the way out and back in."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import INPUT_PARTS, OUTPUT_PARTS, cast_spec, edit_leaves, key_pairs, map_keys
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["DTypeCastTransform", "DoubleToFloat"]


def _scan(tensordict: TensorDictBase, src: torch.dtype, dst: torch.dtype) -> TensorDictBase:
    """Casts every ``src`` tensor of ``tensordict`` to ``dst`` (keys-free mode, outside envs)."""
    for key, value in list(tensordict.items(include_nested=True, leaves_only=True)):
        if isinstance(value, torch.Tensor) and value.dtype == src:
            tensordict.set(key, value.to(dst))
    return tensordict


class _DTypeMismatchError(TypeError, AttributeError):
    """A cast entry whose spec does not have ``dtype_in`` (TorchRL: TypeError on outputs; on inputs the spec
    property re-raises it as AttributeError)."""


class DTypeCastTransform(Transform):
    """Casts entries from ``dtype_in`` (the env's) to ``dtype_out`` (the outside's), and inputs back.

    Which entries:

    - with ``in_keys`` / ``in_keys_inv``: exactly those (giving only one side leaves the other empty);
    - with neither, inside an env: every output entry (observations, rewards, states) whose spec has
      ``dtype_in`` is cast on the way out, and every input entry (actions, states) of dtype ``dtype_in``
      is cast back from ``dtype_out`` before it reaches the env. Keys are read from the specs once;
    - with neither, outside an env (``forward`` on stored data): every ``dtype_in`` tensor is cast (and
      ``inv`` casts every ``dtype_out`` tensor back). ``out_keys`` cannot be given in this mode.

    Args:
        dtype_in: the env's dtype.
        dtype_out: the dtype shown outside (to policies and buffers).
        in_keys: output entries to cast.
        out_keys: where the casts go (default: ``in_keys``).
        in_keys_inv: input entries the base env reads (cast back to ``dtype_in``).
        out_keys_inv: the names the outside writes them under (default: ``in_keys_inv``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._dtype_cast import DTypeCastTransform
        >>> t = DTypeCastTransform(torch.float64, torch.float32, in_keys=["obs"])
        >>> t(TensorDict(obs=torch.zeros(2, dtype=torch.float64)))["obs"].dtype
        torch.float32
    """

    invertible = True

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(
        self,
        dtype_in: torch.dtype,
        dtype_out: torch.dtype,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        name = type(self).__name__
        if not isinstance(dtype_in, torch.dtype) or not isinstance(dtype_out, torch.dtype):
            raise TypeError(f"{name}: dtype_in and dtype_out must be torch.dtype, got {dtype_in!r} and {dtype_out!r}.")
        if in_keys is None and out_keys is not None:
            raise ValueError(f"{name}: out_keys={out_keys!r} given without in_keys; pass in_keys too.")
        if in_keys_inv is None and out_keys_inv is not None:
            raise ValueError(f"{name}: out_keys_inv={out_keys_inv!r} given without in_keys_inv; pass in_keys_inv too.")
        # as TorchRL: without in_keys every dtype_in output entry is cast; without either key list, every
        # dtype_in input entry is cast back too
        self._auto = in_keys is None
        self._auto_inv_mode = in_keys is None and in_keys_inv is None
        self._reset_auto()
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        for given_in, given_out, label in ((in_keys, out_keys, ""), (in_keys_inv, out_keys_inv, "_inv")):
            if given_out is not None and len(_key_list(given_in)) != len(_key_list(given_out)):
                raise ValueError(
                    f"{name}: in_keys{label} {_key_list(given_in)} and out_keys{label} {_key_list(given_out)} "
                    f"differ in length."
                )
        self.dtype_in = dtype_in
        self.dtype_out = dtype_out
        self._reset_auto()

    # -- keys ------------------------------------------------------------------------------------------
    def _reset_auto(self) -> None:
        self._auto_out = None  # [(key, strict)] read from the output spec (+ state-only keys, not strict)
        self._auto_inv = None  # [key] read from the input spec

    def set_container(self, container) -> None:
        super().set_container(container)
        self._reset_auto()

    def _detach_container(self) -> None:
        super()._detach_container()
        self._reset_auto()

    def _spec_keys(self, spec: Composite, parts) -> list[NestedKey]:
        out = []
        for part in parts:
            for key, leaf in spec[part].items(include_nested=True, leaves_only=True):
                if leaf.dtype == self.dtype_in:
                    out.append(key)
        return out

    def _resolve(self) -> bool:
        """Reads the keys from the parent env's specs (auto mode); False when there is no parent."""
        if self._auto_out is not None and self._auto_inv is not None:
            return True
        parent = self.parent
        if parent is None:
            return False
        self._set_auto(parent.output_spec, parent.input_spec)
        return True

    def _set_auto(self, output_spec: Composite | None, input_spec: Composite | None) -> None:
        if output_spec is not None:
            self._auto_out = [(k, True) for k in self._spec_keys(output_spec, OUTPUT_PARTS)]
        if input_spec is not None:
            self._auto_inv = self._spec_keys(input_spec, INPUT_PARTS)
            known = {k for k, _ in self._auto_out or ()}
            extra = [(k, False) for k in self._spec_keys(input_spec, ("full_state_spec",)) if k not in known]
            self._auto_out = list(self._auto_out or ()) + extra

    @property
    def in_keys(self) -> list[NestedKey] | None:
        """The cast entries; ``None`` in automatic mode until the transform is in an env (as TorchRL)."""
        if self._auto:
            return [k for k, _ in self._auto_out] if self._resolve() else None
        return self._in_keys

    @in_keys.setter
    def in_keys(self, value) -> None:
        self._in_keys = _key_list(value)
        if value is not None:
            self._auto = self._auto_inv_mode = False

    @property
    def out_keys(self) -> list[NestedKey] | None:
        out = self._out_keys
        if out is not None:
            return out
        keys = self.in_keys
        return None if keys is None else list(keys)

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._out_keys = None if value is None else _key_list(value)

    @property
    def in_keys_inv(self) -> list[NestedKey] | None:
        if self._auto_inv_mode:
            return list(self._auto_inv) if self._resolve() else None
        return self._in_keys_inv

    @in_keys_inv.setter
    def in_keys_inv(self, value) -> None:
        self._in_keys_inv = _key_list(value)
        if value is not None:
            self._auto_inv_mode = False

    @property
    def out_keys_inv(self) -> list[NestedKey] | None:
        out = self._out_keys_inv
        if out is not None:
            return out
        keys = self.in_keys_inv
        return None if keys is None else list(keys)

    @out_keys_inv.setter
    def out_keys_inv(self, value) -> None:
        self._out_keys_inv = None if value is None else _key_list(value)

    # -- data --------------------------------------------------------------------------------------------
    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.to(self.dtype_out)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.to(self.dtype_in)

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        dst = self.dtype_out
        if self._auto:
            if not self._resolve():
                return _scan(next_tensordict, self.dtype_in, dst)
            for key, strict in self._auto_out:
                value = fast_get(next_tensordict, key)
                if value is None:
                    if strict and not tolerant and not self._missing_tolerance:
                        raise KeyError(
                            f"{type(self).__name__}: key {key!r} (declared with dtype {self.dtype_in} in the env's "
                            f"specs) is missing from the step output."
                        )
                    continue
                fast_set(next_tensordict, key, value.to(dst))
            return next_tensordict
        return map_keys(
            next_tensordict,
            key_pairs(self),
            self._apply_transform,
            strict=not (tolerant or self._missing_tolerance),
            owner=type(self).__name__,
        )

    def forward(self=None, tensordict: TensorDictBase = None) -> TensorDictBase:  # TorchRL's signature
        """Applies the transform to ``tensordict`` outside an env (e.g. on replay-buffer samples)."""
        if tensordict is None:
            raise TypeError("DTypeCastTransform.forward: pass the TensorDict to transform.")
        return self._call(tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)

    def _inv_pairs(self):
        if self._auto_inv_mode:
            return [(k, k) for k in self._auto_inv]
        return key_pairs(self, inverse=True)

    def _inv_call(self, tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        if self._auto_inv_mode:
            if not self._resolve():
                return _scan(tensordict, self.dtype_out, self.dtype_in)
            tolerant = True  # state entries may legitimately be absent from a step's input
        src = self.dtype_in
        for in_key, out_key in self._inv_pairs():
            value = fast_get(tensordict, out_key)
            if value is None:
                if tolerant or self._missing_tolerance:
                    continue
                raise KeyError(
                    f"{type(self).__name__} (inverse): key {out_key!r} not found; available keys: "
                    f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            fast_set(tensordict, in_key, value.to(src))
        return tensordict

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Casts the inputs back to ``dtype_in`` on a shallow copy of ``tensordict``."""
        if not self._has_inverse:
            return tensordict
        return self._inv_call(tensordict.copy())

    @property
    def _has_inverse(self) -> bool:
        if self._auto_inv_mode:
            return not self._resolve() or bool(self._auto_inv)
        return bool(self._in_keys_inv)

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """States handed to a (partial) reset go back to the env's dtype."""
        if tensordict is None or not self._has_inverse:
            return tensordict
        return self._inv_call(tensordict, tolerant=True)

    # -- specs ---------------------------------------------------------------------------------------------
    def _cast_out(self, leaf: TensorSpec) -> TensorSpec:
        return cast_spec(leaf, self.dtype_out)

    def _cast_checked(self, leaf: TensorSpec) -> TensorSpec:
        """``_cast_out`` for an explicitly named entry, which must have ``dtype_in``."""
        if leaf.dtype != self.dtype_in:
            raise _DTypeMismatchError(
                f"{type(self).__name__}: a named entry has dtype {leaf.dtype} in the env's specs, but the transform "
                f"casts from dtype_in={self.dtype_in} (spec {type(leaf).__name__} of shape {tuple(leaf.shape)})."
            )
        return cast_spec(leaf, self.dtype_out)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._auto:
            self._set_auto(output_spec, None)
            pairs = [(k, k) for k, _ in self._auto_out]
            edit_leaves(output_spec, OUTPUT_PARTS, pairs, self._cast_out)
        else:
            edit_leaves(output_spec, OUTPUT_PARTS, key_pairs(self), self._cast_checked)
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if self._auto_inv_mode:
            self._set_auto(None, input_spec)
            pairs, fn = [(k, k) for k in self._auto_inv], self._cast_out
        else:
            pairs, fn = key_pairs(self, inverse=True), self._cast_checked
        missing = edit_leaves(input_spec, INPUT_PARTS, pairs, fn, move=True)
        if missing:
            raise KeyError(
                f"{type(self).__name__}: in_keys_inv {missing} are not in the env's action or state specs; "
                f"available: {sorted(map(str, input_spec.keys(include_nested=True, leaves_only=True)))}."
            )
        return input_spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        if self._auto:
            pairs = [(k, k) for k, leaf in observation_spec.items(True, True) if leaf.dtype == self.dtype_in]
        else:
            pairs = key_pairs(self)
        for in_key, out_key in pairs:
            if in_key in observation_spec:
                observation_spec[out_key] = self._cast_out(observation_spec[in_key])
        return observation_spec

    def __repr__(self) -> str:
        if self._auto and self._auto_out is None:
            keys = "keys=<all " + str(self.dtype_in).replace("torch.", "") + " entries>"
        elif self._auto and not self._auto_inv_mode:
            keys = f"in_keys=<all {str(self.dtype_in).replace('torch.', '')} entries>, in_keys_inv={self.in_keys_inv}"
        else:
            keys = f"in_keys={self.in_keys}, out_keys={self.out_keys}, in_keys_inv={self.in_keys_inv}"
        return f"{type(self).__name__}({keys}, dtype_in={self.dtype_in}, dtype_out={self.dtype_out})"


class DoubleToFloat(DTypeCastTransform):
    """Casts ``float64`` entries to ``float32`` (and ``float32`` inputs back to ``float64`` for the env).

    Same key rules as :class:`DTypeCastTransform` with ``dtype_in=torch.float64`` and
    ``dtype_out=torch.float32``: without keys, every float64 entry of the env's specs is handled.

    Args:
        in_keys: float64 output entries to cast.
        out_keys: where the casts go (default: ``in_keys``).
        in_keys_inv: float64 input entries the base env reads (e.g. ``["action"]``).
        out_keys_inv: the names the outside writes them under (default: ``in_keys_inv``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._dtype_cast import DoubleToFloat
        >>> t = DoubleToFloat(in_keys=["obs"], in_keys_inv=["action"])
        >>> t(TensorDict(obs=torch.zeros(3, dtype=torch.float64)))["obs"].dtype
        torch.float32
        >>> t.inv(TensorDict(action=torch.zeros(1)))["action"].dtype
        torch.float64
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(
            torch.float64, torch.float32, in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
