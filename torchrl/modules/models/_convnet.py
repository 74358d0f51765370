"""Convolutional networks: ``ConvNet`` (2d, also exported as ``Conv2dNet``) and ``Conv3dNet``."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from torchrl.modules.models._mlp import MLP
from torchrl.modules.models.utils import _kwargs_list, create_on_device, SquashDims, Squeeze2dLayer, SqueezeLayer

__all__ = ["ConvNet", "Conv2dNet", "Conv3dNet"]


def _first(kwargs, n: int):
    """Per-layer keyword lists longer than the network are cut to its ``n`` layers (as TorchRL tolerates)."""
    if isinstance(kwargs, (list, tuple)) and len(kwargs) > n:
        return list(kwargs)[:n]
    return kwargs


class _ConvNetBase(nn.Sequential):
    """Shared construction of the 2d/3d convolutional networks (``_conv``/``_lazy_conv``/``_spatial``).

    Layer counts follow TorchRL: ``depth`` (when not given) is the length of the last list among
    ``num_cells``, ``kernel_sizes``, ``strides`` and ``paddings`` (in that order), scalars are repeated, and a
    list of another length raises ``_conflict_error``.
    """

    _conv: type[nn.Module]
    _lazy_conv: type[nn.Module]
    _spatial: int
    _conflict_error: type[Exception]
    _default_cells_follow_depth: bool  # num_cells=None with a depth gives [32] * depth (else [32, 32, 32])

    def __init__(
        self,
        in_features: int | None = None,
        depth: int | None = None,
        num_cells: Sequence[int] | int = None,
        kernel_sizes: Sequence[int] | int = 3,
        strides: Sequence[int] | int = 1,
        paddings: Sequence[int] | int = 0,
        activation_class: type[nn.Module] | Callable = nn.ELU,
        activation_kwargs: dict | list[dict] | None = None,
        norm_class: type[nn.Module] | Callable | None = None,
        norm_kwargs: dict | list[dict] | None = None,
        bias_last_layer: bool = True,
        aggregator_class: type[nn.Module] | Callable | None = SquashDims,
        aggregator_kwargs: dict | None = None,
        squeeze_output: bool = False,
        device=None,
    ) -> None:
        owner = type(self).__name__
        if num_cells is None:
            num_cells = [32] * depth if depth is not None and self._default_cells_follow_depth else [32, 32, 32]
        options = {"num_cells": num_cells, "kernel_sizes": kernel_sizes, "strides": strides, "paddings": paddings}
        if depth is None:
            lists = [len(v) for v in options.values() if isinstance(v, (list, tuple))]
            if not lists:
                raise ValueError(
                    f"{owner}: depth=None needs one of num_cells, kernel_sizes, strides or paddings to be a list or "
                    f"tuple (got num_cells={num_cells!r}, kernel_sizes={kernel_sizes!r}, strides={strides!r}, "
                    f"paddings={paddings!r}); pass depth or a list."
                )
            depth = lists[-1]
        if depth == 0:
            raise ValueError(f"{owner}: depth=0 (no layer) is not permitted; pass depth >= 1 or a non-empty num_cells.")
        if depth < 0:
            raise self._conflict_error(f"{owner}: depth={depth} is negative; pass depth >= 1.")
        layers_of = {}
        for name, value in options.items():
            if isinstance(value, (list, tuple)):
                if len(value) != depth:
                    raise self._conflict_error(
                        f"{owner}: depth={depth} conflicts with {name}={list(value)} ({len(value)} entries); make them "
                        f"agree, or pass {name} as a single int repeated over the {depth} layers."
                    )
                layers_of[name] = list(value)
            else:
                layers_of[name] = [value] * depth
                options[name] = layers_of[name]
        n = len(layers_of["num_cells"])
        cells = [int(c) for c in layers_of["num_cells"]]
        self.in_features = in_features
        self.activation_class = activation_class
        self.norm_class = norm_class
        self.activation_kwargs = activation_kwargs if activation_kwargs is not None else {}
        self.norm_kwargs = norm_kwargs if norm_kwargs is not None else {}
        self.bias_last_layer = bias_last_layer
        self.aggregator_class = aggregator_class
        agg_kwargs = dict(aggregator_kwargs or {})
        if aggregator_class is SquashDims:
            agg_kwargs.setdefault("ndims_in", self._spatial + 1)
        self.aggregator_kwargs = agg_kwargs
        self.squeeze_output = squeeze_output
        self.depth = depth
        self.num_cells = options["num_cells"]
        self.kernel_sizes = options["kernel_sizes"]
        self.strides = options["strides"]
        self.paddings = options["paddings"]
        self.out_features = cells[-1] if cells else None
        act_kwargs = _kwargs_list(_first(activation_kwargs, n), n, "activation_kwargs", owner)
        nrm_kwargs = _kwargs_list(_first(norm_kwargs, n), n, "norm_kwargs", owner)

        layers: list[nn.Module] = []
        for i, (c_in, c_out) in enumerate(zip([in_features] + cells[:-1], cells)):
            conv_kwargs = {
                "kernel_size": layers_of["kernel_sizes"][i],
                "stride": layers_of["strides"][i],
                "padding": layers_of["paddings"][i],
                "bias": bias_last_layer if i == n - 1 else True,
            }
            if c_in is None:
                layers.append(create_on_device(self._lazy_conv, device, c_out, **conv_kwargs))
            else:
                layers.append(create_on_device(self._conv, device, c_in, c_out, **conv_kwargs))
            layers.append(create_on_device(activation_class, device, **act_kwargs[i]))
            if norm_class is not None:  # TorchRL's order: convolution, activation, normalisation
                layers.append(create_on_device(norm_class, device, **nrm_kwargs[i]))
        if aggregator_class is not None:
            layers.append(create_on_device(aggregator_class, device, **agg_kwargs))
        if squeeze_output:  # (as TorchRL: the last submodule squeezes the singleton spatial dims)
            layers.append(Squeeze2dLayer() if self._spatial == 2 else SqueezeLayer(tuple(range(-self._spatial, 0))))
        super().__init__(*layers)

    def __getitem__(self, idx):
        # nn.Sequential slices rebuild ``type(self)`` from modules, which this constructor does not take.
        if isinstance(idx, slice):
            return nn.Sequential(*list(self)[idx])
        return super().__getitem__(idx)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        # Convolutions take one leading batch dimension: fold any others into it and back.
        core = self._spatial + 1
        if inputs.ndim < core:
            raise ValueError(
                f"The input value of {type(self).__name__} must have at least {core} dimensions "
                f"([*batch, channels, {', '.join('DHW'[-self._spatial:])}]), got {inputs.ndim} instead "
                f"(shape {tuple(inputs.shape)})."
            )
        batch = inputs.shape[:-core]
        if len(batch) != 1:
            x = inputs.reshape(-1, *inputs.shape[-core:])
        else:
            x = inputs
        for module in self:
            x = module(x)
        if len(batch) != 1:
            x = x.reshape(*batch, *x.shape[1:])
        return x


class ConvNet(_ConvNetBase):
    """A 2d convolutional network: ``depth`` convolutions, each followed by an activation and optional norm.

    The output goes through ``aggregator_class`` (by default :class:`SquashDims`, flattening
    ``[C, H, W]`` into one feature dimension). Inputs may have any number of leading batch dimensions.

    Args:
        in_features (int, optional): input channels; ``None`` uses a lazy first convolution.
        depth (int, optional): number of convolutions. Defaults to the length of the last list among
            ``num_cells``, ``kernel_sizes``, ``strides`` and ``paddings``.
        num_cells (int or sequence of int, optional): output channels of each convolution (an int is
            repeated ``depth`` times). Defaults to ``[32, 32, 32]``.
        kernel_sizes (int or sequence, optional): kernel size(s). Defaults to ``3``.
        strides (int or sequence, optional): stride(s). Defaults to ``1``.
        paddings (int or sequence, optional): padding(s). Defaults to ``0``.
        activation_class (type or callable, optional): activation. Defaults to ``nn.ELU``.
        activation_kwargs (dict or list of dict, optional): its keyword arguments (one per layer or one
            for all).
        norm_class (type or callable, optional): normalisation after each activation.
        norm_kwargs (dict or list of dict, optional): its keyword arguments.
        bias_last_layer (bool, optional): bias in the last convolution. Defaults to ``True``.
        aggregator_class (type or callable, optional): module applied last. Defaults to
            :class:`SquashDims`; ``None`` keeps the feature maps.
        aggregator_kwargs (dict, optional): its keyword arguments.
        squeeze_output (bool, optional): squeeze the spatial dims of the output, which must be singletons
            (e.g. ``[B, C, 1, 1] -> [B, C]`` with ``aggregator_class=None``). Defaults to ``False``.
        device (torch.device, optional): device of the parameters.

    Raises:
        ValueError: if ``depth`` is 0, or missing while every per-layer option is a scalar; when called, if
            the input has fewer than 3 dims.
        RuntimeError: if a per-layer list (``num_cells``, ``kernel_sizes``, ``strides``, ``paddings``) has
            another length than ``depth``; when called with ``squeeze_output``, if the spatial dims of the
            output are not singletons.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import ConvNet
        >>> cnn = ConvNet(num_cells=[32, 64], kernel_sizes=[8, 4], strides=[4, 2])
        >>> cnn(torch.randn(4, 3, 84, 84)).shape
        torch.Size([4, 5184])
    """

    _conv = nn.Conv2d
    _lazy_conv = nn.LazyConv2d
    _spatial = 2
    _conflict_error = RuntimeError
    _default_cells_follow_depth = False

    @classmethod
    def default_atari_dqn(cls, num_actions: int):
        """The DQN Atari network (Mnih et al., 2015): 3 convolutions, a 512-unit layer, ``num_actions`` outputs.

        Examples:
            >>> import torch
            >>> ConvNet.default_atari_dqn(6)(torch.randn(2, 4, 84, 84)).shape
            torch.Size([2, 6])
        """
        cnn = cls(
            activation_class=nn.ReLU, num_cells=[32, 64, 64], kernel_sizes=[8, 4, 3], strides=[4, 2, 1]
        )
        mlp = MLP(activation_class=nn.ReLU, out_features=num_actions, num_cells=[512])
        return nn.Sequential(cnn, mlp)


Conv2dNet = ConvNet


class Conv3dNet(_ConvNetBase):
    """A 3d convolutional network (inputs ``[*B, C, D, H, W]``); options as :class:`ConvNet`.

    Two differences with :class:`ConvNet`, as in TorchRL: ``num_cells=None`` with a ``depth`` gives ``depth``
    layers of 32 channels, and a per-layer list of the wrong length raises ``ValueError``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import Conv3dNet
        >>> net = Conv3dNet(num_cells=[8, 16], kernel_sizes=3, strides=[1, 2])
        >>> net(torch.randn(2, 1, 9, 9, 9)).shape
        torch.Size([2, 432])
    """

    _conv = nn.Conv3d
    _lazy_conv = nn.LazyConv3d
    _spatial = 3
    _conflict_error = ValueError
    _default_cells_follow_depth = True
