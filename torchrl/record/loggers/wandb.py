"""``WandbLogger``: Weights & Biases runs (online, or offline files synced later)."""
from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sys
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase
from torch import Tensor

from torchrl._utils._optional import has_module
from torchrl.record.loggers._video import has_mp4_backend, write_video
from torchrl.record.loggers.common import cfg_to_dict, flatten_metrics, Logger

__all__ = ["WandbLogger"]

#: Optional-library availability flags (TorchRL's names), found without importing the libraries.
_has_wandb = has_module("wandb")
_has_omegaconf = has_module("omegaconf")
_has_moviepy = has_module("moviepy")

STEP_KEY = "trainer/step"


def env_packages() -> dict[str, Any]:
    """The Python runtime, installed distributions (name -> version) and editable source locations."""
    packages, editable = {}, {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name:
            continue
        packages[name] = dist.version
        direct_url = dist.read_text("direct_url.json")
        if direct_url:
            info = json.loads(direct_url)
            if info.get("dir_info", {}).get("editable"):
                editable[name] = info.get("url")
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": dict(sorted(packages.items())),
        "editable": editable,
    }


class WandbLogger(Logger):
    """Wrapper for the wandb logger (needs ``pip install wandb``).

    The keyword arguments follow :func:`wandb.init`.

    Args:
        exp_name: the name of the run.
        offline: if ``True``, logs are written locally only (``mode="offline"``; sync later with
            ``wandb sync``). Defaults to ``False``.
        save_dir: the directory where wandb writes. Exclusive with ``log_dir``.
        id: a unique run id, used for resuming.
        project: the wandb project.

    Keyword Args:
        video_fps: frames per second of logged videos. Defaults to 30.
        log_dir: same as ``save_dir``.
        base_url: the W&B server URL (sets ``WANDB_BASE_URL`` before the run starts).
        log_env_packages: record the Python runtime, installed package versions and editable source
            locations under ``config["env"]``. Defaults to ``True``.
        **kwargs: forwarded to :func:`wandb.init`.

    Steps: by default a given ``step`` is logged next to the value as ``"trainer/step"`` (wandb's own step
    must only grow, which breaks when several components log at their own pace); with
    ``override_global_step=True`` it is passed as wandb's step instead.

    Examples:
        >>> import tempfile
        >>> from torchrl.record import WandbLogger
        >>> logger = WandbLogger("run", offline=True, save_dir=tempfile.mkdtemp(), project="demo")  # doctest: +SKIP
        >>> logger.log_scalar("loss", 0.5, step=1)  # doctest: +SKIP
        >>> logger.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        exp_name: str,
        offline: bool = False,
        save_dir: str | None = None,
        id: str | None = None,
        project: str | None = None,
        *,
        video_fps: int = 30,
        log_dir: str | None = None,
        base_url: str | None = None,
        log_env_packages: bool = True,
        **kwargs,
    ) -> None:
        try:
            import wandb
        except ImportError as err:
            raise ImportError("WandbLogger requires wandb: pip install wandb") from err
        if save_dir is not None and log_dir is not None:
            raise ValueError("WandbLogger: save_dir and log_dir are the same option; pass only one of them.")
        save_dir = save_dir if save_dir is not None else log_dir
        if base_url is not None:
            os.environ["WANDB_BASE_URL"] = base_url
        if save_dir is not None:
            os.makedirs(save_dir, exist_ok=True)
        self._wandb = wandb
        self.offline = bool(offline)
        self.video_fps = int(video_fps)
        self.log_env_packages = bool(log_env_packages)
        self._init_kwargs = {"dir": save_dir, "name": exp_name, "project": project, "id": id, **kwargs}
        if offline:
            self._init_kwargs["mode"] = "offline"
        self._video_counts: dict[str, int] = defaultdict(int)
        super().__init__(exp_name=exp_name, log_dir=save_dir)

    def _create_experiment(self):
        run = self._wandb.init(**{k: v for k, v in self._init_kwargs.items() if v is not None})
        if self.log_env_packages:
            run.config.update({"env": env_packages()}, allow_val_change=True)
        return run

    @property
    def id(self) -> str:
        return self.experiment.id

    def _log(self, data: dict, step: int | None, override_global_step: bool, commit: bool = True) -> None:
        if step is None:
            self.experiment.log(data, commit=commit)
        elif override_global_step:
            self.experiment.log(data, step=int(step), commit=commit)
        else:
            self.experiment.log({**data, STEP_KEY: int(step)}, commit=commit)

    def log_scalar(
        self, name: str, value: float, step: int | None = None, commit: bool = True, *,
        override_global_step: bool = False,
    ) -> None:
        """Logs ``{name: value}``; ``commit=False`` keeps the row open for more values."""
        if isinstance(value, Tensor):
            value = value.item()
        self._log({name: value}, step, override_global_step, commit)

    def log_metrics(
        self, metrics: dict[str, Any] | TensorDictBase, step: int | None = None, *, keys_sep: str = "/",
        override_global_step: bool = False,
    ) -> dict[str, Any]:
        """Logs all metrics in one wandb row; returns them flattened as Python numbers."""
        flat = flatten_metrics(metrics, keys_sep)
        self._log(flat, step, override_global_step)
        return flat

    def log_str(
        self, name: str, value: str, step: int | None = None, *, override_global_step: bool = False
    ) -> None:
        """Logs a text value."""
        self._log({name: str(value)}, step, override_global_step)

    def log_video(self, name: str, video: Tensor, **kwargs) -> None:
        """Logs a ``(T, C, H, W)`` or ``(N, T, C, H, W)`` video.

        Keyword Args:
            step (int): the step (see the class notes); ``override_global_step`` as for scalars.
            fps (int): frames per second (default ``video_fps``).
            format (str): ``"gif"`` or ``"mp4"`` (default: mp4 when PyAV is installed, else gif).
        """
        step = kwargs.pop("step", None)
        override = kwargs.pop("override_global_step", False)
        fps = kwargs.pop("fps", self.video_fps)
        fmt = kwargs.pop("format", "mp4" if has_mp4_backend() else "gif")
        if step is None:
            step = self._video_counts[name]
        self._video_counts[name] += 1
        with tempfile.TemporaryDirectory() as tmp:
            path = write_video(Path(tmp, f"{name.replace('/', '_')}.{fmt}"), video, fps, name=f"video {name!r}")
            self._log({name: self._wandb.Video(str(path), format=fmt, **kwargs)}, step, override)

    def log_hparams(self, cfg: Mapping | Any) -> None:
        """Adds the hyperparameters to the run's config."""
        self.experiment.config.update(cfg_to_dict(cfg), allow_val_change=True)

    def log_histogram(self, name: str, data: Sequence, **kwargs):
        """Logs a ``wandb.Histogram`` (``bins=`` / ``num_bins=``, ``step=``, ``override_global_step=``)."""
        step = kwargs.pop("step", None)
        override = kwargs.pop("override_global_step", False)
        num_bins = kwargs.pop("num_bins", kwargs.pop("bins", 64))
        values = np.asarray(torch.as_tensor(data).detach().cpu().reshape(-1).numpy())
        self._log({name: self._wandb.Histogram(values, num_bins=num_bins)}, step, override)

    def _close(self) -> None:
        self.experiment.finish()

    def _extra_state(self) -> dict[str, Any]:
        return {
            "id": self.experiment.id,
            "project": self.experiment.project,
            "offline": self.offline,
            "video_counts": dict(self._video_counts),
        }

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        self._video_counts.update(state.get("video_counts", {}))
