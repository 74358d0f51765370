"""``LazyTensorStorage``: a ``TensorStorage`` allocated from the first data written to it."""
from __future__ import annotations

from typing import Any

import torch
from tensordict import is_tensor_collection
from torch.utils._pytree import tree_flatten, tree_map

from torchrl.data.replay_buffers._utils import preallocate_zeros
from torchrl.data.replay_buffers.storages._layout import IGNORED_KEYS
from torchrl.data.replay_buffers.storages._tensor_storage import TensorStorage, _device_of


class LazyTensorStorage(TensorStorage):
    """A preallocated tensor storage whose layout is taken from the first write.

    The first ``add``/``extend`` allocates room for ``max_size`` elements shaped like the incoming data
    (zeros, on ``device``); every later write must carry the same keys and per-element shapes.

    Args:
        max_size (int): the number of elements the storage holds. With ``ndim > 1`` this counts every
            ``(dim0, dim1, ...)`` element: ``LazyTensorStorage(1000, ndim=2)`` fed ``[time, 4]`` batches has
            room for 250 time steps.

    Keyword Args:
        device (torch.device, optional): where the storage lives; ``"auto"`` takes the first data's
            device. Defaults to ``"cpu"``.
        ndim (int, optional): the number of storage dimensions. Defaults to ``1``.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.
        consolidated (bool, optional): allocate every leaf in one contiguous buffer (cheaper device
            transfers of the whole storage). Defaults to ``False``.
        shared_init (bool, optional): allocate in shared memory (to use the storage across processes).
            Defaults to ``False``.
        cleanup_memmap (bool, optional): accepted for API compatibility; an in-memory storage has no
            files to clean up. Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import TensorDictReplayBuffer, LazyTensorStorage
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8)
        >>> _ = rb.extend(TensorDict(obs=torch.randn(10, 3), batch_size=[10]))
        >>> rb.sample()["obs"].shape
        torch.Size([8, 3])
    """

    def __init__(
        self,
        max_size: int,
        *,
        device: torch.device | str = "cpu",
        ndim: int = 1,
        compilable: bool = False,
        consolidated: bool = False,
        shared_init: bool = False,
        cleanup_memmap: bool = True,
    ):
        super().__init__(None, max_size=max_size, device=device, ndim=ndim, compilable=compilable)
        self.consolidated = consolidated
        self.shared_init = shared_init
        self.cleanup_memmap = cleanup_memmap

    def get(self, indices: slice) -> Any:
        return super().get(indices)

    def _target_device(self, data: Any) -> torch.device:
        if self.device == "auto":
            return _device_of(data) or torch.device("cpu")
        return self.device

    def _init(self, data: Any, single: bool) -> None:
        template = data if single else data[0] if is_tensor_collection(data) else tree_map(lambda x: x[0], data)
        shape = template.shape if (is_tensor_collection(template) or isinstance(template, torch.Tensor)) else None
        if self.ndim > 1:
            inner = shape[: self.ndim - 1] if shape is not None else _first_shape(template)[: self.ndim - 1]
            rows = -(self.max_size // -max(1, _prod(inner)))
        else:
            rows = self.max_size
        self._init_like(template, rows, is_template=True)

    def _init_like(self, data: Any, rows: int, is_template: bool = False) -> None:
        template = data if is_template else (data[0] if is_tensor_collection(data) else tree_map(lambda x: x[0], data))
        if is_tensor_collection(template):
            ignored = [key for key in IGNORED_KEYS if key in template.keys()]
            if ignored:
                template = template.exclude(*ignored)
        storage = self._allocate(template, rows)
        if self.shared_init:
            storage = storage.share_memory_() if is_tensor_collection(storage) else tree_map(
                lambda x: x.share_memory_(), storage
            )
        self._adopt(storage, rows=0)
        if self._shared_rows is not None:
            self._share()

    def _allocate(self, template: Any, rows: int) -> Any:
        device = self._target_device(template)

        def zeros(x: torch.Tensor) -> torch.Tensor:
            return preallocate_zeros((rows, *x.shape), x.dtype, device)

        if is_tensor_collection(template):
            storage = template.apply(zeros, batch_size=[rows, *template.batch_size], device=device)
            _keep_nested_dims(storage, template, rows)
            if self.consolidated:
                storage = storage.consolidate()
            return storage
        if isinstance(template, torch.Tensor):
            return zeros(template)
        return tree_map(zeros, template)


def _keep_nested_dims(storage, template, rows: int) -> None:
    """Gives each nested tensordict of ``storage`` its template's batch dims after the row dim (``apply``
    with a ``batch_size`` gives them the root's): a group ``("agents", ...)`` stored from data of batch size
    ``(T, n_agents)`` comes back as such."""
    nested = [(key, value.batch_size) for key, value in template.items(include_nested=True)
              if is_tensor_collection(value) and len(value.batch_size) > len(template.batch_size)]
    for key, batch_size in sorted(nested, key=lambda kv: len(kv[0]) if isinstance(kv[0], tuple) else 1):
        storage.get(key).batch_size = torch.Size([rows, *batch_size])


def _prod(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def _first_shape(data: Any) -> torch.Size:
    return tree_flatten(data)[0][0].shape
