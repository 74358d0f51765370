"""Spec and key helpers shared by the value transforms (casts, affine maps, clipping, reshapes).

A transform that maps ``in_keys`` to ``out_keys`` entry by entry edits the specs the same way: find the
part of ``output_spec`` (observation / reward / done) or ``input_spec`` (action / state) that holds the
key, and write the transformed leaf at the output key of the same part. These helpers do that once, so
every transform states only how one leaf changes.
"""
from __future__ import annotations

import functools
from typing import Callable, Iterable

import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Bounded, Composite, TensorSpec, Unbounded

__all__ = [
    "_apply_to_composite",
    "INPUT_PARTS",
    "OUTPUT_PARTS",
    "affine_spec",
    "cast_spec",
    "check_feature_dims",
    "clip_spec",
    "edit_leaves",
    "find_part",
    "key_pairs",
    "map_keys",
    "notify_specs_changed",
]

OUTPUT_PARTS = ("full_observation_spec", "full_reward_spec", "full_done_spec")
INPUT_PARTS = ("full_action_spec", "full_state_spec")


def find_part(root: Composite, parts: Iterable[str], key: NestedKey) -> str | None:
    """The name of the first part of ``root`` holding ``key`` (``None`` when no part does)."""
    for part in parts:
        sub = root.get(part, None)
        if sub is not None and key in sub:
            return part
    return None


def edit_leaves(
    root: Composite,
    parts: Iterable[str],
    pairs: Iterable[tuple[NestedKey, NestedKey]],
    fn: Callable[[TensorSpec], TensorSpec],
    *,
    move: bool = False,
) -> list[NestedKey]:
    """Writes ``fn(leaf)`` at ``out_key`` (same part as ``in_key``) for every pair found in ``root``.

    With ``move``, a renamed ``in_key`` is removed (used on the input side: the outside writes ``out_key``
    and the transform produces ``in_key`` for the base env). Empty ``parts`` edit ``root`` itself.
    Returns the ``in_keys`` that were not found.
    """
    parts = tuple(parts)
    missing = []
    for in_key, out_key in pairs:
        if parts:
            part = find_part(root, parts, in_key)
            sub = root[part] if part is not None else None
        else:
            sub = root if in_key in root else None
        if sub is None:
            missing.append(in_key)
            continue
        leaf = sub[in_key]
        if move and out_key != in_key:
            del sub[in_key]
        sub[out_key] = fn(leaf)
    return missing


def check_feature_dims(
    root: Composite, pairs: Iterable[tuple[NestedKey, NestedKey]], n_dims: int, owner: str, what: str
) -> None:
    """Raises ``ValueError`` when an edit of the last ``n_dims`` dims of an ``in_key`` (a permutation, a
    flattening) would reach into the batch dims of the ``Composite`` that receives its ``out_key``: a
    group's agent dim (``("agents", ...)``) or the env's batch dims. Keys absent from ``root`` are skipped."""
    for in_key, out_key in pairs:
        leaf = root.get(in_key, None)
        if leaf is None or isinstance(leaf, Composite):
            continue
        out = unravel_key(out_key)
        out = out if isinstance(out, tuple) else (out,)
        holder, held = root, ()
        for i in range(1, len(out)):  # the deepest existing Composite above out_key
            sub = root.get(out[:i], None)
            if not isinstance(sub, Composite):
                break
            holder, held = sub, out[:i]
        batch = holder.shape
        if leaf.ndim - n_dims < len(batch):
            where = f"the group {held[0] if len(held) == 1 else held!r}" if held else "the env"
            raise ValueError(
                f"{owner}: {what} the last {n_dims} dims of {in_key!r} (shape {tuple(leaf.shape)}) would reach into "
                f"the batch dims {tuple(batch)} of {where}, where {out_key!r} is written: a group's agent dim or "
                f"the env's batch dims cannot be edited. Use dims within the entry's own trailing dims, or write "
                f"the result outside the group (e.g. at the root)."
            )


