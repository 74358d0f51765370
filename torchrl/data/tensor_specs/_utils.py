"""Small helpers shared by every spec module: shape/device normalisation, index arithmetic, messages."""
from __future__ import annotations

from typing import Any, Sequence, Union

import numpy as np
import torch

from torchrl._utils._errors import ValueRuntimeError as _ValueRuntimeError  # (the spec modules import it from here)

DEVICE_TYPING = Union[torch.device, str, int]
INDEX_TYPING = Union[int, torch.Tensor, np.ndarray, slice, list]
SHAPE_INDEX_TYPING = Union[
    int,
    range,
    list[int],
    np.ndarray,
    slice,
    None,
    torch.Tensor,
    type(...),
    tuple[int, range, list[int], np.ndarray, slice, None, torch.Tensor, type(...)],
]
DEVICE_ERR_MSG = "device of empty Composite is not defined."

_CPU = torch.device("cpu")
_DEVICE_CACHE: dict[Any, torch.device] = {}


def _size(shape: Any) -> torch.Size:
    """Turns ``None``, an int, a sequence of ints or a ``torch.Size`` into a ``torch.Size``."""
    if shape is None:
        return torch.Size(())
    if type(shape) is torch.Size:
        return shape
    if isinstance(shape, (int, np.integer)):
        return torch.Size((int(shape),))
    if isinstance(shape, torch.Tensor):
        return torch.Size(shape.tolist()) if shape.ndim else torch.Size((int(shape),))
    return torch.Size([int(s) for s in shape])


def _shape_args(shape: tuple) -> torch.Size:
    """Reads ``f(2, 3)``, ``f((2, 3))`` and ``f(torch.Size([2, 3]))`` alike."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        return _size(shape[0])
    return _size(shape)


def _device(device: Any) -> torch.device | None:
    """Normalises a device argument (``None`` stays ``None``); cached because it runs on every spec op."""
    if device is None:
        return None
    try:
        return _DEVICE_CACHE[device]
    except (KeyError, TypeError):
        pass
    out = device if isinstance(device, torch.device) else torch.device(device)
    if out.type == "cuda" and out.index is None and torch.cuda.is_available():
        out = torch.device("cuda", torch.cuda.current_device())
    try:
        _DEVICE_CACHE[device] = out
    except TypeError:
        pass
    return out


def _leaf_device(device: Any) -> torch.device:
    """Leaves always have a device: ``None`` means the default device (CPU unless changed)."""
    if device is None:
        default = torch.get_default_device()
        return _CPU if default.type == "cpu" else default
    return _device(device)


def _dtype(dtype: Any, default: torch.dtype) -> torch.dtype:
    """Accepts a ``torch.dtype``, a string such as ``"float32"`` / ``"torch.int64"``, or ``None``."""
    if dtype is None:
        return default
    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        out = getattr(torch, dtype.replace("torch.", ""), None)
        if isinstance(out, torch.dtype):
            return out
    if isinstance(dtype, np.dtype) or (isinstance(dtype, type) and issubclass(dtype, np.generic)):
        return torch.from_numpy(np.zeros((), dtype=dtype)).dtype
    raise _DtypeError(f"unknown dtype {dtype!r}; pass a torch.dtype such as torch.float32.")


def _is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def _key_str(key: Any) -> str:
    """Formats a nested key the way it is written in code: ``'obs'`` or ``('agents', 'obs')``."""
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    return repr(key)


def _cat_shape(prefix: Any, shape: torch.Size) -> torch.Size:
    """``prefix + shape`` where ``prefix`` may be ``None``, an int or a sequence."""
    if prefix is None:
        return shape
    if isinstance(prefix, (int, np.integer)):
        return torch.Size((int(prefix), *shape))
    if not prefix:
        return shape
    return torch.Size((*prefix, *shape))


def _value_shape(prefix: Any, shape: torch.Size) -> torch.Size:
    """The shape of a value drawn from a spec: ``prefix + shape`` with each dynamic dim (``-1``, a size that
    changes from step to step) taken as 1."""
    full = _cat_shape(prefix, shape) if prefix else shape
    if any(d < 0 for d in full):
        return torch.Size(1 if d < 0 else d for d in full)
    return full


def _expand_ellipsis(idx: tuple, ndim: int) -> tuple:
    """Replaces ``...`` by explicit slices so the index also applies to tensors with extra trailing dims."""
    if not any(i is Ellipsis for i in idx):
        return idx
    used = 0
    for i in idx:
        if i is None or i is Ellipsis:
            continue
        if isinstance(i, (torch.Tensor, np.ndarray)) and i.dtype in (torch.bool, np.bool_):
            used += i.ndim
        else:
            used += 1
    out: list = []
    for i in idx:
        if i is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(i)
    return tuple(out)


def _norm_index(idx: Any, ndim: int) -> tuple:
    """Turns any tensor-style index into a tuple without ``...`` (numpy arrays become tensors)."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    idx = tuple(torch.as_tensor(i) if isinstance(i, np.ndarray) else i for i in idx)
    idx = tuple(list(i) if isinstance(i, range) else i for i in idx)
    return _expand_ellipsis(idx, ndim)


