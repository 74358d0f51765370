"""Small building blocks shared by the networks: reshaping layers, lazy-layer lookup, option expansion.

The scale mappings (``mappings``, ``biased_softplus``, ``inv_softplus``, ``expln``) are tensordict's and
are re-exported here.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch
from tensordict.nn.utils import biased_softplus, expln, inv_softplus, mappings
from torch import nn

from torchrl.modules.models._noisy import NoisyLazyLinear, NoisyLinear

__all__ = [
    "SquashDims",
    "SqueezeLayer",
    "Squeeze2dLayer",
    "LazyMapping",
    "biased_softplus",
    "expln",
    "inv_softplus",
    "mappings",
]


class SquashDims(nn.Module):
    """Flattens the last ``ndims_in`` dimensions into one (e.g. ``[B, C, H, W] -> [B, C * H * W]``).

    Args:
        ndims_in (int, optional): number of trailing dimensions to flatten. Defaults to ``3``.

    Examples:
        >>> import torch
        >>> SquashDims()(torch.zeros(4, 3, 5, 6)).shape
        torch.Size([4, 90])
    """

    def __init__(self, ndims_in: int = 3) -> None:
        super().__init__()
        self.ndims_in = ndims_in

    def forward(self, value: torch.Tensor) -> torch.Tensor:
        return value.flatten(-self.ndims_in, -1)


class SqueezeLayer(nn.Module):
    """Squeezes the given singleton dimensions.

    Args:
        dims (sequence of int, optional): dimensions to squeeze, all negative. Defaults to ``(-1,)``.

    Raises:
        ValueError: if a dimension is not negative.
        RuntimeError: in ``forward``, if a dimension to squeeze does not have size 1.
        IndexError: in ``forward``, if the input has fewer dimensions than the ones to squeeze.

    Examples:
        >>> import torch
        >>> SqueezeLayer((-2, -1))(torch.zeros(4, 1, 1)).shape
        torch.Size([4])
    """

    def __init__(self, dims: Sequence[int] = (-1,)) -> None:
        super().__init__()
        for dim in dims:
            if dim >= 0:
                raise ValueError(f"SqueezeLayer: dims must be negative (counted from the end), got {tuple(dims)}.")
        self.dims = tuple(sorted(dims))

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 - TorchRL's argument name
        if self.dims and input.ndim < -self.dims[0]:
            raise IndexError(
                f"Tried to squeeze an input over dims {self.dims} with shape {tuple(input.shape)}: it needs "
                f"{-self.dims[0]} trailing dims to squeeze (an aggregator already flattened them?)."
            )
        for dim in self.dims:
            if input.shape[dim] != 1:
                raise RuntimeError(
                    f"Tried to squeeze an input over dims {self.dims} with shape {tuple(input.shape)}: dimension "
                    f"{dim} has size {input.shape[dim]}, not 1 (a network's squeeze_output needs singleton spatial "
                    "dims: use aggregator_class=None and kernels that reduce the maps to 1, or squeeze_output=False)."
                )
            input = input.squeeze(dim)
        return input


class Squeeze2dLayer(SqueezeLayer):
    """Squeezes the last two dimensions (e.g. the ``1 x 1`` spatial output of a convolution).

    Examples:
        >>> import torch
        >>> Squeeze2dLayer()(torch.zeros(4, 8, 1, 1)).shape
        torch.Size([4, 8])
    """

    def __init__(self) -> None:
        super().__init__((-2, -1))


# Layer class -> the lazy layer class that infers ``in_features`` / ``in_channels`` on first call.
LazyMapping: dict[type, type] = {
    nn.Linear: nn.LazyLinear,
    nn.Conv1d: nn.LazyConv1d,
    nn.Conv2d: nn.LazyConv2d,
    nn.Conv3d: nn.LazyConv3d,
    NoisyLinear: NoisyLazyLinear,
}


def _expand(value, n: int, name: str, owner: str) -> list:
    """``value`` repeated ``n`` times, or ``value`` itself (as a list) if it is already a sequence of ``n``."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{owner}: {name} has {len(value)} entries but the network has {n} layers.")
        return list(value)
    return [value] * n


def _kwargs_list(kwargs: dict | Sequence[dict] | None, n: int, name: str, owner: str) -> list[dict]:
    if kwargs is None:
        return [{} for _ in range(n)]
    if isinstance(kwargs, dict):
        return [dict(kwargs) for _ in range(n)]
    return [dict(k) for k in _expand(list(kwargs), n, name, owner)]


def _accepts_device(cls: Callable) -> bool:
    try:
        return "device" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        return False


def create_on_device(cls: Callable, device, *args, **kwargs) -> nn.Module:
    """``cls(*args, **kwargs)`` built on ``device`` (passed as ``device=`` when accepted, else moved)."""
    if device is not None and _accepts_device(cls):
        return cls(*args, device=device, **kwargs)
    module = cls(*args, **kwargs)
    if device is not None and isinstance(module, nn.Module):
        module = module.to(device)
    return module


def _reset_parameters_recursive(module: nn.Module) -> bool:
    """Calls ``reset_parameters`` on every submodule that has one; returns whether any had."""
    found = False
    for sub in module.modules():
        reset = getattr(sub, "reset_parameters", None)
        if callable(reset):
            reset()
            found = True
    return found
