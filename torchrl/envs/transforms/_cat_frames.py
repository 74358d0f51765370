"""``CatFrames``: stacks the last ``N`` observations along a feature dim (in an env, or offline on trajectories)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import (
    Composite,
    MultiOneHot,
    OneHot,
    TensorSpec,
    Unbounded,
)
from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._groups import restart_where_reset, only_reset_key
from torchrl.envs.transforms._spec_edit import key_pairs
from torchrl.envs.transforms._transform import ObservationTransform, Transform

if TYPE_CHECKING:  # replay buffers sit above environments in the import order
    from torchrl.data.replay_buffers.samplers.slice import SliceSampler

__all__ = ["CatFrames"]

_PADDINGS = ("same", "constant")


# -- window arithmetic (pure functions of the time layout, shared by the offline paths) -------------------------
def _done_along_time(tensordict: TensorDictBase, done_key: NestedKey, required: bool) -> torch.Tensor | None:
    """``("next", done_key)`` reduced to the tensordict's batch shape ``(*lead, T)`` (``None`` when absent)."""
    key = ("next",) + as_tuple(done_key)
    done = tensordict.get(key, None)
    if done is None:
        if required:
            raise KeyError(
                f"CatFrames: the offline path needs the {key!r} entry to find where trajectories restart; "
                f"available keys: {sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}. "
                "Store full transitions (root and 'next' entries), pass done_key=..., or use future=True to treat "
                "each batch row as one trajectory."
            )
        return None
    shape = tensordict.batch_size
    return done.reshape(*shape, -1).any(-1)


def _last_start(done: torch.Tensor | None, shape: torch.Size, device) -> torch.Tensor:
    """For each step ``t``, the index of the first step of its trajectory within the row: ``(*lead, T)``."""
    T = shape[-1]
    steps = torch.arange(T, device=device)
    if done is None:
        return torch.zeros(shape, dtype=torch.long, device=device)
    starts = torch.zeros(shape, dtype=torch.bool, device=device)
    starts[..., 1:] = done[..., :-1]
    return torch.where(starts, steps, 0).cummax(-1).values


def _first_end(done: torch.Tensor | None, shape: torch.Size, device) -> torch.Tensor:
    """For each step ``t``, the index of the last step of its trajectory within the row: ``(*lead, T)``."""
    T = shape[-1]
    last = torch.full(shape, T - 1, dtype=torch.long, device=device)
    if done is None:
        return last
    ends = torch.where(done, torch.arange(T, device=device), last)
    return ends.flip(-1).cummin(-1).values.flip(-1)


def _merge_frames(frames: torch.Tensor, lead: int, dim: int) -> torch.Tensor:
    """``(*L, P, N, *F)`` frames -> ``(*L, P, *F')`` with the ``N`` frames concatenated along ``dim`` of ``F``."""
    n_feat = frames.ndim - lead - 2
    fd = n_feat + dim  # position of dim among the feature dims
    if fd < 0:
        raise ValueError(
            f"CatFrames: dim={dim} is out of range for frames with {n_feat} feature dim(s) "
            f"(shape {tuple(frames.shape[lead + 2:])}); pick a dim among the last {n_feat}."
        )
    n = frames.shape[lead + 1]
    moved = frames.movedim(lead + 1, lead + 1 + fd)
    shape = list(moved.shape)
    shape[lead + 1 + fd : lead + 3 + fd] = [n * shape[lead + 2 + fd]]
    return moved.reshape(shape)


def _gather(src: torch.Tensor, lead: torch.Size, index: torch.Tensor) -> torch.Tensor:
    """``src[..., index]`` along the time dim: ``src`` is ``(*L, S, *F)``, ``index`` ``(*L, P, N)``; returns
    ``(*L, P, N, *F)`` with one ``index_select``."""
    rows = lead.numel()
    S = src.shape[len(lead)]
    feat = src.shape[len(lead) + 1 :]
    flat = src.reshape(rows * S, -1)  # one row per frame: index_select copies whole rows
    offsets = (torch.arange(rows, device=index.device) * S).view(rows, 1, 1)
    idx = index.reshape(rows, *index.shape[-2:]) + offsets
    out = flat.index_select(0, idx.reshape(-1))
    return out.view(*lead, *index.shape[-2:], *feat)


