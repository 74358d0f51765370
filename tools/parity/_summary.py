"""Turns what a scenario returns into plain JSON, the same way under both packages.

Imported by ``_child.py`` under either interpreter: it may use ``torch`` and ``tensordict`` but never
``torchrl`` internals, only public names looked up by attribute so that both packages summarise alike.
"""
from __future__ import annotations

import math
from typing import Any

import torch
from tensordict import TensorDictBase  # the data model of both packages

MAX_VALUES = 256  # tensors up to this many elements are compared value by value, larger ones by statistics


class Structure:
    """Marks a value whose structure (keys, shapes, dtypes, types) is compared but not its numbers."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Warned:
    """A result together with the warning categories raised while computing it (see ``parity.warns``)."""

    def __init__(self, value: Any, categories: list[str]) -> None:
        self.value = value
        self.categories = categories


def exception(err: BaseException) -> dict:
    """An exception by type: its class name, the names in its MRO (for subclass checks) and its message."""
    mro = [c.__name__ for c in type(err).__mro__ if c not in (object, BaseException)]
    return {"raises": type(err).__name__, "mro": mro, "message": str(err)[:300]}


def _number(x: float) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)
    return x


def _tensor(t: torch.Tensor, values: bool) -> dict:
    out: dict[str, Any] = {"tensor": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
    if not values:
        return out
    t = t.detach()
    if t.is_floating_point() or t.is_complex():
        t = t.to(torch.float64)
    if t.numel() <= MAX_VALUES:
        out["values"] = [_number(v) for v in t.reshape(-1).tolist()]
    else:
        f = t.to(torch.float64)
        out["stats"] = [_number(float(v)) for v in (f.sum(), f.abs().sum(), f.min(), f.max())]
    return out


def _spec(spec: Any, values: bool) -> dict:
    out: dict[str, Any] = {"spec": type(spec).__name__, "shape": list(spec.shape), "device": str(getattr(spec, "device", None))}
    if hasattr(spec, "keys") and callable(spec.keys) and type(spec).__name__ in ("Composite", "StackedComposite"):
        # a Composite's dtype is not compared: TorchRL's is always float32 whatever the leaves (ours: None)
        out["entries"] = {_key(k): summarize(spec[k], values) for k in spec.keys()}
        return out
    out["dtype"] = str(getattr(spec, "dtype", None)).replace("torch.", "")
    space = getattr(spec, "space", None)
    for name in ("low", "high", "n", "nvec"):
        v = getattr(space, name, None)
        if v is not None:
            out[name] = summarize(v, values)
    return out


def _key(key: Any) -> str:
    return key if isinstance(key, str) else "/".join(map(str, key))


def summarize(obj: Any, values: bool = True) -> Any:
    """A JSON-able description of ``obj``: tensors by shape, dtype and values; TensorDicts by class, batch size
    and entries; specs by class, shape, dtype, device and bounds; containers recursively."""
    if isinstance(obj, Structure):
        return summarize(obj.value, values=False)
    if isinstance(obj, Warned):
        return {"result": summarize(obj.value, values), "warnings": obj.categories}
    if isinstance(obj, BaseException):
        return exception(obj)
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        return _number(obj) if values else "float"
    if isinstance(obj, torch.Tensor):
        return _tensor(obj, values)
    if isinstance(obj, (torch.Size,)):
        return list(obj)
    if isinstance(obj, (torch.dtype, torch.device)):
        return str(obj)
    if isinstance(obj, TensorDictBase):
        entries = {}
        for key in obj.keys():
            try:
                entries[_key(key)] = summarize(obj.get(key), values)
            except Exception as err:  # noqa: BLE001 - e.g. heterogeneous lazy stacks
                entries[_key(key)] = exception(err)
        return {"td": type(obj).__name__, "batch_size": list(obj.batch_size), "entries": entries}
    if type(obj).__module__.startswith("torchrl") and hasattr(obj, "shape") and hasattr(obj, "is_in"):
        return _spec(obj, values)
    if isinstance(obj, dict):
        return {"dict": {_key(k) if isinstance(k, (str, tuple)) else repr(k): summarize(v, values) for k, v in obj.items()}}
    if isinstance(obj, (list, tuple)):
        return {type(obj).__name__: [summarize(v, values) for v in obj]}
    if isinstance(obj, type):
        return {"class": obj.__name__}
    return {"object": type(obj).__name__}
