"""The work behind ``ReplayBuffer``'s methods, as plain functions (the class stays a thin facade)."""
from __future__ import annotations

import collections
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection
from torch.utils._pytree import tree_map

from torchrl._utils._backends import get_service_backend
from torchrl.data.replay_buffers._utils import _leading_len, load_json, save_json, to_device
from torchrl.data.replay_buffers.storages._list_storage import ListStorage

_SERVICE_BACKENDS = ("direct", "local")


def resolve_service_backend(use_ray_service: bool, service_backend: Any, owner: str) -> str:
    backend = service_backend
    if backend is None:
        backend = "ray" if use_ray_service else get_service_backend()
    backend = str(getattr(backend, "value", backend))
    if backend in _SERVICE_BACKENDS:
        return "direct"
    if backend == "ray":
        raise ValueError(
            f"{owner}: service_backend='ray' runs the buffer inside a Ray actor (RayReplayBuffer), which this "
            "implementation does not provide. Use the default direct backend (share the buffer across "
            "processes with shared=True)."
        )
    raise ValueError(f"{owner}: unknown service_backend {backend!r}; expected 'direct' or 'ray'.")


# ---------------------------------------------------------------------------- collation
def stack_anything(items: list) -> Any:
    """Stacks a list of samples read from a list storage: tensors, tensordicts, numbers, tuples, dicts."""
    if not items:
        return items
    first = items[0]
    if isinstance(first, torch.Tensor):
        shape = first.shape
        for x in items:
            if x.shape != shape:
                raise RuntimeError(
                    f"Cannot stack the sampled tensors: their shapes differ ({tuple(shape)} and {tuple(x.shape)}). "
                    "Pass collate_fn=lambda x: x to the ReplayBuffer to get the list of elements, or store "
                    "TensorDicts in a LazyStackStorage."
                )
        return torch.stack(items)
    if is_tensor_collection(first):
        return LazyStackedTensorDict.maybe_dense_stack(items)
    if isinstance(first, (int, float, bool)):
        return torch.tensor(items)
    if type(first) is tuple or type(first) is list:
        return type(first)(stack_anything(list(x)) for x in zip(*items))
    if isinstance(first, dict):
        return {k: stack_anything([x[k] for x in items]) for k in first}
    return items


def default_collate(data: Any) -> Any:
    return stack_anything(data) if type(data) is list else data


# ---------------------------------------------------------------------------- transforms on any data
def apply_transform(transform, data: Any, inverse: bool) -> Any:
    """Runs ``transform`` (or its inverse) on ``data``.

    Plain callables receive the data as it is stored (a tensor, a tuple, a dict...). When the chain holds
    TorchRL transforms, a plain tensor travels under the key ``"data"`` of a TensorDict.
    """
    fn = transform.inv if inverse else transform
    if is_tensor_collection(data) or not transform.needs_tensordict:
        return fn(data)
    batch = data.shape[:1] if isinstance(data, torch.Tensor) and data.ndim else []
    wrapped = TensorDict({"data": data}, batch_size=batch)
    out = fn(wrapped)
    return None if out is None else out.get("data")


def nothing_to_write(data: Any) -> bool:
    """Whether the inverse transforms left nothing to write: ``None`` or a batch with no element.

    ``MultiStepTransform`` returns a zero-length batch (TorchRL's returns ``None``) while it waits for a full
    window; the buffer then skips the write instead of handing the writer an empty batch.
    """
    if data is None:
        return True
    if is_tensor_collection(data):
        return data.batch_dims > 0 and data.batch_size.numel() == 0
    if isinstance(data, torch.Tensor):
        return data.ndim > 0 and data.shape[0] == 0
    return False


def no_index(storage) -> torch.Tensor:
    """The index a skipped write returns: an empty ``(0, storage.ndim)`` int64 tensor (as TorchRL)."""
    return torch.zeros((0, storage.ndim), dtype=torch.long)


def transpose_for_extend(data: Any, dim_extend: int) -> Any:
    """Moves ``dim_extend`` to the front (buffers always write along their first dim)."""
    if dim_extend == 0:
        return data
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        return data.transpose(dim_extend, 0)
    return tree_map(lambda x: x.transpose(dim_extend, 0), data)


def flat_element_index(storage, rows: torch.Tensor) -> torch.Tensor:
    """Row indices of a multi-dim storage -> the flat indices of every element of those rows."""
    inner = getattr(storage, "_inner", 1)
    if inner == 1:
        return rows
    return (rows.unsqueeze(-1) * inner + torch.arange(inner)).reshape(-1)


_MERGED_FLAGS = ("is_init", "terminated")


