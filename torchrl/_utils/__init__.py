"""``torchrl._utils``: the utility names TorchRL's recipes and tutorials import from this path.

Most of them live in the private modules of this package (``_timeit``, ``_logging``, ``_compile``, ``_implement_for``,
``_cuda``, ``_auto_unwrap``, ``_backends``, ``_seeding``) and are re-exported here; this module adds the
small helpers of its own: environment-variable flags (``VERBOSE``, ``RL_WARNINGS``), ``get_available_device``,
``prod``, ``strtobool``, the profiling switch and the remote-invocation markers.

Examples:
    >>> from torchrl._utils import logger as torchrl_logger, timeit, get_available_device
    >>> with timeit("doc-example"):
    ...     device = get_available_device()
    >>> device.type in ("cpu", "cuda", "mps")
    True
"""
from __future__ import annotations

import functools
import logging
import os
import traceback
import warnings
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

import torch
from tensordict import unravel_key
from torch.autograd.profiler import record_function
from torch.compiler import is_compiling

from torchrl._utils._auto_unwrap import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
from torchrl._utils._backends import get_ray_default_runtime_env, merge_ray_runtime_env
from torchrl._utils._compile import compile_with_warmup
from torchrl._utils._cuda import cuda_memory_profile, cuda_memory_stats, reset_cuda_peak_stats
from torchrl._utils._implement_for import implement_for
from torchrl._utils._logging import logger
from torchrl._utils._seeding import seed_generator
from torchrl._utils._timeit import timeit

__all__ = [
    "BATCHED_PIPE_TIMEOUT",
    "DEFAULT_DONE_KEYS",
    "KeyDependentDefaultDict",
    "LOGGING_LEVEL",
    "RL_WARNINGS",
    "VERBOSE",
    "WEIGHT_SYNC_TIMEOUT",
    "accept_remote_rref_invocation",
    "accept_remote_rref_udf_invocation",
    "auto_unwrap_transformed_env",
    "compile_with_warmup",
    "cuda_memory_profile",
    "cuda_memory_stats",
    "get_available_device",
    "get_binary_env_var",
    "get_ray_default_runtime_env",
    "get_trace",
    "implement_for",
    "is_compiling",
    "logger",
    "merge_ray_runtime_env",
    "print_directory_tree",
    "prod",
    "record_function",
    "reset_cuda_peak_stats",
    "rl_warnings",
    "seed_generator",
    "set_auto_unwrap_transformed_env",
    "set_profiling_enabled",
    "strtobool",
    "timeit",
    "unravel_key",
]

_TRUE = frozenset({"y", "yes", "t", "true", "on", "1"})
_FALSE = frozenset({"n", "no", "f", "false", "off", "0"})


def strtobool(val: Any) -> bool:
    """``True`` for ``y/yes/t/true/on/1``, ``False`` for ``n/no/f/false/off/0`` (case-insensitive).

    Raises:
        ValueError: for any other string.

    Examples:
        >>> strtobool("Yes"), strtobool("0")
        (True, False)
    """
    text = val.lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"Invalid truth value {val!r}: expected one of {sorted(_TRUE | _FALSE)}.")


def get_binary_env_var(key: str) -> bool:
    """Reads a boolean environment variable (``"True"``, ``"False"``, ``"1"`` or ``"0"``); unset is ``False``.

    Raises:
        ValueError: if the variable holds anything else.

    Examples:
        >>> get_binary_env_var("TORCHRL_SURELY_UNSET_VARIABLE")
        False
    """
    val = os.environ.get(key, "False")
    if val in ("0", "False", "false"):
        return False
    if val in ("1", "True", "true"):
        return True
    raise ValueError(f"Environment variable {key} should be in 'True', 'False', '0' or '1'. Got {val} instead.")


#: The ``torchrl`` logger's level name (from ``RL_LOGGING_LEVEL``, default ``"INFO"``).
LOGGING_LEVEL: str = os.environ.get("RL_LOGGING_LEVEL", "INFO").upper()
#: Verbose diagnostics (``VERBOSE`` environment variable; on by default when the logger is at DEBUG level).
VERBOSE: bool = strtobool(os.environ.get("VERBOSE", str(logger.isEnabledFor(logging.DEBUG))))
#: TorchRL's own warnings are emitted (``RL_WARNINGS`` environment variable, default on).
RL_WARNINGS: bool = strtobool(os.environ.get("RL_WARNINGS", "1"))
#: Seconds a batched env waits on a worker pipe (``BATCHED_PIPE_TIMEOUT``).
BATCHED_PIPE_TIMEOUT: float = float(os.environ.get("BATCHED_PIPE_TIMEOUT", "10000.0"))
#: Seconds a weight synchronisation waits (``WEIGHT_SYNC_TIMEOUT``).
WEIGHT_SYNC_TIMEOUT: float = float(os.environ.get("WEIGHT_SYNC_TIMEOUT", "60.0"))
#: The done keys every environment writes.
DEFAULT_DONE_KEYS: tuple[str, ...] = ("done", "truncated", "terminated")

