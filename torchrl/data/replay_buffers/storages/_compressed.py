"""``CompressedListStorage``: a list storage that keeps every element compressed in memory."""
from __future__ import annotations

import pickle
import zlib
from typing import Any, Callable, Sequence

import numpy as np
import torch
from tensordict import TensorDict, is_tensor_collection

from torchrl.data.replay_buffers._utils import INT_CLASSES
from torchrl.data.replay_buffers.storages._checkpointers import CompressedListStorageCheckpointer
from torchrl.data.replay_buffers.storages._list_storage import ListStorage, _positions


class CompressedListStorage(ListStorage):
    """Stores each element compressed (``zlib`` by default) and decompresses it when read.

    Tensors and tensordicts are compressed leaf by leaf (their dtype and shape are kept aside); other
    objects are pickled then compressed. Trades CPU time for memory: useful for large, compressible
    observations such as images.

    Args:
        max_size (int): the capacity.

    Keyword Args:
        compression_fn (callable, optional): ``tensor -> compressed object``. Must be given together with
            ``decompression_fn``. Defaults to ``zlib`` on the tensor's bytes.
        decompression_fn (callable, optional): ``compressed object -> tensor``.
        compression_level (int, optional): the ``zlib`` level (0-9) of the default compression.
            Defaults to ``3``.
        device (torch.device, optional): where read tensors are placed. Defaults to ``"cpu"``.
        compilable (bool, optional): accepted for API compatibility. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.replay_buffers import ReplayBuffer, CompressedListStorage
        >>> rb = ReplayBuffer(storage=CompressedListStorage(10), batch_size=2)
        >>> _ = rb.extend(TensorDict(pixels=torch.zeros(4, 64, 64, dtype=torch.uint8), batch_size=[4]))
        >>> rb.storage.bytes() < 4 * 64 * 64
        True
        >>> rb.sample()["pixels"].shape
        torch.Size([2, 64, 64])
    """

    _default_checkpointer = CompressedListStorageCheckpointer

    def __init__(
        self,
        max_size: int,
        *,
        compression_fn: Callable | None = None,
        decompression_fn: Callable | None = None,
        compression_level: int = 3,
        device: torch.device = "cpu",
        compilable: bool = False,
    ):
        if (compression_fn is None) != (decompression_fn is None):
            raise ValueError("CompressedListStorage: pass both compression_fn and decompression_fn, or neither.")
        super().__init__(max_size, compilable=compilable, device=device)
        self.compression_level = compression_level
        self._compress_tensor = compression_fn or self._zlib_compress
        self._decompress_tensor = decompression_fn or self._zlib_decompress

    # ---------------------------------------------------------------- codecs
    def to_bytestream(self, data_to_bytestream: torch.Tensor | np.array | Any) -> bytes:
        """The raw bytes of a tensor or array, or the pickle of any other object."""
        if isinstance(data_to_bytestream, torch.Tensor):
            return data_to_bytestream.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()
        if isinstance(data_to_bytestream, np.ndarray):
            return data_to_bytestream.tobytes()
        return pickle.dumps(data_to_bytestream)

    def _zlib_compress(self, tensor: torch.Tensor) -> tuple:
        raw = self.to_bytestream(tensor.reshape(-1) if tensor.ndim == 0 else tensor)
        return zlib.compress(raw, self.compression_level), tensor.dtype, tuple(tensor.shape)

    @staticmethod
    def _zlib_decompress(packed: tuple) -> torch.Tensor:
        raw, dtype, shape = packed
        buffer = bytearray(zlib.decompress(raw))
        flat = torch.frombuffer(buffer, dtype=torch.uint8) if buffer else torch.empty(0, dtype=torch.uint8)
        return flat.view(dtype).reshape(shape)

    def _compress(self, item: Any) -> tuple:
        if isinstance(item, torch.Tensor):
            return ("tensor", self._compress_tensor(item))
        if is_tensor_collection(item):
            leaves = {key: self._compress_tensor(value) for key, value in item.items(True, True)}
            return ("tensordict", leaves, tuple(item.batch_size))
        return ("object", zlib.compress(pickle.dumps(item), self.compression_level))

    def _decompress(self, packed: tuple) -> Any:
        kind = packed[0]
        if kind == "tensor":
            return self._decompress_tensor(packed[1]).to(self.device)
        if kind == "tensordict":
            out = TensorDict(batch_size=packed[2], device=self.device)
            for key, value in packed[1].items():
                out.set(key, self._decompress_tensor(value))
            return out
        return pickle.loads(zlib.decompress(packed[1]))

    # ---------------------------------------------------------------- storage interface
    def set(self, cursor: int | Sequence[int] | slice, data: Any, *, set_cursor: bool = True):
        if isinstance(cursor, INT_CLASSES):
            return super().set(cursor, self._compress(data), set_cursor=set_cursor)
        if isinstance(cursor, slice):
            cursor = range(*cursor.indices(max(cursor.stop or 0, len(self._storage))))
        positions = _positions(cursor)
        for i in sorted(range(len(positions)), key=positions.__getitem__):
            super().set(positions[i], self._compress(data[i]), set_cursor=set_cursor)

    def get(self, index: int | Sequence[int] | slice) -> Any:
        if isinstance(index, INT_CLASSES) or (isinstance(index, torch.Tensor) and index.ndim == 0):
            return self._decompress(self._storage[int(index)])
        if isinstance(index, slice):
            return [self._decompress(x) for x in self._storage[index]]
        if isinstance(index, tuple):
            index = index[0]
        return [self._decompress(self._storage[i]) for i in _positions(index)]

    def __len__(self) -> int:
        return len(self._storage)

    def bytes(self) -> int:
        """The number of compressed bytes held."""
        total = 0
        for packed in self._storage:
            if packed[0] == "tensor":
                total += _packed_size(packed[1])
            elif packed[0] == "tensordict":
                total += sum(_packed_size(v) for v in packed[1].values())
            else:
                total += len(packed[1])
        return total

    def state_dict(self) -> dict[str, Any]:
        return {"_storage": list(self._storage), "compression_level": self.compression_level}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._storage = list(state_dict["_storage"])


def _packed_size(packed: Any) -> int:
    if isinstance(packed, tuple) and packed and isinstance(packed[0], (bytes, bytearray)):
        return len(packed[0])
    if isinstance(packed, (bytes, bytearray)):
        return len(packed)
    if isinstance(packed, torch.Tensor):
        return packed.numel() * packed.element_size()
    return len(pickle.dumps(packed))
