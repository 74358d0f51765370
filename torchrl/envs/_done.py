"""The structure of an environment's done signals, derived once from its ``full_done_spec``.

Done leaves come in *groups*: all leaves under one parent key (the root, or e.g. ``"agents"`` in a
multi-agent env) share a shape and form one group, whose reset mask lives at ``parent + ("_reset",)``.
Within a group, ``done`` must equal ``terminated | truncated``; environments may return only some of the
three, and :meth:`DoneStructure.complete` fills in the rest the same way on every step.
"""
from __future__ import annotations

import weakref
from typing import Iterable

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import any_true, entries, fast_get, fast_set

__all__ = ["DoneStructure", "as_tuple", "checked_after_reset", "from_tuple", "flag_state", "known_value",
           "mark_checked_after_reset", "mark_false", "mark_true", "sort_keys", "where_reset"]

DONE_NAMES = ("done", "terminated", "truncated")

# Host-side knowledge of done flags and reset masks on an accelerator that are all False or all True, kept without
# reading them (CPU flags are not marked: reading them costs less than the bookkeeping):
# id -> (weak reference, version when marked, value). Two generations of at most _MARKS_PER_GENERATION entries:
# a mark lives through at least that many newer ones (a few per step), and the memory stays bounded without
# weakref callbacks. Kept out of the tensors themselves so that pickles and deep copies (whose versions restart
# at 0) never carry a stale mark.
_MARKS_PER_GENERATION = 1024
_marks: dict[int, tuple] = {}
_old_marks: dict[int, tuple] = {}


def _mark(t: torch.Tensor, value) -> torch.Tensor:
    global _marks, _old_marks
    if len(_marks) >= _MARKS_PER_GENERATION:
        _old_marks, _marks = _marks, {}
    _marks[id(t)] = (weakref.ref(t), t._version, value)
    return t


def mark_false(t: torch.Tensor) -> torch.Tensor:
    """Records that ``t`` (a done flag just filled with False, e.g. by ``zeros_like``) holds no True value, so
    that done checks skip reading it; returns ``t``.

    The mark holds the tensor's version: any in-place write (to ``t`` or a view of it) makes it stale. On an
    accelerator this is what keeps the step loop free of host syncs while no episode can end (``PendulumEnv``,
    or a ``StepCounter`` that knows on the host that no counter can reach its limit). CPU tensors are returned
    unmarked: reading them costs less than the bookkeeping."""
    return t if t.is_cpu else _mark(t, False)


def mark_true(t: torch.Tensor) -> torch.Tensor:
    """Records that every value of ``t`` (a reset mask) is True: resets then restart every row without reading
    the mask (:func:`known_value`); returns ``t`` (unmarked on the CPU, as :func:`mark_false`)."""
    return t if t.is_cpu else _mark(t, True)


_CHECKED = "checked after reset"


def mark_checked_after_reset(t: torch.Tensor) -> torch.Tensor:
    """Records that ``t`` (a done flag a reset just blended) holds False wherever that reset restarted a row, as
    checked by the env's done-after-reset test; an enclosing env's same test then skips it; returns ``t``
    (unmarked on the CPU, as :func:`mark_false`)."""
    return t if t.is_cpu else _mark(t, _CHECKED)


def _lookup(t: torch.Tensor):
    key = id(t)
    entry = _marks.get(key) or _old_marks.get(key)
    if entry is not None and entry[0]() is t and entry[1] == t._version:
        return entry[2]
    return None


def known_value(t: torch.Tensor) -> bool | None:
    """``False``/``True`` when ``t`` was marked all-False/all-True (:func:`mark_false`, :func:`mark_true`) and
    has not been written since; ``None`` when unknown. Reads no value: never waits for a device."""
    value = _lookup(t)
    return value if type(value) is bool else None


def checked_after_reset(t: torch.Tensor) -> bool:
    """Whether ``t`` is known (without a read) to hold False on the rows a reset restarted: all-False, or
    marked by :func:`mark_checked_after_reset` and not written since."""
    value = _lookup(t)
    return value is False or value is _CHECKED


def flag_state(t: torch.Tensor) -> tuple[bool, bool]:
    """``(any, all)`` of a done flag. A CPU flag is read cheaply for ``any`` (``all`` then stays unknown:
    ``False``). A flag on an accelerator comes from its mark when it has one, else is read once for both, which
    is a host sync (the one a step loop's done test makes, and the only one of a step that resets every row)."""
    if t.is_cpu:
        return any_true(t), False
    known = known_value(t)
    if known is not None:
        return known, known
    if t.numel() == 1:
        return any_true(t), False
    found, every = torch.stack((t.any(), t.all())).tolist()
    return found, every


