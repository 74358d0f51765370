"""Global switches of the recurrent modules: the recurrent mode and the matmul precision of recurrences."""
from __future__ import annotations

import contextlib
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
_TORCH_SETTING = {"ieee": "highest", "tf32x3": "high", "tf32": "medium"}
_FROM_TORCH = {v: k for k, v in _TORCH_SETTING.items()}
_USER_MODES = ("auto", "fast", "high-prec", "ieee", "tf32", "tf32x3")


def _resolve_precision(mode: str | None) -> RecurrentMatmulPrecision:
    if mode is None or mode == "auto":
        return _FROM_TORCH.get(torch.get_float32_matmul_precision(), "ieee")
    if mode == "fast":
        return "tf32"
    if mode == "high-prec":
        return "tf32x3"
    if mode in _TORCH_SETTING:
        return mode
    raise ValueError(f"Unknown recurrent matmul precision {mode!r}; expected one of {list(_USER_MODES)}.")


def set_recurrent_matmul_precision(mode: str | None) -> None:
    """Sets the float32 matmul precision used inside recurrences (``None`` restores ``"auto"``).

    ``"ieee"`` is full float32, ``"tf32x3"`` (``"high-prec"``) and ``"tf32"`` (``"fast"``) allow the faster
    reduced-precision modes of recent GPUs (they map onto :func:`torch.set_float32_matmul_precision`'s
    ``"highest"``, ``"high"`` and ``"medium"`` while a recurrence runs). ``"auto"`` follows torch's
    global setting. CPU matmuls are unaffected.

    Examples:
        >>> from torchrl.modules import get_recurrent_matmul_precision, set_recurrent_matmul_precision
        >>> set_recurrent_matmul_precision("fast")
        >>> get_recurrent_matmul_precision()
        'tf32'
        >>> set_recurrent_matmul_precision(None)
    """
    if mode is not None:
        _resolve_precision(mode)
    _STATE["precision"] = mode


def get_recurrent_matmul_precision() -> RecurrentMatmulPrecision:
    """The precision recurrences use now (the global setting resolved against torch's; see the setter)."""
    return _resolve_precision(_STATE["precision"])


def _precision_context(module_mode: str):
    """Applies a module's precision (its own when not ``"auto"``, else the global one) for one call."""
    wanted = _resolve_precision(_STATE["precision"] if module_mode == "auto" else module_mode)
    setting = _TORCH_SETTING[wanted]
    current = torch.get_float32_matmul_precision()
    if setting == current:
        return contextlib.nullcontext()
    return _TorchPrecision(setting, current)


class _TorchPrecision:
    def __init__(self, setting: str, previous: str) -> None:
        self.setting, self.previous = setting, previous

    def __enter__(self) -> None:
        torch.set_float32_matmul_precision(self.setting)

    def __exit__(self, *exc) -> None:
        torch.set_float32_matmul_precision(self.previous)
