"""Gym spaces ↔ TorchRL specs: ``gym_space_to_spec``, ``spec_to_gym_space``, ``register_gym_spec_conversion``.

The mapping (spaces of ``gymnasium`` and of the legacy ``gym`` alike, matched by class name):

============================  =====================================================================
space                         spec
============================  =====================================================================
``Box``                       ``Bounded`` (``Unbounded`` when the bounds span the whole dtype:
                              ``±inf``, or ``finfo``/``iinfo`` min and max); the space's dtype is
                              kept (float64 stays float64, uint8 images stay uint8); a scalar
                              ``Box`` (shape ``()``) gives a ``(1,)`` spec, as in TorchRL
``Discrete(n)``               ``OneHot(n)`` (``Categorical(n)`` with ``categorical_action_encoding``)
``MultiDiscrete(nvec)``       ``MultiOneHot(nvec)`` (``MultiCategorical(nvec)``)
``MultiBinary(n)``            ``Binary(n)`` (int8)
``Dict``                      ``Composite`` (a top-level ``"state"`` key becomes ``"observation"``)
``Tuple``                     the element specs stacked along a new first dim when they share shape
                              and dtype (a lazy ``Stacked`` spec if their bounds or ``n`` differ);
                              otherwise a ``Composite`` with keys ``"0"``, ``"1"``, ...
``Text``                      ``NonTensor`` holding strings
============================  =====================================================================

``Discrete``/``MultiDiscrete`` ``start`` offsets are not part of the spec: the readers in
``_gym_utils`` subtract them from observations and add them back to actions.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from torchrl.data.tensor_specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    NonTensor,
    OneHot,
    Stacked,
    TensorSpec,
    Unbounded,
)
from torchrl.envs.libs._gym_backend import gym_backend

__all__ = [
    "gym_space_to_spec",
    "spec_to_gym_space",
    "register_gym_spec_conversion",
    "numpy_to_torch_dtype",
    "torch_to_numpy_dtype",
    "TextSpec",
]

_CONVERSIONS: dict[Any, Callable[..., TensorSpec]] = {}
_NP_TO_TORCH: dict[Any, torch.dtype] = {}
_TORCH_TO_NP: dict[torch.dtype, np.dtype] = {}


def numpy_to_torch_dtype(dtype: Any) -> torch.dtype:
    """The torch dtype of a numpy dtype (``np.float64`` → ``torch.float64``)."""
    out = _NP_TO_TORCH.get(dtype)
    if out is None:
        out = _NP_TO_TORCH[dtype] = torch.from_numpy(np.empty(0, dtype=dtype)).dtype
    return out


def torch_to_numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype (``torch.float32`` → ``np.float32``)."""
    out = _TORCH_TO_NP.get(dtype)
    if out is None:
        out = _TORCH_TO_NP[dtype] = torch.empty(0, dtype=dtype).numpy().dtype
    return out


class TextSpec(NonTensor):
    """``NonTensor`` spec of a gym ``Text`` space; keeps the space's lengths and charset for the way back."""

    def __init__(self, shape=(), device=None, *, min_length: int = 1, max_length: int = 1, charset: str = "", **kwargs):
        example = (charset[:1] or "a") * max(min_length, 0)
        kwargs.setdefault("example_data", example)
        super().__init__(shape=shape, device=device, **kwargs)
        self.min_length = min_length
        self.max_length = max_length
        self.charset = charset

    def _rebuild(self, shape: torch.Size, params: dict, **overrides: Any) -> TextSpec:
        return TextSpec(
            shape,
            overrides.get("device", self._device),
            min_length=self.min_length,
            max_length=self.max_length,
            charset=self.charset,
            example_data=self.example_data,
        )


def register_gym_spec_conversion(spec_type: Any) -> Callable[[Callable[..., TensorSpec]], Callable[..., TensorSpec]]:
    """Decorator registering the conversion of a gym space type to a TorchRL spec.

    ``spec_type`` is the space class, or its name under ``gym(nasium).spaces`` (``"Box"``,
    ``"graph.Graph"``). The function is called as ``fn(space, dtype=None, device=None,
    categorical_action_encoding=None, remap_state_to_observation=None, batch_size=None)`` (unused
    arguments can be collected with ``**kwargs``) and returns a spec whose shape starts with
    ``batch_size``. A registration replaces any previous one for the same type.

    Examples:
        >>> import gymnasium, torch
        >>> from torchrl.data import Unbounded
        >>> from torchrl.envs.libs.gym import register_gym_spec_conversion
        >>> class Half(gymnasium.spaces.Box):
        ...     pass
        >>> @register_gym_spec_conversion(Half)
        ... def _half(space, device=None, batch_size=(), **kwargs):
        ...     return Unbounded(shape=(*batch_size, *space.shape), dtype=torch.float16, device=device)
        >>> from torchrl.envs.libs._gym_specs import gym_space_to_spec
        >>> gym_space_to_spec(Half(-1, 1, (2,))).dtype
        torch.float16
    """
    if not isinstance(spec_type, (type, str)):
        raise TypeError(f"register_gym_spec_conversion: expected a space class or its name, got {type(spec_type).__name__}.")

    def decorator(fn: Callable[..., TensorSpec]) -> Callable[..., TensorSpec]:
        _CONVERSIONS[spec_type] = fn
        return fn

    return decorator