def _indexed_shape(shape: torch.Size, idx: tuple) -> torch.Size:
    """The shape of ``tensor[idx]`` for a tensor of ``shape`` (computed on a zero-stride tensor)."""
    try:
        return torch.zeros(()).expand(shape)[idx].shape
    except IndexError as err:
        raise IndexError(f"index {idx!r} does not apply to shape {shape}: {err}") from None


class _DimError(IndexError, ValueError):
    """A dim out of range (or that a spec cannot act on): TorchRL raises IndexError or ValueError depending on
    the method and the spec, so ours is both (code catching either catches it)."""




_ShapeError = _ValueRuntimeError


class _DtypeError(ValueError, AttributeError):
    """An unknown dtype: TorchRL raises AttributeError (a string has no dtype attributes), ours says which."""


def _neg_dim(dim: int, ndim: int, *, what: str = "dim") -> int:
    """A dim in ``[-ndim, ndim)`` made non-negative, with a clear error otherwise."""
    if not -ndim <= dim < ndim:
        raise _DimError(f"{what} {dim} is out of range for {ndim} dimension(s).")
    return dim % ndim if ndim else 0


def _format_tensor(t: torch.Tensor) -> str:
    return f"Tensor(shape={t.shape}, device={t.device}, dtype={t.dtype}, contiguous={t.is_contiguous()})"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def _shapes_compatible(val_shape: Sequence[int], spec_shape: Sequence[int]) -> bool:
    """``True`` when ``val_shape`` ends with ``spec_shape`` (``-1`` in the spec matches any size)."""
    n = len(spec_shape)
    if len(val_shape) < n:
        return False
    if n == 0:
        return True
    tail = val_shape[len(val_shape) - n :]
    if tuple(tail) == tuple(spec_shape):
        return True
    return all(s == -1 or s == v for s, v in zip(spec_shape, tail))


def _cartesian(axes: list[torch.Tensor], shape: torch.Size) -> torch.Tensor:
    """Every combination of one value per position: ``axes[i]`` holds the values allowed at flat position
    ``i`` of ``shape``; the result has shape ``(n_combinations, *shape)``."""
    if not axes:
        return torch.zeros((1, *shape), dtype=torch.long)
    grid = torch.cartesian_prod(*axes) if len(axes) > 1 else axes[0].unsqueeze(-1)
    return grid.reshape(-1, *shape)


def _expand_shape(spec: Any, new: torch.Size) -> torch.Size:
    """Checks ``spec.expand(*new)``: ``new`` ends with the spec's shape, where only singleton or dynamic
    (``-1``) dims may differ (``-1`` in ``new`` makes a dim dynamic, as in TorchRL)."""
    old = spec.shape
    off = len(new) - len(old)
    name = type(spec).__name__
    if off < 0:
        raise ValueError(f"{name}.expand: shape {tuple(new)} has fewer dims than the spec's shape {tuple(old)}.")
    for o, n in zip(old, new[off:]):
        if n != o and o not in (1, -1):
            raise ValueError(
                f"{name}.expand: shape {tuple(new)} does not fit the spec's shape {tuple(old)}: its last {len(old)} "
                "dims must match it (only singleton or dynamic (-1) dims can change)."
            )
    return new
