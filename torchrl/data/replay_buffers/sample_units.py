"""Sample units: what each sampled anchor expands into (one transition, a window of records, ...)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal

import torch
from tensordict import NestedKey

from torchrl.data.replay_buffers._utils import ravel_index, unravel_index
from torchrl.data.replay_buffers.samplers._trajectories import position_lookup, storage_table


class SampleUnit(ABC):
    """Expands the anchors chosen by a sampler into the records of the batch.

    The buffer calls :meth:`expand` after the sampler and before reading the storage; the indices it returns
    are read and reported in the sample info.

    Examples:
        >>> import torch
        >>> from torchrl.data.replay_buffers import SampleUnit, ReplayBuffer, LazyTensorStorage
        >>> class Pairs(SampleUnit):
        ...     def expand(self, index, info, storage):
        ...         return torch.stack([index, (index + 1) % len(storage)], -1).reshape(-1), info
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), sample_unit=Pairs())
        >>> _ = rb.extend(torch.arange(10))
        >>> rb.sample(3).shape
        torch.Size([6])
    """

    @abstractmethod
    def expand(self, index: torch.Tensor | tuple, info: dict[str, Any], storage) -> tuple[torch.Tensor | tuple, dict[str, Any]]:
        ...


class Transition(SampleUnit):
    """Every anchor is one record (the buffers' default behaviour).

    Examples:
        >>> import torch
        >>> Transition().expand(torch.tensor([3, 1]), {}, None)
        (tensor([3, 1]), {})
    """

    def expand(self, index: torch.Tensor | tuple, info: dict[str, Any], storage) -> tuple[torch.Tensor | tuple, dict[str, Any]]:
        return index, info


class Sequence(SampleUnit):
    """Expands every anchor into a window of ``burn_in + length + bootstrap`` records.

    Record ``k`` of the window of anchor ``t`` is ``t + dilation * (k - burn_in)``: ``burn_in`` records
    before the anchor, the learning region of ``length`` records starting at it, ``bootstrap`` records after
    it. Episode boundaries come from the stored ``done_key``; the newest record of a circular storage also
    ends its episode. A batch of ``B`` anchors returns ``B * window`` records, with masks in the info:

    - ``"sequence_mask"``: the record belongs to the anchor's episode (always ``True`` with
      ``episode_boundary="include_reset"``, except past the newest record);
    - ``"learning_mask"``: the record is in the learning region and valid.

    ``episode_boundary`` decides what records outside the anchor's episode hold:

    - ``"pad"``: the nearest record of the anchor's episode (masked out);
    - ``"stop"``: as ``"pad"``, and the last valid record of every window is reported done/truncated
      (``("next", "done")`` / ``("next", "truncated")``), so value estimators stop there;
    - ``"include_reset"``: the records of the following (or preceding) episode, unmasked.

    Args:
        length (int): the learning region length.
        episode_boundary (str, optional): ``"pad"``, ``"stop"`` or ``"include_reset"``. Defaults to ``"pad"``.
        done_key (NestedKey, optional): the stored end-of-episode flag. Defaults to ``("next", "done")``.
        burn_in (int, optional): records before the anchor. Defaults to ``0``.
        bootstrap (int, optional): records after the learning region. Defaults to ``0``.
        dilation (int, optional): spacing of the window's records. Defaults to ``1``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TensorDictReplayBuffer, LazyTensorStorage, Sequence
        >>> done = torch.tensor([0, 0, 1, 0, 0, 0, 0, 1], dtype=torch.bool).unsqueeze(-1)
        >>> data = TensorDict(t=torch.arange(8), next=TensorDict(done=done, batch_size=[8]), batch_size=[8])
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), sample_unit=Sequence(3, burn_in=1))
        >>> _ = rb.extend(data)
        >>> rb.sampler.sample = lambda storage, batch_size: (torch.tensor([1]), {})  # anchor at step 1
        >>> batch = rb.sample(1)
        >>> batch["t"].tolist(), batch["sequence_mask"].tolist()
        ([0, 1, 2, 2], [True, True, True, False])
    """

    def __init__(
        self,
        length: int,
        episode_boundary: Literal["pad", "stop", "include_reset"] = "pad",
        done_key: NestedKey | None = ("next", "done"),
        burn_in: int = 0,
        bootstrap: int = 0,
        dilation: int = 1,
    ):
        if episode_boundary not in ("pad", "stop", "include_reset"):
            raise ValueError(
                f"Sequence: episode_boundary must be 'pad', 'stop' or 'include_reset', got {episode_boundary!r}."
            )
        if length < 1 or burn_in < 0 or bootstrap < 0 or dilation < 1:
            raise ValueError(
                "Sequence: length and dilation must be >= 1 and burn_in, bootstrap >= 0; got "
                f"length={length}, burn_in={burn_in}, bootstrap={bootstrap}, dilation={dilation}."
            )
        self.length = length
        self.episode_boundary = episode_boundary
        self.done_key = done_key
        self.burn_in = burn_in
        self.bootstrap = bootstrap
        self.dilation = dilation
        self._cache: tuple[Any, Any] | None = None

    @property
    def window(self) -> int:
        return self.burn_in + self.length + self.bootstrap

    def _tables(self, storage):
        key = (id(storage), storage._version, len(storage))
        if self._cache is None or self._cache[0] != key:
            table = storage_table(storage, [self.done_key], "end", "Sequence")
            self._cache = (key, (table, *position_lookup(table)))
        return self._cache[1]

    def expand(self, index: torch.Tensor | tuple, info: dict[str, Any], storage) -> tuple[torch.Tensor | tuple, dict[str, Any]]:
        table, traj_of, offset_of = self._tables(storage)
        columns = max(1, len(storage) // max(table.rows, 1))
        flat = ravel_index(index, (0, *table.inner_shape)) if isinstance(index, tuple) else index
        steps = self.dilation * (torch.arange(self.window, device=flat.device) - self.burn_in)
        traj = traj_of[flat]
        offset = offset_of[flat]
        length = table.length[traj]
        rel = offset.unsqueeze(-1) + steps  # position inside the anchor's trajectory
        inside = (rel >= 0) & (rel < length.unsqueeze(-1))
        if self.episode_boundary == "include_reset":
            # follow the storage across episode ends, but never past the newest or before the oldest record
            last_row = storage._last_row() if table.wrap else None
            oldest = (last_row + 1) % table.rows if last_row is not None else 0
            ordinal = ((flat // columns - oldest) % table.rows).unsqueeze(-1) + steps
            mask = (ordinal >= 0) & (ordinal < table.rows)
            target = (ordinal.clamp(0, table.rows - 1) + oldest) % table.rows
        else:
            clamped = torch.minimum(rel.clamp_min(0), (length - 1).unsqueeze(-1))
            target = table.start[traj].unsqueeze(-1) + clamped
            if table.wrap:
                target = target % table.rows
            mask = inside
        column = table.column[traj].unsqueeze(-1).expand_as(target)
        learning = torch.zeros_like(mask)
        learning[:, self.burn_in : self.burn_in + self.length] = True
        info = dict(info)
        for name, value in list(info.items()):  # anchor-level info (e.g. weights) repeated over the window
            if isinstance(value, torch.Tensor) and value.shape[:1] == flat.shape:
                info[name] = value.unsqueeze(1).expand(value.shape[0], self.window, *value.shape[1:]).reshape(
                    -1, *value.shape[1:]
                )
        info["sequence_mask"] = mask.reshape(-1)
        info["learning_mask"] = (mask & learning).reshape(-1)
        if self.episode_boundary == "stop":
            last = mask & ~torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], 1)
            info[("next", "truncated")] = last.reshape(-1, 1)
            info[("next", "done")] = last.reshape(-1, 1)
        time_index = target.reshape(-1)
        if table.inner_shape:
            return (time_index, *unravel_index(column.reshape(-1), (0, *table.inner_shape))[1:]), info
        return time_index, info
