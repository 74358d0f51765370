"""A direct per-step call for plain ``tensordict.nn.TensorDictModule`` policies.

``TensorDictModule.__call__`` goes through keyword dispatch, skip-existing checks, ``tensordict_out``
handling and output selection before it reaches the wrapped network; for a small network run once per
env step that wrapper costs as much as the network. :func:`direct_module_call` returns a function that
reads the in_keys, calls the network and writes the out_keys, for modules whose behaviour that covers
exactly (no hooks, no keyword dispatch, in-place outputs); anything else gets ``None`` and keeps the
public call. Used by ``EnvBase.rollout`` and by the collectors.
"""
from __future__ import annotations

from typing import Callable

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule, skip_existing
from torch.nn.modules import module as _torch_module

from torchrl._fast import _switch
from torchrl._fast.tensordicts import fast_get, fast_set

__all__ = ["direct_module_call", "hooked", "plain_parts"]


def hooked(module) -> bool:
    """Whether a forward hook (on ``module`` or global) would run when ``module`` is called."""
    return bool(
        module._forward_hooks
        or module._forward_pre_hooks
        or getattr(module, "_forward_hooks_with_kwargs", None)
        or _torch_module._global_forward_hooks
        or _torch_module._global_forward_pre_hooks
    )


def plain_parts(policy) -> tuple[torch.nn.Module, list, list] | None:
    """``(network, in_keys, out_keys)`` of a ``TensorDictModule`` whose call is exactly "read the in_keys,
    call the network, write the out_keys in place" (no hooks, no keyword dispatch); ``None`` otherwise."""
    if type(policy) is not TensorDictModule:
        return None
    if policy.inplace is not True or policy._kwargs is not None or policy.method is not None or policy.method_kwargs:
        return None
    if getattr(policy, "_get_kwargs", None) or hooked(policy):
        return None
    in_keys = [k if isinstance(k, str) else tuple(k) for k in policy.in_keys]
    out_keys = [k if isinstance(k, str) else tuple(k) for k in policy.out_keys]
    if list(policy.out_keys_source) != list(policy.out_keys) or "_" in out_keys:
        return None
    return policy.module, in_keys, out_keys


def direct_module_call(policy) -> Callable[[TensorDictBase], TensorDictBase] | None:
    """``call(td) -> td`` equivalent to ``policy(td)``, or ``None`` when ``policy`` needs its full call.

    The returned function falls back to ``policy(td)`` per call for anything but a plain ``TensorDict``
    holding every input, outside skip-existing mode, with no hook registered since.
    """
    if not _switch.ON:
        return None
    parts = plain_parts(policy)
    if parts is None:
        return None
    inner, in_keys, out_keys = parts
    n_out = len(out_keys)
    single = out_keys[0] if n_out == 1 else None

    def call(td: TensorDictBase) -> TensorDictBase:
        if type(td) is not TensorDict or skip_existing() or hooked(policy):
            return policy(td)
        inputs = [fast_get(td, k) for k in in_keys]
        if any(x is None for x in inputs):
            return policy(td)  # the public call raises the informative KeyError
        out = inner(*inputs)
        batch = td.batch_size
        n = len(batch)
        if type(out) is torch.Tensor and single is not None and out.shape[:n] == batch:
            fast_set(td, single, out)
            return td
        if type(out) is not tuple:
            out = (out,)
        if len(out) != n_out:
            raise RuntimeError(
                f"{type(inner).__name__} returned {len(out)} output(s) for the {n_out} out_keys {out_keys} of its "
                f"TensorDictModule; make them match."
            )
        if all(type(o) is torch.Tensor and o.shape[:n] == batch for o in out):
            for key, value in zip(out_keys, out):
                fast_set(td, key, value)
            return td
        return policy._write_to_tensordict(td, out)

    return call
