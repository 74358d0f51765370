"""Convolutional networks: ``ConvNet`` (2d, also exported as ``Conv2dNet``) and ``Conv3dNet``."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from torchrl.modules.models.mlp import MLP
from torchrl.modules.models.utils import _expand, _kwargs_list, create_on_device, SquashDims

__all__ = ["ConvNet", "Conv2dNet", "Conv3dNet"]


class _ConvNetBase(nn.Sequential):
    """Shared construction of the 2d/3d convolutional networks (``_conv``/``_lazy_conv``/``_spatial``)."""

    _conv: type[nn.Module]
    _lazy_conv: type[nn.Module]
    _spatial: int

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
            num_cells = [32, 32, 32] if depth is None else [32] * depth
        if isinstance(num_cells, int):
            if depth is None:
                raise ValueError(f"{owner}: num_cells is an int ({num_cells}) but depth is None; pass depth too.")
            num_cells = [num_cells] * depth
        cells = [int(c) for c in num_cells]
        if depth is not None and depth != len(cells):
            raise RuntimeError(
                f"{owner}: depth={depth} conflicts with num_cells={cells} ({len(cells)} layers); pass only one of "
                "them or make them agree."
            )
        n = len(cells)
        self.in_features = in_features
        self.depth = n
        self.num_cells = cells
        self.kernel_sizes = _expand(kernel_sizes, n, "kernel_sizes", owner)
        self.strides = _expand(strides, n, "strides", owner)
        self.paddings = _expand(paddings, n, "paddings", owner)
        self.activation_class = activation_class
        self.norm_class = norm_class
        self.bias_last_layer = bias_last_layer
        self.squeeze_output = squeeze_output
        act_kwargs = _kwargs_list(activation_kwargs, n, "activation_kwargs", owner)
        nrm_kwargs = _kwargs_list(norm_kwargs, n, "norm_kwargs", owner)

        layers: list[nn.Module] = []
        for i, (c_in, c_out) in enumerate(zip([in_features] + cells[:-1], cells)):
            conv_kwargs = {
                "kernel_size": self.kernel_sizes[i],
                "stride": self.strides[i],
                "padding": self.paddings[i],
                "bias": bias_last_layer if i == n - 1 else True,
            }
            if c_in is None:
                layers.append(create_on_device(self._lazy_conv, device, c_out, **conv_kwargs))
            else:
                layers.append(create_on_device(self._conv, device, c_in, c_out, **conv_kwargs))
            if norm_class is not None:
                layers.append(create_on_device(norm_class, device, **nrm_kwargs[i]))
            layers.append(create_on_device(activation_class, device, **act_kwargs[i]))
        if aggregator_class is not None:
            agg_kwargs = dict(aggregator_kwargs or {})
            if aggregator_class is SquashDims:
                agg_kwargs.setdefault("ndims_in", self._spatial + 1)
            layers.append(create_on_device(aggregator_class, device, **agg_kwargs))
        super().__init__(*layers)

    def __getitem__(self, idx):
        # nn.Sequential slices rebuild ``type(self)`` from modules, which this constructor does not take.
        if isinstance(idx, slice):
            return nn.Sequential(*list(self)[idx])
        return super().__getitem__(idx)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        # Convolutions take one leading batch dimension: fold any others into it and back.
        core = self._spatial + 1
        batch = inputs.shape[:-core]
        if len(batch) != 1:
            x = inputs.reshape(-1, *inputs.shape[-core:])
        else:
            x = inputs
        for module in self:
            x = module(x)
        if len(batch) != 1:
            x = x.reshape(*batch, *x.shape[1:])
        if self.squeeze_output:
            while x.ndim > len(batch) and x.shape[-1] == 1:
                x = x.squeeze(-1)
        return x


class ConvNet(_ConvNetBase):
    """A 2d convolutional network: ``depth`` convolutions, each followed by optional norm and an activation.

    The output goes through ``aggregator_class`` (by default :class:`SquashDims`, flattening
    ``[C, H, W]`` into one feature dimension). Inputs may have any number of leading batch dimensions.

    Args:
        in_features (int, optional): input channels; ``None`` uses a lazy first convolution.
        depth (int, optional): number of convolutions (defaults to the length of ``num_cells``).
        num_cells (int or sequence of int, optional): output channels of each convolution. Defaults to
            ``[32, 32, 32]``.
        kernel_sizes (int or sequence, optional): kernel size(s). Defaults to ``3``.
        strides (int or sequence, optional): stride(s). Defaults to ``1``.
        paddings (int or sequence, optional): padding(s). Defaults to ``0``.
        activation_class (type or callable, optional): activation. Defaults to ``nn.ELU``.
        activation_kwargs (dict or list of dict, optional): its keyword arguments (one per layer or one
            for all).
        norm_class (type or callable, optional): normalisation after each convolution.
        norm_kwargs (dict or list of dict, optional): its keyword arguments.
        bias_last_layer (bool, optional): bias in the last convolution. Defaults to ``True``.
        aggregator_class (type or callable, optional): module applied last. Defaults to
            :class:`SquashDims`; ``None`` keeps the feature maps.
        aggregator_kwargs (dict, optional): its keyword arguments.
        squeeze_output (bool, optional): squeeze the trailing singleton dimensions of the output (e.g.
            ``[B, C, 1, 1] -> [B, C]``). Defaults to ``False``.
        device (torch.device, optional): device of the parameters.

    Raises:
        ValueError: if a per-layer list has the wrong length, or ``num_cells`` is an int without ``depth``.
        RuntimeError: if ``depth`` and the length of ``num_cells`` disagree.

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
