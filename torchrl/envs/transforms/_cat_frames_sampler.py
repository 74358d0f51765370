"""The slice sampler that :meth:`CatFrames.make_rb_transform_and_sampler` returns.

A separate module because it subclasses a replay-buffer class: ``torchrl.envs`` sits below
``torchrl.data.replay_buffers`` in the import order, so ``CatFrames`` imports this module only when it is asked
for a sampler.
"""
from __future__ import annotations

from torchrl.data.replay_buffers.samplers.slice import SliceSampler

__all__ = ["FrameStackSliceSampler"]


class FrameStackSliceSampler(SliceSampler):
    """A :class:`SliceSampler` of ``frames``-step slices that draws ``frames`` steps per requested sample.

    A buffer asking for ``batch_size`` samples gets ``batch_size`` slices of ``frames`` consecutive steps
    (``batch_size * frames`` indices), which the paired frame-stacking transform folds back into
    ``batch_size`` stacked samples.

    Args:
        frames: the slice length (``CatFrames.N``).

    Keyword Args:
        **kwargs: other :class:`SliceSampler` options (``end_key``, ``traj_key``, ``strict_length``, ...).

    Examples:
        >>> from torchrl.envs.transforms._cat_frames_sampler import FrameStackSliceSampler
        >>> FrameStackSliceSampler(4).slice_len
        4
    """

    def __init__(self, frames: int, **kwargs) -> None:
        kwargs.pop("slice_len", None)
        kwargs.pop("num_slices", None)
        super().__init__(slice_len=frames, **kwargs)
        self._batch_size_multiplier = frames

    def sample(self, storage, batch_size: int):
        return super().sample(storage, batch_size * self._batch_size_multiplier)

    def can_sample(self, storage, batch_size: int) -> bool:
        return super().can_sample(storage, batch_size * self._batch_size_multiplier)
