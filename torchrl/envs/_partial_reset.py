"""What ``EnvBase.reset(tensordict)`` returns when ``"_reset"`` masks select only some sub-environments.

As in TorchRL, the rows a mask selects take the reset's outputs, and the entries the reset did not write are
zeroed there; the other rows keep the input's values (zeros for outputs the input lacks). A group's mask
(``("agents", "_reset")``) applies to that group's sub-TensorDict, the root mask to everything else; in an env without root done entries, the root
entries outside the groups keep the input's values. A mask that selects every row is a full reset (the input's
other entries are kept as they are; on an accelerator that case is told apart on the device, not by reading
the mask). Lazily stacked groups (agents of different shapes) are blended member by
member.
"""
from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase, is_tensor_collection

from torchrl._fast import fast_get, fast_set
from torchrl.envs._done import where_reset

__all__ = ["blend_partial_reset"]


def _as_batch_mask(mask: torch.Tensor, batch: torch.Size) -> torch.Tensor:
    """``mask`` (the shape of a group's done entries) over the leading dims of a sub-TensorDict's ``batch``."""
    n = len(batch)
    if mask.ndim > n:  # e.g. (*batch, 1) for a TensorDict of batch `batch`
        mask = mask.flatten(n).any(-1) if n else mask.any().reshape(())
    return mask


def _blend(previous: TensorDictBase, fresh: TensorDictBase, mask: torch.Tensor, skip: set, prefix: tuple, pad: bool = True,
           keep: bool = False, partial: torch.Tensor | None = None) -> None:
    """Writes into ``fresh``: ``previous``'s values outside ``mask``, zeros inside it for entries ``fresh`` lacks.

    ``partial`` (a 0-dim bool tensor, for masks on an accelerator): whether the mask leaves some row out; where
    it does not (a full reset), the entries ``fresh`` lacks keep their values, decided on the device."""
    if (
        isinstance(previous, LazyStackedTensorDict)
        and isinstance(fresh, LazyStackedTensorDict)
        and previous.stack_dim == fresh.stack_dim
        and len(previous.tensordicts) == len(fresh.tensordicts)
    ):
        dim = previous.stack_dim
        for i, (old, new) in enumerate(zip(previous.tensordicts, fresh.tensordicts)):
            _blend(old, new, mask.select(dim, i) if mask.ndim > dim else mask, skip, prefix, pad, keep, partial)
        return
    mask = _as_batch_mask(mask, previous.batch_size).to(previous.device or mask.device)
    views: dict[int, torch.Tensor] = {}  # the mask viewed for each leaf ndim

    def view(ndim: int) -> torch.Tensor:
        m = views.get(ndim)
        if m is None:
            m = views[ndim] = _view(mask, ndim)
        return m

    fresh_keys = set(fresh.keys())
    for key, old in previous.items():
        if key == "_reset" or (skip and prefix + (key,) in skip):
            continue
        new = fast_get(fresh, key)
        if type(old) is not torch.Tensor and is_tensor_collection(old):
            if new is None:
                new = old.empty()
                fresh.set(key, new)
            if is_tensor_collection(new):
                _blend(old, new, mask, skip, prefix + (key,), pad, keep, partial)
            continue
        if new is None:  # an input entry the reset does not write: zeroed where reset (unless all rows are)
            drop = view(old.ndim)
            fast_set(fresh, key, _zeroed(old, drop if partial is None else drop & partial))
        elif not keep and (type(new) is torch.Tensor or not is_tensor_collection(new)) and new.shape == old.shape:
            fast_set(fresh, key, where_reset(view(old.ndim), new, old if old.dtype == new.dtype else old.to(new.dtype)))
    if pad:
        for key in fresh_keys.difference(previous.keys()):  # outputs the input lacks: zeros outside the mask
            _keep_masked(fresh, key, fast_get(fresh, key), ~mask)


def _view(mask: torch.Tensor, ndim: int) -> torch.Tensor:
    """``mask`` (over leading dims) with trailing singleton dims, to broadcast over ``ndim``-dim values."""
    return mask.reshape(mask.shape + (1,) * (ndim - mask.ndim)) if ndim > mask.ndim else mask


def _zeroed(value: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``value`` with zeros where ``mask`` (already viewed for it) is set; ``value`` itself when nothing is."""
    if mask.numel() == 1 and mask.is_cpu:  # the usual unbatched reset: no torch op
        return torch.zeros_like(value) if bool(mask) else value
    return value.masked_fill(mask.to(value.device), 0)


def _keep_masked(fresh: TensorDictBase, key: str, new, drop: torch.Tensor) -> None:
    """``fresh[key]`` zeroed where ``drop`` (a mask over its leading dims) is set, recursing into collections."""
    if is_tensor_collection(new):
        if isinstance(new, LazyStackedTensorDict):
            dim = new.stack_dim
            for i, member in enumerate(new.tensordicts):
                m = _as_batch_mask(drop.select(dim, i) if drop.ndim > dim else drop, member.batch_size)
                for k in list(member.keys()):
                    _keep_masked(member, k, member.get(k), m)
            return
        m = _as_batch_mask(drop, new.batch_size)
        for k in list(new.keys()):
            _keep_masked(new, k, new.get(k), m)
        return
    fresh.set(key, _zeroed(new, _view(drop, new.ndim)))


def blend_partial_reset(
    tensordict: TensorDictBase,
    out: TensorDictBase,
    masks: dict[tuple[str, ...], torch.Tensor],
    *,
    given: set | None = None,
    root_group: bool = True,
    outputs_hold_all_rows: bool = False,
) -> None:
    """Blends ``out`` (the reset's outputs) with ``tensordict`` (its input), in place in ``out``.

    Args:
        masks: group prefix → mask, for the masks that select only some rows.
        given: the prefixes of every mask the input holds (default: those of ``masks``); a group without a
            mask of its own follows its parent group's.
        root_group: whether the env has root done entries; without them, the root entries outside the groups
            keep the input's values.
        outputs_hold_all_rows: the reset's outputs already hold the current values of the rows not reset (an env
            that says so, e.g. EnvPool's): only the input's other entries are zeroed where reset.
    """
    given = set(masks) if given is None else set(given) | set(masks)
    keep_root = not root_group and () not in given
    if keep_root:
        masks = {(): torch.zeros(tensordict.batch_size, dtype=torch.bool, device=tensordict.device), **masks}
    for prefix, mask in masks.items():
        previous = tensordict.get(prefix, None) if prefix else tensordict
        fresh = out.get(prefix, None) if prefix else out
        if previous is None or fresh is None or not is_tensor_collection(previous) or not is_tensor_collection(fresh):
            continue
        skip = {g for g in given if g != prefix and g[: len(prefix)] == prefix}
        # CPU masks come here only when they leave some row out (EnvBase._reset_into reads them); one on an
        # accelerator may select every row, which the blend then tells apart on the device, without a sync
        partial = None if mask.is_cpu else ~mask.all()
        _blend(previous, fresh, mask, skip, prefix, pad=not (keep_root and prefix == ()), keep=outputs_hold_all_rows,
               partial=partial)
