"""``MLP``: a configurable multi-layer perceptron built as an ``nn.Sequential``."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import nn

from torchrl.modules.models.utils import _kwargs_list, create_on_device, LazyMapping

__all__ = ["MLP"]

_DEFAULT_CELLS = 32


def _hidden_sizes(depth: int | None, num_cells, owner: str) -> list[int]:
    """The hidden layer sizes from ``depth``/``num_cells``, as TorchRL: no hidden layer when neither is given,
    ``depth`` layers of 32 cells when only ``depth`` is."""
    if depth is not None and depth < 0:
        raise RuntimeError(f"{owner}: depth={depth} is negative; pass depth >= 0.")
    if num_cells is None:
        return [_DEFAULT_CELLS] * (0 if depth is None else depth)
    if isinstance(num_cells, int):
        if depth is None:
            raise RuntimeError(
                f"{owner}: num_cells is an int ({num_cells}) but depth is None; pass depth, or num_cells as a list."
            )
        return [num_cells] * depth
    cells = [int(c) for c in num_cells]
    if depth is not None and depth != len(cells):
        raise RuntimeError(
            f"{owner}: depth={depth} conflicts with num_cells={cells} ({len(cells)} layers); pass only one of "
            "them or make them agree."
        )
    return cells


class _SingleBias(nn.Module):
    """Adds one learned scalar to every output (``single_bias_last_layer``)."""

    def __init__(self, device=None) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(1, device=device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.bias


class MLP(nn.Sequential):
    """A multi-layer perceptron: ``depth`` hidden layers, then an output layer.

    Each hidden layer is ``layer_class`` followed (in this order) by ``nn.Dropout(dropout)`` if ``dropout``
    is set, ``norm_class`` if set, and ``activation_class``. The output layer has no activation unless
    ``activate_last_layer``. With several inputs, ``forward`` concatenates them along the last dimension
    (``mlp(observation, action)``); with an ``out_features`` shape, the output is reshaped to it.

    Args:
        in_features (int, optional): input size; ``None`` uses a lazy first layer.
        out_features (int or shape): output size, or output shape (the last layer has ``prod(shape)``
            outputs, reshaped).
        depth (int, optional): number of hidden layers; ``0`` gives a single ``layer_class``.
        num_cells (int or sequence of int, optional): hidden sizes; an int is repeated ``depth`` times.
            Without ``num_cells``: ``depth`` hidden layers of 32 cells (none without ``depth`` either: a
            single ``layer_class``, as in TorchRL).
        activation_class (type or callable, optional): activation. Defaults to ``nn.Tanh``.
        activation_kwargs (dict or list of dict, optional): its keyword arguments, one dict per
            activated layer or one for all.
        norm_class (type or callable, optional): normalisation layer after each hidden layer.
        norm_kwargs (dict or list of dict, optional): its keyword arguments (like ``activation_kwargs``).
        dropout (float, optional): dropout probability after each hidden layer.
        bias_last_layer (bool, optional): bias in the output layer. Defaults to ``True``.
        single_bias_last_layer (bool, optional): the output layer has one scalar bias shared by all its
            outputs instead of one per output. Defaults to ``False``.
        layer_class (type or callable, optional): linear layer class, called as
            ``layer_class(in, out, bias=..., **layer_kwargs)``. Defaults to ``nn.Linear``.
        layer_kwargs (dict, optional): extra keyword arguments of ``layer_class``.
        activate_last_layer (bool, optional): apply dropout/norm/activation after the output layer too.
            Defaults to ``False``.
        device (torch.device, optional): device of the parameters.

    Raises:
        ValueError: if ``out_features`` is missing, a per-layer list has the wrong length, or
            ``in_features`` is ``None`` for a ``layer_class`` with no lazy counterpart.
        RuntimeError: if ``depth`` and the length of ``num_cells`` disagree, ``depth`` is negative, or
            ``num_cells`` is an int without ``depth``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import MLP
        >>> mlp = MLP(in_features=64, out_features=10, num_cells=[128, 128])
        >>> mlp(torch.randn(4, 64)).shape
        torch.Size([4, 10])
        >>> MLP(out_features=(2, 3), depth=1, num_cells=16)(torch.randn(5, 7)).shape  # lazy input, shaped output
        torch.Size([5, 2, 3])
    """

    def __init__(
        self,
        in_features: int | None = None,
        out_features: int | torch.Size | None = None,
        depth: int | None = None,
        num_cells: Sequence[int] | int | None = None,
        activation_class: type[nn.Module] | Callable = nn.Tanh,
        activation_kwargs: dict | list[dict] | None = None,
        norm_class: type[nn.Module] | Callable | None = None,
        norm_kwargs: dict | list[dict] | None = None,
        dropout: float | None = None,
        bias_last_layer: bool = True,
        single_bias_last_layer: bool = False,
        layer_class: type[nn.Module] | Callable = nn.Linear,
        layer_kwargs: dict | None = None,
        activate_last_layer: bool = False,
        device=None,
    ) -> None:
        if out_features is None:
            raise ValueError("MLP: out_features must be given (an int, or a shape to reshape the output to).")
        self.in_features = in_features
        if isinstance(out_features, int):
            self.out_features = out_features
            self._out_shape = None
            n_out = out_features
        else:
            self.out_features = torch.Size(out_features)
            self._out_shape = self.out_features
            n_out = math.prod(self.out_features)
        cells = _hidden_sizes(depth, num_cells, "MLP")
        self.depth = len(cells)
        self.num_cells = cells
        self.activation_class = activation_class
        self.norm_class = norm_class
        self.dropout = dropout
        self.bias_last_layer = bias_last_layer
        self.single_bias_last_layer = single_bias_last_layer
        self.layer_class = layer_class
        self.activate_last_layer = activate_last_layer
        n_act = self.depth + int(activate_last_layer)
        act_kwargs = _kwargs_list(activation_kwargs, n_act, "activation_kwargs", "MLP")
        nrm_kwargs = _kwargs_list(norm_kwargs, n_act, "norm_kwargs", "MLP")
        layer_kwargs = dict(layer_kwargs or {})

        sizes_in = [in_features] + cells
        sizes_out = cells + [n_out]
        layers: list[nn.Module] = []
        for i, (d_in, d_out) in enumerate(zip(sizes_in, sizes_out)):
            last = i == self.depth
            bias = bias_last_layer and not single_bias_last_layer if last else True
            layers.append(self._make_layer(d_in, d_out, bias, layer_kwargs, device))
            if last and single_bias_last_layer:
                layers.append(_SingleBias(device))
            if not last or activate_last_layer:
                if dropout is not None:
                    layers.append(nn.Dropout(p=dropout))
                if norm_class is not None:
                    layers.append(create_on_device(norm_class, device, **nrm_kwargs[i]))
                layers.append(create_on_device(activation_class, device, **act_kwargs[i]))
        super().__init__(*layers)

    def __getitem__(self, idx):
        # nn.Sequential slices rebuild ``type(self)`` from modules, which this constructor does not take.
        if isinstance(idx, slice):
            return nn.Sequential(*list(self)[idx])
        return super().__getitem__(idx)

    def _make_layer(self, d_in, d_out, bias, layer_kwargs, device) -> nn.Module:
        if d_in is None:
            lazy = LazyMapping.get(self.layer_class)
            if lazy is None:
                raise ValueError(
                    f"MLP: in_features is None but layer_class {self.layer_class!r} has no lazy version; pass "
                    f"in_features, or use one of {[c.__name__ for c in LazyMapping]}."
                )
            return create_on_device(lazy, device, d_out, bias=bias, **layer_kwargs)
        return create_on_device(self.layer_class, device, d_in, d_out, bias=bias, **layer_kwargs)

    def forward(self, *inputs: tuple[torch.Tensor]) -> torch.Tensor:
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, -1)
        for module in self:
            x = module(x)
        if self._out_shape is not None:
            x = x.unflatten(-1, self._out_shape)
        return x
