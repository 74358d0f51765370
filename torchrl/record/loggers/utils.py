"""``get_logger`` (build a logger by name, as the recipes do) and ``generate_exp_name``."""
from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from torchrl.record.loggers._video import has_mp4_backend
from torchrl.record.loggers.common import Logger
from torchrl.record.loggers.csv import CSVLogger
from torchrl.record.loggers.mlflow import MLFlowLogger
from torchrl.record.loggers.tensorboard import TensorboardLogger
from torchrl.record.loggers.wandb import WandbLogger

__all__ = ["generate_exp_name", "get_logger"]

_TYPES = ("tensorboard", "csv", "wandb", "mlflow")


def generate_exp_name(model_name: str, experiment_name: str) -> str:
    """A unique experiment id: ``<model_name>_<experiment_name>_<8 hex chars>_<yy_mm_dd-HH_MM_SS>``.

    Examples:
        >>> name = generate_exp_name("SAC", "cheetah")
        >>> name.startswith("SAC_cheetah_"), len(name.split("_")[2])
        (True, 8)
    """
    stamp = datetime.now().strftime("%y_%m_%d-%H_%M_%S")
    return f"{model_name}_{experiment_name}_{uuid.uuid4().hex[:8]}_{stamp}"


def get_logger(
    logger_type: Literal["tensorboard", "csv", "wandb", "mlflow", "trackio", ""] | None,
    logger_name: str,
    experiment_name: str,
    *,
    state_dict: Mapping[str, Any] | None = None,
    service_backend: Literal["direct", "process", "ray"] = "direct",
    service_backend_options: dict[str, Any] | None = None,
    use_ray_service: bool = False,
    ray_actor_options: dict[str, Any] | None = None,
    **kwargs,
) -> Logger | None:
    """Builds a logger of ``logger_type``.

    Args:
        logger_type: ``"tensorboard"``, ``"csv"``, ``"wandb"`` or ``"mlflow"``; ``""`` or ``None`` returns
            ``None``. (``"trackio"`` is not available in this implementation.)
        logger_name: the log directory (for mlflow: a directory turned into a ``file:`` tracking URI).
        experiment_name: the experiment (run) name.

    Keyword Args:
        state_dict: a logger's :meth:`~Logger.state_dict`: CSV/TensorBoard loggers get the saved name,
            directory and counters back; a W&B run is resumed (``resume="must"``). Other types reject it.
        service_backend: ``"direct"``, ``"process"`` or ``"ray"``.
        service_backend_options: options of the process or Ray backend.
        use_ray_service, ray_actor_options: deprecated Ray spellings.
        **kwargs: ``wandb_kwargs`` / ``mlflow_kwargs`` (dicts forwarded to those loggers). CSV loggers write
            mp4 videos when PyAV is installed, ``.pt`` files otherwise.

    Raises:
        NotImplementedError: unknown ``logger_type``.
        ValueError: ``state_dict`` for mlflow, or for another logger type than the one that saved it.

    Examples:
        >>> import tempfile
        >>> from torchrl.record.loggers import get_logger
        >>> logger = get_logger("csv", tempfile.mkdtemp(), "exp")
        >>> type(logger).__name__, logger.exp_name
        ('CSVLogger', 'exp')
        >>> get_logger("", "logs", "exp") is None
        True
    """
    if not logger_type:
        return None
    if logger_type not in _TYPES:
        raise NotImplementedError(
            f"get_logger: unsupported logger_type {logger_type!r}; expected one of {list(_TYPES)} "
            f"(or '' / None for no logger)."
        )
    wandb_kwargs = dict(kwargs.pop("wandb_kwargs", None) or {})
    mlflow_kwargs = dict(kwargs.pop("mlflow_kwargs", None) or {})
    kwargs.pop("trackio_kwargs", None)
    if kwargs:
        raise TypeError(f"get_logger: unexpected keyword arguments {sorted(kwargs)}.")
    options = dict(service_backend_options or {})
    if ray_actor_options:
        options["actor_options"] = ray_actor_options
    service = {
        "service_backend": service_backend,
        "service_backend_options": options or None,
        "use_ray_service": use_ray_service,
    }
    if state_dict is not None:
        saved = state_dict.get("logger_type")
        expected = {"csv": "CSVLogger", "tensorboard": "TensorboardLogger", "wandb": "WandbLogger"}.get(logger_type)
        if expected is None:
            raise ValueError(f"get_logger: state_dict restoration is not supported for logger_type {logger_type!r}.")
        if saved is not None and saved != expected:
            raise ValueError(f"get_logger: state_dict was saved by a {saved}, not a {expected}.")
        logger_name = state_dict.get("log_dir") or logger_name
        experiment_name = state_dict.get("exp_name") or experiment_name
    if logger_type == "tensorboard":
        logger = TensorboardLogger(log_dir=logger_name, exp_name=experiment_name, **service)
    elif logger_type == "csv":
        video_format = "mp4" if has_mp4_backend() else "pt"
        logger = CSVLogger(log_dir=logger_name, exp_name=experiment_name, video_format=video_format, **service)
    elif logger_type == "wandb":
        if state_dict is not None:
            wandb_kwargs.update(id=state_dict["id"], resume="must")
            if state_dict.get("project"):
                wandb_kwargs.setdefault("project", state_dict["project"])
            if state_dict.get("offline"):
                wandb_kwargs.setdefault("offline", True)
        logger = WandbLogger(log_dir=logger_name, exp_name=experiment_name, **wandb_kwargs, **service)
    else:
        uri = mlflow_kwargs.pop("tracking_uri", None) or pathlib.Path(os.path.abspath(logger_name)).as_uri()
        logger = MLFlowLogger(exp_name=experiment_name, tracking_uri=uri, **mlflow_kwargs, **service)
    if state_dict is not None and logger_type != "wandb":
        logger.load_state_dict(state_dict)
    return logger
