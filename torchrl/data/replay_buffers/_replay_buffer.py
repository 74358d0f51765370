"""``ReplayBuffer``: a storage, a sampler, a writer and optional transforms, composed."""
from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import torch
from tensordict import NestedKey, TensorDictBase, is_tensor_collection

from torchrl._utils._deprecation import warn_once
from torchrl.data.replay_buffers import _buffer_ops as ops
from torchrl.data.replay_buffers._compact import CompactObservations
from torchrl.data.replay_buffers._transforms import BufferTransform, make_transform
from torchrl._utils._atomic import atomic_directory
from torchrl.data.replay_buffers._utils import INT_CLASSES, resolve_checkpoint
from torchrl.data.replay_buffers._conditional import ConditionalUpdateResult, update_if_present
from torchrl.data.replay_buffers.samplers.base import Sampler
from torchrl.data.replay_buffers.samplers.random import RandomSampler
from torchrl.data.replay_buffers.storages.base import Storage
from torchrl.data.replay_buffers.storages._list_storage import ListStorage
from torchrl.data.replay_buffers.storages._tensor_storage import TensorStorage
from torchrl.data.replay_buffers._trajectories import Trajectory, filter_trajectories
from torchrl.data.replay_buffers.writers.base import Writer
from torchrl.data.replay_buffers.writers.round_robin import RoundRobinWriter


class _BufferMeta(type):
    """Routes construction by service backend (TorchRL's ``use_ray_service`` / ``service_backend``)."""

    def __call__(cls, *args, use_ray_service=False, service_backend=None, service_backend_options=None, **kwargs):
        backend = ops.resolve_service_backend(use_ray_service, service_backend, cls.__name__)
        instance = super().__call__(*args, **kwargs)
        instance._service_backend = backend
        return instance


def _build(component: Any, default: Callable[[], Any]) -> Any:
    if component is None:
        return default()
    if isinstance(component, type) or (callable(component) and not isinstance(component, (Storage, Sampler, Writer))):
        return component()
    return component


