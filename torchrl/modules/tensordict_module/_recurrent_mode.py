"""Global switches of the recurrent modules: the recurrent mode and the matmul precision of recurrences."""
from __future__ import annotations

import os
from typing import Literal

import torch
from torch.utils._contextlib import _DecoratorContextManager

__all__ = [
    "RecurrentMatmulPrecision",
    "RecurrentMatmulPrecisionUserMode",
    "get_recurrent_matmul_precision",
    "recurrent_mode",
    "set_recurrent_matmul_precision",
    "set_recurrent_mode",
]

RecurrentMatmulPrecision = Literal["ieee", "tf32", "tf32x3"]
RecurrentMatmulPrecisionUserMode = Literal["auto", "fast", "high-prec", "ieee", "tf32", "tf32x3"]

_STATE = {"mode": None, "precision": None}


def recurrent_mode() -> bool | None:
    """The recurrent mode set by the innermost :class:`set_recurrent_mode` (``None`` outside any).

    Examples:
        >>> from torchrl.modules import recurrent_mode, set_recurrent_mode
        >>> with set_recurrent_mode("recurrent"):
        ...     recurrent_mode()
        True
        >>> recurrent_mode() is None
        True
    """
    return _STATE["mode"]


def _as_mode(mode) -> bool | None:
    if mode is None or isinstance(mode, bool):
        return mode
    if mode == "recurrent":
        return True
    if mode == "sequential":
        return False
    raise ValueError(f"set_recurrent_mode: mode must be True, False, None, 'recurrent' or 'sequential', got {mode!r}.")


class set_recurrent_mode(_DecoratorContextManager):  # noqa: N801 - TorchRL's public name
    """Context manager / decorator choosing how recurrent modules read their input.

    ``True`` (``"recurrent"``): the last batch dim is time; whole sequences run in one call, with hidden
    states restarting where ``is_init`` is True (training). ``False`` (``"sequential"``): every entry is
    one step fed by the state stored in the data (collection). ``None``: each module's own default.

    Args:
        mode (bool, "recurrent", "sequential" or None, optional): defaults to ``True``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import GRUModule, set_recurrent_mode
        >>> gru = GRUModule(input_size=3, hidden_size=4, in_key="obs", out_key="features")
        >>> data = TensorDict(obs=torch.randn(2, 5, 3), is_init=torch.zeros(2, 5, 1, dtype=torch.bool),
        ...                   recurrent_state=torch.zeros(2, 5, 1, 4), batch_size=[2, 5])
        >>> with set_recurrent_mode("recurrent"):
        ...     gru(data)["features"].shape
        torch.Size([2, 5, 4])
    """

    def __init__(self, mode: bool | Literal["recurrent", "sequential"] | None = True) -> None:
        super().__init__()
        self.mode = _as_mode(mode)
        self._previous: list = []

    def clone(self) -> set_recurrent_mode:
        return type(self)(self.mode)

    def __enter__(self) -> None:
        self._previous.append(_STATE["mode"])
        _STATE["mode"] = self.mode

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        _STATE["mode"] = self._previous.pop()


# -- matmul precision ---------------------------------------------------------------------------------------
# torch's global float32 setting, read as a recurrent mode: "highest" -> ieee, "high" -> high-prec, "medium" -> fast
_FROM_TORCH = {"highest": "ieee", "high": "high-prec", "medium": "fast"}
_PRESETS = {"fast": "tf32", "high-prec": "tf32x3"}
_USER_MODES = ("auto", "fast", "high-prec", "ieee", "tf32", "tf32x3")
_ENV_VAR = "TORCHRL_RNN_PRECISION"


def _check_mode(mode: str | None, what: str = "recurrent_matmul_precision") -> None:
    if mode is not None and mode not in _USER_MODES:
        raise ValueError(f"Invalid {what}={mode!r}. Expected one of {list(_USER_MODES)}.")


_ENV_MODE = os.environ.get(_ENV_VAR) or None
_check_mode(_ENV_MODE, _ENV_VAR)


def _tensor_cores(device: torch.device | None) -> bool:
    """Whether ``device`` (the current CUDA device when ``None``) has TF32 tensor cores (Ampere or newer)."""
    if device is None:
        if not torch.cuda.is_available():
            return False
        device = torch.device("cuda", torch.cuda.current_device())
    if device.type != "cuda":
        return False
    index = device.index if device.index is not None else torch.cuda.current_device()
    cached = _CAPABILITY.get(index)
    if cached is None:
        cached = _CAPABILITY[index] = torch.cuda.get_device_capability(index)[0] >= 8
    return cached


_CAPABILITY: dict[int, bool] = {}


def _resolve_precision(mode: str | None, device: torch.device | None = None) -> RecurrentMatmulPrecision:
    """A concrete precision: the module's ``mode`` unless ``"auto"``, then the global override, then the
    ``TORCHRL_RNN_PRECISION`` variable, then torch's float32 setting; presets resolve on ``device``."""
    _check_mode(mode)
    if mode is None or mode == "auto":
        mode = _STATE["precision"] or _ENV_MODE
    if mode is None or mode == "auto":
        mode = _FROM_TORCH.get(torch.get_float32_matmul_precision(), "ieee")
    if mode in _PRESETS:
        return _PRESETS[mode] if _tensor_cores(device) else "ieee"
    return mode


def set_recurrent_matmul_precision(mode: str | None) -> None:
    """Sets the process-wide precision of the ``"triton"`` backend's recurrent matmuls.

    ``"ieee"``: full float32. ``"tf32"``: TensorFloat-32 tensor cores (Ampere or newer GPUs; about 10
    mantissa bits, cuDNN's default). ``"tf32x3"``: each product computed as three TF32 products (about 22
    bits). Presets resolved on the GPU that runs the recurrence: ``"fast"`` (``"tf32"`` on Ampere or newer,
    else ``"ieee"``) and ``"high-prec"`` (``"tf32x3"`` there, else ``"ieee"``). ``"auto"`` or ``None``
    clears the override: the ``TORCHRL_RNN_PRECISION`` environment variable (read at import) applies, else
    :func:`torch.get_float32_matmul_precision` (``"highest"`` -> ``"ieee"``, ``"high"`` -> ``"high-prec"``,
    ``"medium"`` -> ``"fast"``). A module's own ``recurrent_matmul_precision`` (other than ``"auto"``) wins.
    The setting is read at every call. CPU matmuls and the ``"pad"``/``"scan"`` backends ignore it.

    Args:
        mode (str or None): one of ``"auto"``, ``"fast"``, ``"high-prec"``, ``"ieee"``, ``"tf32"``,
            ``"tf32x3"`` or ``None``.

    Raises:
        ValueError: for any other mode.

    Examples:
        >>> from torchrl.modules import get_recurrent_matmul_precision, set_recurrent_matmul_precision
        >>> set_recurrent_matmul_precision("tf32")
        >>> get_recurrent_matmul_precision()
        'tf32'
        >>> set_recurrent_matmul_precision("fast")  # resolves on the current GPU: "ieee" without one
        >>> set_recurrent_matmul_precision(None)
    """
    _check_mode(mode)
    _STATE["precision"] = None if mode == "auto" else mode


def get_recurrent_matmul_precision() -> RecurrentMatmulPrecision:
    """The concrete precision (``"ieee"``, ``"tf32"`` or ``"tf32x3"``) recurrences run at now.

    Presets are resolved on the current CUDA device (``"ieee"`` without one); per-module settings are not
    seen here (see :func:`set_recurrent_matmul_precision`).
    """
    return _resolve_precision(None)
