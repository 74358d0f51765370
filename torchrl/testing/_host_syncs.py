"""Counts the calls that would make the host wait for an accelerator, on any device (CPU included).

On a GPU, reading a tensor's value on the host (``.item()``, ``bool(t)``, ``if t.any():``, ``.tolist()``), or
running an op whose output shape depends on the data (boolean-mask indexing, ``nonzero``, ``unique``,
``masked_select``, ``repeat_interleave`` without ``output_size``), or copying between the host and the device
without ``non_blocking=True``, blocks the Python thread until every queued kernel has run. ``torch.cuda.set_sync_debug_mode`` reports them on CUDA only; this counter sees the same
operations through a ``TorchDispatchMode`` on CPU tensors too, so the hot paths can be checked for host syncs by
the CPU test suite.

Examples:
    >>> import torch
    >>> from torchrl.testing._host_syncs import count_host_syncs
    >>> x = torch.arange(4.0)
    >>> with count_host_syncs() as syncs:
    ...     y = x * 2          # no sync
    ...     _ = bool(y.any())  # one sync: the value is read on the host
    >>> syncs.count
    1
    >>> syncs.events[0].op
    'aten._local_scalar_dense.default'
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import torch
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["HostSync", "SyncCounter", "count_host_syncs"]

# ops that always read device data on the host or produce data-dependent shapes
_SYNC_OPS = frozenset(
    {
        "aten._local_scalar_dense.default",  # .item(), bool(t), int(t), float(t), if t: ...
        "aten.is_nonzero.default",
        "aten.equal.default",
        "aten.nonzero.default",
        "aten.masked_select.default",
        "aten._unique.default",
        "aten._unique2.default",
        "aten.unique_dim.default",
        "aten.unique_consecutive.default",
        "aten.allclose.default",
    }
)
_INDEX_OPS = frozenset({"aten.index.Tensor", "aten.index_put.default", "aten.index_put_.default", "aten._index_put_impl_.default"})


_COPY_OPS = frozenset({"aten._to_copy.default", "aten.copy_.default"})


def _blocking_cross_device(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether a copy moves data between the CPU and another device without ``non_blocking=True``.

    Such a copy waits for every kernel queued on the device before it (a host-to-device copy from pageable
    memory, a device-to-host read); ``non_blocking=True`` copies are queued like kernels.
    """
    if name == "aten._to_copy.default":
        src, target, non_blocking = args[0], kwargs.get("device"), kwargs.get("non_blocking", False)
        if target is None:
            return False
        src_cpu, dst_cpu = src.device.type == "cpu", torch.device(target).type == "cpu"
    else:
        dst, src = args[0], args[1]
        non_blocking = args[2] if len(args) > 2 else kwargs.get("non_blocking", False)
        if not isinstance(src, torch.Tensor):
            return False
        src_cpu, dst_cpu = src.device.type == "cpu", dst.device.type == "cpu"
    return src_cpu != dst_cpu and not non_blocking


@dataclass
class HostSync:
    """One synchronising call: the aten op (or Python method) and where in Python it came from."""

    op: str
    where: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.op} at " + " <- ".join(self.where[:4])


def _caller(skip_prefixes: tuple[str, ...]) -> list[str]:
    frames = traceback.extract_stack()[:-3]
    out = []
    for frame in reversed(frames):
        name = frame.filename
        if "torch/utils/_python_dispatch" in name or name == __file__ or name.endswith("torch/_tensor.py"):
            continue
        if any(p in name for p in skip_prefixes):
            continue
        out.append(f"{'/'.join(name.split('/')[-2:])}:{frame.lineno} {frame.name}")
    return out


class SyncCounter(TorchDispatchMode):
    """The dispatch mode behind :func:`count_host_syncs`; ``events`` lists every synchronising call."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[HostSync] = []
        self._patched: dict[str, object] = {}

    @property
    def count(self) -> int:
        return len(self.events)

    def _record(self, op: str) -> None:
        self.events.append(HostSync(op, _caller(("site-packages/torch/", "site-packages/tensordict/"))))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        if name in _SYNC_OPS:
            self._record(name)
        elif name == "aten.repeat_interleave.Tensor" and (kwargs or {}).get("output_size") is None:
            self._record(name)
        elif name in _COPY_OPS and _blocking_cross_device(name, args, kwargs or {}):
            self._record(name + " (blocking copy between the host and a device)")
        elif name in _INDEX_OPS:
            indices = args[1] if len(args) > 1 else ()
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or ()):
                self._record(name + " (boolean mask)")
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        # tolist()/numpy() do not reach the dispatcher on CPU: count them at the Python level
        for method in ("tolist", "numpy"):
            original = getattr(torch.Tensor, method)
            self._patched[method] = original

            def patched(tensor, *args, _original=original, _name=method, **kwargs):
                self._record(f"Tensor.{_name}")
                return _original(tensor, *args, **kwargs)

            setattr(torch.Tensor, method, patched)
        return super().__enter__()

    def __exit__(self, *exc):
        for method, original in self._patched.items():
            setattr(torch.Tensor, method, original)
        self._patched.clear()
        return super().__exit__(*exc)

    def report(self) -> str:
        """One line per synchronising call, for assertion messages."""
        return "\n".join(str(e) for e in self.events) or "no host syncs"


def count_host_syncs() -> SyncCounter:
    """A context manager counting the calls that would synchronise the host with an accelerator.

    Returns:
        a :class:`SyncCounter`; after the block, ``count`` is the number of synchronising calls and ``events``
        says which op ran and from where (``report()`` formats them).
    """
    return SyncCounter()
