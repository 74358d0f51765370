"""Batch buffers in shared memory, shared by one worker process and the parent.

A worker collects straight into a TensorDict whose leaves are views of one memory-mapped file
(``/dev/shm`` when available). After its first batch (or whenever the batch structure changes) it
describes the layout — file name, leaf paths, shapes, dtypes, byte offsets — in a small picklable
:class:`ShmLayout`; the parent maps the same file and unlinks it at once, so the memory is freed when
both processes drop their mappings and no segment outlives them. Files a worker created but could not
report (it died first) carry the parent's prefix and are removed by :func:`remove_prefixed` at shutdown.
"""
from __future__ import annotations

import glob
import os
import tempfile
import uuid

import torch
from tensordict import TensorDict

from torchrl._fast import new_td

__all__ = ["ShmLayout", "shm_dir", "new_prefix", "remove_prefixed"]

_ALIGN = 64


def shm_dir() -> str:
    """``/dev/shm`` (RAM-backed) when writable, else the temporary directory."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return "/dev/shm"
    return tempfile.gettempdir()


def new_prefix() -> str:
    """A file-name prefix unique to one collector of this process."""
    return os.path.join(shm_dir(), f"torchrl-collector-{os.getpid()}-{uuid.uuid4().hex[:10]}")


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


def _walk(td: TensorDict, prefix: tuple, leaves: list, nodes: list, order: list | None = None) -> None:
    for key, value in td._tensordict.items():
        path = prefix + (key,)
        if order is not None:
            order.append(path)
        if type(value) is TensorDict:
            nodes.append((path, tuple(value.batch_size)))
            _walk(value, path, leaves, nodes, order)
        else:
            leaves.append((path, tuple(value.shape), value.dtype))


class ShmLayout:
    """Where each leaf of a batch lives in one shared file.

    Attributes:
        path: the file.
        batch_size: the batch size of the root TensorDict.
        nodes: ``[(path, batch size)]`` of nested TensorDicts, parents first.
        leaves: ``[(path, shape, dtype, byte offset)]``.
        nbytes: file size.
        order: every entry path in the original (pre-order) order.
    """

    def __init__(self, path: str, batch_size: tuple, nodes: list, leaves: list, nbytes: int, order: list) -> None:
        self.order = order
        self.path = path
        self.batch_size = batch_size
        self.nodes = nodes
        self.leaves = leaves
        self.nbytes = nbytes

    @classmethod
    def plan(cls, td: TensorDict, path: str) -> "ShmLayout":
        """The layout that would hold ``td`` (a plain, possibly nested TensorDict of dense tensors)."""
        leaves, nodes, order = [], [], []
        _walk(td, (), leaves, nodes, order)
        offset = 0
        placed = []
        for leaf_path, shape, dtype in leaves:
            placed.append((leaf_path, shape, dtype, offset))
            nbytes = torch.Size(shape).numel() * torch.empty((), dtype=dtype).element_size()
            offset += -(-nbytes // _ALIGN) * _ALIGN
        return cls(path, tuple(td.batch_size), nodes, placed, max(offset, _ALIGN), order)

    def matches(self, td: TensorDict) -> bool:
        """Whether ``td`` has exactly this layout's structure, shapes and dtypes."""
        leaves, nodes = [], []
        _walk(td, (), leaves, nodes)
        return (
            tuple(td.batch_size) == self.batch_size
            and nodes == self.nodes
            and [(p, s, d) for p, s, d, _ in self.leaves] == leaves
        )

    def _map(self) -> torch.Tensor:
        return torch.from_file(self.path, shared=True, size=self.nbytes, dtype=torch.uint8)

    def create(self) -> TensorDict:
        """Creates the file (must not exist) and returns a zero-filled TensorDict over it."""
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        try:
            os.ftruncate(fd, self.nbytes)
        finally:
            os.close(fd)
        return self._build(self._map())

    def attach(self, *, unlink: bool = True) -> TensorDict:
        """Maps an existing file (removing its name afterwards when ``unlink``)."""
        try:
            flat = self._map()
        finally:
            if unlink:
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
        return self._build(flat)

    def _build(self, flat: torch.Tensor) -> TensorDict:
        views = {}
        for path, shape, dtype, offset in self.leaves:
            size = torch.Size(shape)
            nbytes = size.numel() * torch.empty((), dtype=dtype).element_size()
            views[path] = flat[offset : offset + nbytes].view(dtype).view(size)
        sizes = dict(self.nodes)
        children: dict[tuple, list[tuple]] = {}
        for path in self.order:
            children.setdefault(path[:-1], []).append(path)

        def make(prefix: tuple, batch: tuple) -> TensorDict:
            source = {}
            for path in children.get(prefix, ()):
                source[path[-1]] = make(path, sizes[path]) if path in sizes else views[path]
            return new_td(source, torch.Size(batch))

        return make((), self.batch_size)
