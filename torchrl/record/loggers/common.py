"""``Logger``: the interface every experiment logger implements, and where its service backend is chosen.

A logger is built *direct* (in this process; ``client()`` returns the logger itself) or, with
``service_backend="process"``, as a :class:`~torchrl.record.loggers.ProcessLogger` that runs the same
logger class in a dedicated process and hands out picklable clients. The choice is made by the class
call (``CSVLogger(..., service_backend="process")``), before the concrete constructor runs.
"""
from __future__ import annotations

import abc
import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from torch import Tensor

from torchrl._utils._deprecation import warn_once
from torchrl._utils._optional import has_module
from torchrl.record.loggers._ray_service import RayLogger
from torchrl.record.loggers._service import ProcessLogger

if TYPE_CHECKING:  # pragma: no cover
    from omegaconf import DictConfig

__all__ = ["Logger"]

#: Optional-library availability flags (TorchRL's names), found without importing the libraries.
_has_tv = has_module("torchvision")
_has_torchcodec = has_module("torchcodec")

_BACKENDS = ("direct", "process", "ray")
_PROCESS_OPTIONS = ("context", "mp_context", "max_queue_size", "startup_timeout")
_RAY_OPTIONS = ("actor_options", "ray_init_config")


def _resolve_backend(cls_name: str, use_ray_service: bool, service_backend: str | None) -> str:
    if use_ray_service:
        warn_once(
            "use_ray_service=True is deprecated (removal planned for v0.16); use service_backend='ray' instead."
        )
        if service_backend not in (None, "ray"):
            raise ValueError(f"{cls_name}: use_ray_service=True conflicts with service_backend={service_backend!r}.")
        return "ray"
    backend = service_backend or "direct"
    if backend not in _BACKENDS:
        raise ValueError(f"{cls_name}: service_backend must be one of {list(_BACKENDS)}, got {service_backend!r}.")
    return backend


class _LoggerMeta(abc.ABCMeta):
    """Routes ``LoggerClass(...)`` to the requested service backend."""

    def __call__(
        cls, *args, use_ray_service=False, service_backend=None, service_backend_options=None, **kwargs
    ):
        backend = _resolve_backend(cls.__name__, use_ray_service, service_backend)
        options = dict(service_backend_options or {})
        if backend == "direct":
            if options:
                raise ValueError(
                    f"{cls.__name__}: service_backend_options {sorted(options)} only apply to the 'process' and "
                    f"'ray' backends; pass service_backend='process'."
                )
            return super().__call__(*args, **kwargs)
        if backend == "process":
            unknown = sorted(set(options) - set(_PROCESS_OPTIONS))
            if unknown:
                raise ValueError(
                    f"{cls.__name__}: unknown process service option(s) {unknown}; expected some of "
                    f"{list(_PROCESS_OPTIONS)}."
                )
            if "context" in options:
                options["mp_context"] = options.pop("context")
            return ProcessLogger(cls, *args, **options, **kwargs)
        unknown = sorted(set(options) - set(_RAY_OPTIONS))
        if unknown:
            raise ValueError(
                f"{cls.__name__}: unknown ray service option(s) {unknown}; expected some of {list(_RAY_OPTIONS)}."
            )
        return RayLogger(
            cls, *args, ray_actor_options=options.get("actor_options"),
            ray_init_config=options.get("ray_init_config"), **kwargs,
        )


def cfg_to_dict(cfg: Any) -> dict:
    """Hyperparameters as a plain dict: dicts, OmegaConf configs, dataclasses and argparse namespaces."""
    if isinstance(cfg, Mapping) and not type(cfg).__module__.startswith("omegaconf"):
        return dict(cfg)
    if type(cfg).__module__.startswith("omegaconf"):
        from omegaconf import OmegaConf  # optional dependency (hydra configs)

        return OmegaConf.to_container(cfg, resolve=True)
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return dataclasses.asdict(cfg)
    if isinstance(cfg, argparse.Namespace):
        return vars(cfg)
    raise TypeError(
        f"log_hparams: expected a dict, an OmegaConf config, a dataclass or an argparse.Namespace, "
        f"got {type(cfg).__name__}."
    )


def flatten_dict(cfg: Mapping, sep: str = "/", prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in cfg.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten_dict(value, sep, name))
        else:
            out[name] = value
    return out


def _key_name(key, sep: str) -> str:
    return key if isinstance(key, str) else sep.join(key)


def flatten_metrics(metrics: Mapping | TensorDictBase, keys_sep: str = "/") -> dict[str, Any]:
    """Flattens (nested) metrics and turns one-element tensors into Python numbers.

    Tensors off the CPU are moved in one transfer. Raises ``ValueError`` for a tensor with more than one
    element (log it with ``log_histogram`` instead).
    """
    if isinstance(metrics, TensorDictBase):
        items = [(_key_name(k, keys_sep), v) for k, v in metrics.items(include_nested=True, leaves_only=True)]
    elif isinstance(metrics, Mapping):
        items = list(flatten_dict(metrics, keys_sep).items())
    else:
        raise TypeError(f"log_metrics: expected a dict or a TensorDict, got {type(metrics).__name__}.")
    out: dict[str, Any] = {}
    remote: list[tuple[str, Tensor]] = []
    for name, value in items:
        if isinstance(value, Tensor):
            if value.numel() != 1:
                raise ValueError(
                    f"log_metrics: metric {name!r} has shape {tuple(value.shape)}; only one-element tensors are "
                    f"scalars (use log_histogram for distributions)."
                )
            if value.device.type == "cpu":
                out[name] = value.item()
            else:
                out[name] = None
                remote.append((name, value))
        else:
            out[name] = value
    if remote:
        values = torch.stack([v.detach().reshape(()).to(torch.float64) for _, v in remote]).cpu().tolist()
        for (name, _), value in zip(remote, values):
            out[name] = value
    return out


