"""Small helpers shared by storages, samplers, writers and buffers (no public names)."""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tensordict import is_tensor_collection
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from torchrl._utils._atomic import resolve_directory

INT_CLASSES = (int, np.integer)


def _is_int(index: Any) -> bool:
    return isinstance(index, INT_CLASSES) or (isinstance(index, torch.Tensor) and index.ndim == 0)


def _as_index(index: Any, device: torch.device | str | None = None) -> torch.Tensor:
    """Turns an int, a sequence, an array or a tensor into a 1-d ``long`` tensor."""
    if isinstance(index, torch.Tensor):
        return index.reshape(-1).to(torch.long)
    if isinstance(index, INT_CLASSES):
        return torch.tensor([int(index)], dtype=torch.long, device=device)
    return torch.as_tensor(np.asarray(index), dtype=torch.long, device=device).reshape(-1)


_CPU = torch.device("cpu")


def to_device(tensor: torch.Tensor, device: torch.device | None) -> torch.Tensor:
    """``tensor`` on ``device`` (``None``: the CPU), without making the host wait where it need not.

    Copies to an accelerator are issued with ``non_blocking=True``: the host does not wait for the queued
    kernels (a blocking host-to-device copy synchronises the stream), and kernels that later read the copy run
    after it on the same stream. Copies to the CPU block, because the host reads them next.
    """
    target = _CPU if device is None else device
    if tensor.device == target:
        return tensor
    return tensor.to(target, non_blocking=target.type != "cpu")


def random_on(factory, *args: Any, generator: torch.Generator | None, device: torch.device | None, **kwargs: Any):
    """``factory(*args, generator=generator, device=device)`` (``torch.randint``, ``rand``, ``randperm``...).

    A generator draws on its own device: with a generator on another device than ``device`` (a CPU generator
    for a CUDA storage), the numbers are drawn where the generator lives, so that its stream of numbers is the
    one the user seeded, and the result is moved to ``device`` (see :func:`to_device`). Without a generator,
    or with one on ``device``, the draw is made on ``device`` directly (one kernel, no copy).
    """
    if generator is not None and device is not None and generator.device.type != device.type:
        return to_device(factory(*args, generator=generator, device=generator.device, **kwargs), device)
    return factory(*args, generator=generator, device=device, **kwargs)


def _leading_len(data: Any) -> int:
    """Size of the first dimension of a tensor, a tensor collection, a pytree of tensors or a sequence."""
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        if not data.shape:
            raise ValueError(
                "extend() expects data with a leading batch dimension, got a 0-dimensional "
                f"{type(data).__name__}; use add() to write a single element."
            )
        return data.shape[0]
    if isinstance(data, dict):
        return _leading_len(next(iter(data.values())))
    if isinstance(data, np.ndarray):
        return data.shape[0]
    return len(data)


def _tree_leading_len(data: Any) -> int:
    """Size of the first dimension of a pytree of tensors (a tuple, a dict, ...): that of its first leaf."""
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        return _leading_len(data)
    for leaf in tree_flatten(data)[0]:
        if isinstance(leaf, torch.Tensor) or is_tensor_collection(leaf):
            if not leaf.shape:
                raise ValueError(
                    f"extend() expects every tensor of the {type(data).__name__} to have a leading batch dimension, "
                    "got a 0-dimensional tensor; use add() to write a single element."
                )
            return leaf.shape[0]
    raise TypeError(
        f"extend(): a tensor storage stores tensors, TensorDicts or pytrees (tuples, dicts, lists) of tensors; "
        f"got a {type(data).__name__} without any tensor. Use a ListStorage for other Python objects."
    )


def _tree_slice(data: Any, index: Any) -> Any:
    """``data[index]`` along the leading dimension of a tensor, a tensor collection or every leaf of a pytree."""
    if isinstance(data, torch.Tensor) or is_tensor_collection(data):
        return data[index]
    return tree_map(lambda x: x[index], data)


