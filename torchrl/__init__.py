"""TorchRL: reinforcement learning with PyTorch and TensorDict.

Subpackages (``torchrl.envs``, ``torchrl.data``, ...) load on first access, so ``import torchrl`` stays
cheap and imports no optional library.
"""
from __future__ import annotations

import importlib

from torchrl._utils._auto_unwrap import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
from torchrl._utils._check_mode import check_mode, set_check_mode
from torchrl._utils._backends import get_ray_default_runtime_env, merge_ray_runtime_env, service_backend, transport_backend
from torchrl._utils._compile import compile_with_warmup
from torchrl._utils._cuda import cuda_memory_profile, cuda_memory_stats, reset_cuda_peak_stats
from torchrl._utils._exploration import ExplorationType, exploration_type, set_exploration_type
from torchrl._utils._implement_for import implement_for
from torchrl._utils._logging import logger, torchrl_logger
from torchrl._utils._timeit import timeit

__version__ = "0.14.1"

__all__ = [
    "auto_unwrap_transformed_env",
    "check_mode",
    "compile_with_warmup",
    "cuda_memory_profile",
    "cuda_memory_stats",
    "get_ray_default_runtime_env",
    "implement_for",
    "logger",
    "merge_ray_runtime_env",
    "reset_cuda_peak_stats",
    "service_backend",
    "set_auto_unwrap_transformed_env",
    "set_check_mode",
    "timeit",
    "torchrl_logger",
    "transport_backend",
    "ExplorationType",
    "set_exploration_type",
    "exploration_type",
]

_SUBPACKAGES = frozenset(
    {"collectors", "data", "envs", "modules", "objectives", "record", "trainers", "testing", "weight_update", "checkpoint"}
)


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        try:
            return importlib.import_module(f"torchrl.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"torchrl.{name}":  # a missing dependency inside the subpackage: say so
                raise
            # a subpackage this version does not have yet: ``hasattr`` must answer False, not raise
            raise AttributeError(f"module 'torchrl' has no attribute {name!r}") from None
    raise AttributeError(f"module 'torchrl' has no attribute {name!r}")
