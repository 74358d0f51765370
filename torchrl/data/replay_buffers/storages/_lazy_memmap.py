"""``LazyMemmapStorage``: a lazily allocated storage backed by memory-mapped files."""
from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import torch
from tensordict import MemoryMappedTensor, is_tensor_collection
from torch.utils._pytree import tree_map

from torchrl.data.replay_buffers.storages._lazy_tensor import LazyTensorStorage


def _remove_dir(path: str, owner_pid: int) -> None:
    if os.getpid() == owner_pid:
        shutil.rmtree(path, ignore_errors=True)


class LazyMemmapStorage(LazyTensorStorage):
    """A :class:`LazyTensorStorage` whose data lives in memory-mapped files on disk.

    The files are created on the first write, in ``scratch_dir`` (or in a fresh temporary directory). The
    operating system pages the data in and out, so the storage can exceed the available RAM; reads gather
    through plain tensor views of the mapped files, as fast as in-memory storage for data in the page
    cache.

    Args:
        max_size (int): the number of elements the storage holds.

    Keyword Args:
        scratch_dir (str or Path, optional): the directory of the files. Defaults to a temporary directory.
        device (torch.device, optional): where sampled data is returned. The files always live on the CPU:
            samplers draw CPU indices, the rows are gathered on the CPU and copied to ``device`` without
            blocking the host (with ``ReplayBuffer(pin_memory=True)``, keep ``device="cpu"`` and move the
            pinned batches yourself, as TorchRL recommends). Defaults to ``"cpu"``.
        ndim (int, optional): the number of storage dimensions. Defaults to ``1``.
        existsok (bool, optional): allow the files to be created in a ``scratch_dir`` that already holds
            storage files (they are overwritten). Defaults to ``False``, which raises instead.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.
        shared_init (bool, optional): accepted for API compatibility; memory-mapped files are shared
            between processes by construction. Defaults to ``False``.
        auto_cleanup (bool, optional): delete the files when the storage is garbage-collected (only in
            the process that created them). Defaults to ``True`` for a temporary directory and ``False``
            for a user-given ``scratch_dir``.

    To reopen a storage saved with ``dumps(path)`` (or a buffer saved with ``ReplayBuffer.dumps``), create
    a storage with the same ``max_size`` and call ``loads(path)``.

    Examples:
        >>> import os, tempfile, torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TensorDictReplayBuffer, LazyMemmapStorage
        >>> with tempfile.TemporaryDirectory() as d:
        ...     rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, scratch_dir=d), batch_size=4)
        ...     _ = rb.extend(TensorDict(obs=torch.arange(10.0), batch_size=[10]))
        ...     print(rb.sample()["obs"].shape, sorted(os.listdir(d))[:1])
        torch.Size([4]) ['meta.json']
    """

    def __init__(
        self,
        max_size: int,
        *,
        scratch_dir=None,
        device: torch.device | str = "cpu",
        ndim: int = 1,
        existsok: bool = False,
        compilable: bool = False,
        shared_init: bool = False,
        auto_cleanup: bool | None = None,
    ):
        super().__init__(max_size, device=device, ndim=ndim, compilable=compilable, shared_init=False)
        self.scratch_dir = str(Path(scratch_dir).expanduser()) if scratch_dir is not None else None
        self.existsok = existsok
        self.auto_cleanup = auto_cleanup if auto_cleanup is not None else scratch_dir is None
        self._files_dir: str | None = None
        self._finalizer = None
        self._index_device = None  # the files are read on the CPU: samplers draw CPU indices

    def _allocate(self, template: Any, rows: int) -> Any:
        if self.scratch_dir is None:
            prefix = tempfile.mkdtemp(prefix="torchrl_memmap_")
        else:
            prefix = self.scratch_dir
            os.makedirs(prefix, exist_ok=True)
        self._files_dir = prefix
        if self.auto_cleanup:
            self._finalizer = weakref.finalize(self, _remove_dir, prefix, os.getpid())
        # As TorchRL: other files in scratch_dir are left alone; one this storage would write raises unless
        # existsok (tensordict's own check for TensorDicts).
        if is_tensor_collection(template):
            return template.expand(rows, *template.batch_size).memmap_like(prefix=prefix, existsok=self.existsok)
        counter = iter(range(10**9))

        def leaf(x: torch.Tensor, name: str | None = None) -> MemoryMappedTensor:
            filename = os.path.join(prefix, name or f"leaf_{next(counter)}.memmap")
            if os.path.exists(filename) and not self.existsok:
                raise RuntimeError(
                    f"The file {filename} already exists. Pass existsok=True to overwrite it, choose another "
                    "scratch_dir, or reopen a saved storage with loads(path)."
                )
            return MemoryMappedTensor.empty((rows, *x.shape), dtype=x.dtype, filename=filename)

        if isinstance(template, torch.Tensor):
            return leaf(template, "storage.memmap")
        return tree_map(leaf, template)

    def _target_device(self, data: Any) -> torch.device:
        return torch.device("cpu")

    def get(self, index) -> Any:
        data = super().get(index)
        device = self.device
        if device != "auto" and device.type != "cpu":
            # the gathered rows are a fresh CPU copy: the host-to-device copy needs not block the host
            if isinstance(data, torch.Tensor) or is_tensor_collection(data):
                data = data.to(device, non_blocking=True)
            else:
                data = tree_map(lambda x: x.to(device, non_blocking=True), data)
        return data

    def cleanup(self) -> bool:
        """Deletes the storage files; returns whether there was anything to delete."""
        if self._files_dir is None or not os.path.exists(self._files_dir):
            return False
        if self._finalizer is not None:
            self._finalizer.detach()
        shutil.rmtree(self._files_dir, ignore_errors=True)
        self._files_dir = None
        self._storage = None
        self._layout = None
        self._tree = None
        self.initialized = False
        self._rows = 0
        return True

    def state_dict(self) -> dict[str, Any]:
        return super().state_dict()

    def load_state_dict(self, state_dict):
        return super().load_state_dict(state_dict)

    def __getstate__(self):
        state = super().__getstate__()
        state["_finalizer"] = None
        return state