def where_reset(mask: torch.Tensor, fresh: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
    """``torch.where(mask, fresh, previous)``: a reset's new values where ``mask`` is set, the old ones elsewhere.

    A one-element CPU mask over tensors of one shape and dtype picks a side without a torch op (the usual
    unbatched reset); the chosen tensor is returned as is, as a reset carries untouched entries over. Masks on
    an accelerator take ``torch.where`` (reading them would wait for the device), unless marked all-True
    (:func:`mark_true`).
    """
    if fresh.shape == previous.shape and fresh.dtype == previous.dtype:
        if mask.is_cpu:
            if mask.numel() == 1:
                return fresh if bool(mask) else previous
        elif known_value(mask) is True:  # a mask known (without a read) to select every row
            return fresh
    return torch.where(mask, fresh, previous)


def sort_keys(keys: Iterable[NestedKey]) -> list[NestedKey]:
    """``keys`` in TorchRL's order for an env's key lists: shallow keys first, then by name."""
    return sorted(keys, key=lambda k: (len(as_tuple(k)), as_tuple(k)))


def as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def from_tuple(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


class _Group:
    __slots__ = ("prefix", "done", "terminated", "truncated", "others", "keys", "reset_key", "shape", "event", "dtypes")

    def __init__(self, prefix: tuple[str, ...], names: dict[str, NestedKey], shape: torch.Size, batch_ndim: int = 0,
                 dtypes: dict | None = None):
        self.prefix = prefix
        self.done = names.pop("done", None)
        self.terminated = names.pop("terminated", None)
        self.truncated = names.pop("truncated", None)
        self.others = list(names.values())
        # every leaf of the group: done, terminated, truncated (those present), then the others
        self.keys: list[NestedKey] = [k for k in (self.done, self.terminated, self.truncated) if k is not None] + self.others
        self.reset_key = from_tuple(prefix + ("_reset",))
        self.shape = shape
        self.event = shape[batch_ndim:]  # the leaves' shape past the env's batch dims
        self.dtypes = dtypes or {}  # key -> dtype of each leaf (for the entries filled with False)

    def fill(self, data: TensorDictBase, like: torch.Tensor | None) -> None:
        """Writes all-False values for the group's entries missing from ``data``."""
        for key in self.keys:
            if fast_get(data, key) is None:
                dtype = self.dtypes.get(key, torch.bool)
                if like is not None:
                    value = torch.zeros(like.shape, dtype=dtype, device=like.device)
                else:
                    value = torch.zeros((*data.batch_size, *self.event), dtype=dtype, device=data.device)
                fast_set(data, key, mark_false(value) if dtype is torch.bool else value)


class DoneStructure:
    """Done keys grouped by parent, their reset keys, and the rule that completes partial done outputs.

    Args:
        full_done_spec: a ``Composite`` whose leaves are the env's done signals.

    Examples:
        >>> import torch
        >>> from torchrl.data import Categorical, Composite
        >>> spec = Composite(done=Categorical(2, (1,), dtype=torch.bool), terminated=Categorical(2, (1,), dtype=torch.bool))
        >>> ds = DoneStructure(spec)
        >>> ds.done_keys, ds.reset_keys
        (['done', 'terminated'], ['_reset'])
    """

    def __init__(self, full_done_spec) -> None:
        groups: dict[tuple[str, ...], dict[str, NestedKey]] = {}
        shapes: dict[tuple[str, ...], torch.Size] = {}
        dtypes: dict[NestedKey, torch.dtype] = {}
        for key, leaf in full_done_spec.items(include_nested=True, leaves_only=True):
            tkey = as_tuple(key)
            groups.setdefault(tkey[:-1], {})[tkey[-1]] = from_tuple(tkey)
            shapes.setdefault(tkey[:-1], leaf.shape)
            dtypes[from_tuple(tkey)] = leaf.dtype
        ndim = len(getattr(full_done_spec, "shape", ()))
        # As TorchRL: the key lists are sorted (shallow keys first, then by name); a group's own keys keep the
        # spec's order in done_keys_groups.
        order = sorted(groups, key=lambda p: (len(p), p))
        self.groups = [_Group(prefix, dict(groups[prefix]), shapes[prefix], ndim, dtypes) for prefix in order]
        self.done_keys: list[NestedKey] = sort_keys(k for g in self.groups for k in g.keys)
        self.reset_keys: list[NestedKey] = [g.reset_key for g in self.groups]
        self.done_keys_groups: list[list[NestedKey]] = [list(groups[prefix].values()) for prefix in order]
        # complete() has nothing to do when all these top-level keys are present (``None``: some are nested)
        flat = [k for g in self.groups for k in g.keys]
        self._complete_keys = frozenset(flat) if all(type(k) is str for k in flat) else None
        # The common layout (one group with a done entry) gets a short path in any_done.
        self._single = (self.groups[0].done, self.groups[0].reset_key) if len(self.groups) == 1 and self.groups[0].done is not None else None

    def complete(self, data: TensorDictBase) -> TensorDictBase:
        """Fills missing done entries of ``data`` in place, as TorchRL does.

        ``terminated`` defaults to ``done``; ``done`` to ``terminated | truncated``; every other missing
        entry (``truncated``, custom names, or all of them) to all-False.

        Raises:
            RuntimeError: ``done`` and ``truncated`` are given without ``terminated``, which cannot be told
                apart where both are set (as in TorchRL).
        """
        keys = self._complete_keys
        present = entries(data) if keys is not None else None
        if present is not None and present.keys() >= keys:
            return data  # e.g. a transformed env whose base env and transforms wrote every entry
        for g in self.groups:
            done = fast_get(data, g.done) if g.done is not None else None
            terminated = fast_get(data, g.terminated) if g.terminated is not None else None
            truncated = fast_get(data, g.truncated) if g.truncated is not None else None
            given = done is not None
            if g.done is not None and not given and (terminated is not None or truncated is not None):
                done = terminated if truncated is None else (truncated if terminated is None else terminated | truncated)
                fast_set(data, g.done, done)
            if g.terminated is not None and terminated is None and done is not None:
                if truncated is not None and given:
                    raise RuntimeError(
                        f"The env returned {from_tuple(as_tuple(g.done))!r} and {from_tuple(as_tuple(g.truncated))!r} "
                        f"but not {from_tuple(as_tuple(g.terminated))!r}: terminated cannot be inferred where both are "
                        f"set. Return 'terminated' (and 'truncated') from _step; 'done' is then filled in."
                    )
                fast_set(data, g.terminated, done if given else done & ~truncated)
            g.fill(data, done if done is not None else (terminated if terminated is not None else truncated))
        return data

    def reset_masks(self, data: TensorDictBase) -> list[tuple[NestedKey, torch.Tensor | None]]:
        """``[(reset_key, mask)]``: per group, which sub-environments are finished (``None`` if no entry).

        ``done`` alone decides when present (it covers ``terminated | truncated`` once completed).
        """
        out = []
        for g in self.groups:
            mask = fast_get(data, g.done) if g.done is not None else None
            if mask is None:
                for key in g.keys:
                    value = fast_get(data, key)
                    if value is not None:
                        mask = value if mask is None else mask | value
            out.append((g.reset_key, mask))
        return out

    def any_done(self, data: TensorDictBase, *, write_reset: bool = True) -> bool:
        """Whether any done signal in ``data`` is set; writes the ``_reset`` masks when ``write_reset``.

        The host needs this answer (to reset, or to stop a rollout), so on an accelerator it costs one host
        sync per group (:func:`flag_state`), except for flags known on the host (:func:`mark_false`), which are
        not read. In the usual layout (one group with a ``done`` entry) that is at most one sync per step; a
        mask found all-True is marked so, and the reset that follows restarts every row without another read.
        """
        single = self._single
        if single is not None:
            mask = fast_get(data, single[0])
            if mask is not None:
                if mask.is_cpu:  # (the usual CPU case, without flag_state's call)
                    if not any_true(mask):
                        return False
                    every = False
                else:
                    found, every = flag_state(mask)
                    if not found:
                        return False
                if write_reset:
                    fast_set(data, single[1], mark_true(mask) if every else mask)
                return True
        found = False
        for reset_key, mask in self.reset_masks(data):
            if mask is None:
                continue
            some, every = flag_state(mask)
            if some:
                found = True
                if write_reset:
                    data.set(reset_key, mark_true(mask) if every else mask)
        return found


def prefixes(keys: Iterable[NestedKey]) -> set[tuple[str, ...]]:
    return {as_tuple(k)[:-1] for k in keys}
