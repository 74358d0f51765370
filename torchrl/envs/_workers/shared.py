"""Shared buffers of the worker layer: tensors laid out in one file that several processes map.

A :class:`SharedBlock` places tensors of given shapes and dtypes at aligned offsets of one file (in
``/dev/shm`` when available, RAM-backed): whoever creates it and whoever attaches it by name read and
write the same memory, whatever the start method. Once every process has mapped it the name can be
removed (:meth:`SharedBlock.unlink`): the memory is freed when the last mapping goes, so no segment
outlives its processes. Files a worker created but could not report (it died first) carry the owner's
prefix and are removed by :func:`remove_prefixed` at shutdown.

- ``ParallelEnv`` allocates one block for its step and reset buffers before starting its workers; each
  worker maps it and views its row of every leaf once.
- Process collectors' workers create a :class:`ShmLayout` (a block plus the nesting of a TensorDict) for
  their batches; the parent attaches it when told its layout.
"""
from __future__ import annotations

import glob
import os
import tempfile
import uuid
from typing import Sequence

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import new_td

__all__ = ["SharedBlock", "ShmLayout", "new_prefix", "remove_prefixed", "shm_dir"]

_ALIGN = 64


def shm_dir() -> str:
    """``/dev/shm`` (RAM-backed) when writable, else the temporary directory."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return "/dev/shm"
    return tempfile.gettempdir()


def new_prefix(kind: str = "torchrl-collector-", directory: str | None = None) -> str:
    """A file-name prefix unique to one owner of this process (``<dir>/<kind><pid>-<random>``)."""
    return os.path.join(directory or shm_dir(), f"{kind}{os.getpid()}-{uuid.uuid4().hex[:10]}")


def remove_prefixed(prefix: str) -> int:
    """Removes every file starting with ``prefix``; returns how many were removed."""
    count = 0
    for path in glob.glob(glob.escape(prefix) + "*"):
        try:
            os.unlink(path)
            count += 1
        except FileNotFoundError:
            pass
    return count


def _nbytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    return torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()


class SharedBlock:
    """Where each tensor of a set lives in one shared file (picklable: it travels to the workers).

    Args:
        path: the file.
        leaves: ``[(shape, dtype)]`` of the tensors.
    """

    def __init__(self, path: str, leaves: Sequence[tuple[Sequence[int], torch.dtype]]) -> None:
        self.path = path
        self.leaves = []
        offset = 0
        for shape, dtype in leaves:
            self.leaves.append((tuple(shape), dtype, offset))
            offset += -(-_nbytes(shape, dtype) // _ALIGN) * _ALIGN
        self.nbytes = max(offset, _ALIGN)

    def create(self) -> list[torch.Tensor]:
        """Creates the file (it must not exist) and returns zero-filled tensors over it."""
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, self.nbytes)
        finally:
            os.close(fd)
        return self._views()

    def attach(self, *, unlink: bool = False) -> list[torch.Tensor]:
        """Maps the existing file (removing its name afterwards when ``unlink``)."""
        try:
            return self._views()
        finally:
            if unlink:
                self.unlink()

    def unlink(self) -> None:
        """Removes the file's name (mapped memory stays valid)."""
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def _views(self) -> list[torch.Tensor]:
        flat = torch.from_file(self.path, shared=True, size=self.nbytes, dtype=torch.uint8)
        return [
            flat[offset: offset + _nbytes(shape, dtype)].view(dtype).view(torch.Size(shape))
            for shape, dtype, offset in self.leaves
        ]


def _walk(td: TensorDictBase, prefix: tuple, leaves: list, nodes: list, order: list) -> None:
    for key, value in td.items():
        path = prefix + (key,)
        order.append(path)
        if type(value) is TensorDict:
            nodes.append((path, tuple(value.batch_size)))
            _walk(value, path, leaves, nodes, order)
        else:
            leaves.append((path, tuple(value.shape), value.dtype))


class ShmLayout:
    """A TensorDict batch in one :class:`SharedBlock`: the block plus the nesting of the TensorDict.

    Attributes:
        block: the leaves' block.
        batch_size: the batch size of the root TensorDict.
        nodes: ``{path: batch size}`` of nested TensorDicts.
        paths: the leaf paths, in block order.
        order: every entry path in the original (pre-order) order.
    """

    def __init__(self, block: SharedBlock, batch_size: tuple, nodes: dict, paths: list, order: list) -> None:
        self.block = block
        self.batch_size = batch_size
        self.nodes = nodes
        self.paths = paths
        self.order = order

    @property
    def path(self) -> str:
        return self.block.path

    @classmethod
    def plan(cls, td: TensorDictBase, path: str) -> "ShmLayout":
        """The layout that would hold ``td`` (a plain, possibly nested TensorDict of dense tensors)."""
        leaves, nodes, order = [], [], []
        _walk(td, (), leaves, nodes, order)
        block = SharedBlock(path, [(shape, dtype) for _, shape, dtype in leaves])
        return cls(block, tuple(td.batch_size), dict(nodes), [p for p, _, _ in leaves], order)

    def create(self) -> TensorDictBase:
        """Creates the file and returns a zero-filled TensorDict over it."""
        return self._build(self.block.create())

    def attach(self, *, unlink: bool = True) -> TensorDictBase:
        """Maps the existing file (removing its name afterwards when ``unlink``)."""
        return self._build(self.block.attach(unlink=unlink))

    def _build(self, tensors: list[torch.Tensor]) -> TensorDictBase:
        views = dict(zip(self.paths, tensors))
        children: dict[tuple, list[tuple]] = {}
        for path in self.order:
            children.setdefault(path[:-1], []).append(path)

        def make(prefix: tuple, batch: tuple) -> TensorDictBase:
            source = {}
            for path in children.get(prefix, ()):
                source[path[-1]] = make(path, self.nodes[path]) if path in self.nodes else views[path]
            return new_td(source, torch.Size(batch))

        return make((), self.batch_size)