def _lookup(space: Any) -> Callable[..., TensorSpec] | None:
    for klass in type(space).__mro__:
        fn = _CONVERSIONS.get(klass)
        if fn is not None:
            return fn
        module = klass.__module__
        for root in ("gymnasium.spaces.", "gym.spaces."):
            if module.startswith(root):
                rel = module[len(root) :]
                fn = _CONVERSIONS.get(f"{rel}.{klass.__name__}") or _CONVERSIONS.get(klass.__name__)
                if fn is not None:
                    return fn
    return None


def gym_space_to_spec(
    space: Any,
    *,
    dtype: torch.dtype | None = None,
    device: Any = None,
    categorical_action_encoding: bool = False,
    remap_state_to_observation: bool = True,
    batch_size: tuple = (),
) -> TensorSpec:
    """The TorchRL spec of a gym space (see the module docstring), with ``batch_size`` leading dims.

    Raises:
        NotImplementedError: for a space type with no conversion (register one with
            :func:`register_gym_spec_conversion`).
    """
    fn = _lookup(space)
    if fn is None:
        raise NotImplementedError(
            f"gym_space_to_spec: no conversion for the space {space!r} (type {type(space).__module__}."
            f"{type(space).__name__}). Register one with @register_gym_spec_conversion({type(space).__name__})."
        )
    return fn(
        space,
        dtype=dtype,
        device=device,
        categorical_action_encoding=categorical_action_encoding,
        remap_state_to_observation=remap_state_to_observation,
        batch_size=tuple(batch_size),
    )


def _sub(space, *, device, categorical_action_encoding, batch_size) -> TensorSpec:
    return gym_space_to_spec(
        space,
        device=device,
        categorical_action_encoding=categorical_action_encoding,
        remap_state_to_observation=False,
        batch_size=batch_size,
    )


def _full_range(low: np.ndarray, high: np.ndarray) -> bool:
    """Whether a Box's bounds span its whole dtype (``±inf``, ``finfo``/``iinfo`` min and max): no bounds at all."""
    if np.issubdtype(low.dtype, np.floating):
        info = np.finfo(low.dtype)
    elif np.issubdtype(low.dtype, np.integer):
        info = np.iinfo(low.dtype)
    else:
        return False
    return bool((low <= info.min).all() and (high >= info.max).all())


@register_gym_spec_conversion("Box")
def _box(space, dtype=None, device=None, batch_size=(), **kwargs) -> TensorSpec:
    dtype = dtype or numpy_to_torch_dtype(space.dtype)
    leaf = tuple(space.shape) or (1,)  # a scalar Box is read as a (1,) entry, as rewards and done flags are
    shape = (*batch_size, *leaf)
    low, high = np.asarray(space.low), np.asarray(space.high)
    if _full_range(low, high):
        return Unbounded(shape=shape, device=device, dtype=dtype)
    low_t = torch.as_tensor(np.broadcast_to(low, leaf).copy()).to(dtype).expand(shape).clone()
    high_t = torch.as_tensor(np.broadcast_to(high, leaf).copy()).to(dtype).expand(shape).clone()
    return Bounded(low_t, high_t, shape=shape, device=device, dtype=dtype)


@register_gym_spec_conversion("Discrete")
def _discrete(space, dtype=None, device=None, categorical_action_encoding=False, batch_size=(), **kwargs) -> TensorSpec:
    dtype = dtype or numpy_to_torch_dtype(space.dtype)
    n = int(space.n)
    if categorical_action_encoding:
        return Categorical(n, shape=batch_size, device=device, dtype=dtype)
    return OneHot(n, shape=(*batch_size, n), device=device, dtype=dtype)


@register_gym_spec_conversion("MultiDiscrete")
def _multi_discrete(space, dtype=None, device=None, categorical_action_encoding=False, batch_size=(), **kwargs) -> TensorSpec:
    dtype = dtype or numpy_to_torch_dtype(space.dtype)
    nvec = np.asarray(space.nvec)
    if categorical_action_encoding:
        return MultiCategorical(torch.as_tensor(nvec), shape=(*batch_size, *nvec.shape), device=device, dtype=dtype)
    if nvec.ndim == 1:
        return MultiOneHot(nvec.tolist(), shape=(*batch_size, int(nvec.sum())), device=device, dtype=dtype)
    n = int(nvec.flat[0])
    if not (nvec == n).all():
        raise NotImplementedError(
            f"gym_space_to_spec: a MultiDiscrete space with a {nvec.ndim}-d nvec of unequal sizes has no one-hot "
            f"spec; build the env with categorical_action_encoding=True."
        )
    return OneHot(n, shape=(*batch_size, *nvec.shape, n), device=device, dtype=dtype)


@register_gym_spec_conversion("MultiBinary")
def _multi_binary(space, dtype=None, device=None, batch_size=(), **kwargs) -> TensorSpec:
    shape = tuple(space.shape)
    return Binary(n=shape[-1], shape=(*batch_size, *shape), device=device, dtype=dtype or numpy_to_torch_dtype(space.dtype))


