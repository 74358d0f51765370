"""``TensorboardLogger``: TensorBoard event files through ``torch.utils.tensorboard``."""
from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from torchrl._utils._optional import has_module
from torchrl.record.loggers._video import encode_gif, to_thwc
from torchrl.record.loggers.common import cfg_to_dict, flatten_dict, Logger

__all__ = ["TensorboardLogger"]

#: Optional-library availability flags (TorchRL's names), found without importing the libraries.
_has_tb = has_module("tensorboard")
_has_omgaconf = has_module("omegaconf")  # sic: TorchRL's spelling


def _hparam_value(value: Any):
    if isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Tensor) and value.numel() == 1:
        return value.item()
    return str(value)


class TensorboardLogger(Logger):
    """Wrapper for the TensorBoard logger (needs ``pip install tensorboard``).

    Events go to ``<log_dir>/<exp_name>``. Videos are written as animated gifs (Pillow), so no video
    library is needed.

    Args:
        exp_name: the name of the experiment (run folder).
        log_dir: the TensorBoard root directory. Defaults to ``"tb_logs"``.

    Keyword Args:
        video_fps: frames per second of logged videos unless ``log_video(..., fps=)`` says otherwise.

    Examples:
        >>> import tempfile
        >>> from torchrl.record import TensorboardLogger
        >>> logger = TensorboardLogger("exp", log_dir=tempfile.mkdtemp())
        >>> logger.log_scalar("loss", 0.5, step=1)
        >>> logger.close()
    """

    def __init__(self, exp_name: str, log_dir: str = "tb_logs", *, video_fps: int = 30) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            raise ImportError("TensorboardLogger requires tensorboard: pip install tensorboard") from err
        self._writer_cls = SummaryWriter
        self.video_fps = int(video_fps)
        self._video_counts: dict[str, int] = defaultdict(int)
        super().__init__(exp_name=exp_name, log_dir=log_dir)

    def _create_experiment(self):
        return self._writer_cls(log_dir=os.path.join(self.log_dir, self.exp_name))

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        self.experiment.add_scalar(name, value, global_step=step)

    def log_video(self, name: str, video: Tensor, step: int | None = None, **kwargs) -> None:
        """Logs ``video`` (``(T, C, H, W)`` or ``(N, T, C, H, W)``; several videos are tiled) as a gif.

        Keyword Args:
            fps (int): frames per second (default ``video_fps``).
        """
        from tensorboard.compat.proto.summary_pb2 import Summary  # installed with tensorboard

        fps = kwargs.pop("fps", self.video_fps)
        if kwargs:
            raise TypeError(f"TensorboardLogger.log_video: unexpected keyword arguments {sorted(kwargs)}.")
        if step is None:
            step = self._video_counts[name]
        self._video_counts[name] += 1
        frames = to_thwc(video, name=f"video {name!r}")
        _, height, width, _ = frames.shape
        image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=encode_gif(frames, fps))
        summary = Summary(value=[Summary.Value(tag=name, image=image)])
        self.experiment._get_file_writer().add_summary(summary, step)

    def log_hparams(self, cfg: Mapping | Any) -> None:
        """Logs hyperparameters to TensorBoard's HParams plugin (in this run, no sub-run is created)."""
        from torch.utils.tensorboard.summary import hparams

        flat = {key: _hparam_value(value) for key, value in flatten_dict(cfg_to_dict(cfg)).items()}
        writer = self.experiment._get_file_writer()
        for summary in hparams(flat, {}):
            writer.add_summary(summary)

    def log_histogram(self, name: str, data: Sequence, **kwargs):
        """``SummaryWriter.add_histogram``; ``step=`` (or ``global_step=``), ``bins=`` are forwarded."""
        step = kwargs.pop("step", kwargs.pop("global_step", None))
        self.experiment.add_histogram(name, torch.as_tensor(data), global_step=step, **kwargs)

    def flush(self, timeout: float | None = None) -> None:
        self.experiment.flush()

    def _close(self) -> None:
        self.experiment.close()

    def _extra_state(self) -> dict[str, Any]:
        return {"video_counts": dict(self._video_counts), "video_fps": self.video_fps}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        self._video_counts.update(state.get("video_counts", {}))
