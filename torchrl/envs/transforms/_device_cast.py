"""``DeviceCastTransform``: moves data (all of it, or selected entries) to another device and back."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import INPUT_PARTS, OUTPUT_PARTS, edit_leaves, key_pairs
from torchrl.envs.transforms._transform import Transform

__all__ = ["DeviceCastTransform"]


def _device(device) -> torch.device | None:
    return None if device is None else torch.device(device)


class DeviceCastTransform(Transform):
    """Moves data to ``device`` on the way out and back to ``orig_device`` on the way in.

    Without keys, whole TensorDicts move and the transformed env reports ``device`` as its device (its
    specs move too). With keys, only those entries move (the TensorDicts holding them become
    device-less when needed) and the env's device is unchanged.

    Args:
        device: the destination device (outside the env or buffer).
        orig_device: the origin device (inside); default: the parent env's device when there is one,
            otherwise unspecified (inputs are then passed back unmoved).

    Keyword Args:
        in_keys: output entries to move (default: everything).
        out_keys: where the moved entries go (default: ``in_keys``).
        in_keys_inv: input entries the base env reads, moved back to ``orig_device``.
        out_keys_inv: the names the outside writes them under (default: ``in_keys_inv``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._device_cast import DeviceCastTransform
        >>> t = DeviceCastTransform("cpu:1", "cpu")
        >>> t(TensorDict(obs=torch.ones(1), device="cpu")).device
        device(type='cpu', index=1)
        >>> t.inv(TensorDict(action=torch.ones(1), device="cpu:1")).device
        device(type='cpu')
    """

    invertible = True

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(self, device, orig_device=None, *, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None) -> None:
        self._whole = in_keys is None and in_keys_inv is None
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
        self._check_keys()
        if len(self.in_keys_inv) != len(self.out_keys_inv):
            raise ValueError(
                f"DeviceCastTransform: in_keys_inv {self.in_keys_inv} and out_keys_inv {self.out_keys_inv} differ in "
                f"length."
            )
        self.device = _device(device)
        self._orig_given = _device(orig_device)
        self._orig_cache = None

    @property
    def orig_device(self) -> torch.device | None:
        """The device inside the env (given, or the parent env's)."""
        if self._orig_given is not None:
            return self._orig_given
        if self._orig_cache is None:
            parent = self.parent
            self._orig_cache = (parent.device,) if parent is not None else None
        return None if self._orig_cache is None else self._orig_cache[0]

    def set_container(self, container) -> None:
        super().set_container(container)
        self._orig_cache = None

    # -- data ------------------------------------------------------------------------------------------
    @staticmethod
    def _move_entries(tensordict: TensorDictBase, pairs, device, strict: bool, owner: str) -> TensorDictBase:
        if device is None:
            return tensordict
        if tensordict.device is not None and tensordict.device != device:
            tensordict.clear_device_()
        for src, dst in pairs:
            value = fast_get(tensordict, src)
            if value is None:
                if strict:
                    raise KeyError(
                        f"{owner}: key {src!r} not found; available keys: "
                        f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
                    )
                continue
            fast_set(tensordict, dst, value.to(device))
        return tensordict

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        if self._whole:
            return next_tensordict.to(self.device)
        strict = not (tolerant or self._missing_tolerance)
        return self._move_entries(next_tensordict, key_pairs(self), self.device, strict, "DeviceCastTransform")

    def forward(self=None, tensordict: TensorDictBase = None) -> TensorDictBase:  # TorchRL's signature
        """Applies the transform to ``tensordict`` outside an env (e.g. on replay-buffer samples)."""
        if tensordict is None:
            raise TypeError("DeviceCastTransform.forward: pass the TensorDict to transform.")
        return self._call(tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)

    def _inv_call(self, tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        orig = self.orig_device
        if self._whole:
            return tensordict if orig is None else tensordict.to(orig)
        strict = not (tolerant or self._missing_tolerance)
        return self._move_entries(tensordict, key_pairs(self, inverse=True), orig, strict, "DeviceCastTransform (inverse)")

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Moves the inputs back to ``orig_device`` (the input TensorDict is not modified)."""
        if self._whole:
            return self._inv_call(tensordict)
        if not self.in_keys_inv:
            return tensordict
        return self._inv_call(tensordict.copy())

    @property
    def _has_inverse(self) -> bool:
        return self._whole or bool(self.in_keys_inv)

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        if tensordict is None:
            return None
        return self._inv_call(tensordict, tolerant=True)

    # -- specs ---------------------------------------------------------------------------------------------
    def transform_env_device(self, device):
        return self.device if self._whole else device

    def _move_leaf(self, leaf: TensorSpec) -> TensorSpec:
        return leaf.to(self.device)

    def _edit(self, root: Composite, parts, pairs, move: bool) -> Composite:
        for part in parts:
            sub = root[part]
            if sub.device is not None and sub.device != self.device and any(k in sub for k, _ in pairs):
                sub.clear_device_()
        if root.device is not None and root.device != self.device:
            root.clear_device_()
        edit_leaves(root, parts, pairs, self._move_leaf, move=move)
        return root

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._whole:
            return output_spec.to(self.device)
        return self._edit(output_spec, OUTPUT_PARTS, key_pairs(self), move=False)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if self._whole:
            return input_spec.to(self.device)
        return self._edit(input_spec, INPUT_PARTS, key_pairs(self, inverse=True), move=True)

    def _leafwise(self, spec: Composite, inverse: bool) -> Composite:
        if self._whole:
            return spec.to(self.device)
        pairs = key_pairs(self, inverse=inverse)
        if spec.device is not None and spec.device != self.device and any(k in spec for k, _ in pairs):
            spec.clear_device_()
        edit_leaves(spec, (), pairs, self._move_leaf, move=inverse)
        return spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._leafwise(observation_spec, False)

    def transform_reward_spec(self, full_reward_spec: Composite) -> Composite:
        return self._leafwise(full_reward_spec, False)

    def transform_done_spec(self, full_done_spec: Composite) -> Composite:
        return self._leafwise(full_done_spec, False)

    def transform_action_spec(self, full_action_spec: Composite) -> Composite:
        return self._leafwise(full_action_spec, True)

    def transform_state_spec(self, full_state_spec: Composite) -> Composite:
        return self._leafwise(full_state_spec, True)

    def __repr__(self) -> str:
        keys = "" if self._whole else f", in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv}"
        return f"DeviceCastTransform(device={self.device}, orig_device={self._orig_given}{keys})"
