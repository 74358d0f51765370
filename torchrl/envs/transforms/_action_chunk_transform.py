"""``ActionChunkTransform``: per-step actions -> fixed-length chunks of upcoming actions (action-chunking targets)."""
from __future__ import annotations

from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite
from torchrl.envs.transforms._cat_frames import CatFrames
from torchrl.envs.transforms._compose import Compose
from torchrl.envs.transforms._squeeze import UnsqueezeTransform

__all__ = ["ActionChunkTransform"]


def _as_tuple(key: NestedKey) -> tuple:
    return (key,) if isinstance(key, str) else tuple(key)


class ActionChunkTransform(Compose):
    """Builds, for each step ``t`` of a trajectory window, the chunk of actions ``a[t], ..., a[t + H - 1]``.

    Action-chunking policies (ACT, pi0, SmolVLA, ...) predict the next ``H = chunk_size`` actions at once;
    this transform makes their training targets from time-structured data: an action ``[*B, T, action_dim]``
    (time at ``time_dim``, the action dim right after it) gives ``chunk_key`` ``[*B, T, H, action_dim]``
    and ``pad_key`` ``[*B, T, H]``, ``True`` where a chunk runs past the end of the window and is filled by
    repeating the last available action. When the data carries its done state at ``("next", done_key)``
    (shaped like the action without its last dim, with or without a trailing singleton), chunks also stop
    at the trajectory boundaries inside the window, padded the same way. Each row is its own window:
    reshape a flat :class:`~torchrl.data.SliceSampler` batch to ``[num_slices, slice_len]`` first.

    It is a :class:`Compose` recipe: an :class:`UnsqueezeTransform` opens the chunk dim and a
    forward-looking :class:`CatFrames` (``future=True``, ``padding="same"``, ``mask_key=pad_key``) gathers
    the windows. As a replay-buffer transform, chunks are built on ``sample`` (``extend`` stores the raw
    steps). Appended to an env it leaves the outputs and specs unchanged (it builds training targets; use
    :class:`MultiAction` to execute a chunk).

    Args:
        chunk_size: the horizon ``H`` (``>= 1``).

    Keyword Args:
        action_key: the per-step action (default ``"action"``).
        chunk_key: where the chunks go (default ``("vla_action", "chunk")``).
        pad_key: where the padding mask goes (default ``"action_is_pad"``).
        time_dim: the time dim of the action tensor (default ``-2``); the action dim must follow it.
        done_key: the done entry (under ``"next"``) marking trajectory ends (default ``"done"``; ``None``
            ignores the done state).

    Raises:
        ValueError: ``chunk_size < 1``; (on data) the action dim does not follow ``time_dim``, or the done
            entry's leading dims differ from the action's.
        KeyError: (on data) ``action_key`` is missing.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._action_chunk_transform import ActionChunkTransform
        >>> t = ActionChunkTransform(3)
        >>> td = t(TensorDict(action=torch.arange(4.0).view(1, 4, 1), batch_size=[1, 4]))
        >>> td["vla_action", "chunk"][0, :, :, 0]
        tensor([[0., 1., 2.],
                [1., 2., 3.],
                [2., 3., 3.],
                [3., 3., 3.]])
        >>> td["action_is_pad"][0, 2:].tolist()
        [[False, False, True], [False, True, True]]
    """

    def __init__(
        self,
        chunk_size: int,
        *,
        action_key: NestedKey = "action",
        chunk_key: NestedKey = ("vla_action", "chunk"),
        pad_key: NestedKey = "action_is_pad",
        time_dim: int = -2,
        done_key: NestedKey | None = "done",
    ) -> None:
        if isinstance(chunk_size, bool) or int(chunk_size) != chunk_size or chunk_size < 1:
            raise ValueError(f"ActionChunkTransform: chunk_size must be an integer >= 1, got {chunk_size!r}.")
        chunk_size = int(chunk_size)
        frames = CatFrames(
            N=chunk_size, dim=-2, in_keys=[chunk_key], out_keys=[chunk_key], padding="same", future=True,
            mask_key=pad_key, done_key="done" if done_key is None else done_key,
        )
        super().__init__(UnsqueezeTransform(dim=-2, in_keys=[action_key], out_keys=[chunk_key]), frames)
        self.chunk_size = chunk_size
        self.time_dim = int(time_dim)
        self._keys = (action_key, chunk_key, pad_key, done_key)

    @property
    def action_key(self) -> NestedKey:
        return self._keys[0]

    @property
    def chunk_key(self) -> NestedKey:
        return self._keys[1]

    @property
    def pad_key(self) -> NestedKey:
        return self._keys[2]

    @property
    def done_key(self) -> NestedKey | None:
        return self._keys[3]

    # -- data path -----------------------------------------------------------------------------------------
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes ``chunk_key`` and ``pad_key`` into ``tensordict`` (in place) and returns it."""
        action = tensordict.get(self.action_key, None)
        if action is None:
            raise KeyError(
                f"ActionChunkTransform: action {self.action_key!r} not found; available keys: "
                f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
            )
        ndim = action.ndim
        t = self.time_dim + ndim if self.time_dim < 0 else self.time_dim
        if ndim < 2 or t != ndim - 2:
            raise ValueError(
                f"ActionChunkTransform expects the action dim to follow the time dim (action shaped "
                f"[..., T, action_dim]); got {self.action_key!r} of shape {tuple(action.shape)} with "
                f"time_dim={self.time_dim}."
            )
        lead = action.shape[: t + 1]  # (*B, T): the windows are rows of the last of these dims
        window = TensorDict(batch_size=lead, device=tensordict.device)
        window.set(self.action_key, action)
        if self.done_key is not None:
            done = tensordict.get(("next", *_as_tuple(self.done_key)), None)
            if done is not None:
                if done.shape[: len(lead)] != lead:
                    raise ValueError(
                        f"ActionChunkTransform: done entry {('next', *_as_tuple(self.done_key))!r} has shape "
                        f"{tuple(done.shape)}; expected it to start with the action's leading dims {tuple(lead)}."
                    )
                window.set(("next", *_as_tuple(self.done_key)), done)
        window = super().forward(window)
        tensordict.set(self.chunk_key, window.get(self.chunk_key))
        tensordict.set(self.pad_key, window.get(self.pad_key))
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    # -- env path: outputs and specs unchanged -------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        return input_spec

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        return output_spec

    def clone(self) -> ActionChunkTransform:
        return type(self)(
            self.chunk_size, action_key=self.action_key, chunk_key=self.chunk_key, pad_key=self.pad_key,
            time_dim=self.time_dim, done_key=self.done_key,
        )

    def __repr__(self) -> str:
        return type(self).__name__ + super().__repr__()[len("Compose"):]
