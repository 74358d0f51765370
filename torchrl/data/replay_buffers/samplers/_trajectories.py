"""Trajectory boundaries of stored data: where each trajectory starts, how long it is, in which column.

Storages are time-major: element ``(t, c)`` is time step ``t`` of column ``c`` (``c`` flattens the storage
dims after the first; a 1-dimensional storage has one column). A full circular storage wraps: a
trajectory may run from the last row to the first, so positions are taken modulo the number of rows.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import torch

from torchrl.data.replay_buffers._utils import _key_str, unravel_index


class TrajectoryTable(NamedTuple):
    start: torch.Tensor  # [n] first time step of each trajectory
    length: torch.Tensor  # [n]
    column: torch.Tensor  # [n] flat column of each trajectory
    rows: int  # number of time steps stored (T)
    wrap: bool  # positions are taken modulo ``rows``
    inner_shape: tuple[int, ...]  # shape of the columns (storage dims after the first)
    stored_end: torch.Tensor  # [T, C] the end flags as stored (without the forced ends)


def _ends_from_ids(ids: torch.Tensor, wrap: bool) -> torch.Tensor:
    """``[T, C]`` ids -> ``[T, C]`` flags marking the last step of each run of equal ids."""
    end = torch.empty_like(ids, dtype=torch.bool)
    end[:-1] = ids[1:] != ids[:-1]
    end[-1] = (ids[-1] != ids[0]) if wrap else True
    return end


def trajectory_table(
    end: torch.Tensor, *, wrap: bool, last_row: int | None, inner_shape: tuple[int, ...] = ()
) -> TrajectoryTable:
    """Builds the table of trajectories from ``[T, C]`` end flags.

    Args:
        end: ``[T, C]`` booleans, ``True`` at the last step of a trajectory.
        wrap: the storage is full and circular (a trajectory may continue from row ``T-1`` to row ``0``).
        last_row: the newest row, which ends every trajectory it belongs to (``None``: unknown).
        inner_shape: the shape the ``C`` columns come from.
    """
    rows, columns = end.shape
    forced = end.clone()
    if last_row is not None:
        forced[last_row] = True
    if not wrap:
        forced[-1] = True
    else:
        forced[-1] |= ~forced.any(0)  # a column without any end still needs one
    col, t = forced.t().nonzero(as_tuple=True)  # sorted by column, then time
    first = torch.ones_like(col, dtype=torch.bool)
    first[1:] = col[1:] != col[:-1]
    last = torch.ones_like(col, dtype=torch.bool)
    last[:-1] = col[1:] != col[:-1]
    previous = torch.roll(t, 1)
    previous[first] = t[last] - rows if wrap else -1
    length = t - previous
    start = (previous + 1) % rows
    return TrajectoryTable(start, length, col, rows, wrap, tuple(inner_shape), end)


def find_start_stop_traj(
    *,
    trajectory: torch.Tensor | None = None,
    end: torch.Tensor | None = None,
    at_capacity: bool,
    cursor: int | torch.Tensor | range | None = None,
    device: torch.device | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Start and stop positions (inclusive) and lengths of the trajectories in time-major data.

    Exactly one of ``trajectory`` (ids, shape ``[T, ...]``) and ``end`` (booleans marking the last step
    of each trajectory, shape ``[T, ...]``) is given. Extra dims are independent columns (e.g. parallel
    environments). When ``at_capacity``, the data is a full circular buffer and trajectories may wrap from
    the last row to the first (then ``stop < start``). ``cursor`` is the newest written row (or rows): a
    trajectory always ends there.

    Returns:
        ``(start, stop, lengths)``: for 1-d data, ``start``/``stop`` have shape ``[n]``; otherwise
        ``[n, ndim]`` coordinates.

    Examples:
        >>> import torch
        >>> end = torch.tensor([False, True, False, False, True, False])
        >>> find_start_stop_traj(end=end, at_capacity=False)
        (tensor([0, 2, 5]), tensor([1, 4, 5]), tensor([2, 3, 1]))
        >>> find_start_stop_traj(trajectory=torch.tensor([2, 0, 0, 1, 1, 2]), at_capacity=True, cursor=0)
        (tensor([5, 1, 3]), tensor([0, 2, 4]), tensor([2, 2, 2]))
    """
    if (trajectory is None) == (end is None):
        raise ValueError("find_start_stop_traj: pass exactly one of trajectory= and end=.")
    data = trajectory if trajectory is not None else end
    if device is not None:
        data = data.to(device)
    rows = data.shape[0]
    inner_shape = tuple(data.shape[1:])
    data = data.reshape(rows, -1)
    flags = _ends_from_ids(data, at_capacity) if trajectory is not None else data.bool()
    if cursor is not None:
        if isinstance(cursor, range):
            cursor = cursor[-1] if len(cursor) else None
        elif isinstance(cursor, torch.Tensor):
            cursor = int(cursor.reshape(-1)[-1])
    table = trajectory_table(flags, wrap=at_capacity, last_row=cursor, inner_shape=inner_shape)
    stop = table.start + table.length - 1
    if at_capacity:
        stop = stop % rows
    if not inner_shape:
        return table.start, stop, table.length
    coords = unravel_index(table.column, (0, *inner_shape))[1:]
    return (
        torch.stack([table.start, *coords], -1),
        torch.stack([stop, *coords], -1),
        table.length,
    )


