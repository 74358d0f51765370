"""``ObservationNorm``: a fixed affine map of observations (``obs * scale + loc`` or ``(obs - loc) / scale``)."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import (
    INPUT_PARTS,
    affine_spec,
    edit_leaves,
    inverse_read_pairs,
    key_pairs,
    map_keys,
    notify_specs_changed,
)
from torchrl.envs.transforms._transform import ObservationTransform

__all__ = ["ObservationNorm"]



def _as_buffer(value) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() else value.to(torch.get_default_dtype())
    return torch.as_tensor(float(value), dtype=torch.get_default_dtype())


class ObservationNorm(ObservationTransform):
    """Normalizes observations with a fixed affine map.

    ``obs = obs * scale + loc`` by default; ``obs = (obs - loc) / scale`` with ``standard_normal=True``
    (the scale is floored at ``eps`` there). ``loc`` and ``scale`` are buffers (saved in ``state_dict``):
    numbers or tensors broadcasting against the observation's feature dims.

    Leave both ``loc`` and ``scale`` unset for lazy initialisation, then call :meth:`init_stats` once the
    transform sits in an env: it collects random rollouts and sets ``loc``/``scale`` so that the
    normalized observations have zero mean and unit standard deviation.

    With ``in_keys_inv``, inputs (e.g. actions) are expected normalized from the outside and mapped back
    (the inverse map) before the env sees them; the action spec shown outside is normalized accordingly.

    Args:
        loc: location of the affine map (default ``0`` when only ``scale`` is given).
        scale: scale of the affine map (default ``1`` when only ``loc`` is given).
        in_keys: entries to normalize (required, as in TorchRL: leaving it out raises ``RuntimeError``).
        out_keys: where the results go (default: ``in_keys``).
        in_keys_inv: input entries the base env reads (mapped back from the outside's normalized values).
        out_keys_inv: the names the outside writes them under (default: ``in_keys_inv``).
        standard_normal: use ``(obs - loc) / scale`` instead of ``obs * scale + loc``.
        eps: floor of ``scale`` in the ``standard_normal`` case and of the std in :meth:`init_stats`
            (default: the machine epsilon of ``scale``'s dtype).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._observation_norm import ObservationNorm
        >>> t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["obs"], standard_normal=True)
        >>> t(TensorDict(obs=torch.tensor([1.0, 3.0])))["obs"].tolist()
        [0.0, 1.0]
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(seed=0), ObservationNorm(in_keys=["observation"], standard_normal=True))
        >>> env.transform.init_stats(num_iter=100)
        >>> env.transform.loc.shape
        torch.Size([3])
    """

    invertible = True

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(
        self,
        loc: float | torch.Tensor | None = None,
        scale: float | torch.Tensor | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        standard_normal: bool = False,
        eps: float | None = None,
    ) -> None:
        if in_keys is None:
            raise RuntimeError(
                "ObservationNorm: in_keys must be given (as TorchRL: not passing in_keys is a deprecated behavior); "
                "e.g. ObservationNorm(loc, scale, in_keys=['observation'])."
            )
        self._default_keys = False
        super().__init__(
            in_keys=in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
        )
        self._check_keys()
        if len(self.in_keys_inv) != len(self.out_keys_inv):
            raise ValueError(
                f"ObservationNorm: in_keys_inv {self.in_keys_inv} and out_keys_inv {self.out_keys_inv} differ in length."
            )
        self.standard_normal = bool(standard_normal)
        self.eps = eps
        if loc is None and scale is None:
            self.register_buffer("loc", None)
            self.register_buffer("scale", None)
        else:
            self.register_buffer("loc", _as_buffer(0.0 if loc is None else loc))
            self.register_buffer("scale", _as_buffer(1.0 if scale is None else scale))
        self._coef = None

    # -- state -------------------------------------------------------------------------------------------
    @property
    def initialized(self) -> bool:
        """Whether ``loc`` and ``scale`` are set (not waiting for :meth:`init_stats` or a state dict)."""
        return self._buffers.get("loc") is not None and self._buffers.get("scale") is not None

    def _eps(self, dtype: torch.dtype) -> float:
        if self.eps is not None:
            return self.eps
        return torch.finfo(dtype).eps if dtype.is_floating_point else 1e-6

    def _coefficients(self, dtype: torch.dtype, device: torch.device | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mul, add)`` with ``normalized = obs * mul + add``, on ``device`` (the observations'; default: the
        buffers'), cached until loc/scale change: the buffers stay where they are (as TorchRL's), and an env on
        another device gets its copies once, not at every step."""
        buffers = self._buffers
        loc, scale = buffers.get("loc"), buffers.get("scale")
        if loc is None or scale is None:
            raise RuntimeError(
                "ObservationNorm: loc and scale are not initialized. Pass them to the constructor, call "
                "transform.init_stats(num_iter) once the transform is in a TransformedEnv, or load a state dict."
            )
        coef = self._coef
        if coef is not None:
            c_loc, c_lv, c_scale, c_sv, c_dtype, c_device = coef[0]
            if c_loc is loc and c_scale is scale and c_lv == loc._version and c_sv == scale._version and c_dtype == dtype \
                    and (device is None or c_device == device):
                return coef[1], coef[2]
        device = loc.device if device is None else device
        stamp = (loc, loc._version, scale, scale._version, dtype, device)
        if not dtype.is_floating_point:
            dtype = torch.promote_types(loc.dtype, scale.dtype)
        loc_, scale_ = loc.detach().to(device=device, dtype=dtype), scale.detach().to(device=device, dtype=dtype)
        if self.standard_normal:
            mul = 1.0 / scale_.clamp_min(self._eps(dtype))
            add = -loc_ * mul
        else:
            mul, add = scale_, loc_
        self._coef = (stamp, mul, add)
        return mul, add

    # -- data ----------------------------------------------------------------------------------------------
    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        mul, add = self._coefficients(obs.dtype, obs.device)
        return torch.addcmul(add, obs, mul)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        loc, scale = self.loc.to(device=state.device, dtype=state.dtype), self.scale.to(device=state.device, dtype=state.dtype)
        if self.standard_normal:
            return torch.addcmul(loc, state, scale.clamp_min(self._eps(state.dtype)))
        return (state - loc) / scale

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        strict = not (self._default_keys or self._missing_tolerance)
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner="ObservationNorm")

    @property
    def _has_inverse(self) -> bool:
        return bool(self.in_keys_inv)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        strict = not self._missing_tolerance
        return map_keys(tensordict, inverse_read_pairs(self), self._inv_apply_transform, strict=strict, owner="ObservationNorm (inverse)")

    # -- statistics ---------------------------------------------------------------------------------------
    def init_stats(
        self,
        num_iter: int,
        reduce_dim: int | tuple[int] = 0,
        cat_dim: int | None = None,
        key: NestedKey | None = None,
        keep_dims: tuple[int] | None = None,
    ) -> None:
        """Sets ``loc``/``scale`` from random rollouts of the parent env (standardizing the observations).

        Args:
            num_iter: number of env steps to collect (rollouts are repeated until reached).
            reduce_dim: dim(s) of the collected data to average over (``0`` is time for an unbatched
                env; use ``(0, 1)`` for a batched one).
            cat_dim: dim along which successive rollouts are concatenated (must be in ``reduce_dim``;
                default: the first of ``reduce_dim``).
            key: the entry to compute statistics of (default: the transform's only ``in_key``).
            keep_dims: reduced dims kept as singleton dims in ``loc``/``scale`` (e.g. ``(-1, -2)`` for
                per-channel pixel statistics of shape ``[C, 1, 1]``).

        Raises:
            RuntimeError: the stats are already set, or the transform has no parent env.
            ValueError: inconsistent ``cat_dim``/``keep_dims``, or several ``in_keys`` and no ``key``.
        """
        if self.initialized:
            raise RuntimeError("ObservationNorm.init_stats: loc and scale are already initialized.")
        if num_iter < 1:
            raise ValueError(f"ObservationNorm.init_stats: num_iter must be a positive integer, got {num_iter}.")
        parent = self.parent
        if parent is None:
            raise RuntimeError(
                "ObservationNorm.init_stats needs a parent env: put the transform in a TransformedEnv first."
            )
        key = self._stats_key(key, parent)
        reduce_dims = (reduce_dim,) if isinstance(reduce_dim, int) else tuple(reduce_dim)
        if cat_dim is None:
            cat_dim = reduce_dims[0]
        elif cat_dim not in reduce_dims:
            raise ValueError(f"ObservationNorm.init_stats: cat_dim ({cat_dim}) must be part of reduce_dim ({reduce_dim}).")
        keep = () if keep_dims is None else tuple(keep_dims)
        if any(k not in reduce_dims for k in keep):
            raise ValueError(f"ObservationNorm.init_stats: keep_dims {keep} must be a subset of reduce_dim {reduce_dims}.")
        chunks, steps = [], 0
        while steps < num_iter:
            data = parent.rollout(max_steps=num_iter)
            steps += data.shape[-1]
            chunks.append(data.get(key))
        data = torch.cat(chunks, cat_dim)
        if not data.is_floating_point():
            data = data.to(torch.get_default_dtype())
        dims = sorted({d % data.ndim for d in reduce_dims})
        loc = data.mean(dims, keepdim=True)
        scale = data.std(dims, keepdim=True)
        kept = {k % data.ndim for k in keep}
        for d in reversed(dims):
            if d not in kept:
                loc, scale = loc.squeeze(d), scale.squeeze(d)
        if not self.standard_normal:
            scale = 1.0 / scale.clamp_min(self._eps(scale.dtype))
            loc = -loc * scale
        self.loc, self.scale = loc, scale
        notify_specs_changed(self)

    def _stats_key(self, key, parent) -> NestedKey:
        if key is not None:
            return key
        keys = self.in_keys
        if self._default_keys:
            keys = [k for k in keys if k in parent.full_observation_spec]
        if len(keys) != 1:
            raise ValueError(
                f"ObservationNorm.init_stats: the transform normalizes {keys}; pass key=... to say which entry to "
                f"compute the statistics of."
            )
        return keys[0]

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        for name in ("loc", "scale"):
            value = state_dict.get(prefix + name)
            if value is not None and self._buffers.get(name) is None:
                self._buffers[name] = torch.empty_like(value)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)
        notify_specs_changed(self)

    # -- specs ----------------------------------------------------------------------------------------------
    def _spec_fn(self, leaf: TensorSpec) -> TensorSpec:
        dtype = leaf.dtype if leaf.dtype.is_floating_point else torch.get_default_dtype()
        if not self.initialized:  # as TorchRL: the specs are unknown until init_stats (or a state dict)
            raise RuntimeError(
                "ObservationNorm: loc/scale have not been initialized, so the transformed specs are unknown. Pass "
                "them to the constructor or call transform.init_stats(num_iter) first."
            )
        return affine_spec(leaf, self._apply_transform, dtype, map_unbounded=True)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        # as TorchRL: in_keys absent from the specs are left to the data path (which raises KeyError on them)
        for in_key, out_key in key_pairs(self):
            if in_key in observation_spec:
                observation_spec[out_key] = self._spec_fn(observation_spec[in_key])
        return observation_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        missing = edit_leaves(input_spec, INPUT_PARTS, key_pairs(self, inverse=True), self._spec_fn, move=True)
        if missing:
            raise KeyError(f"ObservationNorm: in_keys_inv {missing} are not in the env's action or state specs.")
        return input_spec

    def transform_action_spec(self, action_spec: Composite) -> Composite:
        edit_leaves(action_spec, (), key_pairs(self, inverse=True), self._spec_fn, move=True)
        return action_spec

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        edit_leaves(state_spec, (), key_pairs(self, inverse=True), self._spec_fn, move=True)
        return state_spec

    def __repr__(self) -> str:
        if not self.initialized:
            stats = "loc=<lazy>, scale=<lazy>"
        else:
            stats = f"loc={_short(self.loc)}, scale={_short(self.scale)}"
        return f"ObservationNorm(keys={self.in_keys}, {stats}, standard_normal={self.standard_normal})"


def _short(t: torch.Tensor) -> str:
    return f"{t.item():.4g}" if t.numel() == 1 else f"Tensor(shape={tuple(t.shape)})"
