"""``LazyStackStorage``: a list storage that returns lazily stacked tensordicts."""
from __future__ import annotations

from typing import Any

import torch
from tensordict import LazyStackedTensorDict, is_tensor_collection

from torchrl.data.replay_buffers._utils import INT_CLASSES
from torchrl.data.replay_buffers.storages._list_storage import ListStorage


class LazyStackStorage(ListStorage):
    """A :class:`ListStorage` whose batched reads are lazy stacks of the stored tensordicts.

    Useful for elements of different shapes (e.g. trajectories of different lengths): they are stored as
    they are and stacked without copy when read.

    Args:
        max_size (int, optional): the capacity. ``None`` means unbounded.

    Keyword Args:
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.
        stack_dim (int, optional): the dimension of the lazy stack. Defaults to ``0``.
        device (torch.device, optional): where read elements are moved.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import ReplayBuffer, LazyStackStorage
        >>> rb = ReplayBuffer(storage=LazyStackStorage(10), batch_size=2)
        >>> _ = rb.add(TensorDict(obs=torch.zeros(3), batch_size=[3]))
        >>> _ = rb.add(TensorDict(obs=torch.zeros(5), batch_size=[5]))
        >>> rb.storage.get([0, 1]).shape
        torch.Size([2, -1])
    """

    def __init__(
        self,
        max_size: int | None = None,
        *,
        compilable: bool = False,
        stack_dim: int = 0,
        device: torch.device | str | int | None = None,
    ):
        super().__init__(max_size, compilable=compilable, device=device)
        self.stack_dim = stack_dim

    def get(self, index: int | Any) -> Any:
        out = super().get(index)
        if isinstance(index, INT_CLASSES) or not isinstance(out, list):
            return out
        if out and all(is_tensor_collection(x) for x in out):
            return LazyStackedTensorDict.lazy_stack(out, dim=self.stack_dim)
        return out
