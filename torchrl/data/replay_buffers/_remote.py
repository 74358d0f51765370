"""``RemoteTensorDictReplayBuffer``: a TensorDict replay buffer served to other processes over
``torch.distributed.rpc``."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl.data.replay_buffers._tensordict_replay_buffer import TensorDictReplayBuffer

__all__ = ["RemoteTensorDictReplayBuffer"]


class RemoteTensorDictReplayBuffer(TensorDictReplayBuffer):
    """A :class:`TensorDictReplayBuffer` meant to live in one process of an RPC group and be used from the
    others: build it there with ``rpc.remote(owner, RemoteTensorDictReplayBuffer, kwargs=...)`` and call its
    methods through the ``RRef`` (``rref.rpc_sync().extend(data)`` from collectors, ``rref.rpc_sync().sample()``
    in the trainer, ``state_dict()``/``dumps(path)`` for checkpoints, which then run where the storage is).

    RPC serves calls on a thread pool: every public operation takes the buffer's lock (as any replay buffer
    here does), so concurrent ``extend`` and ``sample`` calls from several processes are safe. Any storage,
    sampler and writer of the local buffer works; called locally it is a plain ``TensorDictReplayBuffer``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage
        >>> rb = RemoteTensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        >>> rb.extend(TensorDict(obs=torch.arange(6.0), batch_size=[6])).tolist()
        [0, 1, 2, 3, 4, 5]
        >>> rb.client() is rb, len(rb), rb.sample().shape
        (True, 6, torch.Size([4]))
    """

    def sample(self, batch_size: int | None = None, include_info: bool | None = None,
               return_info: bool = False) -> TensorDictBase:
        """As :meth:`TensorDictReplayBuffer.sample` (TorchRL's argument order for the remote buffer)."""
        return super().sample(batch_size, return_info=return_info, include_info=include_info)

    def extend(self, tensordicts: list | TensorDictBase, *, update_priority: bool | None = None) -> torch.Tensor:
        """As :meth:`TensorDictReplayBuffer.extend`; a list of TensorDicts (one per step, as a remote collector
        may send) is stacked first."""
        if isinstance(tensordicts, (list, tuple)):
            tensordicts = torch.stack(list(tensordicts))
        return super().extend(tensordicts, update_priority=update_priority)
