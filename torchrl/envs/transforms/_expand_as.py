"""``ExpandAs``: expands an entry to the shape of another one (trailing dims added, then broadcast)."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import OUTPUT_PARTS, find_part
from torchrl.envs.transforms._transform import Transform

__all__ = ["ExpandAs"]


def _check_prefix(owner: str, shape: torch.Size, ref_shape: torch.Size, key: NestedKey, ref_key: NestedKey) -> None:
    ok = len(shape) <= len(ref_shape) and all(a == b or a == 1 for a, b in zip(shape, ref_shape))
    if not ok:
        raise RuntimeError(
            f"{owner}: entry {key!r} of shape {tuple(shape)} cannot be expanded as {ref_key!r} of shape "
            f"{tuple(ref_shape)}: its shape must match the leading dims of the reference (or be 1 there)."
        )


def expand_as_right(value: torch.Tensor, ref_shape: torch.Size) -> torch.Tensor:
    """``value`` with trailing singleton dims added until it has ``len(ref_shape)`` dims, expanded to it."""
    return value.reshape(*value.shape, *([1] * (len(ref_shape) - value.ndim))).expand(ref_shape)


def expand_spec_as_right(spec: TensorSpec, ref_shape: torch.Size) -> TensorSpec:
    """The spec of :func:`expand_as_right` applied to a value of ``spec``."""
    out = spec.clone()
    while len(out.shape) < len(ref_shape):
        out = out.unsqueeze(-1)
    return out.expand(*ref_shape)


class ExpandAs(Transform):
    """Expands ``in_key`` to the shape of ``ref_key`` and writes it at ``out_key``.

    The entry keeps its leading dims (which must equal those of the reference, or be 1); trailing singleton
    dims are added and broadcast, as ``tensordict.utils.expand_as_right``. A per-env reward of shape ``(1,)``
    can so be repeated over the ``(1, n_agents)`` layout of another entry. The spec of ``out_key`` is
    ``in_key``'s spec expanded the same way, written next to ``in_key`` (observation, reward or done).

    Args:
        in_key: the entry to expand.
        ref_key: the entry whose shape is the target.
        out_key: where the result goes (default: ``in_key``, in place).

    Raises:
        RuntimeError: if the entry's shape is not a prefix of the reference's (up to singleton dims).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import ExpandAs
        >>> t = ExpandAs("reward", "obs", out_key="reward_expanded")
        >>> td = t(TensorDict(reward=torch.tensor([1.0, 2.0]), obs=torch.zeros(2, 3)))
        >>> td["reward_expanded"].tolist()
        [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
    """

    def __init__(self, in_key: NestedKey, ref_key: NestedKey, out_key: NestedKey | None = None) -> None:
        out_key = in_key if out_key is None else out_key
        super().__init__(in_keys=[in_key], out_keys=[out_key])
        self.in_key, self.ref_key, self.out_key = self.in_keys[0], ref_key, self.out_keys[0]

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        value = next_tensordict.get(self.in_key, None)
        ref = next_tensordict.get(self.ref_key, None)
        if value is None or ref is None:
            if tolerant or self._missing_tolerance:
                return next_tensordict
            missing = self.in_key if value is None else self.ref_key
            raise KeyError(
                f"ExpandAs: key {missing!r} not found; available keys: "
                f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
            )
        _check_prefix("ExpandAs", value.shape, ref.shape, self.in_key, self.ref_key)
        next_tensordict.set(self.out_key, expand_as_right(value, ref.shape))
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes the expanded entry into ``tensordict`` (in place) and returns it."""
        return self._call(tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        # rewards are usually absent after a reset: expand what is there
        return self._call(tensordict_reset, tolerant=True)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        part = find_part(output_spec, OUTPUT_PARTS, self.in_key)
        ref_part = find_part(output_spec, OUTPUT_PARTS, self.ref_key)
        if part is None or ref_part is None:
            missing = self.in_key if part is None else self.ref_key
            raise KeyError(f"ExpandAs: key {missing!r} is not an output (observation, reward or done) of the env.")
        spec, ref_shape = output_spec[part][self.in_key], output_spec[ref_part][self.ref_key].shape
        batch = len(output_spec.shape)
        # specs carry the env's batch dims in front of the entry's own dims
        _check_prefix("ExpandAs", spec.shape[batch:], ref_shape[batch:], self.in_key, self.ref_key)
        output_spec[part][self.out_key] = expand_spec_as_right(spec, ref_shape)
        return output_spec

    def __repr__(self) -> str:
        return f"ExpandAs(in_key={self.in_key!r}, ref_key={self.ref_key!r}, out_key={self.out_key!r})"
