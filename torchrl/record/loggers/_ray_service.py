"""``RayLogger``: a logger living in a Ray actor, driven through picklable clients (needs ``pip install ray``)."""
from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import torch
from tensordict import TensorDictBase

__all__ = ["RayLogger"]


def _to_cpu(value: Any) -> Any:
    """Tensors (also inside dicts, lists and TensorDicts) moved to the CPU before they travel."""
    if isinstance(value, (torch.Tensor, TensorDictBase)):
        return value.cpu() if value.device is not None and value.device.type != "cpu" else value
    if isinstance(value, Mapping):
        return {k: _to_cpu(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_to_cpu(v) for v in value)
    return value


class _LoggerActor:
    """The actor body: builds the logger and runs the calls sent to it."""

    def __init__(self, logger_cls, args, kwargs) -> None:
        self.logger = logger_cls(*args, **kwargs)

    def info(self) -> dict:
        return {"exp_name": getattr(self.logger, "exp_name", None), "log_dir": getattr(self.logger, "log_dir", None)}

    def call(self, op: str, args, kwargs):
        return getattr(self.logger, op)(*args, **kwargs)


class _RayLoggerClient:
    """A picklable handle on a Ray logger service: ``log_*`` calls run in the actor and are awaited."""

    def __init__(self, actor, info: dict) -> None:
        self._actor = actor
        self._info = dict(info)

    @property
    def exp_name(self) -> str | None:
        return self._info.get("exp_name")

    @property
    def log_dir(self) -> str | None:
        return self._info.get("log_dir")

    def client(self) -> "_RayLoggerClient":
        """A restricted, picklable client of the same actor."""
        return _RayLoggerClient(self._actor, self._info)

    def _request(self, op: str, *args, _timeout: float | None = None, **kwargs) -> Any:
        import ray  # optional dependency: present whenever a Ray logger exists

        ref = self._actor.call.remote(op, _to_cpu(args), _to_cpu(kwargs))
        return ray.get(ref, timeout=_timeout)

    def __getattr__(self, name: str):
        if name.startswith("log_") or name == "print_log_dir":
            return functools.partial(self._request, name)
        raise AttributeError(
            f"{type(self).__name__} has no attribute {name!r}: logger clients forward log_* calls only; "
            f"lifecycle calls (flush, close, shutdown) belong to the owner."
        )


class RayLogger(_RayLoggerClient):
    """Driver-owned Ray logger service with restricted worker clients.

    ``logger_cls(*args, **kwargs)`` is built in a Ray actor; this object and its clients (picklable, so
    they can be handed to Ray tasks or other processes) forward ``log_*`` calls and wait for them, so
    errors surface at the call. Tensors are moved to the CPU before they are sent. Loggers built with
    ``service_backend="ray"`` return one of these.

    Args:
        logger_cls: the logger class to run.
        *args, **kwargs: its constructor arguments.

    Keyword Args:
        ray_actor_options: options of the actor (``ray.remote(...).options``), e.g. ``{"num_cpus": 1}``.
        ray_init_config: ``ray.init`` arguments, used when Ray is not initialised yet.

    Examples:
        >>> import tempfile
        >>> from torchrl.record import CSVLogger
        >>> logger = CSVLogger("run", log_dir=tempfile.mkdtemp(), service_backend="ray")  # doctest: +SKIP
        >>> logger.client().log_scalar("loss", 1.0, step=0)  # doctest: +SKIP
        >>> logger.shutdown()  # doctest: +SKIP
    """

    def __init__(
        self,
        logger_cls: type,
        *args: Any,
        ray_actor_options: dict[str, Any] | None = None,
        ray_init_config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            import ray
        except ImportError as err:
            raise ImportError("RayLogger (service_backend='ray') requires ray: pip install ray") from err
        if not ray.is_initialized():
            ray.init(**(ray_init_config or {}))
        actor_cls = ray.remote(_LoggerActor)
        options = {"num_cpus": 0, **(ray_actor_options or {})}
        actor = actor_cls.options(**options).remote(logger_cls, args, kwargs)
        super().__init__(actor, ray.get(actor.info.remote()))
        self._logger_cls = logger_cls
        self._alive = True

    def __reduce__(self):
        raise TypeError("RayLogger owns its actor and cannot be pickled; send logger.client() instead.")

    @property
    def service_backend(self) -> str:
        return "ray"

    @property
    def is_alive(self) -> bool:
        return self._alive

    def start(self) -> "RayLogger":
        """The actor starts with the constructor; returns ``self``."""
        return self

    def client(self) -> _RayLoggerClient:
        """A picklable client exposing the ``log_*`` calls only."""
        return _RayLoggerClient(self._actor, self._info)

    def flush(self, timeout: float | None = None) -> None:
        self._request("flush", _timeout=timeout)

    def state_dict(self) -> dict:
        return self._request("state_dict")

    def load_state_dict(self, state_dict) -> None:
        self._request("load_state_dict", state_dict)

    def close(self, timeout: float | None = 5.0) -> None:
        """Closes the logger in the actor, then ends the actor (idempotent)."""
        if not self._alive:
            return
        import ray

        try:
            self._request("close", _timeout=timeout)
        finally:
            ray.kill(self._actor)
            self._alive = False

    def shutdown(self, timeout: float | None = 5.0) -> None:
        """Same as :meth:`close`."""
        self.close(timeout)
