"""``RenameTransform``: renames (or copies) entries of an environment's outputs and inputs."""
from __future__ import annotations

from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set, new_td, shallow_dict
from torchrl.data.tensor_specs import Composite
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["RenameTransform"]

_OUTPUT_PARTS = ("full_observation_spec", "full_reward_spec", "full_done_spec")
_INPUT_PARTS = ("full_action_spec", "full_state_spec")


def _move(spec: Composite, old: NestedKey, new: NestedKey, copy: bool) -> bool:
    """Renames (or copies) ``old`` to ``new`` inside ``spec``; returns whether ``old`` was there."""
    if old not in spec:
        return False
    leaf = spec[old]
    if copy:
        leaf = leaf.clone()
    else:
        del spec[old]
    spec[new] = leaf
    return True


def _any_nested(pairs) -> bool:
    return any(isinstance(k, tuple) for pair in pairs for k in pair)


def _rename(td: TensorDictBase, pairs, copy: bool, strict: bool, owner: str) -> TensorDictBase:
    """``td`` with each ``src`` moved (or copied) to ``dst``; a missing ``src`` raises ``KeyError`` when ``strict``.

    Plain TensorDicts get a new TensorDict over the same tensors (``td`` is left as it is); anything else is
    edited in place and returned.
    """
    plain = type(td) is TensorDict
    entries = shallow_dict(td) if plain and all(type(k) is str for pair in pairs for k in pair) else None
    if entries is not None:
        for src, dst in pairs:
            value = entries.get(src) if copy else entries.pop(src, None)
            if value is None:
                if strict:
                    _missing(td, src, owner)
                continue
            entries[dst] = value
        return new_td(entries, td.batch_size, td.device)
    if plain:
        td = td.copy()
    for src, dst in pairs:
        value = fast_get(td, src)
        if value is None:
            if strict:
                _missing(td, src, owner)
            continue
        if not copy:
            del td[src]
        fast_set(td, dst, value)
    return td


def _missing(td: TensorDictBase, key, owner: str) -> None:
    raise KeyError(
        f"{owner}: key {key!r} not found; available keys: "
        f"{sorted(map(str, td.keys(include_nested=True, leaves_only=True)))}."
    )


