"""Process-wide choices of service and transport backends, and Ray runtime-environment helpers."""
from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

__all__ = [
    "service_backend",
    "transport_backend",
    "get_service_backend",
    "get_transport_backend",
    "get_ray_default_runtime_env",
    "merge_ray_runtime_env",
]

_SERVICE_BACKENDS = ("local", "ray")
_TRANSPORT_BACKENDS = ("mp", "shared_mem", "ray", "rpc", "distributed", "nccl", "gloo")
_state = {"service": "local", "transport": "mp"}


def _check(value: Any, allowed: tuple[str, ...], what: str) -> str:
    value = str(getattr(value, "value", value))
    if value not in allowed:
        raise ValueError(f"{what}: unknown backend {value!r}; expected one of {list(allowed)}.")
    return value


@contextlib.contextmanager
def service_backend(backend: Any) -> Iterator[None]:
    """Context manager selecting where services (replay buffers, registries) live: ``"local"`` or ``"ray"``.

    Examples:
        >>> from torchrl import service_backend
        >>> from torchrl._utils._backends import get_service_backend
        >>> with service_backend("ray"):
        ...     get_service_backend()
        'ray'
    """
    previous = _state["service"]
    _state["service"] = _check(backend, _SERVICE_BACKENDS, "service_backend")
    try:
        yield
    finally:
        _state["service"] = previous


@contextlib.contextmanager
def transport_backend(backend: Any) -> Iterator[None]:
    """Context manager selecting how weights and data travel between processes (``"mp"``, ``"ray"``, ...)."""
    previous = _state["transport"]
    _state["transport"] = _check(backend, _TRANSPORT_BACKENDS, "transport_backend")
    try:
        yield
    finally:
        _state["transport"] = previous


def get_service_backend() -> str:
    return _state["service"]


def get_transport_backend() -> str:
    return _state["transport"]


_FORWARDED_ENV_PREFIXES = ("TORCHRL_", "RL_", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")


def get_ray_default_runtime_env() -> dict[str, Any]:
    """The runtime environment Ray workers get by default: this process's TorchRL-related variables."""
    env_vars = {k: v for k, v in os.environ.items() if k.startswith(_FORWARDED_ENV_PREFIXES)}
    return {"env_vars": env_vars}


def merge_ray_runtime_env(ray_init_config: dict[str, Any]) -> dict[str, Any]:
    """Returns a copy of ``ray_init_config`` whose ``runtime_env`` includes the default one.

    Values already in the user's config win over the defaults.

    Examples:
        >>> from torchrl import merge_ray_runtime_env
        >>> cfg = merge_ray_runtime_env({"runtime_env": {"env_vars": {"A": "1"}}})
        >>> cfg["runtime_env"]["env_vars"]["A"]
        '1'
    """
    config = dict(ray_init_config)
    runtime_env = dict(config.get("runtime_env") or {})
    defaults = get_ray_default_runtime_env()
    env_vars = dict(defaults["env_vars"])
    env_vars.update(runtime_env.get("env_vars") or {})
    runtime_env["env_vars"] = env_vars
    config["runtime_env"] = runtime_env
    return config
