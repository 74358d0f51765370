"""Fast TensorDict access for hot paths (env steps, rollouts, collectors, buffers).

Plain ``TensorDict`` instances keep their entries in a dict; reading and writing it directly costs a
fraction of the public ``get``/``set`` (which validate keys, shapes and devices on every call). These
helpers take the fast route only for exact ``TensorDict`` instances whose inputs we produced or already
checked, and fall back to the public API for anything else (lazy stacks, tensorclasses, subclasses).
``test/test_td_fast.py`` checks that both routes agree, so a tensordict upgrade that changes the
internals fails loudly instead of silently.
"""
from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

__all__ = ["any_true", "fast_get", "fast_set", "new_td", "shallow_dict", "stack_tds", "writable"]

_TD = TensorDict


def fast_get(td: TensorDictBase, key, default: Any = None):
    """``td.get(key, default)``, skipping validation for plain TensorDicts."""
    if type(td) is _TD:
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
    if t.dtype is torch.bool and t.is_cpu:
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
    if type(td) is not _TD:
        return False
    d = td.__dict__
    return not d.get("_is_locked") and "_consolidated" not in d


def fast_set(td: TensorDictBase, key, value: torch.Tensor) -> None:
    """``td.set(key, value)`` for values already known to have ``td``'s batch shape and device."""
    if type(td) is _TD and type(key) is str:
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
    return _TD._new_unsafe(source, batch_size=batch_size, device=device, nested=convert_dicts)


def shallow_dict(td: TensorDictBase) -> dict | None:
    """A copy of the top-level entry dict of a plain TensorDict (``None`` for other types)."""
    if type(td) is _TD:
        return dict(td._tensordict)
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


def _collect(entries: dict, template: list, sinks: list, pos: int) -> int:
    """Appends ``entries``' leaves to ``sinks`` in template order; raises ``_Mismatch`` on any difference."""
    if len(entries) != len(template):
        raise _Mismatch
    try:
        for key, sub in template:
            v = entries[key]
            if sub is None:
                sinks[pos].append(v)
                pos += 1
            else:
                if type(v) is not _TD:
                    raise _Mismatch
                pos = _collect(v._tensordict, sub, sinks, pos)
    except KeyError:
        raise _Mismatch from None
    return pos


def _n_leaves(template: list) -> int:
    return sum(1 if sub is None else _n_leaves(sub) for _, sub in template)


def stack_tds(tds: list[TensorDictBase], dim: int = 0) -> TensorDictBase:
    """``torch.stack(tds, dim)``, faster for lists of plain TensorDicts sharing one structure.

    Each leaf is stacked with one ``torch.stack`` call (a leaf that is the very same tensor in every
    element is expanded and copied once instead); anything unusual goes through tensordict's own stack.
    """
    first = tds[0]
    if type(first) is not _TD or dim < 0 or dim > first.batch_dims:
        return torch.stack(tds, dim)
    template = _template(first)
    if template is None:
        return torch.stack(tds, dim)
    batch = first.batch_size
    sinks: list[list] = [[] for _ in range(_n_leaves(template))]
    try:
        for td in tds:
            if type(td) is not _TD or td.batch_size != batch:
                raise _Mismatch
            _collect(td._tensordict, template, sinks, 0)
    except _Mismatch:
        return torch.stack(tds, dim)
    n = len(tds)
    shifted = _shifted_pairs(sinks) if n > 2 else {}
    stacked: list = [None] * len(sinks)
    for i, values in enumerate(sinks):
        if i in shifted:
            continue
        v0 = values[0]
        if all(v is v0 for v in values):
            stacked[i] = v0.unsqueeze(dim).expand(*v0.shape[:dim], n, *v0.shape[dim:]).clone()
        else:
            try:
                if dim == 0:
                    stacked[i] = torch.stack(values, 0)
                else:  # a contiguous stack then one transposing copy beats a strided stack
                    stacked[i] = torch.stack(values, 0).movedim(0, dim).contiguous()
            except RuntimeError:
                return torch.stack(tds, dim)
    for i, (j, exceptions) in shifted.items():  # [values[0], *other's first n - 1], then the exceptions
        out = torch.cat([sinks[i][0].unsqueeze(dim), stacked[j].narrow(dim, 0, n - 1)], dim)
        for t in exceptions:
            out.select(dim, t).copy_(sinks[i][t])
        stacked[i] = out
    out_batch = torch.Size((*batch[:dim], n, *batch[dim:]))
    return _build(template, iter(stacked), first, out_batch)


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
        exceptions = [t for t in range(1, n) if values[t] is not other[t - 1]]
        if len(exceptions) > n // 8:
            continue
        o0 = other[0]
        if all(v.shape == o0.shape and v.dtype == o0.dtype and v.device == o0.device
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
