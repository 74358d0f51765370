"""Boxes: the set a spec's values live in (an interval, ``n`` categories, binary vectors, a list of boxes)."""
from __future__ import annotations

from typing import Any, Iterator

import torch

from torchrl.data.tensor_specs._utils import DEVICE_TYPING, _device, _format_tensor, _size

__all__ = ["Box", "ContinuousBox", "CategoricalBox", "DiscreteBox", "BoxList", "BinaryBox"]


class Box:
    """Base class of the spaces a spec describes.

    Examples:
        >>> from torchrl.data.tensor_specs import CategoricalBox
        >>> isinstance(CategoricalBox(3), Box)
        True
    """

    def __iter__(self) -> Iterator[Any]:
        """Iterates over the box's defining values (e.g. ``low, high = box``)."""
        for name, value in vars(self).items():
            if not name.startswith("_"):
                yield value

    def clone(self) -> Box:
        """A copy of the box (tensors are cloned)."""
        return self.to(None)

    def to(self, dest: torch.dtype | DEVICE_TYPING) -> Box:
        """Boxes without tensors are device-free: ``to`` returns a copy."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        return out

    def __eq__(self, other: Any) -> bool:
        return type(self) is type(other) and vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]


class ContinuousBox(Box):
    """An interval ``[low, high]`` per element.

    Args:
        _low (torch.Tensor): lower bounds (the full spec shape).
        _high (torch.Tensor): upper bounds (same shape as ``_low``).
        device (torch.device, optional): where to move the bounds.
        _batch_size (torch.Size, optional): leading dims of the bounds that are batch dims.

    Examples:
        >>> box = ContinuousBox(torch.zeros(3), torch.ones(3))
        >>> low, high = box
        >>> high.sum().item()
        3.0
    """

    def __init__(
        self,
        _low: torch.Tensor,
        _high: torch.Tensor,
        device: torch.device | None = None,
        _batch_size: torch.Size | None = None,
    ) -> None:
        device = _device(device)
        if device is not None:
            _low, _high = _low.to(device), _high.to(device)
        self._low = _low
        self._high = _high
        self._batch_size = _size(_batch_size)
        self._cache: dict[str, Any] = {}

    @property
    def low(self) -> torch.Tensor:
        return self._low

    @low.setter
    def low(self, value: torch.Tensor) -> None:
        self._low = torch.as_tensor(value, dtype=self._low.dtype, device=self._low.device).expand(self._low.shape)
        self._cache.clear()

    @property
    def high(self) -> torch.Tensor:
        return self._high

    @high.setter
    def high(self, value: torch.Tensor) -> None:
        self._high = torch.as_tensor(value, dtype=self._high.dtype, device=self._high.device).expand(self._high.shape)
        self._cache.clear()

    @property
    def batch_size(self) -> torch.Size:
        return self._batch_size

    @property
    def device(self) -> torch.device:
        return self._low.device

    def __iter__(self) -> Iterator[torch.Tensor]:
        yield self._low
        yield self._high

    def clone(self) -> ContinuousBox:
        return ContinuousBox(self._low.clone(), self._high.clone(), _batch_size=self._batch_size)

    def to(self, dest: torch.dtype | DEVICE_TYPING) -> ContinuousBox:
        if isinstance(dest, torch.dtype):
            return ContinuousBox(self._low.to(dest), self._high.to(dest), _batch_size=self._batch_size)
        dest = _device(dest)
        if dest is None or dest == self._low.device:
            return self
        return ContinuousBox(self._low.to(dest), self._high.to(dest), _batch_size=self._batch_size)

    def unbind(self, dim: int = 0) -> tuple[ContinuousBox, ...]:
        """Splits the bounds along ``dim``."""
        return tuple(
            ContinuousBox(lo, hi, _batch_size=self._batch_size[1:])
            for lo, hi in zip(self._low.unbind(dim), self._high.unbind(dim))
        )

    def __eq__(self, other: Any) -> bool:
        return (
            type(other) is ContinuousBox
            and self._low.dtype == other._low.dtype
            and self._low.shape == other._low.shape
            and self._low.device == other._low.device
            and bool(torch.equal(self._low, other._low))
            and bool(torch.equal(self._high, other._high))
        )

    def __repr__(self) -> str:
        return f"ContinuousBox(\n    low={_format_tensor(self._low)},\n    high={_format_tensor(self._high)})"


class CategoricalBox(Box):
    """The integers ``0 .. n - 1``.

    Args:
        n (int): number of categories (``-1`` while unknown, see ``Categorical.set_provisional_n``).

    Examples:
        >>> CategoricalBox(4).n
        4
    """

    def __init__(self, n: int) -> None:
        self.n = int(n)

    def to(self, dest: torch.dtype | DEVICE_TYPING) -> CategoricalBox:
        return type(self)(self.n)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n})"


class DiscreteBox(CategoricalBox):
    """Old name of :class:`CategoricalBox` (kept because TorchRL exports it).

    Examples:
        >>> DiscreteBox(2).n
        2
    """


class BinaryBox(Box):
    """Binary vectors of length ``n``.

    Args:
        n (int): the vector length.

    Examples:
        >>> BinaryBox(3).n
        3
    """

    def __init__(self, n: int) -> None:
        self.n = int(n)

    def to(self, dest: torch.dtype | DEVICE_TYPING) -> BinaryBox:
        return BinaryBox(self.n)

    def __repr__(self) -> str:
        return f"BinaryBox(n={self.n})"


class BoxList(Box):
    """A list of boxes, e.g. one :class:`CategoricalBox` per entry of a ``MultiCategorical``'s ``nvec``.

    Args:
        boxes (list of Box): the boxes.

    Examples:
        >>> boxes = BoxList.from_nvec(torch.tensor([2, 3]))
        >>> [box.n for box in boxes]
        [2, 3]
    """

    def __init__(self, boxes: list) -> None:
        self.boxes = list(boxes)

    @staticmethod
    def from_nvec(nvec: torch.Tensor) -> CategoricalBox | BoxList:
        """A (nested) list of categorical boxes, one per entry of ``nvec``."""
        nvec = torch.as_tensor(nvec)
        if nvec.ndim == 0:
            return CategoricalBox(int(nvec))
        return BoxList([BoxList.from_nvec(n) for n in nvec])

    def __iter__(self) -> Iterator[Box]:
        return iter(self.boxes)

    def __len__(self) -> int:
        return len(self.boxes)

    def __getitem__(self, idx: int) -> Box:
        return self.boxes[idx]

    def to(self, dest: torch.dtype | DEVICE_TYPING) -> BoxList:
        return BoxList([box.to(dest) for box in self.boxes])

    def __repr__(self) -> str:
        return f"BoxList(boxes={self.boxes})"