_PROFILING_ALLOWED: bool = get_binary_env_var("TORCHRL_PROFILING")
_PROFILING_ENABLED: bool = _PROFILING_ALLOWED


def rl_warnings() -> bool:
    """Whether TorchRL's own warnings are on (the ``RL_WARNINGS`` environment variable)."""
    return RL_WARNINGS


def set_profiling_enabled(enabled: bool) -> None:
    """Turns the profiling hooks on or off at run time.

    Profiling hooks are compiled in only when ``TORCHRL_PROFILING=1`` is set before ``torchrl`` is
    imported; without it, turning them on warns and does nothing.

    Examples:
        >>> import torchrl._utils as utils
        >>> utils.set_profiling_enabled(False)
        >>> utils._PROFILING_ENABLED
        False
    """
    global _PROFILING_ENABLED
    if enabled and not _PROFILING_ALLOWED:
        warnings.warn(
            "set_profiling_enabled(True) called but TORCHRL_PROFILING=1 was not set before importing torchrl: "
            "the profiling hooks are not installed. Set the environment variable before the import and retry.",
            UserWarning,
            stacklevel=2,
        )
        return
    _PROFILING_ENABLED = bool(enabled)


def get_available_device(return_str: bool = False) -> torch.device | str:
    """The best available device: ``cuda:0``, else ``mps``, else ``cpu``.

    Args:
        return_str: return the device's name instead of a :class:`torch.device`.

    Examples:
        >>> str(get_available_device()) in ("cpu", "cuda:0", "mps")
        True
    """
    if torch.cuda.is_available():
        device = torch.device("cuda:0")
    elif torch.backends.mps.is_available():
        device = torch.device("mps")
    else:
        device = torch.device("cpu")
    return str(device) if return_str else device


def prod(sequence: Iterable):
    """The product of the items of ``sequence`` (``1`` when empty).

    Examples:
        >>> prod([2, 3, 4]), prod(())
        (24, 1)
    """
    out = 1
    for item in sequence:
        out = out * item
    return out


class KeyDependentDefaultDict(defaultdict):
    """A ``defaultdict`` whose factory receives the missing key (the value is stored).

    Examples:
        >>> d = KeyDependentDefaultDict(lambda key: key * 2)
        >>> d[3], dict(d)
        (6, {3: 6})
    """

    def __init__(self, fun: Callable[[Any], Any]) -> None:
        self.fun = fun
        super().__init__()

    def __missing__(self, key):
        value = self.fun(key)
        self[key] = value
        return value


def accept_remote_rref_invocation(func: Callable) -> Callable:
    """Marks a method as callable through a ``torch.distributed.rpc`` remote reference (a transparent
    wrapper here: the call goes straight to ``func``).

    Examples:
        >>> f = accept_remote_rref_invocation(lambda x: x + 1)
        >>> f(1)
        2
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return func(*args, **kwargs)

    return wrapper


def accept_remote_rref_udf_invocation(decorated_class: type) -> type:
    """Class decorator marking every method as callable through a remote reference; returns the class."""
    return decorated_class


def get_trace() -> None:
    """Prints the current call stack (a debugging helper to find out where a function is called from)."""
    traceback.print_stack()


def _format_size(num_bytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if num_bytes < 1024 or unit == "TB":
            return f"{num_bytes:.2f} {unit}"
        num_bytes /= 1024
    return f"{num_bytes:.2f} TB"  # unreachable, keeps type checkers happy


def print_directory_tree(path: str, indent: str = "", display_metadata: bool = True) -> None:
    """Logs the tree of files under ``path`` (directories first), with the total size when
    ``display_metadata``.

    Args:
        path: the directory (or file) to show.
        indent: the indentation of the first level.
        display_metadata: log ``"Directory size: <size>"`` first.
    """
    if display_metadata:
        total = 0
        for root, _, files in os.walk(path):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
        logger.info(f"Directory size: {_format_size(total)}")
    if not os.path.isdir(path):
        logger.info(indent + os.path.basename(path))
        return
    logger.info(indent + os.path.basename(os.path.normpath(path)) + "/")
    entries = sorted(os.listdir(path), key=lambda e: (not os.path.isdir(os.path.join(path, e)), e))
    for entry in entries:
        full = os.path.join(path, entry)
        if os.path.isdir(full):
            print_directory_tree(full, indent + "    ", display_metadata=False)
        else:
            logger.info(indent + "    " + entry)


def name_time_dim(td):
    """Names ``td``'s last batch dim ``"time"``, the others unnamed (as TorchRL names rollouts and collector
    batches); returns ``td``."""
    if td.batch_dims:
        td.names = [None] * (td.batch_dims - 1) + ["time"]
    return td