def _apply_to_composite(method: Callable) -> Callable:
    """Decorator for a ``transform_<...>_spec(self, spec)`` method written for one leaf spec.

    Given a :class:`Composite`, the decorated method is applied to (a clone of) the leaf at each ``in_key``
    of the transform that the composite holds, and the result is written at the paired ``out_key`` (in
    place); the composite is returned. ``in_keys`` that are absent, or that name a sub-composite, are
    skipped. Given a leaf spec, the method is applied to it directly. This is what TorchRL's "Pendulum:
    writing your own environment" tutorial uses on ``transform_observation_spec``.

    Raises:
        ValueError: if the transform has a different number of ``in_keys`` and ``out_keys``.

    Examples:
        >>> from torchrl.data import Bounded, Composite, Unbounded
        >>> from torchrl.envs.transforms import Transform
        >>> from torchrl.envs.transforms.transforms import _apply_to_composite
        >>> class Sin(Transform):
        ...     def _apply_transform(self, obs):
        ...         return obs.sin()
        ...     @_apply_to_composite
        ...     def transform_observation_spec(self, spec):
        ...         return Bounded(-1, 1, shape=spec.shape, dtype=spec.dtype, device=spec.device)
        >>> spec = Sin(in_keys=["th"], out_keys=["sin"]).transform_observation_spec(Composite(th=Unbounded((1,))))
        >>> type(spec["sin"]).__name__
        'BoundedContinuous'
    """

    @functools.wraps(method)
    def apply(self, spec):
        if not isinstance(spec, Composite):
            return method(self, spec)
        in_keys, out_keys = list(self.in_keys), list(self.out_keys)
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"{type(self).__name__}.{method.__name__}: in_keys {in_keys} and out_keys {out_keys} differ in "
                "length; pass one out_key per in_key."
            )
        leaves = set(spec.keys(include_nested=True, leaves_only=True))
        for in_key, out_key in zip(in_keys, out_keys):
            if unravel_key(in_key) in leaves:
                spec[out_key] = method(self, spec[in_key].clone())
        return spec

    return apply


def key_pairs(transform, inverse: bool = False) -> tuple[tuple[NestedKey, NestedKey], ...]:
    """``((in_key, out_key), ...)`` of a transform, cached until its key lists are replaced."""
    if inverse:
        src_in, src_out, cached = transform._in_keys_inv, transform._out_keys_inv, transform._pairs_inv_cache
    else:
        src_in, src_out, cached = transform._in_keys, transform._out_keys, transform._pairs_cache
    if cached is not None and cached[0] is src_in and cached[1] is src_out:
        return cached[2]
    if inverse:
        pairs = tuple(zip(transform.in_keys_inv, transform.out_keys_inv))
        transform._pairs_inv_cache = (src_in, src_out, pairs)
    else:
        pairs = tuple(zip(transform.in_keys, transform.out_keys))
        transform._pairs_cache = (src_in, src_out, pairs)
    return pairs


def inverse_read_pairs(transform) -> tuple[tuple[NestedKey, NestedKey], ...]:
    """``((out_key_inv, in_key_inv), ...)``: an inverse reads what the outside wrote under ``out_keys_inv`` and
    writes what the env reads under ``in_keys_inv`` (the order :func:`map_keys` takes)."""
    return tuple((dst, src) for src, dst in key_pairs(transform, inverse=True))


def map_keys(
    tensordict: TensorDictBase,
    pairs: Iterable[tuple[NestedKey, NestedKey]],
    fn: Callable[[torch.Tensor], torch.Tensor],
    *,
    strict: bool,
    owner: str,
) -> TensorDictBase:
    """``tensordict[out] = fn(tensordict[in])`` for every pair; a missing ``in`` raises only when ``strict``."""
    for src, dst in pairs:
        value = fast_get(tensordict, src)
        if value is None:
            if strict:
                raise KeyError(
                    f"{owner}: key {src!r} not found; available keys: "
                    f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}. Pass the keys "
                    f"the data holds, or call set_missing_tolerance(True) to skip absent entries."
                )
            continue
        fast_set(tensordict, dst, fn(value))
    return tensordict


