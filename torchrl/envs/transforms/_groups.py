"""Per-done-group bookkeeping shared by transforms that keep a running value per episode."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get
from torchrl.envs._done import as_tuple, from_tuple, known_value, where_reset

__all__ = ["done_groups", "holder", "restart_where_reset", "reset_key_for", "only_reset_key", "row_mask"]


def done_groups(full_done_spec) -> dict[tuple[str, ...], torch.Size]:
    """``{prefix: done shape}`` for every group of done leaves."""
    out: dict[tuple[str, ...], torch.Size] = {}
    for key, leaf in full_done_spec.items(include_nested=True, leaves_only=True):
        out.setdefault(as_tuple(key)[:-1], leaf.shape)
    return out


def holder(tensordict: TensorDictBase, key: NestedKey) -> TensorDictBase:
    """The (sub-)tensordict that holds the entry ``key``: a group's for ``("agents", "obs")`` (its batch
    size includes the agent dim), ``tensordict`` itself for a root key."""
    if isinstance(key, tuple) and len(key) > 1:
        parent = tensordict.get(key[:-1], None)
        if isinstance(parent, TensorDictBase):
            return parent
    return tensordict


def reset_key_for(key: NestedKey, groups: dict[tuple[str, ...], torch.Size]) -> NestedKey:
    """The reset key of the deepest done group containing ``key`` (the root's when none does)."""
    prefix = as_tuple(key)[:-1]
    while prefix and prefix not in groups:
        prefix = prefix[:-1]
    return from_tuple(prefix + ("_reset",))


def restart_where_reset(
    tensordict: TensorDictBase, reset_key: NestedKey, previous: torch.Tensor | None, fresh: torch.Tensor
) -> torch.Tensor:
    """``fresh`` where the sub-env is reset (all of them when there is no mask or no previous value)."""
    mask = fast_get(tensordict, reset_key) if tensordict is not None else None
    if mask is None or previous is None or known_value(mask) is True:  # (a mask known to select every row)
        return fresh
    if mask.ndim > fresh.ndim:  # e.g. a (B, 1) done-shaped mask for a (B,) entry
        mask = mask.reshape(mask.shape[: fresh.ndim])
    while mask.ndim < fresh.ndim:
        mask = mask.unsqueeze(-1)
    return where_reset(mask, fresh, previous)


def only_reset_key(transform, given: NestedKey | None, restarts: str) -> NestedKey:
    """``given`` when set, else the reset key of the transform's env when it has exactly one (``"_reset"`` with
    no env yet); ``ValueError`` naming ``restarts`` (what the mask restarts) when the env has several."""
    if given is not None:
        return given
    parent = transform.parent
    if parent is None:
        return "_reset"
    keys = parent.reset_keys
    if len(keys) != 1:
        raise ValueError(
            f"{type(transform).__name__}: the env has {len(keys)} reset keys ({keys}); pass reset_key=... to pick "
            f"the one whose mask restarts {restarts}."
        )
    return keys[0]


def row_mask(value, batch: torch.Size, device) -> torch.Tensor | None:
    """A condition's result (a bool, or a tensor of one element or of shape ``batch`` / ``(*batch, 1)``) as a
    boolean mask of shape ``batch``; ``None`` for a tensor of any other shape."""
    if isinstance(value, bool):
        return torch.full(batch, value, dtype=torch.bool, device=device)
    value = torch.as_tensor(value, device=device).bool()
    shape = tuple(value.shape)
    if shape in ((), (1,)):
        return value.reshape(()).expand(batch)
    if shape == tuple(batch) or shape == (*batch, 1):
        return value.reshape(batch)
    return None