class Logger(metaclass=_LoggerMeta):
    """A template for loggers.

    Subclasses implement ``_create_experiment`` (returns the backend's run object, stored as
    ``self.experiment``), ``log_scalar``, ``log_video``, ``log_hparams`` and ``log_histogram``.

    Args:
        exp_name: the experiment (run) name.
        log_dir: where the backend writes.

    Keyword Args:
        service_backend: ``"direct"`` (default: the logger lives in this process), ``"process"``
            (a :class:`~torchrl.record.loggers.ProcessLogger` running the logger in its own process) or
            ``"ray"`` (a :class:`~torchrl.record.loggers.RayLogger`, in a Ray actor).
        service_backend_options: process options: ``context``/``mp_context``, ``max_queue_size``,
            ``startup_timeout``; Ray options: ``actor_options``, ``ray_init_config``.
        use_ray_service: deprecated spelling of ``service_backend="ray"``.

    Examples:
        >>> import tempfile
        >>> from torchrl.record.loggers import CSVLogger, Logger
        >>> logger = CSVLogger("exp", log_dir=tempfile.mkdtemp())
        >>> isinstance(logger, Logger), logger.client() is logger, logger.service_backend
        (True, True, 'direct')
    """

    def __init__(self, exp_name: str, log_dir: str) -> None:
        self.exp_name = exp_name
        self.log_dir = log_dir
        self._closed = False
        self.experiment = self._create_experiment()

    @abc.abstractmethod
    def _create_experiment(self) -> Any:
        """Opens the backend run; the result is stored as ``self.experiment``."""

    @abc.abstractmethod
    def log_scalar(self, name: str, value: float, step: int | None = None) -> None:
        """Logs one scalar."""

    @abc.abstractmethod
    def log_video(self, name: str, video: Tensor, step: int | None = None, **kwargs) -> None:
        """Logs a ``(T, C, H, W)`` or ``(N, T, C, H, W)`` video (uint8, or floats in ``[0, 1]``)."""

    @abc.abstractmethod
    def log_hparams(self, cfg: DictConfig | dict) -> None:
        """Logs the experiment's hyperparameters."""

    @abc.abstractmethod
    def log_histogram(self, name: str, data: Sequence, **kwargs):
        """Logs the distribution of ``data``."""

    def log_metrics(
        self, metrics: dict[str, Any] | TensorDictBase, step: int | None = None, *, keys_sep: str = "/"
    ) -> dict[str, Any]:
        """Logs several scalars at ``step``; nested keys are joined with ``keys_sep``.

        Returns:
            the flattened metrics as Python numbers (what was logged).
        """
        flat = flatten_metrics(metrics, keys_sep)
        for name, value in flat.items():
            self.log_scalar(name, value, step=step)
        return flat

    # -- service lifecycle (direct backend) --------------------------------------------------------------------
    @property
    def service_backend(self) -> str:
        return "direct"

    def client(self) -> "Logger":
        """The object workers log through: the logger itself for the direct backend."""
        return self

    def start(self) -> "Logger":
        """Direct loggers start when built; returns ``self``."""
        return self

    @property
    def is_alive(self) -> bool:
        return not self._closed

    def flush(self, timeout: float | None = None) -> None:
        """Writes buffered data (no-op when the backend writes immediately)."""

    def _close(self) -> None:
        """Releases backend resources (override)."""

    def close(self, timeout: float | None = None) -> None:
        """Flushes and closes the backend run (idempotent)."""
        if not self._closed:
            self.flush(timeout)
            self._close()
            self._closed = True

    def shutdown(self, timeout: float | None = None) -> None:
        """Same as :meth:`close` for a direct logger."""
        self.close(timeout)

    # -- checkpointing -----------------------------------------------------------------------------------------
    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        pass

    def state_dict(self) -> dict[str, Any]:
        """Name, directory and counters, enough to resume logging where it stopped."""
        return {
            "logger_type": type(self).__name__,
            "exp_name": self.exp_name,
            "log_dir": None if self.log_dir is None else str(self.log_dir),
            **self._extra_state(),
        }

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Restores the counters saved by :meth:`state_dict`."""
        kind = state_dict.get("logger_type", type(self).__name__)
        if kind != type(self).__name__:
            raise ValueError(f"{type(self).__name__}.load_state_dict: the state was saved by a {kind}.")
        self._load_extra_state(state_dict)

    def __copy__(self) -> "Logger":
        return self

    def __deepcopy__(self, memo) -> "Logger":
        """A logger is a handle on an open run: copies of the objects holding it (e.g. a cloned
        ``VideoRecorder``) share it instead of opening a second run."""
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}(exp_name={self.exp_name!r}, log_dir={str(self.log_dir)!r})"