def stack_elements(items: list, where: str) -> Any:
    """Stacks a list of elements of one structure (tensors, TensorDicts or pytrees of them) into one batch.

    Raises ``RuntimeError`` naming the first element whose structure or shapes differ from the first one's.
    """
    if not items:
        raise RuntimeError(f"{where}: cannot write an empty list.")
    first = items[0]
    try:
        if isinstance(first, torch.Tensor) or is_tensor_collection(first):
            return torch.stack(items)
        leaves, spec = tree_flatten(first)
        columns = [[leaf] for leaf in leaves]
        for i, item in enumerate(items[1:], 1):
            item_leaves, item_spec = tree_flatten(item)
            if item_spec != spec:
                raise RuntimeError(f"element {i} has the structure {item_spec}, element 0 has {spec}")
            for column, leaf in zip(columns, item_leaves):
                column.append(leaf)
        return tree_unflatten([torch.stack(column) for column in columns], spec)
    except (RuntimeError, TypeError) as err:
        raise RuntimeError(
            f"{where}: stacking the elements of the list failed ({err}). A tensor storage stacks a list into one "
            "batch: every element must have the same structure and tensors of the same shapes. Use a ListStorage "
            "(or LazyStackStorage) for elements of different shapes."
        ) from err


def _under_next(key: Any) -> tuple:
    return ("next", *key) if isinstance(key, tuple) else ("next", key)


def _replace_last(key: Any, new: str) -> Any:
    return (*key[:-1], new) if isinstance(key, tuple) else new


def _key_str(key: Any) -> str:
    return repr(key if not isinstance(key, tuple) or len(key) > 1 else key[0])


def save_json(obj: dict, path: Path) -> None:
    with open(path, "w") as f:
        json.dump(obj, f)


def load_json(path: Path) -> dict:
    with open(path) as f:
        return json.load(f)


def ravel_index(index: tuple[torch.Tensor, ...], shape: torch.Size | tuple[int, ...]) -> torch.Tensor:
    """Flat positions of the coordinates ``index`` in a row-major array of shape ``shape``."""
    flat = index[0].to(torch.long)
    for coord, size in zip(index[1:], shape[1:]):
        flat = flat * size + coord
    return flat


def unravel_index(flat: torch.Tensor, shape: torch.Size | tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """Coordinates of the flat positions ``flat`` in a row-major array of shape ``shape``."""
    coords = []
    for size in reversed(shape[1:]):
        coords.append(flat % size)
        flat = flat // size
    coords.append(flat)
    return tuple(reversed(coords))


def resolve_checkpoint(path: str | Path) -> Path:
    """The directory holding the checkpoint saved at ``path`` (its backup if a swap was interrupted).

    Temporaries left by dead writers of the same checkpoint are removed on the way.
    """
    found = resolve_directory(path)
    if found is None:
        raise FileNotFoundError(f"No replay-buffer checkpoint found at {str(Path(path).expanduser().absolute())!r}.")
    return found


# ---------------------------------------------------------------------------- large preallocations
_HUGE_PAGE = 2 * 1024 * 1024
_MADV_HUGEPAGE = 14  # Linux
_libc: Any = None


def _madvise_hugepages(tensor: torch.Tensor) -> None:
    """Asks Linux to back ``tensor`` (not yet touched) with 2 MB pages; silently does nothing elsewhere."""
    global _libc
    if not sys.platform.startswith("linux"):
        return
    if _libc is None:
        try:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        except OSError:
            _libc = False
    if not _libc:
        return
    start = -(tensor.data_ptr() // -_HUGE_PAGE) * _HUGE_PAGE
    end = (tensor.data_ptr() + tensor.numel() * tensor.element_size()) // _HUGE_PAGE * _HUGE_PAGE
    if end > start:
        _libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_HUGEPAGE)


def preallocate_zeros(shape: tuple, dtype: torch.dtype, device: torch.device | str | None = None) -> torch.Tensor:
    """``torch.zeros(shape)``; large CPU tensors are backed by huge pages when the OS allows it.

    Replay buffers read random rows of large preallocated tensors: with 4 kB pages every row read is a TLB
    miss, so sampling from 10M elements costs about twice as much as from 100k. With 2 MB pages the cost
    stays flat.
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    numel = 1
    for size in shape:
        numel *= size
    if device.type != "cpu" or numel * torch.empty((), dtype=dtype).element_size() < 4 * _HUGE_PAGE:
        return torch.zeros(shape, dtype=dtype, device=device)
    tensor = torch.empty(shape, dtype=dtype, device=device)
    _madvise_hugepages(tensor)
    return tensor.zero_()