class RenameTransform(Transform):
    """Renames entries on the way out (``in_keys -> out_keys``) and on the way in (inverse keys).

    Outputs (step and reset data, observation/reward/done specs): ``in_keys[i]`` becomes ``out_keys[i]``.
    Inputs: the outside writes ``out_keys_inv[i]``, the base env receives it as ``in_keys_inv[i]`` (the
    input specs are renamed accordingly).

    A renamed output that is also part of the env's state (an entry the base env reads back at the next
    step, like ``"th"`` of :class:`~torchrl.envs.PendulumEnv`) is renamed back on the way in
    automatically, so that the env keeps working; with ``create_copy`` both names exist and nothing needs
    renaming back.

    Args:
        in_keys: entries to rename in the outputs.
        out_keys: their new names.
        in_keys_inv: input entries as the base env expects them.
        out_keys_inv: the same input entries as the outside writes them (default: ``in_keys_inv``).
        create_copy: keep the original entries and add copies under the new names (this is how
            ``"reward"`` or ``"done"`` can be renamed without removing them).

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._rename_transform import RenameTransform
        >>> env = TransformedEnv(PendulumEnv(), RenameTransform(["observation"], ["obs"]))
        >>> sorted(env.rollout(2)["next"].keys())[:3]
        ['done', 'obs', 'params']
    """

    def __init__(self, in_keys, out_keys, in_keys_inv=None, out_keys_inv=None, create_copy=False) -> None:
        in_keys, out_keys = _key_list(in_keys), _key_list(out_keys)
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"RenameTransform: in_keys {in_keys} and out_keys {out_keys} must have the same length."
            )
        in_keys_inv = _key_list(in_keys_inv)
        out_keys_inv = _key_list(out_keys_inv) if out_keys_inv is not None else list(in_keys_inv)
        if len(in_keys_inv) != len(out_keys_inv):
            raise ValueError(
                f"RenameTransform: in_keys_inv {in_keys_inv} and out_keys_inv {out_keys_inv} must have the same length."
            )
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self.create_copy = bool(create_copy)
        self._pairs = list(zip(in_keys, out_keys))
        # Nested renames edit sub-TensorDicts, which shallow copies share: those paths copy the structure first.
        self._nested_out = any(isinstance(k, tuple) for pair in self._pairs for k in pair)
        # (outside name, base-env name) pairs applied on inputs: the explicit ones, plus renamed state entries.
        self._explicit_inv = list(zip(out_keys_inv, in_keys_inv))
        self._state_inv: list[tuple[NestedKey, NestedKey]] | None = None
        self._all_inv: list[tuple[NestedKey, NestedKey]] | None = None
        self._inv_nested = False

    def set_container(self, container) -> None:
        super().set_container(container)
        self._state_inv = None
        self._all_inv = None

    def _inv_pairs(self) -> list[tuple[NestedKey, NestedKey]]:
        """``(outside name, base-env name)`` pairs of the inputs: the explicit ones, then renamed state."""
        pairs = self._all_inv
        if pairs is None:
            state_inv = self._state_inv
            if state_inv is None:
                parent = self.parent
                state = parent.input_spec["full_state_spec"] if parent is not None else None
                state_inv = self._state_inv = self._renamed_state(state)
            pairs = self._all_inv = self._explicit_inv + state_inv
            self._inv_nested = _any_nested(pairs)
        return pairs

    def _renamed_state(self, state_spec: Composite | None) -> list[tuple[NestedKey, NestedKey]]:
        if self.create_copy or state_spec is None:
            return []
        explicit = {dst for _, dst in self._explicit_inv}
        return [(new, old) for old, new in self._pairs if old in state_spec and old not in explicit]

    # -- data -------------------------------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return _rename(next_tensordict, self._pairs, self.create_copy, not self._missing_tolerance, "RenameTransform")

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Returns ``next_tensordict`` with ``in_keys`` renamed to ``out_keys`` (use the returned TensorDict)."""
        return self._call(next_tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        # Reset outputs carry no rewards (and possibly not every observation): rename what is there.
        if self._nested_out:
            tensordict_reset = tensordict_reset.clone(False)
        return _rename(tensordict_reset, self._pairs, self.create_copy, False, "RenameTransform")

    @property
    def _has_inverse(self) -> bool:
        return bool(self._inv_pairs())

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        pairs = self._inv_pairs()
        if not pairs:
            return tensordict
        if self._inv_nested:
            tensordict = tensordict.clone(False)
        strict = not self._missing_tolerance
        explicit = len(self._explicit_inv)
        tensordict = _rename(tensordict, pairs[:explicit], self.create_copy, strict, "RenameTransform (inverse)")
        return _rename(tensordict, pairs[explicit:], False, False, "RenameTransform (inverse)")

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        pairs = self._inv_pairs()
        if not pairs:
            return tensordict
        if type(tensordict) is TensorDict and not self._inv_nested:
            return self._inv_call(tensordict)  # builds a new TensorDict: the input is not modified
        return self._inv_call(tensordict.copy())

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        pairs = self._inv_pairs()
        if tensordict is None or not pairs:
            return tensordict
        if self._inv_nested:
            tensordict = tensordict.clone(False)
        return _rename(tensordict, pairs, self.create_copy, False, "RenameTransform (inverse)")

    # -- specs ------------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        missing = [old for old, _ in self._pairs if not any(old in output_spec[part] for part in _OUTPUT_PARTS)]
        if missing:
            available = sorted(
                str(k) for part in _OUTPUT_PARTS for k in output_spec[part].keys(True, True)
            )
            raise KeyError(f"RenameTransform: keys {missing} are not produced by the env; available keys: {available}.")
        for old, new in self._pairs:
            for part in _OUTPUT_PARTS:
                if _move(output_spec[part], old, new, self.create_copy):
                    break
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        state_inv = self._renamed_state(input_spec["full_state_spec"])
        self._state_inv = state_inv
        self._all_inv = None
        for outside, base in self._explicit_inv + state_inv:
            found = False
            for part in _INPUT_PARTS:
                if _move(input_spec[part], base, outside, False):
                    found = True
                    break
            if not found:
                available = sorted(str(k) for part in _INPUT_PARTS for k in input_spec[part].keys(True, True))
                raise KeyError(
                    f"RenameTransform: input key {base!r} (in_keys_inv) is not an input of the env; available "
                    f"input keys: {available}."
                )
        return input_spec

    def __repr__(self) -> str:
        inv = f", in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv}" if self.in_keys_inv else ""
        return f"RenameTransform(in_keys={self.in_keys}, out_keys={self.out_keys}{inv}, create_copy={self.create_copy})"