@register_gym_spec_conversion("Dict")
def _dict(space, device=None, categorical_action_encoding=False, remap_state_to_observation=True, batch_size=(), **kwargs):
    specs = {}
    for key, sub in space.spaces.items():
        out_key = "observation" if remap_state_to_observation and key == "state" else key
        specs[out_key] = _sub(sub, device=device, categorical_action_encoding=categorical_action_encoding, batch_size=batch_size)
    return Composite(specs, shape=batch_size, device=device)


def tuple_is_stacked(specs: list[TensorSpec]) -> bool:
    """Whether a ``Tuple`` space's element specs stack into one tensor spec (same class, shape and dtype)."""
    first = specs[0]
    return (
        not isinstance(first, (Composite, NonTensor))
        and all(type(s) is type(first) and s.shape == first.shape and s.dtype == first.dtype for s in specs)
    )


@register_gym_spec_conversion("Tuple")
def _tuple(space, device=None, categorical_action_encoding=False, batch_size=(), **kwargs) -> TensorSpec:
    elements = [_sub(s, device=device, categorical_action_encoding=categorical_action_encoding, batch_size=()) for s in space.spaces]
    if not elements:
        raise NotImplementedError("gym_space_to_spec: an empty Tuple space has no spec.")
    if tuple_is_stacked(elements):
        stacked = torch.stack(elements, 0)
        if batch_size:
            stacked = stacked.expand(*batch_size, *stacked.shape)
        return stacked
    batched = [_sub(s, device=device, categorical_action_encoding=categorical_action_encoding, batch_size=batch_size) for s in space.spaces]
    return Composite({str(i): s for i, s in enumerate(batched)}, shape=batch_size, device=device)


@register_gym_spec_conversion("Text")
def _text(space, device=None, batch_size=(), **kwargs) -> TensorSpec:
    charset = "".join(sorted(space.character_set)) if hasattr(space, "character_set") else ""
    return TextSpec(batch_size, device, min_length=int(space.min_length), max_length=int(space.max_length), charset=charset)


# ---------------------------------------------------------------------------------------------- spec -> space
def spec_to_gym_space(spec: TensorSpec, *, backend: Any = None) -> Any:
    """The gym space of an (unbatched) TorchRL spec; the inverse of :func:`gym_space_to_spec`.

    Args:
        spec: the spec.

    Keyword Args:
        backend: the gym module whose spaces to build (default: the current :func:`gym_backend`).

    Raises:
        NotImplementedError: for specs with no gym counterpart.
    """
    if backend is None:
        backend = gym_backend()
    spaces = backend.spaces
    if isinstance(spec, Stacked):
        return spaces.Tuple(tuple(spec_to_gym_space(s, backend=backend) for s in spec._stack))
    if isinstance(spec, Composite):
        keys = list(spec.keys())
        if keys and keys == [str(i) for i in range(len(keys))]:
            return spaces.Tuple(tuple(spec_to_gym_space(spec[k], backend=backend) for k in keys))
        return spaces.Dict({k: spec_to_gym_space(spec[k], backend=backend) for k in keys})
    if isinstance(spec, TextSpec):
        charset = spec.charset or None
        kwargs = {"charset": charset} if charset else {}
        return spaces.Text(max_length=spec.max_length, min_length=spec.min_length, **kwargs)
    shape = tuple(spec.shape)
    np_dtype = torch_to_numpy_dtype(spec.dtype) if spec.dtype is not None else None
    if isinstance(spec, MultiOneHot):
        return spaces.MultiDiscrete(np.asarray(spec.nvec, dtype=np_dtype))
    if isinstance(spec, OneHot):
        if len(shape) == 1:
            return spaces.Discrete(spec.n)
        return spaces.MultiDiscrete(np.full(shape[:-1], spec.n, dtype=np_dtype))
    if isinstance(spec, Binary):
        return spaces.MultiBinary(list(shape) if len(shape) > 1 else shape[0])
    if isinstance(spec, MultiCategorical):
        return spaces.MultiDiscrete(spec.nvec.cpu().numpy().astype(np_dtype))
    if isinstance(spec, Categorical):
        if not shape:
            return spaces.Discrete(spec.n)
        return spaces.MultiDiscrete(np.full(shape, spec.n, dtype=np_dtype))
    if isinstance(spec, Bounded):
        low = spec.space.low.cpu().numpy().astype(np_dtype)
        high = spec.space.high.cpu().numpy().astype(np_dtype)
        return spaces.Box(low, high, shape=shape, dtype=np_dtype)
    if isinstance(spec, Unbounded):
        if np.issubdtype(np_dtype, np.integer):
            info = np.iinfo(np_dtype)
            return spaces.Box(info.min, info.max, shape=shape, dtype=np_dtype)
        return spaces.Box(-np.inf, np.inf, shape=shape, dtype=np_dtype)
    raise NotImplementedError(f"spec_to_gym_space: no gym space for a {type(spec).__name__} spec.")
