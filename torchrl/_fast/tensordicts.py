"""Fast TensorDict access for hot paths (env steps, rollouts, collectors, buffers): the one module that reads
tensordict's internals (``_tensordict``, ``_new_unsafe``, ``_set_str``, ``_batch_size``, the lock flag).

Plain ``TensorDict`` instances keep their entries in a dict; reading and writing it directly costs a
fraction of the public ``get``/``set`` (which validate keys, shapes and devices on every call). These
helpers take the fast route only for exact ``TensorDict`` instances whose inputs we produced or already
checked, and fall back to the public API for anything else (lazy stacks, tensorclasses, subclasses).
``test/test_fast_tensordicts.py`` checks that both routes agree, so a tensordict upgrade that changes the
internals fails loudly instead of silently. With the fast paths off (:func:`torchrl._fast.set_fast_paths`)
every helper takes the public route.
"""
from __future__ import annotations

from itertools import compress, islice, repeat
from operator import attrgetter, eq, is_, is_not, itemgetter
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from torchrl._fast import _switch

__all__ = ["any_true", "entries", "fast_get", "fast_set", "new_td", "shallow_dict", "stack_tds", "writable"]

_TD = TensorDict
_batch_of = attrgetter("_batch_size")  # TensorDict.batch_size's own storage, read without the property call
_entries_of = attrgetter("_tensordict")


def fast_get(td: TensorDictBase, key, default: Any = None):
    """``td.get(key, default)``, skipping validation for plain TensorDicts."""
    if type(td) is _TD and _switch.ON:
        if type(key) is str:
            return td._tensordict.get(key, default)
        sub = td
        for i, k in enumerate(key[:-1]):
            if type(sub) is not _TD:
                return sub.get(key[i:], default)
            sub = sub._tensordict.get(k)
            if sub is None:
                return default
        if type(sub) is _TD:
            return sub._tensordict.get(key[-1], default)
        return sub.get(key[-1], default)
    return td.get(key, default)


_ZERO_BYTES: dict[int, bytes] = {}


def any_true(t: torch.Tensor) -> bool:
    """``bool(t.any())`` with a single read for one-element tensors, and no torch op for CPU bool tensors:
    comparing their bytes with zeros costs about half of ``any`` plus a read."""
    if t.numel() == 1:
        return bool(t)
    if t.dtype is torch.bool and t.is_cpu and _switch.ON:
        try:
            raw = t.numpy().tobytes()
        except (RuntimeError, TypeError):  # tensor subclasses, functorch wrappers: the torch route
            return bool(t.any())
        zeros = _ZERO_BYTES.get(len(raw))
        if zeros is None:
            if len(_ZERO_BYTES) >= 64:
                _ZERO_BYTES.clear()
            zeros = _ZERO_BYTES[len(raw)] = bytes(len(raw))
        return raw != zeros
    return bool(t.any())


def writable(td: TensorDictBase) -> bool:
    """Whether ``td`` is a plain TensorDict whose entry dict may be written directly (unlocked, and not an
    unpickled consolidated copy: the checks tensordict's own ``_set_str`` makes before it writes)."""
    if type(td) is not _TD or not _switch.ON:
        return False
    d = td.__dict__
    return not d.get("_is_locked") and "_consolidated" not in d


def fast_set(td: TensorDictBase, key, value: torch.Tensor) -> None:
    """``td.set(key, value)`` for values already known to have ``td``'s batch shape and device."""
    if type(td) is _TD and type(key) is str and _switch.ON:
        d = td.__dict__
        if not d.get("_is_locked") and "_consolidated" not in d:  # as writable(), without the call
            td._tensordict[key] = value
        else:
            td._set_str(key, value, inplace=False, validated=True, non_blocking=False)
    else:
        td.set(key, value)


def new_td(
    source: dict, batch_size: torch.Size, device: torch.device | None = None, *, convert_dicts: bool = True
) -> TensorDict:
    """A TensorDict over ``source`` (not copied), without per-entry validation.

    ``convert_dicts=False`` promises that no value is a plain ``dict`` (only tensors and TensorDicts), which
    skips the per-entry type test that turns such dicts into sub-TensorDicts.
    """
    if _switch.ON:
        return _TD._new_unsafe(source, batch_size=batch_size, device=device, nested=convert_dicts)
    return _TD(source, batch_size=batch_size, device=device)


def shallow_dict(td: TensorDictBase) -> dict | None:
    """A copy of the top-level entry dict of a plain TensorDict (``None`` for other types, or fast paths off)."""
    if type(td) is _TD and _switch.ON:
        return dict(td._tensordict)
    return None


def entries(td: Any) -> dict | None:
    """The entry dict of a plain TensorDict, to be READ only (``None`` for other types, or fast paths off).

    Values are tensors or nested TensorDicts (of any class); write through :func:`fast_set`, or into the
    dict only after :func:`writable` said yes.
    """
    if type(td) is _TD and _switch.ON:
        return td._tensordict
    return None


class _Mismatch(Exception):
    pass


def _template(td: TensorDict) -> list | None:
    """``[(key, sub-template or None for a tensor leaf)]`` of a plain TensorDict tree, else ``None``."""
    out = []
    for k, v in td._tensordict.items():
        if type(v) is _TD:
            sub = _template(v)
            if sub is None:
                return None
            out.append((k, sub))
        elif isinstance(v, torch.Tensor):
            out.append((k, None))
        else:
            return None
    return out


