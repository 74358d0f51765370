"""``SliceSampler``: contiguous sub-trajectories that never cross trajectory boundaries."""
from __future__ import annotations

from typing import Any

import torch

from torchrl._utils._deprecation import warn_once
from torchrl.data.replay_buffers._utils import _replace_last, random_on, to_device, unravel_index
from torchrl.data.replay_buffers.samplers._trajectories import (
    TrajectoryTable,
    _ends_from_ids,
    storage_table,
    trajectory_table,
)
from torchrl.data.replay_buffers.samplers.base import Sampler, empty_storage_error
from torchrl.data.replay_buffers.samplers._without_replacement import SamplerWithoutReplacement

_DEFAULT_END_KEY = ("next", "done")
_MASK_KEY = ("collector", "mask")
_DEFAULT_TRAJ_KEYS = ("episode", ("collector", "traj_ids"))


def _span_pair(span: Any, slice_len: int | None) -> tuple[Any, Any]:
    if isinstance(span, (tuple, list)):
        if len(span) != 2:
            raise ValueError(f"SliceSampler: span must be a bool, an int or a pair of them; got {span!r}.")
        return span[0], span[1]
    return span, span


class SliceSampler(Sampler):
    """Samples slices of consecutive steps that stay inside one trajectory.

    Trajectory boundaries come from an end flag stored with the data (``end_key``, default
    ``("next", "done")``), from trajectory ids (``traj_key``), or from tensors given at construction
    (``ends=`` / ``trajectories=``). The newest stored step always ends its trajectory, and in a full
    circular storage a trajectory may wrap around the end of the storage. Boundaries are recomputed only
    after the storage was written to (they are cached between writes, whatever ``cache_values`` says).

    A batch of ``batch_size`` elements is ``num_slices`` slices of ``batch_size // num_slices`` steps (or
    ``batch_size // slice_len`` slices of ``slice_len`` steps). Trajectories are drawn uniformly, then a
    start uniformly within the trajectory. As in TorchRL, the returned info marks the last step of every
    slice as truncated (``truncated_key``) and done, and reports a ``terminated`` entry next to them that
    keeps the stored terminations, so value estimators never bootstrap across slices.

    Devices: boundaries are computed where the stored flags live (or on ``use_gpu``'s device), and slices
    are drawn there; indices come back on the storage's device. Finding the boundaries after a write has a
    data-dependent size, so the first sample after each write synchronises a CUDA storage with the host
    once; the following samples (full-length slices) do not. ``strict_length=False`` without padding drops
    the steps outside trajectories (a boolean mask: one synchronisation per sample).

    Keyword Args:
        num_slices (int): slices per batch. Exactly one of ``num_slices`` and ``slice_len`` (``TypeError``).
        slice_len (int): steps per slice.
        end_key (NestedKey, optional): the stored end-of-trajectory flag. Defaults to ``("next", "done")``.
        end_keys (list of NestedKey, optional): several end flags, OR-ed. Exclusive with ``end_key``.
        traj_key (NestedKey, optional): the stored trajectory ids; used instead of ``end_key``/``end_keys``
            when both are given.
        ends (Tensor, optional): fixed end flags (for static datasets); requires ``cache_values=True``.
            ``ends``, ``trajectories`` and the keys above are exclusive (``RuntimeError``).
        trajectories (Tensor, optional): fixed trajectory ids (for static datasets); requires
            ``cache_values=True``.
        cache_values (bool, optional): boundaries are always cached until the next write; required with
            ``ends``/``trajectories``. Defaults to ``False``.
        truncated_key (NestedKey, optional): where to report slice ends; ``None`` reports nothing. The
            matching ``"done"`` and ``"terminated"`` keys are reported too. Defaults to
            ``("next", "truncated")``.
        strict_length (bool, optional): only sample trajectories at least as long as a slice. With
            ``False``, shorter trajectories give shorter slices (the batch is smaller than requested
            unless ``pad_output=True``). Defaults to ``True``.
        span (bool, int or pair, optional): let slices overhang the trajectory start/end (left, right):
            ``True`` keeps at least one step, ``i`` keeps at least ``slice_len - i`` steps. Implies
            ``strict_length=False``. Defaults to ``False``.
        pad_output (bool, optional): with ``strict_length=False``, pad short slices to full length by
            repeating their last step, and report real steps in ``("collector", "mask")`` (in the info and
            the sampled TensorDict, when some slice was padded, as in TorchRL); ``ValueError`` with
            ``strict_length=True``. Defaults to ``False``.
        compile (bool, optional): accepted for compatibility (no compiled path). Defaults to ``False``.
        use_gpu (bool or device, optional): compute boundaries on this device. Defaults to ``False``.
        replacement (bool, optional): ``False`` returns a :class:`SliceSamplerWithoutReplacement`.
            Defaults to ``True``.
        init_key (NestedKey, optional): where to report the first step of every slice (recurrent modules
            reset their state there); ``None`` reports nothing. Defaults to ``"is_init"``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TensorDictReplayBuffer, LazyTensorStorage, SliceSampler
        >>> episode = torch.tensor([0] * 5 + [1] * 5)
        >>> data = TensorDict(episode=episode, step=torch.arange(10), batch_size=[10])
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10),
        ...                             sampler=SliceSampler(slice_len=5, traj_key="episode"), batch_size=10)
        >>> _ = rb.extend(data)
        >>> sample = rb.sample()
        >>> [set(x.tolist()) for x in sample["episode"].split(5)] in ([{0}, {1}], [{1}, {0}], [{0}, {0}], [{1}, {1}])
        True
    """

    _fixed_needs_cache = True  # ends=/trajectories= need cache_values=True (not for the without-replacement one)
    _valid_cache = None  # (table, seq_len, valid), see _valid_trajectories
    _pattern = None  # (key, steps, first, last), see _exact_slices

    def __new__(cls, *args, replacement: bool = True, **kwargs):
        if not replacement and cls is SliceSampler:
            return super().__new__(SliceSamplerWithoutReplacement)
        return super().__new__(cls)

    def __init__(
        self,
        *,
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
        use_gpu: torch.device | bool = False,
        replacement: bool = True,
        init_key="is_init",
    ):
        name = type(self).__name__
        if (num_slices is None) == (slice_len is None):
            raise TypeError(
                f"{name}: pass exactly one of num_slices and slice_len (a batch is num_slices slices, or slices of "
                f"slice_len steps); got num_slices={num_slices} and slice_len={slice_len}."
            )
        if end_key is not None and end_keys is not None:
            raise RuntimeError(
                f"{name}: end_key and end_keys are exclusive: pass one boundary key as end_key, or several keys "
                "to be OR-ed as end_keys."
            )
        if ends is not None and trajectories is not None:
            raise RuntimeError(f"{name}: trajectories and ends are exclusive arguments; pass one of them.")
        fixed = "ends" if ends is not None else "trajectories" if trajectories is not None else None
        if fixed is not None and (end_key is not None or end_keys is not None or traj_key is not None):
            raise RuntimeError(
                f"{name}: {fixed}= gives the trajectories directly, so it is exclusive with end_key, end_keys and "
                "traj_key (which read them from the stored data)."
            )
        if fixed is not None and self._fixed_needs_cache and not cache_values:
            raise RuntimeError(f"{name}: {fixed}= requires cache_values=True (the boundaries are given once).")
        if pad_output and strict_length:
            raise ValueError(
                f"{name}: pad_output=True is incompatible with strict_length=True: padding only happens when short "
                "trajectories are kept, which requires strict_length=False."
            )
        self.num_slices = num_slices
        self.slice_len = slice_len
        self.end_keys = list(end_keys) if end_keys is not None else ([end_key] if end_key is not None else None)
        self.traj_key = traj_key  # takes precedence over end_key/end_keys when both are given, as in TorchRL
        self._fixed = (ends, trajectories)
        self.cache_values = cache_values
        self.truncated_key = truncated_key
        self.span = _span_pair(span, slice_len)
        # spanning slices can be shorter than requested: span implies strict_length=False, as in TorchRL
        self.strict_length = strict_length and not any(self.span)
        self.pad_output = pad_output
        self.init_key = init_key
        self.compile = compile
        self.use_gpu = use_gpu
        self._cache_key: Any = None
        self._table: TrajectoryTable | None = None

    # ------------------------------------------------------------------ trajectory table
    def _device(self) -> torch.device | None:
        """Where boundaries and slices are computed (``None``: with the storage's tensors)."""
        if self.use_gpu is True:
            if not torch.cuda.is_available():
                warn_once(
                    f"{type(self).__name__}(use_gpu=True): CUDA is not available; slices are computed on the CPU.",
                    category=UserWarning,
                )
                return None
            return torch.device("cuda")
        if self.use_gpu:
            return torch.device(self.use_gpu)
        return None

    def _resolve_keys(self, storage) -> tuple[str, list]:
        if self.traj_key is not None:
            return "traj", [self.traj_key]
        if self.end_keys is not None:
            return "end", self.end_keys
        content = getattr(storage, "_storage", None)
        keys = set(content.keys(True, True)) if content is not None and hasattr(content, "keys") else set()
        if _DEFAULT_END_KEY in keys:
            return "end", [_DEFAULT_END_KEY]
        for key in _DEFAULT_TRAJ_KEYS:
            if key in keys:
                return "traj", [key]
        return "end", [_DEFAULT_END_KEY]

    def _get_table(self, storage) -> TrajectoryTable:
        if len(storage) == 0:
            raise empty_storage_error(self)
        version = getattr(storage, "_version", None)
        key = (id(storage), version, len(storage))
        if self._table is not None and key == self._cache_key and version is not None:
            return self._table
        ends, trajectories = self._fixed
        if ends is None and trajectories is None:
            kind, keys = self._resolve_keys(storage)
            table = storage_table(storage, keys, kind, type(self).__name__)
        else:
            rows = getattr(storage, "_rows", len(storage))
            capacity_rows = getattr(storage, "_capacity_rows", None)
            last_row = storage._last_row() if hasattr(storage, "_last_row") else None
            wrap = capacity_rows is not None and rows == capacity_rows and last_row not in (None, rows - 1)
            fixed = (ends if ends is not None else trajectories)[:rows].reshape(rows, -1)
            flags = fixed.bool() if ends is not None else _ends_from_ids(fixed, wrap)
            inner = tuple(storage.shape[1 : storage.ndim]) if storage.ndim > 1 else ()
            table = trajectory_table(flags, wrap=wrap, last_row=last_row, inner_shape=inner)
        device = self._device()
        if device is not None:
            table = TrajectoryTable(*(x.to(device) if isinstance(x, torch.Tensor) else x for x in table))
        self._table = table
        self._cache_key = key
        self._on_new_table()
        return self._table

    def _on_new_table(self) -> None:
        """Hook for subclasses keeping state tied to the table (epochs, per-position lookups)."""
        return None

    def _geometry(self, batch_size: int) -> tuple[int, int]:
        if self.slice_len is not None:
            if batch_size % self.slice_len:
                raise RuntimeError(
                    f"{type(self).__name__}: batch_size={batch_size} is not a multiple of slice_len={self.slice_len}."
                )
            return batch_size // self.slice_len, self.slice_len
        if batch_size % self.num_slices:
            raise RuntimeError(
                f"{type(self).__name__}: batch_size={batch_size} is not a multiple of num_slices={self.num_slices}."
            )
        return self.num_slices, batch_size // self.num_slices

    def _overhang(self, seq_len: int) -> tuple[int, int]:
        def one(value: Any) -> int:
            if value is True:
                return seq_len - 1
            if value is False or value is None:
                return 0
            return min(int(value), seq_len - 1)

        return one(self.span[0]), one(self.span[1])

    # ------------------------------------------------------------------ sampling
    def _valid_trajectories(self, table: TrajectoryTable, seq_len: int) -> torch.Tensor:
        cached = self._valid_cache
        if cached is not None and cached[0] is table and cached[1] == seq_len:
            return cached[2]
        if self.strict_length:
            valid = (table.length >= seq_len).nonzero().squeeze(-1)
        else:
            valid = torch.arange(table.length.numel(), device=table.length.device)
        if valid.numel() == 0:
            raise RuntimeError(
                f"{type(self).__name__}: no stored trajectory is at least {seq_len} steps long (the longest has "
                f"{int(table.length.max())}). Use shorter slices, or strict_length=False to get shorter ones."
            )
        self._valid_cache = (table, seq_len, valid)
        return valid

    def _choose_trajectories(self, table: TrajectoryTable, num_slices: int, seq_len: int) -> torch.Tensor:
        valid = self._valid_trajectories(table, seq_len)
        draw = random_on(torch.randint, 0, valid.numel(), (num_slices,), generator=self._rng, device=valid.device)
        return valid[draw]

    def _choose_offsets(self, length: torch.Tensor, seq_len: int) -> torch.Tensor:
        u = random_on(torch.rand, length.shape, generator=self._rng, device=length.device)
        if self.strict_length and not any(self.span):
            return u.mul_(length - (seq_len - 1)).long()
        left, right = self._overhang(seq_len)
        low = -left
        high = torch.clamp(length - seq_len + right, min=low)
        return low + (u * (high - low + 1)).floor_().long()

    def sample(self, storage, batch_size: int) -> tuple[torch.Tensor, dict]:
        table = self._get_table(storage)
        num_slices, seq_len = self._geometry(batch_size)
        traj = self._choose_trajectories(table, num_slices, seq_len)
        if traj.numel() == 0:
            raise RuntimeError(f"{type(self).__name__}: no slice could be drawn.")
        length = table.length[traj]
        offset = self._choose_offsets(length, seq_len)
        index, info = self._slices(table, traj, length, offset, seq_len, extra={})
        if self._device() is not None:  # computed on use_gpu's device: index the storage where it lives
            device = storage._index_device
            index = tuple(to_device(i, device) for i in index) if isinstance(index, tuple) else to_device(index, device)
            info = {k: to_device(v, device) if isinstance(v, torch.Tensor) else v for k, v in info.items()}
        return index, info

    def _exact_slices(self, table, traj, offset, seq_len: int, extra: dict) -> tuple[Any, dict]:
        """``_slices`` for full-length slices of a 1-d storage (the common case), with fewer operations."""
        num_slices = traj.numel()
        key = (num_slices, seq_len, offset.device)
        cached = self._pattern
        if cached is None or cached[0] != key:
            steps = torch.arange(seq_len, device=offset.device)
            first = torch.zeros(num_slices, seq_len, dtype=torch.bool, device=offset.device)
            last = torch.zeros_like(first)
            first[:, 0] = True
            last[:, -1] = True
            cached = self._pattern = (key, steps, first.reshape(-1, 1), last.reshape(-1))
        _, steps, is_first, is_last = cached
        time = (table.start.index_select(0, traj) + offset).unsqueeze(-1) + steps
        if table.wrap:
            time = time % table.rows
        time = time.reshape(-1)
        info = dict(extra)
        for name, value in list(info.items()):
            if isinstance(value, torch.Tensor) and value.ndim >= 2 and value.shape[:2] == (num_slices, seq_len):
                info[name] = value.reshape(-1, *value.shape[2:])
        if self.truncated_key is not None:
            stored_end = table.stored_end.reshape(-1).index_select(0, time)
            self._flags(info, is_last, stored_end)
        if self.init_key is not None:
            info[self.init_key] = is_first
        return (time,), info  # coordinates, as TorchRL: sampled TensorDicts get an "index" of shape [N, 1]

    def _flags(self, info: dict, is_last: torch.Tensor, stored_end: torch.Tensor) -> None:
        """The end flags of the sampled steps, as TorchRL reports them.

        ``truncated`` marks the last step of every slice; ``terminated`` is all False (it is OR-ed with the
        stored entry when there is one, so stored terminations survive); ``done`` is their union with the
        stored trajectory ends.
        """
        last = is_last.unsqueeze(-1)
        info[self.truncated_key] = last
        info[_replace_last(self.truncated_key, "terminated")] = torch.zeros_like(last)
        info[_replace_last(self.truncated_key, "done")] = (is_last | stored_end).unsqueeze(-1)

    def _slices(self, table, traj, length, offset, seq_len: int, extra: dict) -> tuple[Any, dict]:
        if self.strict_length and not any(self.span) and not table.inner_shape:
            return self._exact_slices(table, traj, offset, seq_len, extra)
        steps = torch.arange(seq_len, device=length.device)
        rel = offset.unsqueeze(-1) + steps  # [S, L] position inside the trajectory
        exact = self.strict_length and not any(self.span)
        info = dict(extra)
        if exact:
            keep = None
        else:
            keep = (rel >= 0) & (rel < length.unsqueeze(-1))
            if self.pad_output:
                rel = torch.minimum(torch.maximum(rel, torch.zeros_like(rel)), (length - 1).unsqueeze(-1))
                if not bool(keep.all()):  # as in TorchRL: reported only when some slice was padded
                    info[_MASK_KEY] = keep.reshape(-1)
        time = table.start[traj].unsqueeze(-1) + rel
        if table.wrap:
            time = time % table.rows
        column = table.column[traj].unsqueeze(-1).expand_as(time)
        # the first and last real steps of every slice (its kept steps are contiguous)
        is_first = torch.zeros(rel.shape, dtype=torch.bool, device=rel.device)
        is_last = torch.zeros_like(is_first)
        if keep is None:
            is_first[:, 0] = True
            is_last[:, -1] = True
        else:
            is_first[:, 0] = keep[:, 0]
            is_first[:, 1:] = keep[:, 1:] & ~keep[:, :-1]
            is_last[:, -1] = keep[:, -1]
            is_last[:, :-1] = keep[:, :-1] & ~keep[:, 1:]
        if keep is not None and not self.pad_output:
            time, column, is_last, is_first = time[keep], column[keep], is_last[keep], is_first[keep]
            for name, value in list(info.items()):
                if isinstance(value, torch.Tensor) and value.shape[:2] == keep.shape:
                    info[name] = value[keep]
        else:
            time, column, is_last, is_first = time.reshape(-1), column.reshape(-1), is_last.reshape(-1), is_first.reshape(-1)
            for name, value in list(info.items()):
                if isinstance(value, torch.Tensor) and value.ndim >= 2 and value.shape[:2] == rel.shape:
                    info[name] = value.reshape(-1, *value.shape[2:])
        if self.truncated_key is not None:
            self._flags(info, is_last, table.stored_end[time, column])
        if self.init_key is not None:
            info[self.init_key] = is_first.unsqueeze(-1)
        if table.inner_shape:
            index = (time, *unravel_index(column, (0, *table.inner_shape))[1:])
        else:
            index = (time,)
        return index, info

    # ------------------------------------------------------------------ notifications and state
    def add(self, index: torch.Tensor) -> None:
        self._table = None

    def extend(self, index: torch.Tensor) -> None:
        self._table = None

    def mark_update(self, index: int | torch.Tensor, *, storage=None) -> None:
        self._table = None

    def _empty(self) -> None:
        self._table = None
        self._cache_key = None

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._table = None

    def dumps(self, path):
        return super().dumps(path)

    def loads(self, path):
        return super().loads(path)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_table"] = None
        state["_cache_key"] = None
        state.pop("_valid_cache", None)
        state.pop("_pattern", None)
        return state

    def __repr__(self) -> str:
        end_key = self.end_keys[0] if self.end_keys is not None and len(self.end_keys) == 1 else _DEFAULT_END_KEY
        end_keys = self.end_keys if self.end_keys is not None and len(self.end_keys) > 1 else None
        return (
            f"{type(self).__name__}(num_slices={self.num_slices}, slice_len={self.slice_len}, end_key={end_key}, "
            f"end_keys={end_keys}, traj_key={self.traj_key}, truncated_key={self.truncated_key}, "
            f"strict_length={self.strict_length}, pad_output={self.pad_output})"
        )