def info_into_data(data: TensorDictBase, info: dict) -> TensorDictBase:
    """Writes the per-sample info (index, weights, slice flags) into the sampled tensordict.

    Info tensors on another device than the data (CPU indices of a memory-mapped storage whose samples go
    to a GPU) are copied there without blocking the host (``TensorDict.set`` would copy them blocking).
    """
    batch = data.batch_size
    device = data.device
    for key, value in info.items():
        if key == "index" and isinstance(value, tuple):
            value = torch.stack(value, -1)
        if not isinstance(value, torch.Tensor):
            continue
        if device is not None and value.device != device:
            value = to_device(value, device)
        if value.shape[: len(batch)] != batch:
            if value.shape == batch[: value.ndim]:
                value = value.reshape(*value.shape, *([1] * (len(batch) - value.ndim))).expand(
                    *batch, *value.shape[len(batch) :]
                )
            else:
                continue
        if value.dtype is torch.bool and (key if isinstance(key, str) else key[-1]) in _MERGED_FLAGS:
            # slice flags add to the stored ones: real episode starts inside a slice must survive (recurrent
            # modules reset their state on them), and so must stored terminations
            stored = data.get(key, None)
            if isinstance(stored, torch.Tensor) and stored.dtype is torch.bool and stored.numel() == value.numel():
                value = stored | value.reshape(stored.shape)
        data.set(key, value)
    return data


def pin_cpu_memory(data: Any) -> Any:
    """``data`` with its CPU tensors in pinned memory (``pin_memory=True``); tensors elsewhere are left as they are.

    As TorchRL: only CPU samples are pinned (a storage may already return samples on a GPU). Pinned batches
    can be moved to a GPU with ``.to(device, non_blocking=True)`` while the host goes on.
    """
    if isinstance(data, torch.Tensor):
        return data.pin_memory() if data.device.type == "cpu" else data
    if is_tensor_collection(data):
        device = data.device
        if device is not None:
            return data.pin_memory() if device.type == "cpu" else data
        return data.apply(lambda x: x.pin_memory() if x.device.type == "cpu" else x)
    return tree_map(lambda x: pin_cpu_memory(x) if isinstance(x, torch.Tensor) else x, data)


# ---------------------------------------------------------------------------- prefetching and background work
class BackgroundWork:
    """A small thread pool for prefetched samples and submitted updates, created on first use."""

    def __init__(self, prefetch: int | None):
        self.prefetch = prefetch or 0
        self.queue: collections.deque[Future] = collections.deque()
        self.queue_batch_size: int | None = None
        self._executor: ThreadPoolExecutor | None = None
        self.alive = True
        self.pending: list[Future] = []

    def executor(self) -> ThreadPoolExecutor:
        if not self.alive:
            raise RuntimeError("This replay buffer was shut down; create a new one or call start().")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=max(1, self.prefetch), thread_name_prefix="rb")
        return self._executor

    def next_sample(self, sample_fn, batch_size: int):
        if self.queue_batch_size != batch_size:
            self.drop_queue()
            self.queue_batch_size = batch_size
        executor = self.executor()
        while len(self.queue) < self.prefetch:
            self.queue.append(executor.submit(sample_fn, batch_size))
        future = self.queue.popleft()
        self.queue.append(executor.submit(sample_fn, batch_size))
        return future.result()

    def submit(self, fn, *args, **kwargs) -> Future:
        future = self.executor().submit(fn, *args, **kwargs)
        self.pending = [f for f in self.pending if not f.done()]
        self.pending.append(future)
        return future

    def drop_queue(self) -> None:
        while self.queue:
            future = self.queue.popleft()
            if not future.cancel():
                try:
                    future.result()
                except Exception:  # noqa: BLE001 - a prefetched sample that failed is simply discarded
                    pass

    def synchronize(self) -> None:
        for future in list(self.pending):
            future.result()
        self.pending = []

    def shutdown(self, timeout: float | None = None) -> None:
        self.drop_queue()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
        self._executor = None
        self.alive = False

    def restart(self) -> None:
        self.alive = True


# ---------------------------------------------------------------------------- checkpoints
def dump_components(rb, path: Path) -> None:
    rb._storage.dumps(path / "storage")
    rb._sampler.dumps(path / "sampler")
    rb._writer.dumps(path / "writer")
    meta = {"batch_size": rb._batch_size, "class": type(rb).__name__}
    if rb._transform is not None and len(rb._transform):
        torch.save(rb._transform.state_dict(), path / "transforms.pt")
    save_json(meta, path / "buffer_metadata.json")


def load_components(rb, path: Path) -> None:
    meta = load_json(path / "buffer_metadata.json")
    rb._storage.loads(path / "storage")
    rb._sampler.loads(path / "sampler")
    rb._writer.loads(path / "writer")
    if (path / "transforms.pt").exists() and rb._transform is not None:
        rb._transform.load_state_dict(torch.load(path / "transforms.pt", weights_only=False))
    rb._batch_size = meta["batch_size"]


# ---------------------------------------------------------------------------- ordered reads
def chronological_index(rb) -> torch.Tensor:
    """Storage rows from the oldest to the newest (round-robin storages)."""
    storage = rb._storage
    rows = getattr(storage, "_rows", len(storage))
    capacity = storage._max_size_along_dim0() if not isinstance(storage, ListStorage) or storage.max_size else rows
    cursor = getattr(rb._writer, "_cursor", rows)
    if rows < capacity or cursor % max(rows, 1) == 0:
        return torch.arange(rows)
    return (torch.arange(rows) + cursor) % rows


def leading_len(data: Any) -> int:
    return _leading_len(data)