def _grow_spec(spec: TensorSpec, dim: int, N: int) -> TensorSpec:
    """The spec of ``N`` values of ``spec`` concatenated along ``dim`` (bounds repeated as the values are)."""
    shape = list(spec.shape)
    if -dim > len(shape):
        raise ValueError(f"CatFrames: dim={dim} is out of range for an observation spec of shape {spec.shape}.")
    shape[dim] *= N
    d = len(shape) + dim
    if dim == -1 and isinstance(spec, (OneHot, MultiOneHot)):  # N one-hot vectors side by side
        nvec = [spec.n] if isinstance(spec, OneHot) else list(spec.nvec)
        return MultiOneHot(nvec * N, shape=shape, device=spec.device, dtype=spec.dtype)
    if d < len(shape) - getattr(spec, "_feature_ndim", 0):  # a dim the spec's per-element params share
        params = {k: (torch.cat([v] * N, d) if v is not None else None) for k, v in spec._params().items()}
        try:
            return spec._rebuild(torch.Size(shape), params)
        except (ValueError, RuntimeError, TypeError, IndexError):
            pass  # a kind whose params do not follow its shape: describe the values by dtype only
    return Unbounded(shape=shape, dtype=spec.dtype, device=spec.device)


class CatFrames(ObservationTransform):
    """Concatenates the last ``N`` frames of each ``in_key`` along ``dim`` (frame stacking, as in DQN on Atari).

    **In an environment** the transform keeps, per key, the stack it returned last; each step drops its oldest
    frame and appends the new one (one ``torch.cat``). A reset restarts the stack of the reset rows only (the
    ``"_reset"`` mask of batched envs): with ``padding="same"`` the stack is filled with copies of the first
    frame, with ``padding="constant"`` with ``padding_value`` followed by the first frame. The observation
    spec at each ``out_key`` grows ``N`` times along ``dim``. The stack written at a step is also the one the next
    step starts from (no copy is made): transforms placed after ``CatFrames`` must not edit it in place.

    **Offline** (``transform(tensordict)``, e.g. as a replay-buffer transform), the last batch dim of the data is
    time: every step gets the stack of the ``N`` frames that end at it, built with one gather, so frames are
    stored once rather than ``N`` times. Trajectories restart after each ``("next", done_key)``; frames from
    before a restart (or before the start of the sampled window) are replaced by padding as in an env. A
    ``("next", key)`` entry whose root ``key`` is also in ``in_keys`` is stacked as the env would have: its
    window is the root's, shifted by one step. Sample slices with :class:`~torchrl.data.SliceSampler`, or use
    :meth:`make_rb_transform_and_sampler`.

    Args:
        N: number of frames to concatenate.
        dim: the (negative) dim of each frame along which frames are concatenated.
        in_keys: frames to stack (default ``["pixels"]``).
        out_keys: where the stacks go (default: ``in_keys``).
        padding: ``"same"`` (repeat the trajectory's first frame) or ``"constant"`` (``padding_value``).
        padding_value: the fill value of ``padding="constant"``.
        as_inverse: stack on the inverse path (``inv``, i.e. when data is written to a replay buffer) instead of
            the forward one. Not usable in an env.
        reset_key: the reset mask entry (default: the env's only reset key, ``"_reset"`` when standalone).
        done_key: the done entry (under ``"next"``) that ends trajectories offline (default ``"done"``).
        future: offline only: windows gather the ``N`` *upcoming* frames ``t, ..., t + N - 1``; past the end of
            a trajectory they are padded (``"same"`` repeats its last frame). Without a done entry each row is
            one trajectory.
        mask_key: offline only: where to write a ``(*batch, time, N)`` boolean mask, ``True`` at padded slots.

    Raises:
        ValueError: ``N < 1``, ``dim >= 0``, or an unknown ``padding``.
        RuntimeError: ``as_inverse`` or ``future`` on an env's step or reset path.
        KeyError: offline, without the done entry (unless ``future``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs import CatFrames
        >>> data = TensorDict(
        ...     {"obs": torch.arange(5.).unsqueeze(-1),
        ...      "next": {"done": torch.tensor([[False], [True], [False], [False], [True]])}},
        ...     batch_size=[5],
        ... )
        >>> CatFrames(N=3, dim=-1, in_keys=["obs"])(data)["obs"].tolist()
        [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [2.0, 2.0, 2.0], [2.0, 2.0, 3.0], [2.0, 3.0, 4.0]]
    """

    _out_keys_default_to_in_keys = True

    def __init__(
        self,
        N: int,
        dim: int,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        padding: Literal["same", "constant"] = "same",
        padding_value=0,
        as_inverse=False,
        reset_key: NestedKey | None = None,
        done_key: NestedKey | None = None,
        future: bool = False,
        mask_key: NestedKey | None = None,
    ) -> None:
        if in_keys is None:
            in_keys = ["pixels"]
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        if int(N) < 1:
            raise ValueError(f"CatFrames: N must be a positive number of frames, got N={N}.")
        if dim >= 0:
            raise ValueError(
                f"CatFrames: dim must be negative (counted from the end, so that it means the same dim whatever "
                f"the batch size), got dim={dim}."
            )
        if padding not in _PADDINGS:
            raise ValueError(f"CatFrames: padding must be one of {list(_PADDINGS)}, got {padding!r}.")
        self._check_keys()
        self.N = int(N)
        self.dim = int(dim)
        self.padding = padding
        self.padding_value = padding_value
        self.as_inverse = bool(as_inverse)
        self._reset_key = reset_key
        self._done_key = done_key
        self.future = bool(future)
        self.mask_key = mask_key
        # the last stack returned per in_key: per-episode state, rebuilt at each reset, so kept out of the state
        # dict; a plain list (not module buffers) that each step updates without nn.Module's attribute hooks
        self._stacks: list[torch.Tensor | None] = [None] * len(self.in_keys)
        self._env_cache: tuple | None = None

    # -- keys -------------------------------------------------------------------------------------------------
    @property
    def reset_key(self) -> NestedKey:
        """The reset mask entry: ``reset_key`` when given, else the env's only reset key (``"_reset"``)."""
        return only_reset_key(self, self._reset_key, "the stacks")

    @reset_key.setter
    def reset_key(self, value: NestedKey) -> None:
        self._reset_key = value

    @property
    def done_key(self) -> NestedKey:
        """The done entry (read under ``"next"`` offline) that ends trajectories (default ``"done"``)."""
        return "done" if self._done_key is None else self._done_key

    @done_key.setter
    def done_key(self, value: NestedKey) -> None:
        self._done_key = value

    # -- env path ---------------------------------------------------------------------------------------------
    def _env_pairs(self) -> tuple:
        """``(index, in_key, out_key)`` of the keys an env step carries, cached until the key lists change."""
        pairs = key_pairs(self)
        cached = self._env_cache
        if cached is None or cached[0] is not pairs:
            if len(self._stacks) != len(pairs):
                self._stacks = [None] * len(pairs)
            # ("next", ...) keys only exist in stored transitions
            env_pairs = tuple((i, k, o) for i, (k, o) in enumerate(pairs) if as_tuple(k)[0] != "next")
            cached = self._env_cache = (pairs, env_pairs)
        return cached[1]

    def _check_env_use(self) -> None:
        if self.as_inverse:
            raise RuntimeError(
                "CatFrames(as_inverse=True) stacks frames when data is written to a replay buffer; it cannot be "
                "used in an environment. Use as_inverse=False there."
            )
        if self.future:
            raise RuntimeError(
                "CatFrames(future=True) needs whole trajectories (upcoming frames); it only works offline "
                "(replay buffers, datasets), not on an environment's steps."
            )

    def _missing(self, key: NestedKey, tensordict: TensorDictBase):
        if self._missing_tolerance:
            return
        raise KeyError(
            f"CatFrames: key {key!r} not found; available keys: "
            f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
        )

    def _fresh(self, frame: torch.Tensor) -> torch.Tensor:
        """The stack of a new episode whose first frame is ``frame``."""
        N, dim = self.N, self.dim
        if self.padding == "same":
            return torch.cat([frame] * N, dim) if N > 1 else frame
        shape = list(frame.shape)
        shape[dim] *= N - 1
        pad = torch.full(shape, self.padding_value, dtype=frame.dtype, device=frame.device)
        return torch.cat((pad, frame), dim)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """One env step: each stack drops its oldest frame and takes the new one."""
        self._check_env_use()
        pairs = self._env_pairs()  # (first: it resizes the stacks list when the keys changed)
        N, dim, stacks = self.N, self.dim, self._stacks
        for i, in_key, out_key in pairs:
            frame = fast_get(next_tensordict, in_key)
            if frame is None:
                self._missing(in_key, next_tensordict)
                continue
            stack = stacks[i]
            shape = frame.shape
            d = shape[dim]
            if stack is None or stack.shape[dim] != N * d or stack.shape[:dim] != shape[:dim] \
                    or (dim < -1 and stack.shape[dim + 1 :] != shape[dim + 1 :]) or stack.device != frame.device:
                stack = self._fresh(frame)  # no reset seen for this shape: the episode starts here
            elif N > 1:
                stack = torch.cat((stack.narrow(dim, d, (N - 1) * d), frame), dim)
            else:
                stack = frame
            stacks[i] = stack
            fast_set(next_tensordict, out_key, stack)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        """Restarts the stacks of the reset rows; the other rows keep theirs."""
        self._check_env_use()
        pairs = self._env_pairs()
        reset_key, stacks = self.reset_key, self._stacks
        for i, in_key, out_key in pairs:
            frame = fast_get(tensordict_reset, in_key)
            if frame is None:
                self._missing(in_key, tensordict_reset)
                continue
            fresh = self._fresh(frame)
            previous = stacks[i]
            if previous is not None and (previous.shape != fresh.shape or previous.device != fresh.device):
                previous = None
            stack = stacks[i] = restart_where_reset(tensordict, reset_key, previous, fresh)
            fast_set(tensordict_reset, out_key, stack)
        return tensordict_reset

    # -- offline path -----------------------------------------------------------------------------------------
    def forward(self=None, tensordict=None, **kwargs):
        """Stacks frames over the time dim (the last batch dim) of ``tensordict`` (unchanged if ``as_inverse``)."""
        if tensordict is None:
            return super().forward(**kwargs)
        if self.as_inverse:
            return tensordict
        return self.unfolding(tensordict)

    @property
    def _has_inverse(self) -> bool:
        return self.as_inverse

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self.unfolding(tensordict) if self.as_inverse else tensordict

    def unfolding(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes at each ``out_key`` the stack of ``N`` frames of every step of ``tensordict``.

        The last batch dim is time. Returns ``tensordict`` (edited in place).
        """
        return self._unfold(tensordict, last_only=False)

    def _unfold(self, tensordict: TensorDictBase, last_only: bool) -> TensorDictBase:
        if not tensordict.batch_dims:
            raise ValueError(
                "CatFrames: offline frame stacking needs data with a time dim (the last batch dim); got a "
                "tensordict with batch_size=(). Sample slices of trajectories, e.g. with SliceSampler."
            )
        shape = tensordict.batch_size
        lead, T, device = shape[:-1], shape[-1], tensordict.device
        done = _done_along_time(tensordict, self.done_key, required=not self.future)
        if device is None:
            device = done.device if done is not None else next(iter(tensordict.values(True, True))).device
        N, constant = self.N, self.padding == "constant"
        steps = torch.arange(T - 1, T, device=device) if last_only else torch.arange(T, device=device)
        slots = torch.arange(N, device=device)
        if self.future:
            bound = _first_end(done, shape, device)[..., steps].unsqueeze(-1)  # (*L, P, 1)
            frame = steps.unsqueeze(-1) + slots  # (P, N)
            padded = frame > bound
            index = torch.minimum(frame, bound)
        else:
            bound = _last_start(done, shape, device)[..., steps].unsqueeze(-1)
            frame = steps.unsqueeze(-1) - (N - 1) + slots
            padded = frame < bound
            index = torch.maximum(frame, bound)
        # read every input before writing any stack (an out_key may overwrite an in_key another key reads)
        inputs = {as_tuple(k): tensordict.get(k, None) for k in self.in_keys}
        results = []
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            key = as_tuple(in_key)
            values = inputs[key]
            if values is None:
                self._missing(in_key, tensordict)
                continue
            if key[0] == "next" and inputs.get(key[1:]) is not None:
                if self.future:
                    raise NotImplementedError(
                        f"CatFrames(future=True) cannot stack {in_key!r} together with its root entry "
                        f"{from_tuple(key[1:])!r}: the one-step shift between them is only defined for past "
                        "windows. Stack one of the two."
                    )
                # the env's stack at t+1: the root frame opening the trajectory, then next frames
                src = torch.cat((inputs[key[1:]], values), len(lead))
                shifted = frame + 1
                index_k = torch.where(shifted > bound, shifted - 1 + T, bound)
                padded_k = shifted < bound
            else:
                src, index_k, padded_k = values, index, padded
            index_k = index_k.expand(*lead, *index_k.shape[-2:])
            frames = _gather(src, lead, index_k)
            if constant:
                mask = padded_k.expand(*lead, *padded_k.shape[-2:])
                frames.masked_fill_(mask.reshape(*mask.shape, *([1] * (frames.ndim - mask.ndim))), self.padding_value)
            stacks = _merge_frames(frames, len(lead), self.dim)
            results.append((out_key, stacks.squeeze(len(lead)) if last_only else stacks))
        for out_key, stacks in results:
            tensordict.set(out_key, stacks)
        if self.mask_key is not None:
            mask = padded.expand(*lead, *padded.shape[-2:])
            tensordict.set(self.mask_key, mask.squeeze(len(lead)) if last_only else mask.clone())
        return tensordict

    def make_rb_transform_and_sampler(self, batch_size: int, **sampler_kwargs) -> tuple[Transform, SliceSampler]:
        """A replay-buffer transform and sampler that stack frames at sampling time (frames are stored once).

        The sampler draws ``batch_size`` slices of ``N`` consecutive steps (``SliceSampler`` options go in
        ``sampler_kwargs``); the transform folds each slice into one sample carrying the stack of its last step
        (at ``out_keys`` and their ``("next", ...)`` counterparts). On writes, it drops the ``out_keys`` that differ
        from the ``in_keys``, so stacks collected in an env are not stored. Use it with a
        :class:`~torchrl.data.ReplayBuffer` (the buffer's ``batch_size`` counts stacked samples).

        Args:
            batch_size: the number of stacked samples per batch (informative: the buffer's ``batch_size`` rules).
            **sampler_kwargs: other :class:`~torchrl.data.SliceSampler` options.

        Returns:
            ``(transform, sampler)``.
        """
        # replay buffers sit above environments in the import order: their sampler is imported on demand
        from torchrl.envs.transforms._cat_frames_sampler import FrameStackSliceSampler

        in_keys = [k for k in self.in_keys if as_tuple(k)[0] != "next"]
        out_keys = [o for k, o in zip(self.in_keys, self.out_keys) if as_tuple(k)[0] != "next"]
        in_keys = in_keys + [("next",) + as_tuple(k) for k in in_keys]
        out_keys = out_keys + [("next",) + as_tuple(k) for k in out_keys]
        stacker = CatFrames(
            self.N, self.dim, in_keys=in_keys, out_keys=out_keys, padding=self.padding,
            padding_value=self.padding_value, reset_key=self._reset_key, done_key=self.done_key,
        )
        return _SliceFrameStack(stacker), FrameStackSliceSampler(self.N, **sampler_kwargs)

    # -- specs ------------------------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not isinstance(observation_spec, Composite):
            return _grow_spec(observation_spec, self.dim, self.N)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in observation_spec.keys(include_nested=True, leaves_only=True):
                observation_spec[out_key] = _grow_spec(observation_spec[in_key], self.dim, self.N)
        return observation_spec

    def __repr__(self) -> str:
        keys = f"keys={self.in_keys}" if self.in_keys == self.out_keys else f"in_keys={self.in_keys}, out_keys={self.out_keys}"
        return f"CatFrames(N={self.N}, dim={self.dim}, {keys})"


class _SliceFrameStack(Transform):
    """The buffer transform of :meth:`CatFrames.make_rb_transform_and_sampler`: ``(B * N,)`` samples drawn as
    ``B`` slices of ``N`` steps become ``B`` samples holding the stacks of each slice's last step (only those
    windows are gathered). ``inv`` drops the stacked entries from written data."""

    def __init__(self, stacker: CatFrames) -> None:
        super().__init__(in_keys=stacker.in_keys, out_keys=stacker.out_keys)
        self.stacker = stacker

    def forward(self=None, tensordict=None, **kwargs):
        if tensordict is None:
            return super().forward(**kwargs)
        N = self.stacker.N
        if tensordict.batch_dims != 1 or tensordict.shape[0] % N:
            raise ValueError(
                f"CatFrames buffer transform: expected a flat batch of slices of N={N} steps, got batch_size "
                f"{tuple(tensordict.batch_size)}; sample with the sampler returned by make_rb_transform_and_sampler."
            )
        slices = tensordict.reshape(-1, N)
        out = slices[:, -1]
        stacker = self.stacker
        if not stacker.future and stacker.mask_key is None:
            done = _done_along_time(slices, stacker.done_key, required=False)
            if done is None or not bool(done[:, :-1].any()):
                # no trajectory starts inside any slice (e.g. strict-length slices): each stack is its slice's
                # frames as they are (for a ("next", key), its next frames): a reshape, no padding, no gather
                for in_key, out_key in zip(stacker.in_keys, stacker.out_keys):
                    values = slices.get(in_key, None)
                    if values is None:
                        stacker._missing(in_key, slices)
                        continue
                    out.set(out_key, _merge_frames(values.unsqueeze(1), 1, stacker.dim).squeeze(1))
                return out
        stacked = self.stacker._unfold(slices.select(*self._read_keys(), strict=False), last_only=True)
        for key in self.stacker.out_keys:
            value = stacked.get(key, None)
            if value is not None:
                out.set(key, value)
        return out

    def _read_keys(self):
        keys = list(self.stacker.in_keys) + [("next",) + as_tuple(self.stacker.done_key)]
        return [from_tuple(as_tuple(k)) for k in keys]

    _call = forward

    @property
    def _has_inverse(self) -> bool:
        return True

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        drop = [k for k, i in zip(self.out_keys, self.in_keys) if as_tuple(k) != as_tuple(i)]
        return tensordict.exclude(*drop) if drop else tensordict

    def __repr__(self) -> str:
        return f"_SliceFrameStack({self.stacker})"
