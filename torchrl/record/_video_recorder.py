"""``VideoRecorder``: collects image observations along rollouts and sends them to a logger as a video."""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import TensorSpec
from torchrl.envs.transforms import ObservationTransform
from torchrl.record.loggers._video import tile, to_uint8

__all__ = ["VideoRecorder"]

def _key_str(key: NestedKey) -> str:
    return key if isinstance(key, str) else "_".join(key)


def to_chw(frame: torch.Tensor, key: NestedKey) -> torch.Tensor:
    """Puts the channel dim of ``(..., H, W, C)`` or ``(..., C, H, W)`` images at -3.

    RGB wins ties: a trailing 3 means channels-last, else a 3 in dim -3 means channels-first; then 1 or 4
    channels are looked for in the same order.
    """
    if frame.ndim >= 3:
        for channels in ((3,), (1, 4)):
            if frame.shape[-1] in channels:
                return frame.movedim(-1, -3)
            if frame.shape[-3] in channels:
                return frame
    raise ValueError(
        f"VideoRecorder: entry {key!r} has shape {tuple(frame.shape)}; expected images (..., C, H, W) or "
        f"(..., H, W, C) with 1, 3 or 4 channels."
    )


class VideoRecorder(ObservationTransform):
    """Video recorder transform.

    Records the images found under ``in_keys`` (``"pixels"`` by default) at every step and reset, and
    sends them to ``logger.log_video`` as one ``(N, T, C, H, W)`` uint8 video when :meth:`dump` is called
    (or at episode ends with ``dump_on_done=True``). Channels-last (numpy-style ``H, W, C``) and
    channels-first images are both accepted; floats are read in ``[0, 1]``. Frames are kept until
    :meth:`dump`: call it regularly (or set ``max_frames``) to bound memory.

    Args:
        logger: the logger receiving the videos (e.g. :class:`~torchrl.record.CSVLogger`); a logger
            service owner is replaced by its restricted client. ``None`` records for :meth:`to_animation`
            only.
        tag: the video name in the logger.
        in_keys: the image entries to record. Defaults to ``["pixels"]``.
        skip: keep one frame every ``skip`` calls. Defaults to 1 for batched (vector) envs and standalone
            use, and 2 for a single parent environment.
        center_crop: side of a square crop taken at the image centre.
        make_grid: tile batched images ``(B, C, H, W)`` into one frame. Defaults to ``True`` with a parent
            environment and ``False`` without (batched frames then become ``N = B`` videos).
        out_keys: where the (unchanged) images are also written. Defaults to ``in_keys``.
        fps: frames per second of the video (default: the logger's).
        max_frames: keep at most this many frames (the oldest are dropped).
        dump_on_done: dump the video when a step reports ``done``.
        **kwargs: extra keyword arguments for ``logger.log_video``.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from torchrl.record import CSVLogger, VideoRecorder
        >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp())
        >>> recorder = VideoRecorder(logger, tag="run")
        >>> rollout = TensorDict(pixels=torch.zeros(5, 8, 8, 3, dtype=torch.uint8), batch_size=[5])
        >>> _ = recorder(rollout)  # standalone: the leading dim is time
        >>> recorder.dump()
        >>> torch.load(f"{logger.experiment.log_dir}/videos/run_0.pt").shape
        torch.Size([1, 5, 3, 8, 8])
    """

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(
        self,
        logger: Any,
        tag: str | None,
        in_keys: Sequence[NestedKey] | None = None,
        skip: int | None = None,
        center_crop: int | None = None,
        make_grid: bool | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        fps: int | None = None,
        max_frames: int | None = None,
        dump_on_done: bool = False,
        **kwargs,
    ) -> None:
        if in_keys is None:
            in_keys = ["pixels"]
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._check_keys()
        if skip is not None and int(skip) < 1:
            raise ValueError(f"VideoRecorder: skip must be >= 1, got {skip}.")
        if max_frames is not None and int(max_frames) < 1:
            raise ValueError(f"VideoRecorder: max_frames must be >= 1 or None, got {max_frames}.")
        if center_crop is not None and int(center_crop) < 1:
            raise ValueError(f"VideoRecorder: center_crop must be a positive size, got {center_crop}.")
        if logger is not None and callable(getattr(logger, "client", None)):
            logger = logger.client()
        self.logger = logger
        self.tag = tag or "video"
        self._skip = None if skip is None else int(skip)
        self._make_grid = make_grid
        self.center_crop = None if center_crop is None else int(center_crop)
        self.fps = fps
        self.max_frames = None if max_frames is None else int(max_frames)
        self.dump_on_done = bool(dump_on_done)
        self.video_kwargs = kwargs
        self.count = 0
        self._frames: dict[NestedKey, deque] = {key: deque(maxlen=self.max_frames) for key in self.in_keys}

    # -- defaults that depend on the parent env ------------------------------------------------------------------
    @property
    def skip(self) -> int:
        if self._skip is not None:
            return self._skip
        parent = self.parent
        return 1 if parent is None or len(parent.batch_size) else 2

    @skip.setter
    def skip(self, value: int | None) -> None:
        self._skip = None if value is None else int(value)

    @property
    def make_grid(self) -> bool:
        if self._make_grid is not None:
            return self._make_grid
        return self.parent is not None

    @make_grid.setter
    def make_grid(self, value: bool | None) -> None:
        self._make_grid = value

    @property
    def frames(self) -> dict[NestedKey, list[torch.Tensor]]:
        """The frames recorded so far, per key."""
        return {key: list(frames) for key, frames in self._frames.items()}

    # -- recording -----------------------------------------------------------------------------------------------
    def _prepare(self, value, key: NestedKey, grid: bool) -> torch.Tensor:
        frame = to_chw(torch.as_tensor(np.asarray(value) if not isinstance(value, torch.Tensor) else value), key)
        frame = frame.detach().cpu()
        if self.center_crop is not None:
            c, h, w = self.center_crop, frame.shape[-2], frame.shape[-1]
            if c > h or c > w:
                raise ValueError(f"VideoRecorder: center_crop={c} is larger than the {h}x{w} images of {key!r}.")
            top, left = (h - c) // 2, (w - c) // 2
            frame = frame[..., top : top + c, left : left + c]
        frame = to_uint8(frame)
        if frame.ndim > 3:
            frame = frame.reshape(-1, *frame.shape[-3:])
            if grid:
                frame = tile(frame)
        return frame.clone()

    def _record(self, tensordict: TensorDictBase) -> None:
        self.count += 1
        keep = self.count % self.skip == 0
        grid = self.make_grid if keep else False
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            value = tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"VideoRecorder: key {in_key!r} not found; available keys: "
                    f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            if keep:
                self._frames[in_key].append(self._prepare(value, in_key, grid))
            if out_key != in_key:
                tensordict.set(out_key, value)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._record(next_tensordict)
        return next_tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._record(next_tensordict)
        if self.dump_on_done:
            done = next_tensordict.get("done", None)
            if done is not None and bool(done.any()):
                self.dump()
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Records ``tensordict`` outside an env: its leading batch dim (if any) is read as time."""
        if tensordict.batch_dims == 0:
            self._record(tensordict)
        else:
            for t in range(tensordict.shape[0]):
                self._record(tensordict[t])
        return tensordict

    # -- output --------------------------------------------------------------------------------------------------
    def _video(self, frames: Sequence[torch.Tensor]) -> torch.Tensor:
        shapes = {tuple(f.shape) for f in frames}
        if len(shapes) > 1:
            raise ValueError(f"VideoRecorder: recorded frames have different shapes {sorted(shapes)}.")
        video = torch.stack(list(frames))
        return video.transpose(0, 1) if video.ndim == 5 else video.unsqueeze(0)

    def dump(self, suffix: str | None = None, step: int | None = None) -> None:
        """Sends the recorded frames to the logger as ``(N, T, C, H, W)`` videos and clears them.

        Args:
            suffix: appended to the tag (``"<tag>_<suffix>"``).
            step: the logging step (default: the logger's own count).
        """
        multi = len(self.in_keys) > 1
        for key, frames in self._frames.items():
            if not frames:
                continue
            tag = self.tag if not multi else f"{self.tag}_{_key_str(key)}"
            if suffix is not None:
                tag = f"{tag}_{suffix}"
            if self.logger is not None:
                kwargs = dict(self.video_kwargs)
                if self.fps is not None:
                    kwargs["fps"] = self.fps
                if step is not None:
                    kwargs["step"] = step
                self.logger.log_video(tag, self._video(frames), **kwargs)
            frames.clear()

    def to_animation(
        self, *, title: str | None = None, interval: int = 50, repeat_delay: int = 1000, clear: bool = False
    ) -> Any:
        """A matplotlib animation of the recorded frames of the first key (for notebooks).

        Keyword Args:
            title: the figure title.
            interval: delay between frames, in ms.
            repeat_delay: pause before the animation repeats, in ms.
            clear: drop the recorded frames afterwards.

        Raises:
            ImportError: matplotlib is not installed.
            RuntimeError: nothing was recorded.
        """
        try:
            import matplotlib.pyplot as plt
            from matplotlib import animation
        except ImportError as err:
            raise ImportError("VideoRecorder.to_animation requires matplotlib: pip install matplotlib") from err
        frames = list(self._frames[self.in_keys[0]])
        if not frames:
            raise RuntimeError("VideoRecorder.to_animation: no frame recorded yet; run a rollout first.")
        images = [(tile(f) if f.ndim == 4 else f).permute(1, 2, 0).numpy() for f in frames]
        images = [img[..., 0] if img.shape[-1] == 1 else img for img in images]
        fig, ax = plt.subplots()
        ax.axis("off")
        if title is not None:
            ax.set_title(title)
        artist = ax.imshow(images[0], cmap="gray" if images[0].ndim == 2 else None)

        def update(i):
            artist.set_data(images[i])
            return (artist,)

        anim = animation.FuncAnimation(
            fig, update, frames=len(images), interval=interval, repeat_delay=repeat_delay, blit=True
        )
        plt.close(fig)
        if clear:
            self._frames[self.in_keys[0]].clear()
        return anim

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if out_key != in_key and in_key in observation_spec.keys(True, True):
                observation_spec[out_key] = observation_spec[in_key].clone()
        return observation_spec

    def __repr__(self) -> str:
        frames = sum(map(len, self._frames.values()))
        return f"{type(self).__name__}(tag={self.tag!r}, in_keys={self.in_keys}, skip={self._skip}, frames={frames})"
