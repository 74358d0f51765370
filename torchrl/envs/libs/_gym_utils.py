"""Per-step conversion plans between gym data (numpy, Python numbers, dicts, tuples) and torch.

Everything that can be decided from a space and its spec is decided once, when the plan is built; what
runs per step is one closure per leaf:

- :func:`obs_reader` turns an observation into a tensor (or a dict of them, for ``Dict``/``Tuple``
  spaces whose spec is a ``Composite``). Values are always copied: gym envs may hand out the same
  buffer again on the next step, and a rollout keeps every step's tensors.
- :func:`action_writer` turns the action tensor (or TensorDict, for ``Dict`` action spaces) into what
  ``env.step`` expects: ``int`` for a single ``Discrete`` space, numpy arrays otherwise.

``nb`` is the number of batch dims in the data (0 for a single env, 1 for a vector env).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack

from torchrl._utils._optional import has_module
from torchrl._fast import fast_get
from torchrl.data.tensor_specs import Composite, MultiOneHot, NonTensor, OneHot, TensorSpec
from torchrl.envs.libs._gym_specs import torch_to_numpy_dtype

__all__ = ["space_kind", "obs_reader", "action_writer", "copy_tree", "set_rows"]

#: Optional-library availability flags (TorchRL's names), found without importing the libraries.
_has_gym = has_module("gym")
_has_gymnasium = has_module("gymnasium")

_KINDS = ("Box", "Discrete", "MultiDiscrete", "MultiBinary", "Dict", "Tuple", "Text")
_from_numpy = torch.from_numpy


def space_kind(space: Any) -> str | None:
    """The built-in gym space class ``space`` is (or derives from), by name; ``None`` for others."""
    for klass in type(space).__mro__:
        if klass.__name__ in _KINDS and klass.__module__.split(".")[0] in ("gymnasium", "gym"):
            return klass.__name__
    return None


def _start(space: Any) -> Any:
    start = getattr(space, "start", 0)
    if isinstance(start, np.ndarray):
        return start if start.any() else 0
    return int(start)


# ----------------------------------------------------------------------------------------------- observations
def _np_stage(space: Any, nb: int) -> Callable[[Any], np.ndarray]:
    """raw leaf → numpy array in "value form" (indices for discrete spaces, ``start`` removed)."""
    kind = space_kind(space)
    if kind in ("Discrete", "MultiDiscrete"):
        start = _start(space)
        if isinstance(start, np.ndarray) or start:
            return lambda x: np.asarray(x) - start
    if kind == "Tuple":
        stages = [_np_stage(s, nb) for s in space.spaces]
        return lambda x: np.stack([f(v) for f, v in zip(stages, x)], axis=nb)
    return np.asarray


def _reshape(a: np.ndarray, shape: tuple) -> np.ndarray:
    try:
        return a.reshape(shape)
    except ValueError:
        raise ValueError(
            f"GymWrapper: the env returned an observation of shape {a.shape}, which does not fit the shape "
            f"{shape} of its observation space (with the batch dims); check the env's observation_space."
        ) from None


def _value_encoder(spec: TensorSpec) -> Callable[[Any], torch.Tensor]:
    np_dtype = torch_to_numpy_dtype(spec.dtype)
    shape = tuple(spec.shape)

    def encode(x: Any) -> torch.Tensor:
        a = np.array(x, dtype=np_dtype)
        if a.shape != shape:
            a = _reshape(a, shape)
        return _from_numpy(a)

    return encode


def _one_hot_encoder(spec: TensorSpec) -> Callable[[Any], torch.Tensor]:
    np_dtype = torch_to_numpy_dtype(spec.dtype)
    shape = tuple(spec.shape)
    if isinstance(spec, MultiOneHot):
        offsets = np.concatenate([[0], np.cumsum(spec.nvec)[:-1]]).astype(np.int64)

        def encode_multi(idx: Any) -> torch.Tensor:
            out = np.zeros(shape, dtype=np_dtype)
            pos = np.asarray(idx, dtype=np.int64) + offsets
            np.put_along_axis(out, pos.reshape(*shape[:-1], -1), 1, axis=-1)
            return _from_numpy(out)

        return encode_multi
    if len(shape) == 1:

        def encode_single(idx: Any) -> torch.Tensor:
            out = np.zeros(shape, dtype=np_dtype)
            out[int(idx)] = 1
            return _from_numpy(out)

        return encode_single

    def encode(idx: Any) -> torch.Tensor:
        out = np.zeros(shape, dtype=np_dtype)
        np.put_along_axis(out, np.asarray(idx, dtype=np.int64).reshape(*shape[:-1], 1), 1, axis=-1)
        return _from_numpy(out)

    return encode


def _text_reader(spec: TensorSpec, nb: int) -> Callable[[Any], Any]:
    batch = spec.shape
    if nb:
        return lambda x: NonTensorStack.from_list([str(s) for s in x])
    return lambda x: NonTensorData(data=str(x), batch_size=batch)


def obs_reader(space: Any, spec: TensorSpec, nb: int = 0) -> Callable[[Any], Any]:
    """A function turning one raw observation of ``space`` into data matching ``spec``."""
    kind = space_kind(space)
    if kind == "Dict":
        if not isinstance(spec, Composite):
            raise TypeError(f"obs_reader: a Dict space needs a Composite spec, got {type(spec).__name__}.")
        out_keys = list(spec.keys())
        in_keys = list(space.spaces.keys())
        if len(in_keys) != len(out_keys):
            raise ValueError(f"obs_reader: the Dict space has keys {in_keys} but the spec has {out_keys}.")
        plan = [(ik, ok, obs_reader(space.spaces[ik], spec[ok], nb)) for ik, ok in zip(in_keys, out_keys)]
        return lambda x: {ok: read(x[ik]) for ik, ok, read in plan}
    if kind == "Tuple" and isinstance(spec, Composite):
        plan = [(i, str(i), obs_reader(s, spec[str(i)], nb)) for i, s in enumerate(space.spaces)]
        return lambda x: {ok: read(x[i]) for i, ok, read in plan}
    if kind == "Text" or isinstance(spec, NonTensor):
        return _text_reader(spec, nb)
    if kind is None:
        return spec.encode
    stage = _np_stage(space, nb)
    encode = _one_hot_encoder(spec) if isinstance(spec, OneHot) else _value_encoder(spec)
    if stage is np.asarray:
        return encode
    return lambda x: encode(stage(x))


# ----------------------------------------------------------------------------------------------- actions
def _numpy(t: Any) -> np.ndarray:
    return t.numpy(force=True) if isinstance(t, torch.Tensor) else np.asarray(t)


def _element_writer(space: Any, onehot: bool, nb: int, shape: tuple) -> Callable[[Any], Any]:
    """tensor → gym action for a leaf space; ``onehot`` says whether the tensor is one-hot encoded."""
    kind = space_kind(space)
    np_dtype = space.dtype
    start = _start(space) if kind in ("Discrete", "MultiDiscrete") else 0
    if kind == "Discrete":
        if nb == 0:
            # a Python int, as TorchRL passes (and as the module docstring promises)
            index = (lambda t: int(_numpy(t).reshape(())) + start) if start else (lambda t: int(_numpy(t).reshape(())))
            if onehot:  # a one-hot vector, or an integer index where a policy wrote one (e.g. an argmax)
                return lambda t: int(t.numpy(force=True).argmax()) + start if t.ndim == 1 and t.shape[0] != 1 \
                    else index(t)
            return index
        if onehot:
            n = int(space.n)

            def write_batch(t: Any) -> np.ndarray:
                if t.ndim == nb + 1 and t.shape[-1] == n:
                    return _numpy(t).argmax(-1).astype(np_dtype).reshape(shape) + start
                return np.array(_numpy(t), dtype=np_dtype).reshape(shape) + start  # integer indices

            return write_batch
        return lambda t: np.array(_numpy(t), dtype=np_dtype).reshape(shape) + start
    if kind == "MultiDiscrete" and onehot:
        nvec = np.asarray(space.nvec)
        if nvec.ndim == 1:
            splits = np.cumsum(nvec)[:-1]

            def write_multi(t: Any) -> np.ndarray:
                segments = np.split(_numpy(t), splits, axis=-1)
                return np.stack([s.argmax(-1) for s in segments], -1).astype(np_dtype) + start

            return write_multi
        return lambda t: _numpy(t).argmax(-1).astype(np_dtype) + start
    if kind == "Text":
        return lambda t: t.tolist() if nb else t.data
    if isinstance(start, np.ndarray) or start:
        return lambda t: np.array(_numpy(t), dtype=np_dtype).reshape(shape) + start
    return lambda t: np.array(_numpy(t), dtype=np_dtype).reshape(shape)


def action_writer(space: Any, spec: TensorSpec, nb: int = 0) -> Callable[[Any], Any]:
    """A function turning an action (tensor, or TensorDict for ``Composite`` specs) into a gym action."""
    kind = space_kind(space)
    batch = tuple(spec.shape[:nb])
    if kind == "Dict":
        plan = [(k, action_writer(s, spec[k], nb)) for k, s in space.spaces.items()]
        return lambda td: {k: write(fast_get(td, k)) for k, write in plan}
    if kind == "Tuple":
        if isinstance(spec, Composite):
            plan = [(str(i), action_writer(s, spec[str(i)], nb)) for i, s in enumerate(space.spaces)]
            return lambda td: tuple(write(fast_get(td, k)) for k, write in plan)
        onehot = isinstance(spec, OneHot)
        writers = [_element_writer(s, onehot, nb, (*batch, *(s.shape or ()))) for s in space.spaces]
        return lambda t: tuple(write(e) for write, e in zip(writers, t.unbind(nb)))
    if kind is None:
        return spec.to_numpy
    return _element_writer(space, isinstance(spec, OneHot), nb, (*batch, *(space.shape or ())))


# ----------------------------------------------------------------------------------------------- raw trees
def copy_tree(x: Any) -> Any:
    """A deep copy of a raw (batched) observation: arrays, dicts and tuples of them."""
    if isinstance(x, dict):
        return {k: copy_tree(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return tuple(copy_tree(v) for v in x)
    return np.array(x, copy=True)


def set_rows(dst: Any, rows: np.ndarray, src: Any, *, per_row: bool = False) -> Any:
    """Writes ``src``'s rows (``per_row``: ``src[i]`` is row ``i``'s own unbatched observation) into ``dst``.

    Returns ``dst`` (a new tuple when ``dst`` is a tuple); arrays are edited in place.
    """
    if isinstance(dst, dict):
        for k in dst:
            sub = [src[i][k] for i in range(len(src))] if per_row else src[k]
            dst[k] = set_rows(dst[k], rows, sub, per_row=per_row)
        return dst
    if isinstance(dst, tuple):
        return tuple(
            set_rows(d, rows, [src[i][j] for i in range(len(src))] if per_row else src[j], per_row=per_row)
            for j, d in enumerate(dst)
        )
    if per_row:
        for i in np.flatnonzero(rows):
            dst[i] = src[i]
    else:
        dst[rows] = np.asarray(src)[rows]
    return dst