def cast_spec(spec: TensorSpec, dtype: torch.dtype) -> TensorSpec:
    """``spec`` with ``dtype``, as TorchRL's dtype-cast transforms make it: box specs keep their class and
    their bounds cast to ``dtype`` (a float64 bound beyond float32's range becomes +-inf)."""
    out = spec.to(dtype) if spec.dtype != dtype else spec.clone()
    if isinstance(spec, (Bounded, Unbounded)) and isinstance(out, (Bounded, Unbounded)):
        out.space.low = spec.space.low.to(dtype)
        out.space.high = spec.space.high.to(dtype)
    return out


def affine_spec(
    spec: TensorSpec,
    fn: Callable[[torch.Tensor], torch.Tensor],
    dtype: torch.dtype | None = None,
    *,
    map_unbounded: bool = False,
) -> TensorSpec:
    """The spec of ``fn(x)`` for ``x`` in ``spec``, ``fn`` being an elementwise affine (monotonic) map.

    Bounded specs keep finite bounds (``fn`` applied to both ends, reordered when ``fn`` decreases);
    anything else becomes ``Unbounded`` of the same shape. With ``map_unbounded`` (ObservationNorm, as
    TorchRL), an ``Unbounded`` spec's nominal bounds (the dtype's extremes) are mapped too, overflowing
    to +-inf when the map enlarges them.
    """
    dtype = dtype or (spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype())
    if map_unbounded and isinstance(spec, Unbounded) and spec.dtype.is_floating_point:
        a, b = fn(spec.space.low.to(dtype)), fn(spec.space.high.to(dtype))
        a, b = torch.broadcast_tensors(a, b)
        if a.shape == spec.shape:
            out = cast_spec(spec, dtype)
            out.space.low, out.space.high = torch.minimum(a, b), torch.maximum(a, b)
            return out
    if isinstance(spec, Bounded):
        a = fn(spec.low.to(dtype))
        b = fn(spec.high.to(dtype))
        a, b = torch.broadcast_tensors(a, b)
        low, high = torch.minimum(a, b), torch.maximum(a, b)
        if low.shape == spec.shape:
            return Bounded(low, high, shape=spec.shape, device=spec.device, dtype=dtype)
    return Unbounded(shape=spec.shape, device=spec.device, dtype=dtype)


def clip_spec(spec: TensorSpec, low, high) -> TensorSpec:
    """The spec of ``x.clamp(low, high)`` for ``x`` in ``spec`` (``None`` leaves a side open).

    Clamping is monotonic, so the new bounds are the old ones clamped (unbounded sides start at +-inf,
    or at the integer dtype's limits).
    """
    if not isinstance(spec, (Bounded, Unbounded)):
        return spec
    dtype, device = spec.dtype, spec.space.low.device

    def as_bound(b):
        return None if b is None else torch.as_tensor(b, device=device).to(dtype)

    lo, hi = as_bound(low), as_bound(high)
    new_low = spec.space.low.clamp(lo, hi)
    new_high = spec.space.high.clamp(lo, hi)
    if isinstance(spec, Unbounded) and torch.equal(new_low, spec.space.low) and torch.equal(new_high, spec.space.high):
        return spec.clone()
    new_low, new_high = torch.broadcast_tensors(new_low, new_high)
    return Bounded(new_low.expand(spec.shape), new_high.expand(spec.shape), shape=spec.shape, device=spec.device, dtype=dtype)


def notify_specs_changed(transform) -> None:
    """Tells the container chain of ``transform`` that its specs must be recomputed."""
    container = transform.container
    if container is not None and hasattr(container, "_transforms_changed"):
        container._transforms_changed()
