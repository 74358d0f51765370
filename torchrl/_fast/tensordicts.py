"""Fast TensorDict access for hot paths (env steps, rollouts, collectors, buffers): reads and writes of
tensordict's internals (``_tensordict``, ``_new_unsafe``, ``_set_str``, the lock flag); the stacker is in
:mod:`torchrl._fast.stack`.

Plain ``TensorDict`` instances keep their entries in a dict; reading and writing it directly costs a
fraction of the public ``get``/``set`` (which validate keys, shapes and devices on every call). These
helpers take the fast route only for exact ``TensorDict`` instances whose inputs we produced or already
checked, and fall back to the public API for anything else (lazy stacks, tensorclasses, subclasses).
``test/test_fast_tensordicts.py`` checks that both routes agree, so a tensordict upgrade that changes the
internals fails loudly instead of silently. With the fast paths off (:func:`torchrl._fast.set_fast_paths`)
every helper takes the public route.
"""
from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import _switch

__all__ = ["any_true", "entries", "fast_get", "fast_set", "new_td", "shallow_dict", "writable"]

_TD = TensorDict


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