class SliceSamplerWithoutReplacement(SliceSampler, SamplerWithoutReplacement):
    """A :class:`SliceSampler` that uses every trajectory once per epoch.

    Each batch takes ``num_slices`` trajectories that were not used yet in the current epoch (one slice
    from each), so no step is sampled twice within an epoch and a batch never holds two slices of the same
    trajectory. :attr:`ran_out` flags the end of an epoch; writing to the buffer starts a new one.

    Keyword Args:
        drop_last (bool, optional): drop the last batch of an epoch when fewer than ``num_slices``
            trajectories remain. Defaults to ``False`` (that batch is returned smaller).
        shuffle (bool, optional): visit trajectories in random order. Defaults to ``True``.
        other keyword arguments: as :class:`SliceSampler`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import (TensorDictReplayBuffer, LazyTensorStorage,
        ...     SliceSamplerWithoutReplacement)
        >>> data = TensorDict(episode=torch.arange(4).repeat_interleave(3), batch_size=[12])
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(12), batch_size=6,
        ...     sampler=SliceSamplerWithoutReplacement(slice_len=3, traj_key="episode"))
        >>> _ = rb.extend(data)
        >>> sorted(torch.cat([b["episode"] for b in rb]).unique().tolist())
        [0, 1, 2, 3]
    """

    def __init__(
        self,
        *,
        num_slices: int | None = None,
        slice_len: int | None = None,
        drop_last: bool = False,
        end_key=None,
        end_keys=None,
        traj_key=None,
        ends: torch.Tensor | None = None,
        trajectories: torch.Tensor | None = None,
        truncated_key=("next", "truncated"),
        strict_length: bool = True,
        shuffle: bool = True,
        compile: bool | dict = False,
        use_gpu: bool | torch.device = False,
        cache_values: bool = False,
        span: bool | int | tuple = False,
        pad_output: bool = False,
        replacement: bool = False,
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
            use_gpu=use_gpu,
        )
        SamplerWithoutReplacement.__init__(self, drop_last=drop_last, shuffle=shuffle)

    _fixed_needs_cache = False

    def add(self, index: torch.Tensor) -> None:
        SliceSampler.add(self, index)
        self._order = None

    def extend(self, index: torch.Tensor) -> None:
        SliceSampler.extend(self, index)
        self._order = None

    def mark_update(self, index, *, storage=None) -> None:
        SliceSampler.mark_update(self, index, storage=storage)
        self._order = None

    def _choose_trajectories(self, table: TrajectoryTable, num_slices: int, seq_len: int) -> torch.Tensor:
        valid = self._valid_trajectories(table, seq_len)
        device = valid.device if valid.device.type != "cpu" else None
        return valid[self._take(valid.numel(), num_slices, device)]

    def sample(self, storage, batch_size: int) -> tuple[tuple[torch.Tensor, ...], dict]:
        return SliceSampler.sample(self, storage, batch_size)

    def can_sample(self, storage, batch_size: int) -> bool:
        return len(storage) > 0

    def _empty(self) -> None:
        SliceSampler._empty(self)
        SamplerWithoutReplacement._empty(self)

    def state_dict(self) -> dict[str, Any]:
        return SamplerWithoutReplacement.state_dict(self)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        SamplerWithoutReplacement.load_state_dict(self, state_dict)
        self._cache_key = None
        self._table = None

    def dumps(self, path):
        return Sampler.dumps(self, path)

    def loads(self, path):
        return Sampler.loads(self, path)