def _columns(dicts: list, template: list) -> list:
    """The leaves of ``dicts`` (the entry dicts of TensorDicts sharing ``template``), one sequence per leaf
    in template order; raises ``_Mismatch`` on any difference.

    Each dict is read with one ``itemgetter`` call and the rows are transposed with ``zip``: C-level loops,
    as a rollout stacks thousands of steps.
    """
    n = len(template)
    if n == 0 or not all(map(eq, map(len, dicts), repeat(n))):
        raise _Mismatch
    keys = [k for k, _ in template]
    try:
        if n == 1:
            columns = [tuple(map(itemgetter(keys[0]), dicts))]
        else:
            columns = list(zip(*map(itemgetter(*keys), dicts)))
    except KeyError:
        raise _Mismatch from None
    out = []
    for (_, sub), column in zip(template, columns):
        if sub is None:  # tensors in the first dict; anything else elsewhere makes the stack raise
            out.append(column)
        else:
            if not all(map(is_, map(type, column), repeat(_TD))):
                raise _Mismatch
            out.extend(_columns(list(map(_entries_of, column)), sub))
    return out


def stack_tds(tds: list[TensorDictBase], dim: int = 0) -> TensorDictBase:
    """``torch.stack(tds, dim)``, faster for lists of plain TensorDicts sharing one structure.

    Each leaf is stacked with one ``torch.stack`` call (a leaf that is the very same tensor in every
    element is expanded and copied once instead); anything unusual goes through tensordict's own stack,
    lazily where the elements' structures or leaf shapes differ (as TorchRL's rollouts do).
    """
    first = tds[0]
    if type(first) is not _TD or dim < 0 or dim > first.batch_dims or not _switch.ON:
        return _general_stack(tds, dim)
    template = _template(first)
    if template is None:
        return _general_stack(tds, dim)
    batch = first.batch_size
    # (C-level scans: a rollout stacks thousands of steps)
    if not all(map(is_, map(type, tds), repeat(_TD))) or not all(map(eq, map(_batch_of, tds), repeat(batch))):
        return _general_stack(tds, dim)
    try:
        sinks = _columns(list(map(_entries_of, tds)), template)
    except _Mismatch:
        return _general_stack(tds, dim)
    n = len(tds)
    shifted = _shifted_pairs(sinks) if n > 2 else {}
    stacked: list = [None] * len(sinks)
    for i, values in enumerate(sinks):
        if i in shifted:
            continue
        v0 = values[0]
        if all(map(is_, values, repeat(v0))):
            stacked[i] = v0.unsqueeze(dim).expand(*v0.shape[:dim], n, *v0.shape[dim:]).clone()
        else:
            try:
                if dim == 0:
                    stacked[i] = torch.stack(values, 0)
                else:  # a contiguous stack then one transposing copy beats a strided stack
                    stacked[i] = torch.stack(values, 0).movedim(0, dim).contiguous()
            except Exception:  # e.g. mismatched shapes, or a TensorDict where the first step has a tensor:
                return _general_stack(tds, dim)  # tensordict's own stack, and its own error
    for i, (j, exceptions) in shifted.items():  # [values[0], *other's first n - 1], then the exceptions
        out = torch.cat([sinks[i][0].unsqueeze(dim), stacked[j].narrow(dim, 0, n - 1)], dim)
        for t in exceptions:
            out.select(dim, t).copy_(sinks[i][t])
        stacked[i] = out
    out_batch = torch.Size((*batch[:dim], n, *batch[dim:]))
    return _build(template, iter(stacked), first, out_batch)


def _general_stack(tds: list[TensorDictBase], dim: int) -> TensorDictBase:
    """tensordict's stack: dense where it can be, a ``LazyStackedTensorDict`` where the elements' keys or leaf
    shapes differ (e.g. an env whose observation grows, or agent groups of different sizes)."""
    return LazyStackedTensorDict.maybe_dense_stack(tds, dim)


def _shifted_pairs(sinks: list[list]) -> dict[int, tuple[int, list[int]]]:
    """``{i: (j, exceptions)}`` where leaf list ``i`` repeats leaf list ``j`` one element later
    (``sinks[i][t] is sinks[j][t - 1]``) except at the few positions ``exceptions`` (and 0): a rollout's root
    entries are the previous step's ``"next"`` entries, except after a reset. Every value of list ``i`` that
    is not taken from list ``j`` has the shape, dtype and device of ``j``'s values."""
    n = len(sinks[0])
    by_elem = {}
    for j, values in enumerate(sinks):
        for t in (0, 1):
            by_elem.setdefault(id(values[t]), (j, t))
    out, targets = {}, set()
    for i, values in enumerate(sinks):
        if i in targets:
            continue
        for t in (1, 2):  # the first aligned pair, past a reset at step 1
            hit = by_elem.get(id(values[t]))
            if hit is not None and hit[1] == t - 1:
                break
        else:
            continue
        j = hit[0]
        if j == i or j in out:  # no chains: j is stacked directly
            continue
        other = sinks[j]
        exceptions = list(compress(range(1, n), map(is_not, islice(values, 1, None), other)))
        if len(exceptions) > n // 8:
            continue
        o0 = other[0]
        if all(isinstance(v, torch.Tensor) and v.shape == o0.shape and v.dtype == o0.dtype and v.device == o0.device
               for v in (values[0], *(values[t] for t in exceptions))):
            out[i] = (j, exceptions)
            targets.add(j)
    return out


def _build(template: list, leaves, like: TensorDict, batch: torch.Size) -> TensorDict:
    source = {}
    for k, sub in template:
        if sub is None:
            source[k] = next(leaves)
        else:
            child = like._tensordict[k]
            source[k] = _build(sub, leaves, child, torch.Size((*batch, *child.batch_size[like.batch_dims :])))
    return _TD._new_unsafe(source, batch_size=batch, device=like.device)
