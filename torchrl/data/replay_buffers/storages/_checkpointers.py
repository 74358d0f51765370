"""Storage checkpointers: how a storage's content is written to and read from a directory.

A checkpointer works on a storage through a few private methods every storage implements
(``_checkpoint_content`` / ``_restore_content`` for tensor storages, the item list for list storages), so
this module imports no storage class. Save hooks run on the content before it is written, load hooks on
what was read, in registration order.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch
from tensordict import TensorDict, is_tensor_collection

from torchrl.data.replay_buffers._utils import load_json, save_json
from torchrl.data.replay_buffers.storages._ted import Flat2TED, Nested2TED, TED2Flat, TED2Nested

_META = "storage_metadata.json"


class StorageCheckpointerBase:
    """Base class of storage checkpointers: ``dumps(storage, path)`` and ``loads(storage, path)``.

    Examples:
        >>> from torchrl.data.replay_buffers.storages import ListStorage
        >>> from torchrl.data.replay_buffers.checkpointers import ListStorageCheckpointer
        >>> isinstance(ListStorage(3).checkpointer, ListStorageCheckpointer)
        True
    """

    def __init__(self) -> None:
        self._save_hooks: list[Callable] = []
        self._load_hooks: list[Callable] = []

    def register_save_hook(self, hook):
        """Adds ``hook(data) -> data``, run on the content before it is written."""
        self._hooks("_save_hooks").append(hook)

    def register_load_hook(self, hook):
        """Adds ``hook(data) -> data``, run on the content after it is read."""
        self._hooks("_load_hooks").append(hook)

    def _hooks(self, name: str) -> list[Callable]:
        hooks = getattr(self, name, None)
        if hooks is None:
            hooks = []
            setattr(self, name, hooks)
        return hooks

    def dumps(self, storage, path):
        raise RuntimeError(
            f"{type(storage).__name__} has no checkpointer; pass checkpointer=... to the storage to save it."
        )

    def loads(self, storage, path):
        raise RuntimeError(
            f"{type(storage).__name__} has no checkpointer; pass checkpointer=... to the storage to load it."
        )


class ListStorageCheckpointer(StorageCheckpointerBase):
    """Saves a :class:`ListStorage`'s items with ``torch.save`` (arbitrary Python objects allowed).

    Loading unpickles the file: only load checkpoints you wrote or trust.

    Examples:
        >>> import tempfile
        >>> from torchrl.data.replay_buffers.storages import ListStorage
        >>> storage = ListStorage(4)
        >>> storage.set(0, "a"); storage.set(1, {"b": 1})
        >>> with tempfile.TemporaryDirectory() as d:
        ...     storage.dumps(d)
        ...     other = ListStorage(4)
        ...     other.loads(d)
        >>> other.get([0, 1])
        ['a', {'b': 1}]
    """

    @staticmethod
    def dumps(storage, path):
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save({"items": list(storage._storage), "max_size": storage.max_size}, path / "list_storage.pt")

    @staticmethod
    def loads(storage, path):
        content = torch.load(Path(path) / "list_storage.pt", weights_only=False)
        storage._storage = list(content["items"])


class CompressedListStorageCheckpointer(StorageCheckpointerBase):
    """Saves a :class:`CompressedListStorage`'s compressed items as they are (no decompression).

    Examples:
        >>> from torchrl.data.replay_buffers.storages import CompressedListStorage
        >>> type(CompressedListStorage(3).checkpointer).__name__
        'CompressedListStorageCheckpointer'
    """

    def dumps(self, storage, path):
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(storage.state_dict(), path / "compressed_storage.pt")

    def loads(self, storage, path):
        storage.load_state_dict(torch.load(Path(path) / "compressed_storage.pt", weights_only=False))


class StorageEnsembleCheckpointer(StorageCheckpointerBase):
    """Saves each storage of a :class:`StorageEnsemble` in its own sub-directory ``storage_<i>``.

    Examples:
        >>> from torchrl.data.replay_buffers.storages import StorageEnsemble, LazyTensorStorage
        >>> type(StorageEnsemble(LazyTensorStorage(2), LazyTensorStorage(2)).checkpointer).__name__
        'StorageEnsembleCheckpointer'
    """

    @staticmethod
    def dumps(storage, path: Path):
        path = Path(path)
        for i, sub in enumerate(storage._storages):
            sub.dumps(path / f"storage_{i}")

    @staticmethod
    def loads(storage, path: Path):
        path = Path(path)
        for i, sub in enumerate(storage._storages):
            sub.loads(path / f"storage_{i}")


class TensorStorageCheckpointer(StorageCheckpointerBase):
    """Saves a :class:`TensorStorage`'s written rows as memory-mapped files plus a JSON metadata file.

    TensorDict content is saved with ``TensorDict.memmap``; plain tensors and pytrees with ``torch.save``.
    Loading into an uninitialized lazy storage allocates it; loading into an initialized one copies the
    rows in place (the capacities must agree).

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers.storages import LazyTensorStorage
        >>> storage = LazyTensorStorage(10)
        >>> storage.set(torch.arange(3), TensorDict(obs=torch.arange(3.0), batch_size=[3]))
        >>> with tempfile.TemporaryDirectory() as d:
        ...     storage.dumps(d)
        ...     other = LazyTensorStorage(10)
        ...     other.loads(d)
        >>> other.get(torch.arange(3))["obs"]
        tensor([0., 1., 2.])
    """

    def dumps(self, storage, path):
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        meta = storage._checkpoint_metadata()
        if meta["initialized"]:
            data = storage._written_rows()
            for hook in self._hooks("_save_hooks"):
                data = _call_hook(hook, data, meta)
            if is_tensor_collection(data):
                meta["kind"] = "tensordict"
                data.memmap(path / "storage", num_threads=0, copy_existing=True)
            else:
                meta["kind"] = "tensor" if isinstance(data, torch.Tensor) else "pytree"
                torch.save(data, path / "storage.pt")
        save_json(meta, path / _META)

    def loads(self, storage, path):
        path = Path(path)
        meta = load_json(path / _META)
        if not meta["initialized"]:
            storage._empty()
            return
        if meta["kind"] == "tensordict":
            data = TensorDict.load_memmap(path / "storage")
        else:
            data = torch.load(path / "storage.pt", weights_only=meta["kind"] == "tensor")
        for hook in self._hooks("_load_hooks"):
            data = _call_hook(hook, data, meta)
        storage._restore_content(data, meta)


def _call_hook(hook: Callable, data: Any, meta: dict) -> Any:
    if isinstance(hook, TED2Flat):
        hook.shift = meta.get("cursor", 0)
        hook.is_full = meta.get("is_full", False)
    out = hook(data)
    return data if out is None else out


class FlatStorageCheckpointer(TensorStorageCheckpointer):
    """Saves TED-formatted content in the "flat" layout: every observation once (see :class:`TED2Flat`).

    Examples:
        >>> from torchrl.data.replay_buffers.checkpointers import FlatStorageCheckpointer
        >>> ckpt = FlatStorageCheckpointer()
        >>> len(ckpt._save_hooks), len(ckpt._load_hooks)
        (1, 1)
    """

    def __init__(self, done_keys=None, reward_keys=None):
        super().__init__()
        kwargs = {}
        if done_keys is not None:
            kwargs["done_keys"] = done_keys
        if reward_keys is not None:
            kwargs["reward_keys"] = reward_keys
        self._save_hooks = [self._save_hook_cls(**kwargs)]
        self._load_hooks = [self._load_hook_cls(**kwargs)]

    _save_hook_cls = TED2Flat
    _load_hook_cls = Flat2TED


class NestedStorageCheckpointer(FlatStorageCheckpointer):
    """Like :class:`FlatStorageCheckpointer`, with one nested entry per trajectory (see :class:`TED2Nested`).

    Examples:
        >>> from torchrl.data.replay_buffers.checkpointers import NestedStorageCheckpointer
        >>> type(NestedStorageCheckpointer()._save_hooks[0]).__name__
        'TED2Nested'
    """

    _save_hook_cls = TED2Nested
    _load_hook_cls = Nested2TED

