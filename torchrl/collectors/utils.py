"""Collector utilities: :func:`split_trajectories` (padded per-trajectory layout of a collected batch).

The other names of TorchRL's ``torchrl.collectors.utils`` module (``DEFAULT_DONE_KEYS``, ``pad``,
``TensorDict``, ...) are re-exported here because user code imports them from this path.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

import torch
from tensordict import NestedKey, NonTensorData, NonTensorStack, TensorDict, TensorDictBase, pad, set_lazy_legacy
from tensordict.utils import Buffer
from torch.nn import Parameter

from torchrl._utils._implement_for import implement_for

__all__ = ["DEFAULT_DONE_KEYS", "split_trajectories"]

# Names TorchRL's module exposes at this path (kept importable for user code).
_REEXPORTED = (Buffer, Callable, Literal, NonTensorData, NonTensorStack, Parameter, Sequence, TensorDict, implement_for, pad,
               set_lazy_legacy)

DEFAULT_DONE_KEYS = ("done", "truncated", "terminated")


def _as_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _as_key(key: tuple[str, ...]) -> NestedKey:
    return key[0] if len(key) == 1 else key


def traj_ids_from_done(done: torch.Tensor, batch_size: torch.Size) -> torch.Tensor:
    """Trajectory ids (shape ``batch_size``, time last) from the ``("next", "done")`` flags of a rollout.

    A trajectory starts at the first step of every env row and after every done step; ids are
    numbered in row-major order from 0.
    """
    ndim = len(batch_size)
    done = done.reshape(*batch_size, -1).any(-1) if done.dim() > ndim else done.reshape(batch_size)
    starts = torch.zeros_like(done)
    starts[..., 0] = True
    starts[..., 1:] = done[..., :-1]
    return (starts.reshape(-1).cumsum(0) - 1).reshape(batch_size)


class _MissingEntryError(KeyError, TypeError):
    """A missing entry: a ``KeyError`` that TorchRL's callers catch as ``TypeError``."""


class _NotATensorError(TypeError, AttributeError):
    """A sub-tensordict where a tensor is expected (TorchRL raises ``AttributeError`` there)."""


def split_trajectories(
    rollout_tensordict: TensorDictBase,
    *,
    prefix=None,
    trajectory_key: NestedKey | None = None,
    done_key: NestedKey | None = None,
    as_nested: bool = False,
) -> TensorDictBase:
    """Re-arranges a collected batch into one row per trajectory, zero-padded to the longest one.

    Trajectories are identified by their ids (``(prefix, "traj_ids")``, as written by collectors) or, when
    no ids are present, recovered from the ``("next", done_key)`` flags. Rows appear in the order in which
    trajectories first appear in the (row-major flattened) batch.

    Args:
        rollout_tensordict: a batch with trajectories laid out along its last (time) dimension.

    Keyword Args:
        prefix: where the ids are read and the mask is written (``"collector"`` when the input has a
            ``"collector"`` entry, the root otherwise). Superseded by ``trajectory_key``.
        trajectory_key: the key of the trajectory ids (default ``(prefix, "traj_ids")``).
        done_key: the done key used when no ids are present (default ``"done"``, read under ``"next"``).
        as_nested: return nested (jagged) tensors, batch size ``[n_traj]``, instead of padded rows; a
            ``torch.layout`` selects the nested layout (default ``torch.jagged``).

    Returns:
        A TensorDict of batch size ``[n_traj, max_len]`` with a boolean ``mask`` entry (next to the ids)
        marking the valid steps; padded steps are zeros.

    Raises:
        KeyError: neither the ids nor the done flags are present (the error is also a ``TypeError``, the
            type TorchRL raises).
        TypeError: ``trajectory_key`` names a sub-tensordict (the error is also an ``AttributeError``, as in
            TorchRL).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"obs": torch.arange(5.), ("collector", "traj_ids"): torch.tensor([0, 0, 0, 1, 1])}, [5])
        >>> out = split_trajectories(data)
        >>> out.shape, out["collector", "mask"].tolist()
        (torch.Size([2, 3]), [[True, True, True], [True, True, False]])
        >>> out["obs"].tolist()
        [[0.0, 1.0, 2.0], [3.0, 4.0, 0.0]]
    """
    td = rollout_tensordict
    if td.batch_dims == 0:
        raise ValueError("split_trajectories: the input has no batch dimension; expected [..., T] with time last.")
    if trajectory_key is None:
        if prefix is None:
            prefix = "collector" if "collector" in td.keys() else ()
        trajectory_key = _as_key(_as_tuple(prefix) + ("traj_ids",)) if prefix != () else "traj_ids"
    tkey = _as_tuple(trajectory_key)
    mask_key = _as_key(tkey[:-1] + ("mask",))
    ids = td.get(_as_key(tkey), None)
    if ids is None:
        dkey = ("next",) + _as_tuple(done_key or "done")
        done = td.get(dkey, None)
        if done is None:
            raise _MissingEntryError(
                f"split_trajectories: neither the trajectory ids {_as_key(tkey)!r} nor the done flags {dkey!r} are "
                f"in the input; pass trajectory_key= or done_key= naming an entry that exists (done_key is read "
                f"under 'next')."
            )
        ids = traj_ids_from_done(done, td.batch_size)
        td = td.copy()
        td.set(_as_key(tkey), ids)
    if not isinstance(ids, torch.Tensor):
        raise _NotATensorError(
            f"split_trajectories: the trajectory ids {_as_key(tkey)!r} must be a tensor, got a "
            f"{type(ids).__name__}; pass the key of the ids themselves."
        )
    flat = td.reshape(-1)
    flat_ids = ids.reshape(-1)
    n = flat_ids.numel()
    new = torch.ones(n, dtype=torch.bool, device=flat_ids.device)
    if n > 1:
        new[1:] = flat_ids[1:] != flat_ids[:-1]
    traj_index = new.cumsum(0) - 1
    starts = torch.nonzero(new).squeeze(-1)
    lengths = torch.diff(torch.cat([starts, starts.new_tensor([n])]))
    n_traj = starts.numel()
    if as_nested:
        layout = as_nested if isinstance(as_nested, torch.layout) else torch.jagged
        pieces = lengths.tolist()

        def nest(x: torch.Tensor) -> torch.Tensor:
            return torch.nested.nested_tensor(list(x.split(pieces, 0)), layout=layout)

        return flat.apply(nest, batch_size=[n_traj])
    max_len = int(lengths.max()) if n_traj else 0
    position = torch.arange(n, device=flat_ids.device) - starts[traj_index]

    def scatter(x: torch.Tensor) -> torch.Tensor:
        out = torch.zeros((n_traj, max_len, *x.shape[1:]), dtype=x.dtype, device=x.device)
        out[traj_index, position] = x
        return out

    out = flat.apply(scatter, batch_size=[n_traj, max_len])
    mask = torch.zeros((n_traj, max_len), dtype=torch.bool, device=flat_ids.device)
    mask[traj_index, position] = True
    out.set(mask_key, mask)
    if td.names[-1] == "time" and out.batch_size == td.batch_size:  # (as TorchRL: unsplit rows keep the name)
        out.names = [None, "time"]
    return out
