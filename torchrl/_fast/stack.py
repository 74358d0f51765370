"""The one stacker: :func:`stack_tds`, ``torch.stack`` for lists of TensorDicts, leaf by leaf.

Rollouts and collectors keep each step's TensorDict and stack them once at the end; a multi-process
collector stacks its workers' batches. For plain ``TensorDict`` trees sharing one structure (the usual case)
each leaf is stacked with one ``torch.stack`` call, straight into a preallocated output when one is given
(``out=``: e.g. a worker's shared-memory batch); a root entry that repeats the previous step's ``"next"`` entry
(what ``step_mdp`` does) is copied from the already stacked ``"next"`` leaf in one slice. Anything else goes
through tensordict's own stack, lazily where the elements' structures differ (as TorchRL's rollouts do).
With the fast paths off (:func:`torchrl._fast.set_fast_paths`) every call takes that general route.
"""
from __future__ import annotations

from itertools import compress, islice, repeat
from operator import attrgetter, eq, is_, is_not, itemgetter

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from torchrl._fast import _switch

__all__ = ["stack_tds"]

_TD = TensorDict
_batch_of = attrgetter("_batch_size")  # TensorDict.batch_size's own storage, read without the property call
_entries_of = attrgetter("_tensordict")


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


def _targets(out: TensorDictBase, template: list, sinks: list, dim: int, n: int) -> list | None:
    """The leaves of ``out`` at the positions of ``template`` (extra entries of ``out`` are ignored), or
    ``None`` unless each exists with exactly the stacked shape and the dtype of the first element's leaf."""
    found: list = []

    def walk(node, tmpl) -> bool:
        if type(node) is not _TD:
            return False
        d = node._tensordict
        for key, sub in tmpl:
            v = d.get(key)
            if sub is not None:
                if not walk(v, sub):
                    return False
                continue
            first = sinks[len(found)][0]
            shape = first.shape
            if (not isinstance(v, torch.Tensor) or v.dtype != first.dtype
                    or v.shape != torch.Size((*shape[:dim], n, *shape[dim:]))):
                return False
            found.append(v)
        return True

    return found if walk(out, template) else None


def stack_tds(tds: list[TensorDictBase], dim: int = 0, *, out: TensorDictBase | None = None) -> TensorDictBase:
    """``torch.stack(tds, dim)``, faster for lists of plain TensorDicts sharing one structure.

    Each leaf is stacked with one ``torch.stack`` call (a leaf that is the very same tensor in every
    element is expanded and copied once instead); anything unusual goes through tensordict's own stack,
    lazily where the elements' structures or leaf shapes differ (as TorchRL's rollouts do).

    Args:
        tds: the TensorDicts to stack (at least one).
        dim: the new batch dim (``0 <= dim <= tds[0].batch_dims`` for the fast route).

    Keyword Args:
        out: a TensorDict with the stacked batch size whose entries receive the stack (in place; entries of
            ``out`` the elements do not have are left alone). ``out`` is returned.

    Raises:
        KeyError: ``out`` lacks an entry of the elements.
        RuntimeError: ``out``'s batch size, or an entry's shape, is not the stacked one.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> steps = [TensorDict(obs=torch.full((2,), float(t)), batch_size=[2]) for t in range(3)]
        >>> stack_tds(steps, 1)["obs"].tolist()
        [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
        >>> buffer = TensorDict(obs=torch.zeros(2, 3), batch_size=[2, 3])
        >>> stack_tds(steps, 1, out=buffer) is buffer
        True
    """
    first = tds[0]
    if type(first) is not _TD or dim < 0 or dim > first.batch_dims or not _switch.ON:
        return _general_stack(tds, dim, out)
    template = _template(first)
    if template is None:
        return _general_stack(tds, dim, out)
    batch = first.batch_size
    # (C-level scans: a rollout stacks thousands of steps)
    if not all(map(is_, map(type, tds), repeat(_TD))) or not all(map(eq, map(_batch_of, tds), repeat(batch))):
        return _general_stack(tds, dim, out)
    try:
        sinks = _columns(list(map(_entries_of, tds)), template)
    except _Mismatch:
        return _general_stack(tds, dim, out)
    n = len(tds)
    out_batch = torch.Size((*batch[:dim], n, *batch[dim:]))
    targets = None
    if out is not None:
        if type(out) is _TD and out.batch_size == out_batch:
            targets = _targets(out, template, sinks, dim, n)
        if targets is None:
            return _general_stack(tds, dim, out)
    shifted = _shifted_pairs(sinks) if n > 2 else {}
    stacked: list = [None] * len(sinks) if targets is None else targets
    try:
        for i, values in enumerate(sinks):
            if i not in shifted:
                stacked[i] = _stack_leaf(values, dim, n, None if targets is None else targets[i])
    except Exception:  # e.g. mismatched shapes, or a TensorDict where the first step has a tensor:
        return _general_stack(tds, dim, out)  # tensordict's own stack, and its own error
    for i, (j, exceptions) in shifted.items():  # [values[0], *other's first n - 1], then the exceptions
        head = sinks[i][0].unsqueeze(dim)
        if targets is None:
            stacked[i] = result = torch.cat([head, stacked[j].narrow(dim, 0, n - 1)], dim)
        else:
            result = targets[i]
            result.narrow(dim, 0, 1).copy_(head)
            result.narrow(dim, 1, n - 1).copy_(stacked[j].narrow(dim, 0, n - 1))
        for t in exceptions:
            result.select(dim, t).copy_(sinks[i][t])
    if targets is not None:
        return out
    return _build(template, iter(stacked), first, out_batch)


def _stack_leaf(values: tuple, dim: int, n: int, target: torch.Tensor | None) -> torch.Tensor:
    """One leaf's stack (into ``target`` when given)."""
    v0 = values[0]
    if all(map(is_, values, repeat(v0))):  # the very same tensor at every step: one broadcast copy
        expanded = v0.unsqueeze(dim).expand(*v0.shape[:dim], n, *v0.shape[dim:])
        return expanded.clone() if target is None else target.copy_(expanded)
    if target is not None:
        return torch.stack(values, dim, out=target)
    if dim == 0:
        return torch.stack(values, 0)
    return torch.stack(values, 0).movedim(0, dim).contiguous()  # a contiguous stack then one transposing copy


def _general_stack(tds: list[TensorDictBase], dim: int, out: TensorDictBase | None = None) -> TensorDictBase:
    """tensordict's stack: dense where it can be, a ``LazyStackedTensorDict`` where the elements' keys or leaf
    shapes differ (e.g. an env whose observation grows, or agent groups of different sizes); written into
    ``out`` with ``update_`` when given."""
    result = LazyStackedTensorDict.maybe_dense_stack(tds, dim)
    if out is None:
        return result
    if out.batch_size != result.batch_size:
        raise RuntimeError(
            f"stack_tds: out has batch size {tuple(out.batch_size)}, the stack has {tuple(result.batch_size)}."
        )
    present = set(out.keys(True, True))
    missing = [key for key in result.keys(True, True) if key not in present]
    if missing:
        raise KeyError(f"stack_tds: out has no entry {missing[0]!r} (of the stacked keys {missing}).")
    out.update_(result)
    return out


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