class ReplayBuffer(metaclass=_BufferMeta):
    """A generic, composable replay buffer.

    ``extend`` asks the writer where a batch goes and writes it into the storage in one operation;
    ``sample`` asks the sampler for indices (one ``torch.randint`` for uniform sampling) and gathers them
    from the storage (one index operation per leaf). Any data type works with a :class:`ListStorage`;
    tensors and TensorDicts are fastest in a :class:`LazyTensorStorage` or :class:`LazyMemmapStorage`.
    Every public method holds the buffer's lock, so a buffer can be used from several threads.

    Keyword Args:
        storage (Storage or callable, optional): where data lives. Defaults to ``ListStorage(1000)``.
        sampler (Sampler or callable, optional): how batches are drawn. Defaults to :class:`RandomSampler`.
        writer (Writer or callable, optional): where data is written. Defaults to :class:`RoundRobinWriter`.
        collate_fn (callable, optional): applied to what the storage returns. Defaults to stacking list
            storage samples and passing tensor storage samples through.
        pin_memory (bool, optional): pin the CPU tensors of sampled batches, so that moving them to a GPU with
            ``.to(device, non_blocking=True)`` does not block the host (CUDA hosts only: without CUDA it warns
            and does nothing). Samples a storage returns on a GPU are left as they are. Defaults to ``False``.
        prefetch (int, optional): number of batches sampled ahead by background threads (with a CPU storage
            and ``pin_memory=True``, the next batches are gathered and pinned while the GPU works). Defaults
            to ``None`` (no prefetching).
        transform (Transform, callable or list, optional): applied to sampled data; its inverse (``inv``)
            is applied to written data.
        transform_factory (callable, optional): builds ``transform`` (exclusive with it).
        batch_size (int, optional): the default ``sample()`` batch size (required to iterate).
        dim_extend (int, optional): the dimension of the data ``extend`` writes along (e.g. ``1`` for
            ``[env, time]`` batches into a ``[time, env]`` storage). Defaults to ``0``.
        checkpointer (StorageCheckpointerBase, optional): the storage checkpointer.
        generator (torch.Generator, optional): the random generator of the sampler.
        shared (bool, optional): move the storage and the counters to shared memory so that the buffer
            can be passed to other processes. Defaults to ``False``.
        compilable (bool, optional): accepted for API compatibility.
        delayed_init (bool, optional): accepted for API compatibility (components are built eagerly).
        sample_unit (SampleUnit, optional): expands sampled anchors (e.g. :class:`Sequence` windows).
        compact_obs (bool or list of NestedKey, optional): store every observation once and rebuild
            ``("next", obs)`` when sampling, halving observation memory (TensorDict data in a tensor
            storage). ``True`` compacts every root entry also present under ``"next"`` (except done and
            reward entries). Where the next step does not continue the trajectory, the rebuilt entry is NaN.
            Defaults to ``False``.
        use_ray_service, service_backend, service_backend_options: only the direct backend is provided.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(max_size=1000), batch_size=32)
        >>> _ = rb.extend(TensorDict(obs=torch.randn(100, 4), action=torch.randn(100, 2), batch_size=[100]))
        >>> rb.sample().batch_size
        torch.Size([32])
    """

    def __init__(
        self,
        *,
        storage: Storage | Callable[[], Storage] | None = None,
        sampler: Sampler | Callable[[], Sampler] | None = None,
        writer: Writer | Callable[[], Writer] | None = None,
        collate_fn: Callable | None = None,
        pin_memory: bool = False,
        prefetch: int | None = None,
        transform: Any = None,
        transform_factory: Callable | None = None,
        batch_size: int | None = None,
        dim_extend: int | None = None,
        checkpointer: Any = None,
        generator: torch.Generator | None = None,
        shared: bool = False,
        compilable: bool | None = None,
        delayed_init: bool | None = None,
        sample_unit: Any = None,
        compact_obs: bool | Sequence[NestedKey] = False,
    ) -> None:
        if transform is not None and transform_factory is not None:
            raise TypeError(f"{type(self).__name__}: pass transform or transform_factory, not both.")
        if prefetch is not None and prefetch < 0:
            raise ValueError(f"{type(self).__name__}: prefetch must be >= 0, got {prefetch}.")
        self._lock = threading.RLock()
        self._storage = _build(storage, lambda: ListStorage(1000))
        self._sampler = _build(sampler, RandomSampler)
        self._writer = _build(writer, RoundRobinWriter)
        self._writer.register_storage(self._storage)
        self._storage.attach(self)
        if checkpointer is not None:
            self._storage.checkpointer = _build(checkpointer, lambda: None)
        self._custom_collate = collate_fn is not None
        # a tensor storage returns its stored structure (a list there is a pytree, not a list of samples)
        self._stack_lists = not isinstance(self._storage, TensorStorage)
        self._collate_fn = collate_fn if collate_fn is not None else ops.default_collate
        if pin_memory and not torch.cuda.is_available():
            warn_once(f"{type(self).__name__}: pin_memory=True has no effect without CUDA.", category=UserWarning)
            pin_memory = False
        self._pin_memory = pin_memory
        self._background = ops.BackgroundWork(prefetch)
        self._transform = make_transform(transform_factory() if transform_factory is not None else transform)
        self._batch_size = batch_size
        self._dim_extend = 0 if dim_extend is None else dim_extend
        self._sample_unit = sample_unit
        self._compact = CompactObservations(compact_obs) if compact_obs else None
        self._compilable = bool(compilable)
        self._shared = False
        self._service_backend = "direct"
        if generator is not None:
            self.set_rng(generator)
        if shared:
            self.share(True)

    # ---------------------------------------------------------------- components
    @property
    def storage(self) -> Storage:
        return self._storage

    @property
    def sampler(self) -> Sampler:
        return self._sampler

    @property
    def writer(self) -> Writer:
        return self._writer

    @property
    def transform(self) -> BufferTransform:
        """The buffer's transforms: a ``Compose`` run on sampled data (and inverted on written data)."""
        if self._transform is None:
            self._transform = BufferTransform()
        return self._transform

    @property
    def batch_size(self) -> int | None:
        return self._batch_size

    @property
    def dim_extend(self) -> int:
        return self._dim_extend

    @property
    def write_count(self) -> int:
        """The number of elements written since creation (or since ``empty()``)."""
        return getattr(self._writer, "_write_count", len(self._storage))

    @property
    def initialized(self) -> bool:
        return getattr(self._storage, "initialized", True)

    @property
    def service_backend(self) -> str:
        return self._service_backend

    @property
    def is_alive(self) -> bool:
        return self._background.alive

    def set_storage(self, storage: Storage, collate_fn: Callable | None = None):
        with self._lock:
            self._storage = storage
            self._stack_lists = not isinstance(storage, TensorStorage)
            self._writer.register_storage(storage)
            storage.attach(self)
            if collate_fn is not None:
                self._collate_fn, self._custom_collate = collate_fn, True

    def set_sampler(self, sampler: Sampler):
        with self._lock:
            self._sampler = sampler

    def set_writer(self, writer: Writer):
        with self._lock:
            self._writer = writer
            writer.register_storage(self._storage)

    def set_rng(self, generator) -> None:
        """Uses ``generator`` for every random draw of the buffer's components."""
        self._rng = generator
        for component in (self._storage, self._sampler, self._writer):
            component._rng = generator

    def append_transform(self, transform: Any, *, invert: bool = False) -> ReplayBuffer:
        """Appends ``transform``; with ``invert=True`` it runs on writes and its ``inv`` on reads."""
        self.transform.append(transform, invert=invert)
        return self

    def insert_transform(self, index: int, transform: Any, *, invert: bool = False) -> ReplayBuffer:
        """Inserts ``transform`` at position ``index`` of the transform chain."""
        self.transform.insert(index, transform, invert=invert)
        return self

    # ---------------------------------------------------------------- writes
    def _inverse(self, data: Any) -> Any:
        """The data to write after the inverse transforms; ``None`` when they left nothing to write."""
        transform = self._transform
        if transform is not None and transform.has_inverse:
            data = ops.apply_transform(transform, data, inverse=True)
            if ops.nothing_to_write(data):
                return None
        if self._compact is not None:
            data = self._compact.strip(data)
        return data

    def _notify_others(self, index: Any) -> None:
        for entity in self._storage._attached_entities:
            if entity is not self:
                entity.mark_update(index)

    # ReplayBuffer.add hands a TensorDict to the inverse transforms with a trailing dim of 1 (as TorchRL, so
    # that time-window transforms such as MultiStepTransform see one frame); TensorDictReplayBuffer does not.
    _add_unsqueezes = True

    def add(self, data: Any) -> int | torch.Tensor:
        """Writes one element; returns its index.

        When the inverse transforms leave nothing to write (``MultiStepTransform`` waiting for ``n_steps + 1``
        frames), nothing is written and an empty ``(0, storage.ndim)`` index tensor is returned.
        """
        transform = self._transform
        if self._add_unsqueezes and transform is not None and transform.has_inverse and is_tensor_collection(data):
            data = self._inverse(data.unsqueeze(-1))
            if data is not None and data.shape[-1] == 1:
                data = data.squeeze(-1)
        else:
            data = self._inverse(data)
        if data is None:
            return ops.no_index(self._storage)
        with self._lock:
            index = self._writer.add(data)
            if index is not None:
                self._record_write(index)
                self._notify_others(index)
        return index

    def extend(self, data: Sequence, *, update_priority: bool | None = None) -> torch.Tensor:
        """Writes a batch of elements (along ``dim_extend``); returns their indices."""
        if self._dim_extend:
            data = ops.transpose_for_extend(data, self._dim_extend)
        if self._transform is not None or self._compact is not None:
            data = self._inverse(data)
            if data is None:  # the inverse transforms kept everything back (as TorchRL: no write)
                return ops.no_index(self._storage)
        with self._lock:
            index = self._writer.extend(data)
            if index is not None and index.numel():
                self._record_writes(index)
                if len(self._storage._attached_entities) > 1:
                    self._notify_others(index)
        return index

    def _record_write(self, index: int) -> None:
        """Sampler bookkeeping after ``add`` wrote at ``index``."""
        self._sampler.add(index)

    def _record_writes(self, index: torch.Tensor) -> None:
        """Sampler bookkeeping after ``extend`` wrote at ``index`` (rows of the storage)."""
        if self._storage.ndim > 1:
            index = ops.flat_element_index(self._storage, index)
        self._sampler.extend(index)

    def __setitem__(self, index, value) -> None:
        with self._lock:
            self._storage.set(index, value, set_cursor=False)
            self._sampler.mark_update(index, storage=self._storage)

    def write_all(self, data: Any, end: int | None = None) -> None:
        """Replaces the whole content with ``data`` (its first ``end`` elements), in order."""
        with self._lock:
            self.empty(empty_write_count=False)
            self.extend(data if end is None else data[:end])

    def mark_update(self, index: int | torch.Tensor) -> None:
        """Tells the sampler that the elements at ``index`` changed (e.g. written through another buffer)."""
        self._sampler.mark_update(index, storage=self._storage)

    def empty(self, empty_write_count: bool = True):
        """Forgets the content (and the sampler state); keeps allocated memory."""
        with self._lock:
            self._writer._empty()  # first: an ImmutableDatasetWriter refuses, leaving the content as it is
            self._background.drop_queue()
            self._storage._empty()
            self._sampler._empty()
            if empty_write_count and hasattr(self._writer, "_write_count"):
                self._writer._write_count = 0

    # ---------------------------------------------------------------- reads
    def __len__(self) -> int:
        return len(self._storage)

    def _batch(self, batch_size: int | None) -> int:
        if batch_size is None:
            batch_size = self._batch_size
            if batch_size is None:
                raise RuntimeError(
                    f"{type(self).__name__}.sample: no batch size; pass sample(batch_size) or build the buffer "
                    "with batch_size=..."
                )
        elif self._batch_size is not None and batch_size != self._batch_size:
            warn_once(
                f"{type(self).__name__}: sampling with batch_size={batch_size} while the buffer was built with "
                f"batch_size={self._batch_size}; the call's value is used.",
                category=UserWarning,
            )
        return batch_size

    def _sample(self, batch_size: int) -> tuple[Any, dict]:
        with self._lock:
            index, info = self._sampler.sample(self._storage, batch_size)
            if self._sample_unit is not None:
                index, info = self._sample_unit.expand(index, info, self._storage)
            info["index"] = index
            data = self._storage.get(index)
            if self._compact is not None:
                data = self._compact.rebuild(data, index, self._storage)
            if self._writer.tracks_generations:
                info["index_generation"] = self._writer.generations_of(index)
        if self._custom_collate or (type(data) is list and self._stack_lists):
            data = self._collate_fn(data)
        if self._transform is not None and len(self._transform):
            data = ops.apply_transform(self._transform, data, inverse=False)
        if self._pin_memory:
            data = ops.pin_cpu_memory(data)
        return data, info

    def _sample_maybe_prefetched(self, batch_size: int | None) -> tuple[Any, dict]:
        batch_size = self._batch(batch_size)
        if self._background.prefetch:
            return self._background.next_sample(self._sample, batch_size)
        return self._sample(batch_size)

    def sample(self, batch_size: int | None = None, return_info: bool = False) -> Any:
        """Draws a batch; with ``return_info=True`` returns ``(batch, info)`` (``info["index"]``, weights...)."""
        data, info = self._sample_maybe_prefetched(batch_size)
        return (data, info) if return_info else data

    def next(self):
        """The next batch (``sample()``), for contexts where iteration is not available."""
        return self.sample()

    def can_sample(self, batch_size: int | None = None) -> bool:
        """Whether ``sample(batch_size)`` can succeed now."""
        return self._sampler.can_sample(self._storage, batch_size if batch_size is not None else self._batch(None))

    def __iter__(self) -> Iterator[Any]:
        if self._batch_size is None:
            raise RuntimeError(
                f"Cannot iterate over {type(self).__name__}: build it with batch_size=... to define the batches."
            )
        if self._sampler.ran_out:
            self._sampler.ran_out = False
        while not self._sampler.ran_out or self._background.queue:
            yield self.sample()
            if self._background.prefetch and self._sampler.ran_out:
                self._background.drop_queue()
                break

    def __getitem__(self, *args, **kwargs):
        (index,) = args
        if isinstance(index, INT_CLASSES) and not -len(self) <= index < len(self):
            raise IndexError(f"{type(self).__name__}: index {index} is out of range for {len(self)} elements.")
        if isinstance(index, slice):  # a slice covers the stored elements only, not the storage's capacity
            index = slice(*index.indices(len(self)))
        with self._lock:
            data = self._storage.get(index)
        if self._custom_collate or (type(data) is list and self._stack_lists):
            data = self._collate_fn(data)
        if self._transform is not None and len(self._transform):
            data = ops.apply_transform(self._transform, data, inverse=False)
        return data

    def read_all_in_order(self, end: int | None = None) -> Any:
        """The content from the oldest to the newest element (the first ``end`` of them)."""
        with self._lock:
            rows = ops.chronological_index(self)
            if end is not None:
                rows = rows[:end]
            data = self._storage.get(rows)
        return self._collate_fn(data) if (self._custom_collate or (type(data) is list and self._stack_lists)) else data

    def query(self, predicate=None, *, trajectory_key: NestedKey | None = None) -> list[Trajectory]:
        """The stored trajectories (in order) for which ``predicate(trajectory)`` holds."""
        return filter_trajectories(self.read_all_in_order(), predicate, trajectory_key=trajectory_key)

    # ---------------------------------------------------------------- priorities and in-place edits
    def update_priority(self, index: int | torch.Tensor | tuple[torch.Tensor], priority: int | torch.Tensor) -> None:
        """Sets the priorities of the elements at ``index`` (prioritized samplers only)."""
        if isinstance(index, torch.Tensor) and self._storage.ndim > 1 and index.ndim == 2:
            index = tuple(index.unbind(-1))
        with self._lock:
            self._sampler.update_priority(index, priority, storage=self._storage)

    def _stored_rows(self) -> TensorDictBase:
        content = self._storage._written_rows() if hasattr(self._storage, "_written_rows") else None
        if not isinstance(content, TensorDictBase):
            raise RuntimeError(f"{type(self).__name__}: in-place edits need a TensorStorage of TensorDicts.")
        return content

    def set_(self, key, value):
        """Overwrites the stored entry ``key`` of every element with ``value`` (shape ``[len, ...]``)."""
        with self._lock:
            self._stored_rows().set_(key, value)
            self._storage._version += 1

    def set_at_(self, key, value, index):
        """Overwrites the stored entry ``key`` of the elements at ``index``."""
        with self._lock:
            self._stored_rows().set_at_(key, value, index)
            self._storage._version += 1

    def update_(self, input_dict_or_td, clone=False, *, keys_to_update=None):
        """Overwrites stored entries from ``input_dict_or_td`` (shape ``[len]``)."""
        with self._lock:
            self._stored_rows().update_(input_dict_or_td, clone=clone, keys_to_update=keys_to_update)
            self._storage._version += 1

    def update_if_present(
        self,
        *,
        index: torch.Tensor,
        generation: torch.Tensor,
        patch: Mapping[NestedKey, torch.Tensor] | TensorDictBase,
        version_key: NestedKey | None = None,
        version: int | torch.Tensor | None = None,
        require_newer: bool = False,
    ) -> ConditionalUpdateResult:
        """Writes ``patch`` into the sampled elements that were not overwritten since they were sampled.

        ``generation`` is ``info["index_generation"]`` of the sample (the writer must track generations).
        With ``version_key``, an element is also left alone when its stored version is newer than
        ``version`` (or not older, with ``require_newer=True``).
        """
        with self._lock:
            return update_if_present(self, index, generation, patch, version_key, version, require_newer)

    def submit_update_if_present(
        self,
        *,
        index: torch.Tensor,
        generation: torch.Tensor,
        patch: Mapping[NestedKey, torch.Tensor] | TensorDictBase,
        version_key: NestedKey | None = None,
        version: int | torch.Tensor | None = None,
        require_newer: bool = False,
    ) -> Future[ConditionalUpdateResult]:
        """:meth:`update_if_present` run by a background thread; returns its ``Future``."""
        return self._background.submit(
            self.update_if_present, index=index, generation=generation, patch=patch, version_key=version_key,
            version=version, require_newer=require_newer,
        )

    # ---------------------------------------------------------------- service lifecycle
    def client(self) -> ReplayBuffer:
        """The handle workers use (the buffer itself with the direct backend)."""
        return self

    @classmethod
    def as_remote(cls, remote_config=None):
        """A Ray actor class of this buffer (requires the ``ray`` package)."""
        try:
            import ray
        except ImportError as err:
            raise ImportError(f"{cls.__name__}.as_remote requires the 'ray' package (pip install ray).") from err
        return ray.remote(**(remote_config or {"num_cpus": 1}))(cls)

    def start(self) -> ReplayBuffer:
        """(Re)starts the background threads (prefetching, submitted updates)."""
        self._background.restart()
        return self

    def synchronize(self) -> None:
        """Waits for every submitted background update."""
        self._background.synchronize()

    def shutdown(self, timeout: float | None = None) -> None:
        """Stops the background threads; prefetched batches are dropped."""
        self._background.shutdown(timeout)

    def share(self, shared: bool = True) -> ReplayBuffer:
        """Moves content and counters to shared memory, so the buffer can be used by child processes."""
        if shared:
            for component in (self._storage, self._writer, self._sampler):
                if hasattr(component, "_share"):
                    component._share()
            self._shared = True
        return self

    def stats(self) -> dict[str, int | float | bool]:
        return {
            "size": len(self),
            "capacity": self._storage.max_size or -1,
            "write_count": self.write_count,
            "initialized": self.initialized,
            "batch_size": self._batch_size or 0,
            "prefetch": self._background.prefetch,
            "prefetch_queue": len(self._background.queue),
            "shared": self._shared,
            "alive": self.is_alive,
        }

    # ---------------------------------------------------------------- checkpoints
    def dumps(self, path):
        """Saves content, writer cursor, sampler state (priorities) and transforms under ``path``.

        The checkpoint is written to a temporary directory next to ``path`` and swapped in when complete,
        so an interrupted dump leaves the previous checkpoint intact.
        """
        with self._lock, atomic_directory(path) as tmp:
            ops.dump_components(self, Path(tmp))

    def loads(self, path):
        """Restores a checkpoint written by :meth:`dumps`."""
        with self._lock:
            self._background.drop_queue()
            ops.load_components(self, resolve_checkpoint(path))

    def save(self, *args, **kwargs):
        """Deprecated alias of :meth:`dumps`."""
        warn_once(f"{type(self).__name__}.save is deprecated; use dumps instead.")
        return self.dumps(*args, **kwargs)

    def dump(self, *args, **kwargs):
        """Deprecated alias of :meth:`dumps`."""
        warn_once(f"{type(self).__name__}.dump is deprecated; use dumps instead.")
        return self.dumps(*args, **kwargs)

    def load(self, *args, **kwargs):
        """Deprecated alias of :meth:`loads`."""
        warn_once(f"{type(self).__name__}.load is deprecated; use loads instead.")
        return self.loads(*args, **kwargs)

    def register_save_hook(self, hook: Callable[[Any], Any]):
        self._storage.register_save_hook(hook)

    def register_load_hook(self, hook: Callable[[Any], Any]):
        self._storage.register_load_hook(hook)

    def state_dict(self) -> dict[str, Any]:
        return {
            "_storage": self._storage.state_dict(),
            "_sampler": self._sampler.state_dict(),
            "_writer": self._writer.state_dict(),
            "_transforms": self._transform.state_dict() if self._transform is not None else {},
            "_batch_size": self._batch_size,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        with self._lock:
            self._background.drop_queue()
            self._storage.load_state_dict(state_dict["_storage"])
            self._sampler.load_state_dict(state_dict["_sampler"])
            self._writer.load_state_dict(state_dict["_writer"])
            if self._transform is not None:
                self._transform.load_state_dict(state_dict.get("_transforms", {}))
            self._batch_size = state_dict["_batch_size"]

    # ---------------------------------------------------------------- pickling (other processes)
    def __getstate__(self):
        if self._shared and not getattr(self._storage, "initialized", True):
            raise RuntimeError(
                f"{type(self).__name__}(shared=True) must be written to once before it is sent to another "
                "process: a lazy storage allocates its shared memory on the first write."
            )
        state = self.__dict__.copy()
        state.pop("_lock")
        state["_background"] = ops.BackgroundWork(self._background.prefetch)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.RLock()
        self._storage.attach(self)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(storage={self._storage!r}, sampler={self._sampler!r}, "
            f"writer={self._writer!r}, batch_size={self._batch_size})"
        )

