"""``CSVLogger``: a dependency-free logger writing plain files.

Layout under ``<log_dir>/<exp_name>/``:

- ``scalars/<name>.csv``: one ``step,value`` line per call (``name`` may contain ``/`` for sub-folders);
- ``videos/<name>_<step>.pt|.memmap|.mp4``: one file per video;
- ``histograms/<name>_<step>.pt``: the raw data of each histogram;
- ``texts/hparams.txt``: ``key: value`` lines (nested keys joined with ``/``).
"""
from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import torch
from tensordict import MemoryMappedTensor
from torch import Tensor

from torchrl.record.loggers._video import has_mp4_backend, write_video
from torchrl.record.loggers.common import cfg_to_dict, flatten_dict, Logger

__all__ = ["CSVLogger", "CSVExperiment"]

_VIDEO_FORMATS = ("pt", "memmap", "mp4")


class CSVExperiment:
    """The files of one CSV experiment (``logger.experiment``); ``log_dir`` is ``<log_dir>/<exp_name>``."""

    def __init__(self, log_dir: str | Path, *, video_format: str = "pt", video_fps: int = 30) -> None:
        self.log_dir = str(log_dir)
        self.video_format = video_format
        self.video_fps = video_fps
        self.scalar_counts: dict[str, int] = defaultdict(int)
        self.video_counts: dict[str, int] = defaultdict(int)
        self.histogram_counts: dict[str, int] = defaultdict(int)
        self._files: dict[str, Any] = {}
        for sub in ("scalars", "videos", "texts"):
            os.makedirs(os.path.join(self.log_dir, sub), exist_ok=True)

    def _path(self, folder: str, name: str, suffix: str) -> Path:
        path = Path(self.log_dir, folder, f"{name}{suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def add_scalar(self, name: str, value: float, global_step: int | None = None) -> None:
        if global_step is None:
            global_step = self.scalar_counts[name]
        self.scalar_counts[name] += 1
        handle = self._files.get(name)
        if handle is None:
            handle = self._files[name] = open(self._path("scalars", name, ".csv"), "a", buffering=1)
        handle.write(f"{int(global_step)},{float(value)!r}\n")

    def add_video(self, tag: str, video: Tensor, global_step: int | None = None, fps: int | None = None) -> Path:
        if global_step is None:
            global_step = self.video_counts[tag]
        self.video_counts[tag] += 1
        stem = f"{tag}_{int(global_step)}"
        video = torch.as_tensor(video).detach().cpu()
        if self.video_format == "pt":
            path = self._path("videos", stem, ".pt")
            torch.save(video, path)
        elif self.video_format == "memmap":
            path = self._path("videos", stem, ".memmap")
            MemoryMappedTensor.from_tensor(video, filename=path, existsok=True)
        else:
            path = write_video(self._path("videos", stem, ".mp4"), video, fps or self.video_fps, name=f"video {tag!r}")
        return path

    def add_histogram(self, name: str, data, global_step: int | None = None) -> Path:
        if global_step is None:
            global_step = self.histogram_counts[name]
        self.histogram_counts[name] += 1
        path = self._path("histograms", f"{name}_{int(global_step)}", ".pt")
        torch.save(torch.as_tensor(data).detach().cpu(), path)
        return path

    def add_text(self, name: str, text: str) -> Path:
        path = self._path("texts", name, ".txt")
        path.write_text(text)
        return path

    def flush(self) -> None:
        for handle in self._files.values():
            handle.flush()

    def close(self) -> None:
        for handle in self._files.values():
            handle.close()
        self._files.clear()


class CSVLogger(Logger):
    """A minimal-dependency CSV logger.

    Args:
        exp_name: the name of the experiment (a folder under ``log_dir``).
        log_dir: where experiments are saved. Defaults to ``<cwd>/csv_logs``.
        video_format: ``"pt"`` (``torch.save``), ``"memmap"`` (a ``MemoryMappedTensor`` file) or ``"mp4"``
            (needs PyAV: ``pip install av``). Defaults to ``"pt"``.
        video_fps: frames per second of mp4 videos. Defaults to 30.

    Examples:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from torchrl.record import CSVLogger
        >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp())
        >>> logger.log_scalar("loss", 0.5, step=3)
        >>> (Path(logger.experiment.log_dir) / "scalars" / "loss.csv").read_text()
        '3,0.5\\n'
    """

    def __init__(
        self,
        exp_name: str,
        log_dir: str | Path | None = None,
        video_format: Literal["pt", "memmap", "mp4"] = "pt",
        video_fps: int = 30,
    ) -> None:
        if video_format not in _VIDEO_FORMATS:
            raise ValueError(f"CSVLogger: video_format must be one of {list(_VIDEO_FORMATS)}, got {video_format!r}.")
        if video_format == "mp4" and not has_mp4_backend():
            raise ImportError("CSVLogger: video_format='mp4' requires PyAV: pip install av (or use 'pt' / 'memmap').")
        self.video_format = video_format
        self.video_fps = int(video_fps)
        super().__init__(exp_name=exp_name, log_dir=str(log_dir or os.path.join(os.getcwd(), "csv_logs")))

    def _create_experiment(self) -> CSVExperiment:
        return CSVExperiment(
            os.path.join(self.log_dir, self.exp_name), video_format=self.video_format, video_fps=self.video_fps
        )

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Appends ``step,value`` to ``scalars/<name>.csv`` (``step`` defaults to the entry's index)."""
        self.experiment.add_scalar(name, value, global_step=step)

    def log_video(self, name: str, video: Tensor, step: int | None = None, **kwargs) -> None:
        """Saves ``video`` as ``videos/<name>_<step>.<format>`` (``step`` defaults to a per-name count).

        Keyword Args:
            fps (int): overrides ``video_fps`` for this mp4.
        """
        fps = kwargs.pop("fps", None)
        if kwargs:
            raise TypeError(f"CSVLogger.log_video: unexpected keyword arguments {sorted(kwargs)}.")
        self.experiment.add_video(name, video, global_step=step, fps=fps)

    def log_hparams(self, cfg: Mapping | Any) -> None:
        """Writes ``texts/hparams.txt`` with one ``key: value`` line per (flattened) hyperparameter."""
        flat = flatten_dict(cfg_to_dict(cfg))
        self.experiment.add_text("hparams", "".join(f"{key}: {value}\n" for key, value in flat.items()))

    def log_histogram(self, name: str, data: Sequence, **kwargs):
        """Saves the raw ``data`` as ``histograms/<name>_<step>.pt`` (``step=`` keyword, default a count)."""
        step = kwargs.pop("step", None)
        return self.experiment.add_histogram(name, data, global_step=step)

    def print_log_dir(self):
        """Prints where this experiment writes."""
        print(f"{self.exp_name} log directory: {self.experiment.log_dir}")

    def flush(self, timeout: float | None = None) -> None:
        self.experiment.flush()

    def _close(self) -> None:
        self.experiment.close()

    def _extra_state(self) -> dict[str, Any]:
        exp = self.experiment
        return {
            "video_format": self.video_format,
            "video_fps": self.video_fps,
            "scalar_counts": dict(exp.scalar_counts),
            "video_counts": dict(exp.video_counts),
            "histogram_counts": dict(exp.histogram_counts),
        }

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        exp = self.experiment
        for name in ("scalar_counts", "video_counts", "histogram_counts"):
            getattr(exp, name).update(state.get(name, {}))
