"""``CatTensors``: concatenates several entries into one (e.g. position and velocity into one vector)."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["CatTensors"]


class _MissingInKeysError(KeyError, ValueError):
    """``in_keys`` that are not observations of the env (TorchRL raises ValueError)."""


def _out_of_range(ndim: int, batch_dims: int, dim: int) -> bool:
    """Whether an entry with ``ndim`` dims (``batch_dims`` of them batch dims) has no dim ``dim`` to concatenate
    along: a negative dim must be a feature dim (so that the answer does not depend on the batch size)."""
    return ndim - batch_dims < -dim if dim < 0 else ndim <= dim


def _sorted(keys: list[NestedKey]) -> list[NestedKey]:
    return sorted(keys, key=lambda k: (k,) if isinstance(k, str) else tuple(k))


class CatTensors(Transform):
    """Concatenates ``in_keys`` along ``dim`` into ``out_key`` (and, by default, deletes the inputs).

    Args:
        in_keys: entries to concatenate. ``None``: every observation of the parent env, read from its
            specs the first time they are needed (the transform must then be inside an env).
        out_key: the entry receiving the concatenation.
        dim: the dim to concatenate along. Prefer a negative one (counted from the end, so that any batch size
            works); a non-negative one counts from the first dim of the data, batch dims included.

    Keyword Args:
        del_keys: delete the input entries (from the data and from the observation spec). Keep them
            (``del_keys=False``) when the env reads them back as state, as ``PendulumEnv`` does ``th``.
        unsqueeze_if_oor: give entries that have no dim ``dim`` a singleton dim there instead of failing. For
            a negative ``dim`` only feature dims count (e.g. a per-env scalar of a batched env has no dim -1;
            TorchRL counts batch dims too, so its answer changes with the batch size).
        sort: concatenate in sorted key order (otherwise in the order given).

    Raises:
        ValueError: ``dim`` is not an int.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._cat_tensors import CatTensors
        >>> t = CatTensors(in_keys=["b", "a"], out_key="ab")
        >>> td = t(TensorDict(a=torch.zeros(2, 1), b=torch.ones(2, 2), batch_size=[2]))
        >>> td["ab"].tolist(), sorted(td.keys())
        ([[0.0, 1.0, 1.0], [0.0, 1.0, 1.0]], ['ab'])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey = "observation_vector",
        dim: int = -1,
        *,
        del_keys: bool = True,
        unsqueeze_if_oor: bool = False,
        sort: bool = True,
    ) -> None:
        if not isinstance(dim, int) or isinstance(dim, bool):
            raise ValueError(f"CatTensors: dim must be an int, got {dim!r}.")
        self._lazy = in_keys is None
        self._sort = bool(sort)
        keys = _key_list(in_keys)
        super().__init__(in_keys=_sorted(keys) if sort else keys, out_keys=[out_key])
        if out_key in self.in_keys:
            raise ValueError(f"CatTensors: out_key {out_key!r} is also an in_key; pick another name.")
        self.dim = dim
        self._del_keys = bool(del_keys)
        self.unsqueeze_if_oor = bool(unsqueeze_if_oor)

    # -- keys ------------------------------------------------------------------------------------------
    def _resolve_from(self, observation_spec: Composite) -> None:
        out_key = self.out_keys[0]
        keys = [k for k in observation_spec.keys(include_nested=True, leaves_only=True) if k != out_key]
        self._in_keys = _sorted(keys) if self._sort else keys

    @property
    def in_keys(self) -> list[NestedKey]:
        if self._lazy and not self._in_keys:
            parent = self.parent
            if parent is not None:
                self._resolve_from(parent.full_observation_spec)
        return self._in_keys

    @in_keys.setter
    def in_keys(self, value) -> None:
        self._in_keys = _key_list(value)

    def set_container(self, container) -> None:
        super().set_container(container)
        if self._lazy:
            self._in_keys = []

    @property
    def keys_to_exclude(self) -> list[NestedKey]:
        """The input entries deleted after concatenation (empty when ``del_keys=False``)."""
        if not self._del_keys:
            return []
        out_key = self.out_keys[0]
        return [k for k in self.in_keys if k != out_key]

    # -- data ------------------------------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        keys = self.in_keys
        if not keys:
            raise RuntimeError(
                "CatTensors: no in_keys. Pass in_keys=..., or put the transform in a TransformedEnv so that they "
                "are read from the env's observation spec."
            )
        batch_dims = next_tensordict.batch_dims
        dim, unsqueeze = self.dim, self.unsqueeze_if_oor
        values, missing = [], []
        for key in keys:
            value = fast_get(next_tensordict, key)
            if value is None:
                missing.append(key)
                continue
            if _out_of_range(value.ndim, batch_dims, dim):
                if not unsqueeze:
                    raise RuntimeError(
                        f"CatTensors: entry {key!r} has shape {tuple(value.shape)}, which has no dim {dim} to "
                        f"concatenate along. Pass unsqueeze_if_oor=True to add it."
                    )
                value = value.unsqueeze(dim)
            values.append(value)
        if missing:
            if self._missing_tolerance:
                return next_tensordict
            raise KeyError(
                f"CatTensors: expected entries {keys}, but {missing} are missing; available keys: "
                f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
            )
        try:
            out = torch.cat(values, dim)
        except RuntimeError:
            shapes = {str(k): tuple(v.shape) for k, v in zip(keys, values)}
            raise RuntimeError(f"CatTensors: cannot concatenate along dim {dim}: shapes {shapes} differ elsewhere.") from None
        fast_set(next_tensordict, self.out_keys[0], out)
        if self._del_keys:
            for key in self.keys_to_exclude:
                next_tensordict.del_(key)
        return next_tensordict

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)

    # -- specs -----------------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if self._lazy:
            self._resolve_from(observation_spec)
        keys = self.in_keys
        missing = [k for k in keys if k not in observation_spec]
        if missing:
            raise _MissingInKeysError(
                f"CatTensors: in_keys {missing} are not observations of the env; observations: "
                f"{sorted(map(str, observation_spec.keys(include_nested=True, leaves_only=True)))}."
            )
        n = len(observation_spec.shape)
        shapes, dtype, device = [], None, None
        for key in keys:
            leaf = observation_spec[key]
            shape = leaf.shape
            if _out_of_range(len(shape), n, self.dim):
                if not self.unsqueeze_if_oor:
                    raise ValueError(
                        f"CatTensors: observation {key!r} has shape {tuple(shape)}, which has no dim {self.dim} to "
                        f"concatenate along; pass unsqueeze_if_oor=True."
                    )
                d = self.dim + len(shape) + 1 if self.dim < 0 else self.dim
                shape = torch.Size((*shape[:d], 1, *shape[d:]))
            shapes.append(shape)
            dtype = leaf.dtype if dtype is None else torch.promote_types(dtype, leaf.dtype)
            device = leaf.device if device is None else device
        d = self.dim + len(shapes[0]) if self.dim < 0 else self.dim
        rest = [s[:d] + s[d + 1 :] for s in shapes]
        if any(r != rest[0] or len(s) != len(shapes[0]) for r, s in zip(rest, shapes)):
            raise ValueError(
                f"CatTensors: observations {keys} cannot be concatenated along dim {self.dim}: shapes "
                f"{[tuple(s) for s in shapes]}."
            )
        out_shape = torch.Size((*shapes[0][:d], sum(s[d] for s in shapes), *shapes[0][d + 1 :]))
        observation_spec[self.out_keys[0]] = Unbounded(shape=out_shape, device=device, dtype=dtype)
        for key in self.keys_to_exclude:
            del observation_spec[key]
        return observation_spec

    def __repr__(self) -> str:
        return f"CatTensors(in_keys={self.in_keys}, out_key={self.out_keys[0]!r}, dim={self.dim}, del_keys={self._del_keys})"
