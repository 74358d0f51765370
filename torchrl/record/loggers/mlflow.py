"""``MLFlowLogger``: an MLflow run, driven through ``MlflowClient`` (no global active run)."""
from __future__ import annotations

import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import Tensor

from torchrl._utils._optional import has_module
from torchrl.record.loggers._video import has_mp4_backend, write_video
from torchrl.record.loggers.common import cfg_to_dict, flatten_dict, flatten_metrics, Logger

__all__ = ["MLFlowLogger"]

#: Optional-library availability flags (TorchRL's names), found without importing the libraries.
_has_mlflow = has_module("mlflow")
_has_omegaconf = has_module("omegaconf")
_has_torchcodec = has_module("torchcodec")


class MLFlowLogger(Logger):
    """Wrapper for the mlflow logger (needs ``pip install mlflow`` or ``mlflow-skinny``).

    The MLflow experiment ``exp_name`` is created when missing, and a new run is opened in it;
    ``logger.run_id`` names the run and ``logger.mlflow_client`` is the ``MlflowClient`` used.

    Args:
        exp_name: the name of the MLflow experiment.
        tracking_uri: the tracking store (``"sqlite:///mlflow.db"``, a server URL, or a ``file:`` URI /
            directory; recent MLflow versions need ``MLFLOW_ALLOW_FILE_STORE=true`` for the latter).
        tags: tags of a newly created experiment.

    Keyword Args:
        video_fps: frames per second of logged videos. Defaults to 30.
        artifact_location: where run artifacts (videos, histograms) go for a new experiment. Defaults to
            ``tracking_uri`` when that is a ``file:`` URI, else MLflow's default.
        **kwargs: forwarded to ``MlflowClient.create_run`` (e.g. ``run_name``; defaults to ``exp_name``).

    Examples:
        >>> import tempfile
        >>> from torchrl.record import MLFlowLogger
        >>> logger = MLFlowLogger("exp", tracking_uri="sqlite:///" + tempfile.mkdtemp() + "/m.db")  # doctest: +SKIP
        >>> logger.log_scalar("loss", 0.5, step=1)  # doctest: +SKIP
        >>> logger.close()  # doctest: +SKIP
    """

    def __init__(
        self,
        exp_name: str,
        tracking_uri: str,
        tags: dict[str, Any] | None = None,
        *,
        video_fps: int = 30,
        artifact_location: str | None = None,
        **kwargs,
    ) -> None:
        try:
            import mlflow.entities
            from mlflow.tracking import MlflowClient
        except ImportError as err:
            raise ImportError("MLFlowLogger requires mlflow: pip install mlflow (or mlflow-skinny)") from err
        tracking_uri = str(tracking_uri)
        if artifact_location is None and tracking_uri.startswith("file:"):
            artifact_location = tracking_uri
        self._entities = mlflow.entities
        self.mlflow_client = MlflowClient(tracking_uri=tracking_uri)
        self.tracking_uri = tracking_uri
        self.artifact_location = artifact_location
        self.tags = dict(tags or {})
        self.video_fps = int(video_fps)
        self._run_kwargs = {"run_name": exp_name, **kwargs}
        self._video_counts: dict[str, int] = defaultdict(int)
        self._histogram_counts: dict[str, int] = defaultdict(int)
        super().__init__(exp_name=exp_name, log_dir=tracking_uri)

    def _create_experiment(self):
        experiment = self.mlflow_client.get_experiment_by_name(self.exp_name)
        if experiment is None:
            experiment_id = self.mlflow_client.create_experiment(
                self.exp_name, artifact_location=self.artifact_location,
                tags={k: str(v) for k, v in self.tags.items()},
            )
        else:
            experiment_id = experiment.experiment_id
        return self.mlflow_client.create_run(experiment_id, **self._run_kwargs)

    @property
    def run_id(self) -> str:
        return self.experiment.info.run_id

    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        if isinstance(value, Tensor):
            value = value.item()
        self.mlflow_client.log_metric(self.run_id, name, float(value), step=step)

    def log_metrics(
        self, metrics: dict[str, Any] | TensorDictBase, step: int | None = None, *, keys_sep: str = "/"
    ) -> dict[str, Any]:
        """Logs all metrics in one batch request; returns them flattened as Python numbers."""
        flat = flatten_metrics(metrics, keys_sep)
        now = int(time.time() * 1000)
        batch = [self._entities.Metric(k, float(v), now, int(step or 0)) for k, v in flat.items()]
        self.mlflow_client.log_batch(self.run_id, metrics=batch)
        return flat

    def _log_file(self, folder: str, filename: str, write) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, filename)
            write(path)
            self.mlflow_client.log_artifact(self.run_id, str(path), artifact_path=folder)

    def log_video(self, name: str, video: Tensor, **kwargs) -> None:
        """Logs the video as an artifact ``videos/<name>_<step>.<format>``.

        Keyword Args:
            step (int): used in the file name (default: a per-name count).
            fps (int): frames per second (default ``video_fps``).
            format (str): ``"mp4"`` (needs PyAV) or ``"gif"``; default mp4 when PyAV is installed.
        """
        step = kwargs.pop("step", None)
        fps = kwargs.pop("fps", self.video_fps)
        fmt = kwargs.pop("format", "mp4" if has_mp4_backend() else "gif")
        if kwargs:
            raise TypeError(f"MLFlowLogger.log_video: unexpected keyword arguments {sorted(kwargs)}.")
        if step is None:
            step = self._video_counts[name]
        self._video_counts[name] += 1
        filename = f"{name.replace('/', '_')}_{int(step)}.{fmt}"
        self._log_file("videos", filename, lambda path: write_video(path, video, fps, name=f"video {name!r}"))

    def log_hparams(self, cfg: Mapping | Any) -> None:
        """Logs the (flattened, ``/``-joined) hyperparameters as run params."""
        flat = flatten_dict(cfg_to_dict(cfg))
        params = [self._entities.Param(k, str(v)) for k, v in flat.items()]
        self.mlflow_client.log_batch(self.run_id, params=params)

    def log_histogram(self, name: str, data: Sequence, **kwargs):
        """Logs ``histograms/<name>_<step>.json`` with bin ``edges`` and ``counts`` (``bins=``, ``step=``)."""
        step = kwargs.pop("step", None)
        bins = int(kwargs.pop("bins", 64))
        if step is None:
            step = self._histogram_counts[name]
        self._histogram_counts[name] += 1
        counts, edges = torch.histogram(torch.as_tensor(data).detach().cpu().double().reshape(-1), bins=bins)
        payload = {"step": int(step), "edges": edges.tolist(), "counts": counts.tolist()}
        filename = f"{name.replace('/', '_')}_{int(step)}.json"
        self._log_file("histograms", filename, lambda path: path.write_text(json.dumps(payload)))

    def _close(self) -> None:
        self.mlflow_client.set_terminated(self.run_id)

    def _extra_state(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "video_counts": dict(self._video_counts),
            "histogram_counts": dict(self._histogram_counts),
        }

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        self._video_counts.update(state.get("video_counts", {}))
        self._histogram_counts.update(state.get("histogram_counts", {}))
