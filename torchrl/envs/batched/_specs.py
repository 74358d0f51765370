"""Specs of batched envs: comparing sub-env specs, and stacking them into the batched env's specs.

Every sub-environment must have the same spec *structure* (keys, spec classes, shapes, dtypes): the
batched env allocates one buffer per leaf for all workers. Bounds may differ (e.g. ``StepCounter`` with a
different ``max_steps`` per worker); the batched spec then stacks them, so that each row of the batched
spec keeps its own worker's bounds.
"""
from __future__ import annotations

from typing import Sequence

import torch

from torchrl.data.tensor_specs import Bounded, Composite, Stacked, StackedComposite, TensorSpec, Unbounded

__all__ = ["describe", "dynamic_key", "first_difference", "heterogeneous_key", "stack_specs"]


def describe(env) -> Composite:
    """``Composite(output_spec=..., input_spec=...)`` of ``env`` (what the workers' envs are checked against)."""
    return Composite(output_spec=env.output_spec, input_spec=env.input_spec, shape=env.batch_size, device=env.device)


def _short(spec: TensorSpec) -> str:
    if isinstance(spec, Composite):
        return f"Composite(shape={tuple(spec.shape)})"
    return f"{type(spec).__name__}(shape={tuple(spec.shape)}, dtype={spec.dtype})"


def _values(spec: TensorSpec) -> str:
    space = getattr(spec, "space", None)
    text = repr(space) if space is not None else ""
    text = " ".join(text.split())
    return f"{_short(spec)[:-1]}, space={text[:120]})"


def first_difference(ref: Composite, other: Composite, prefix: tuple = ()) -> str | None:
    """The first structural difference between two spec trees, as a message (``None`` if compatible).

    Structural: keys, spec classes, shapes, dtypes and devices. Differing values are allowed only for
    ``Bounded`` and ``Unbounded`` leaves (their bounds are stacked, or nominal); any other value difference is
    reported.
    """
    if ref.shape != other.shape:
        where = _where(prefix) if prefix else "batch size"
        return f"{where}: shape {tuple(ref.shape)} vs {tuple(other.shape)}"
    ref_keys, other_keys = list(ref.keys()), list(other.keys())
    for key in ref_keys:
        full = prefix + (key,)
        if key not in other_keys:
            return f"{_where(full)}: {_short(ref[key])} vs missing"
        a, b = ref[key], other[key]
        if isinstance(a, Composite) and isinstance(b, Composite):
            diff = first_difference(a, b, full)
            if diff is not None:
                return diff
            continue
        if type(a) is not type(b) or a.shape != b.shape or a.dtype != b.dtype:
            return f"{_where(full)}: {_short(a)} vs {_short(b)}"
        if getattr(a, "device", None) != getattr(b, "device", None):
            return f"{_where(full)}: device {a.device} vs {b.device}"
        if not isinstance(a, (Bounded, Unbounded)) and a != b:  # (box values are stacked, not structure)
            return f"{_where(full)}: {_values(a)} vs {_values(b)}"
    for key in other_keys:
        if key not in ref_keys:
            return f"{_where(prefix + (key,))}: missing vs {_short(other[key])}"
    return None


def _where(full: tuple) -> str:
    """``key 'observation' of the observation spec`` for ``('output_spec', 'full_observation_spec', 'observation')``."""
    part = None
    if full and full[0] in ("output_spec", "input_spec"):
        full = full[1:]
    if full and full[0].startswith("full_") and full[0].endswith("_spec"):
        part, full = full[0][5:-5], full[1:]
    if not full:
        return f"the {part} spec" if part else "the specs"
    key = full[0] if len(full) == 1 else full
    return f"key {key!r} of the {part} spec" if part else f"key {key!r}"


def heterogeneous_key(specs: Composite, prefix: tuple = ()) -> tuple | None:
    """The first leaf whose shape varies *between members* of a lazily stacked spec (a ``-1`` dim of a
    :class:`Stacked` / :class:`StackedComposite`), if any.

    A ``-1`` dim that a plain spec declares (a dynamic dim, e.g. ``MultiAction``'s chunk dim) is not reported:
    every sub-env must declare it alike (see :func:`first_difference`), and the batched spec keeps it.
    """
    for key, value in specs.items():
        full = prefix + (key,)
        if isinstance(value, StackedComposite):
            for sub, leaf in value.items(include_nested=True, leaves_only=True):
                if leaf is not None and -1 in leaf.shape:
                    return full + ((sub,) if isinstance(sub, str) else tuple(sub))
        elif isinstance(value, Stacked):
            if -1 in value.shape:
                return full
        elif isinstance(value, Composite):
            found = heterogeneous_key(value, full)
            if found is not None:
                return found
    return None


def dynamic_key(specs: Composite) -> tuple | None:
    """The first leaf with a dynamic (``-1``) dim, if any."""
    for key, leaf in specs.items(include_nested=True, leaves_only=True):
        if leaf is not None and -1 in leaf.shape:
            return key
    return None


def stack_specs(specs: Sequence[Composite], batch: torch.Size) -> Composite:
    """The batched spec of ``len(specs)`` sub-env specs (structurally equal), with shape ``batch``.

    ``specs`` are the sub-env specs in worker order (the same object may repeat). Bounded leaves whose
    bounds differ across workers get per-worker bounds; everything else is the first spec, expanded.
    """
    first = specs[0]
    out = first.expand(batch)
    distinct = []
    for spec in specs:
        if all(spec is not d for d in distinct):
            distinct.append(spec)
    if len(distinct) == 1:
        return out
    n = len(specs)
    for key, leaf in first.items(include_nested=True, leaves_only=True):
        if not isinstance(leaf, Bounded):
            continue
        leaves = [spec[key] for spec in specs]
        if all(other == leaf for other in leaves[1:]):
            continue
        low = torch.stack([other.space.low for other in leaves])
        high = torch.stack([other.space.high for other in leaves])
        out[key] = Bounded(low, high, shape=(n, *leaf.shape), dtype=leaf.dtype, device=leaf.device)
    return out
