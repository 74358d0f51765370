"""``Choice``: a value drawn from one of several specs, or one of several fixed non-tensor values."""
from __future__ import annotations

from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase, lazy_stack
from tensordict.utils import is_non_tensor

from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._utils import DEVICE_TYPING, INDEX_TYPING, _cat_shape, _DimError, _indent

__all__ = ["Choice"]


class Choice(TensorSpec):
    """A discrete choice between several specs (of one class and shape) or several non-tensor values.

    With specs, ``rand`` draws from a randomly chosen spec (independently per element of a leading
    ``shape``) and ``is_in`` accepts what any of them accepts. With ``NonTensorData`` choices, ``rand``
    returns one of the choices and ``is_in`` checks that the value's data is one of them.

    Args:
        choices (list of TensorSpec, NonTensorData or NonTensorStack): the options.

    Examples:
        >>> from torchrl.data import Bounded
        >>> spec = Choice([Bounded(0.0, 1.0, shape=(2,)), Bounded(10.0, 11.0, shape=(2,))])
        >>> x = spec.rand()
        >>> spec.is_in(x), spec.num_choices
        (True, 2)
        >>> from tensordict import NonTensorData
        >>> words = Choice([NonTensorData("left", batch_size=()), NonTensorData("right", batch_size=())])
        >>> words.rand().data in ("left", "right")
        True
    """

    def __init__(self, choices: list[TensorSpec | NonTensorData | NonTensorStack]) -> None:
        choices = list(choices)
        if not choices:
            raise _DimError("Choice needs at least one choice.")  # TorchRL: IndexError
        first = choices[0]
        specs = [isinstance(c, TensorSpec) for c in choices]
        if any(specs) and not all(specs):
            raise TypeError("Choice: the choices must all be TensorSpecs or all be non-tensor data.")
        self._specs_mode = all(specs)
        if self._specs_mode:
            if len({type(c) for c in choices}) != 1:
                raise TypeError(f"Choice: the specs must share one class, got {[type(c).__name__ for c in choices]}.")
            if len({tuple(c.shape) for c in choices}) != 1:
                raise ValueError(f"Choice: the specs must share one shape, got {[tuple(c.shape) for c in choices]}.")
            shape, device, dtype = first.shape, first.device, first.dtype
        else:
            if not all(is_non_tensor(c) for c in choices):
                raise TypeError("Choice: non-tensor choices must be NonTensorData or NonTensorStack.")
            shape, device, dtype = first.batch_size, first.device, None
        super().__init__(shape, None, None, dtype, "discrete")
        self._device = device
        self._choices = choices

    @property
    def num_choices(self) -> int:
        return len(self._choices)

    @property
    def device(self) -> torch.device | None:
        return self._device

    def _map(self, fn) -> Choice:
        return Choice([fn(c) for c in self._choices])

    def _pick(self, shape: Any, draw) -> Any:
        shape = () if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        k = len(self._choices)
        if not self._specs_mode:
            if not shape:
                return self._choices[int(torch.randint(k, ()))].clone()
            flat = [self._choices[int(torch.randint(k, ()))].clone() for _ in range(int(torch.Size(shape).numel()))]
            return self._restack(flat, shape)
        if not shape:
            return draw(self._choices[int(torch.randint(k, ()))], ())
        samples = [draw(c, shape) for c in self._choices]
        which = torch.randint(0, k, shape, device=self._device)
        stacked = torch.stack(samples, 0)
        full_idx = which.reshape(1, *shape, *([1] * self.ndim))
        if isinstance(stacked, torch.Tensor):
            return stacked.gather(0, full_idx.expand(1, *stacked.shape[1:])).squeeze(0)
        return stacked.apply(lambda t: t.gather(0, full_idx.reshape(1, *shape, *([1] * (t.ndim - 1 - len(shape)))).expand(1, *t.shape[1:])).squeeze(0), batch_size=stacked.batch_size[1:])

    @staticmethod
    def _restack(items: list, shape: tuple) -> Any:
        if len(shape) == 1:
            return lazy_stack(items, 0)
        step = len(items) // shape[0]
        return lazy_stack([Choice._restack(items[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])], 0)

    def rand(self, shape: torch.Size = None) -> TensorDictBase:
        return self._pick(shape, lambda c, s: c.rand(s))

    def zero(self, shape: torch.Size = None) -> TensorDictBase:
        if not self._specs_mode:
            return self._expand_data(self._choices[0], shape)
        return self._choices[0].zero(shape)

    def one(self, shape: torch.Size = None) -> TensorDictBase:
        if not self._specs_mode:
            return self._expand_data(self._choices[0], shape)
        return self._choices[0].one(shape)

    @staticmethod
    def _expand_data(data: Any, shape: Any) -> Any:
        if not shape:
            return data.clone()
        return data.expand(_cat_shape(shape, data.batch_size)).clone()

    def _data_set(self) -> list:
        out = []
        for c in self._choices:
            out.extend(c.tolist() if isinstance(c, NonTensorStack) else [c.data])
        return out

    def is_in(self, val: torch.Tensor | TensorDictBase) -> bool:
        if self._specs_mode:
            if isinstance(val, (torch.Tensor, TensorDictBase)) and val.ndim > self.ndim:
                flat = val.reshape(-1, *self.shape)
                return all(any(c.is_in(v) for c in self._choices) for v in flat)
            return any(c.is_in(val) for c in self._choices)
        if not is_non_tensor(val):
            return False
        allowed = self._data_set()
        values = val.tolist() if isinstance(val, NonTensorStack) else [val.data]
        flat = list(_flatten(values))
        return all(v in allowed for v in flat)

    def _explain(self, val: Any, key: Any = None) -> str:
        where = "Choice" + (f" at key {key!r}" if key is not None else "")
        return f"{where}: the value is in none of the {len(self._choices)} choices."

    def _project(self, val: Any) -> Any:
        if self._specs_mode:
            return self._choices[0].project(val)
        return self._choices[0].clone()

    def index(self, index: INDEX_TYPING, tensor_to_index: torch.Tensor | TensorDictBase) -> torch.Tensor | TensorDictBase:
        return tensor_to_index[index]

    def cardinality(self) -> int:
        if self._specs_mode:
            return sum(c.cardinality() for c in self._choices)
        return len(self._data_set())

    def enumerate(self, use_mask: bool = False) -> list[Any]:
        if self._specs_mode:
            out: list = []
            for c in self._choices:
                out.extend(list(c.enumerate(use_mask)))
            return out
        return [c.clone() for c in self._choices]

    def expand(self, *shape):
        if self._specs_mode:
            return self._map(lambda c: c.expand(*shape))
        from_shape = torch.Size(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else torch.Size(shape)
        return self._map(lambda c: c.expand(from_shape).clone())

    def squeeze(self, dim: int | None = None):
        return self._map(lambda c: c.squeeze(dim) if dim is not None else c.squeeze())

    def unsqueeze(self, dim: int):
        return self._map(lambda c: c.unsqueeze(dim))

    def __getitem__(self, idx: Any):
        return self._map(lambda c: c[idx])

    def unbind(self, dim: int = 0):
        parts = [c.unbind(dim) for c in self._choices]
        return tuple(Choice(list(group)) for group in zip(*parts))

    def to(self, dest: torch.dtype | DEVICE_TYPING) -> Choice:
        return self._map(lambda c: c.to(dest))

    def clone(self) -> Choice:
        return self._map(lambda c: c.clone())

    def __eq__(self, other: Any) -> bool:
        if type(other) is not Choice or len(other._choices) != len(self._choices):
            return False
        for a, b in zip(self._choices, other._choices):
            if self._specs_mode:
                if a != b:
                    return False
            elif not is_non_tensor(b) or a.tolist() != b.tolist() or a.batch_size != b.batch_size:
                return False
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        inner = ",\n".join(repr(c) for c in self._choices)
        return f"Choice(\n{_indent(inner)})"


def _flatten(values: Any):
    for v in values:
        if isinstance(v, list):
            yield from _flatten(v)
        else:
            yield v
