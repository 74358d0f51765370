"""``PrioritizedSliceSampler``: slices whose start steps are drawn by priority."""
from __future__ import annotations

from typing import Any

import torch

from torchrl.data.replay_buffers._utils import to_device
from torchrl.data.replay_buffers.samplers._trajectories import TrajectoryTable, position_lookup
from torchrl.data.replay_buffers.samplers.base import Sampler
from torchrl.data.replay_buffers.samplers.prioritized import PrioritizedSampler
from torchrl.data.replay_buffers.samplers.slice import SliceSampler

_MAX_ROUNDS = 16


class PrioritizedSliceSampler(SliceSampler, PrioritizedSampler):
    """A :class:`SliceSampler` whose slice starts are drawn with prioritized experience replay.

    Every stored step has a priority (as in :class:`PrioritizedSampler`); a step is drawn with probability
    proportional to its priority and becomes the first step of a slice. Steps too close to the end of
    their trajectory to start a full slice are redrawn, so they are never start points (with
    ``strict_length=False`` every step may start a slice, which is then cut at the trajectory end). The
    importance weight of the start step is reported for every step of the slice (``"priority_weight"``).
    Priorities are updated per step with :meth:`update_priority`.

    Starts are drawn and checked on the trees' device (the CPU by default: the rejection of starts too close
    to a trajectory end reads on the host, so it runs where that costs no device synchronisation); the
    slices are then built on the storage's device.

    Args:
        max_capacity (int): the capacity of the storage.
        alpha (float), beta (float), eps (float), dtype, reduction: as :class:`PrioritizedSampler`.

    Keyword Args:
        max_priority_within_buffer (bool, optional): as :class:`PrioritizedSampler`.
        other keyword arguments: as :class:`SliceSampler`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import (TensorDictReplayBuffer, LazyTensorStorage,
        ...     PrioritizedSliceSampler)
        >>> data = TensorDict(episode=torch.arange(4).repeat_interleave(5), batch_size=[20])
        >>> sampler = PrioritizedSliceSampler(max_capacity=20, alpha=1.0, beta=1.0, slice_len=5,
        ...                                   traj_key="episode")
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=sampler, batch_size=10)
        >>> _ = rb.extend(data)
        >>> priority = torch.zeros(20); priority[10] = 1.0  # only episode 2's first step can start
        >>> rb.update_priority(torch.arange(20), priority)
        >>> rb.sample()["episode"].unique().tolist()
        [2]
    """

    def __init__(
        self,
        max_capacity: int,
        alpha: float,
        beta: float,
        eps: float = 1e-8,
        dtype: torch.dtype = torch.float,
        reduction: str = "max",
        *,
        max_priority_within_buffer: bool = False,
        num_slices: int | None = None,
        slice_len: int | None = None,
        end_key=None,
        end_keys=None,
        traj_key=None,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        cache_values: bool = False,
        truncated_key=("next", "truncated"),
        strict_length: bool = True,
        span: bool | int | tuple = False,
        pad_output: bool = False,
        compile: bool | dict = False,
    ):
        SliceSampler.__init__(
            self,
            num_slices=num_slices,
            slice_len=slice_len,
            end_key=end_key,
            end_keys=end_keys,
            traj_key=traj_key,
            ends=ends,
            trajectories=trajectories,
            cache_values=cache_values,
            truncated_key=truncated_key,
            strict_length=strict_length,
            span=span,
            pad_output=pad_output,
            compile=compile,
        )
        PrioritizedSampler.__init__(
            self,
            max_capacity=max_capacity,
            alpha=alpha,
            beta=beta,
            eps=eps,
            dtype=dtype,
            reduction=reduction,
            max_priority_within_buffer=max_priority_within_buffer,
        )
        self._position_lookup: tuple[torch.Tensor, torch.Tensor] | None = None

    def _on_new_table(self) -> None:
        self._position_lookup = None

    def _lookup(self, table: TrajectoryTable) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """For every stored ``(t, column)`` position (flat, time-major): its trajectory and its offset in it,
        then the length of every trajectory; on the trees' device, where starts are drawn and checked."""
        if self._position_lookup is None:
            traj_of, offset_of = position_lookup(table)
            device = self._tree_device
            self._position_lookup = (
                to_device(traj_of, device), to_device(offset_of, device), to_device(table.length, device)
            )
        return self._position_lookup

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        table = self._get_table(storage)
        num_slices, seq_len = self._geometry(batch_size)
        traj_of, offset_of, length_of = self._lookup(table)
        n = len(storage)
        starts = torch.empty(0, dtype=torch.long, device=self._tree_device)
        weights = torch.empty(0, dtype=self.dtype, device=self._tree_device)
        for _ in range(_MAX_ROUNDS):
            flat, weight = self._draw(n, 2 * num_slices)
            traj = traj_of[flat]
            ok = offset_of[flat] <= length_of[traj] - seq_len if self.strict_length else torch.ones_like(
                flat, dtype=torch.bool
            )
            starts = torch.cat([starts, flat[ok]])
            weights = torch.cat([weights, weight[ok]])
            if starts.numel() >= num_slices:
                break
        else:
            raise RuntimeError(
                f"{type(self).__name__}: could not draw {num_slices} slice starts of trajectories at least "
                f"{seq_len} steps long; raise the priorities of such steps, use shorter slices or "
                "strict_length=False."
            )
        starts, weights = starts[:num_slices], weights[:num_slices]
        device = table.length.device  # the slices are built where the table lives (the storage's device)
        traj, offset = to_device(traj_of[starts], device), to_device(offset_of[starts], device)
        extra = {"priority_weight": to_device(weights, device).unsqueeze(-1).expand(num_slices, seq_len)}
        return self._slices(table, traj, table.length[traj], offset, seq_len, extra=extra)

    def add(self, index: torch.Tensor) -> None:
        SliceSampler.add(self, index)
        PrioritizedSampler.add(self, index)

    def extend(self, index: torch.Tensor) -> None:
        SliceSampler.extend(self, index)
        PrioritizedSampler.extend(self, index)

    def mark_update(self, index: int | torch.Tensor, *, storage=None) -> None:
        SliceSampler.mark_update(self, index, storage=storage)
        PrioritizedSampler.mark_update(self, index, storage=storage)

    def _empty(self) -> None:
        SliceSampler._empty(self)
        PrioritizedSampler._empty(self)

    def state_dict(self):
        return PrioritizedSampler.state_dict(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        PrioritizedSampler.load_state_dict(self, state_dict)
        self._table = None

    def dumps(self, path):
        return Sampler.dumps(self, path)

    def loads(self, path):
        return Sampler.loads(self, path)

    def __getstate__(self):
        state = SliceSampler.__getstate__(self)
        state["_position_lookup"] = None
        return state