def read_flags(storage: Any, keys: list, what: str) -> torch.Tensor:
    """The stored entries ``keys`` of the written rows, OR-ed, as ``[T, C]`` (time-major) tensors."""
    content = getattr(storage, "_storage", None)
    if content is None or not hasattr(content, "get") or not hasattr(storage, "_rows"):
        raise RuntimeError(
            f"{what} needs a TensorStorage (e.g. LazyTensorStorage) holding TensorDicts; got "
            f"{type(storage).__name__}."
        )
    rows = storage._rows
    out = None
    for key in keys:
        try:
            value = content.get(key)
        except KeyError:
            value = None
        if value is None:
            available = [_key_str(k) for k in content.keys(True, True)]
            raise KeyError(
                f"{what}: the storage has no entry {_key_str(key)} to find trajectory boundaries; available "
                f"keys: {available}. Pass end_key= or traj_key= naming the entry that marks them."
            )
        value = value[:rows]
        value = value.reshape(rows, math.prod(value.shape[1 : storage.ndim]), -1)
        value = value.any(-1) if value.dtype == torch.bool else value[..., 0]
        out = value if out is None else out | value
    return out


def position_lookup(table: TrajectoryTable) -> tuple[torch.Tensor, torch.Tensor]:
    """For every stored position (flat, time-major ``t * C + c``): its trajectory and its offset in it."""
    columns = math.prod(table.inner_shape) if table.inner_shape else 1
    traj_of = torch.zeros(table.rows * columns, dtype=torch.long, device=table.length.device)
    offset_of = torch.zeros(table.rows * columns, dtype=torch.long, device=table.length.device)
    traj_ids = torch.arange(table.length.numel(), device=table.length.device).repeat_interleave(table.length)
    steps = torch.arange(int(table.length.sum()), device=table.length.device) - torch.repeat_interleave(
        table.length.cumsum(0) - table.length, table.length
    )
    time = table.start[traj_ids] + steps
    if table.wrap:
        time = time % table.rows
    flat = time * columns + table.column[traj_ids]
    traj_of[flat] = traj_ids
    offset_of[flat] = steps
    return traj_of, offset_of


def storage_table(storage, keys: list, kind: str, what: str) -> TrajectoryTable:
    """The trajectory table of the written content of ``storage`` (``kind``: ``"end"`` flags or ``"traj"`` ids)."""
    rows = storage._rows
    capacity_rows = getattr(storage, "_capacity_rows", None)
    last_row = storage._last_row() if hasattr(storage, "_last_row") else None
    wrap = capacity_rows is not None and rows == capacity_rows and last_row not in (None, rows - 1)
    flags = read_flags(storage, keys, what)
    if kind == "traj":
        flags = _ends_from_ids(flags, wrap)
    inner = tuple(storage.shape[1 : storage.ndim]) if storage.ndim > 1 else ()
    return trajectory_table(flags, wrap=wrap, last_row=last_row, inner_shape=inner)
