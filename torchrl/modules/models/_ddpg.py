"""DDPG actor and critic networks (Lillicrap et al., 2015) for vector and image observations.

All input sizes are inferred (lazy layers) unless given in the keyword dictionaries, which are merged into
the defaults documented on each class.
"""
from __future__ import annotations

import torch
from torch import nn

from torchrl.modules.models._convnet import ConvNet
from torchrl.modules.models._mlp import MLP
from torchrl.modules.models.utils import SquashDims

__all__ = ["DdpgCnnActor", "DdpgCnnQNet", "DdpgMlpActor", "DdpgMlpQNet"]


def _conv_kwargs(defaults: dict, user: dict | None, use_avg_pooling: bool, device) -> dict:
    kwargs = dict(defaults, device=device)
    if use_avg_pooling:
        kwargs.update(aggregator_class=nn.AdaptiveAvgPool2d, aggregator_kwargs={"output_size": (1, 1)},
                      squeeze_output=True)
    else:
        kwargs.update(aggregator_class=SquashDims)
    kwargs.update(user or {})
    return kwargs


class DdpgCnnActor(nn.Module):
    """DDPG actor on images: a :class:`ConvNet` then an :class:`MLP`; returns ``(action, hidden)``.

    Args:
        action_dim (int): action size.
        conv_net_kwargs (dict, optional): merged into ``num_cells=[32, 64, 64], kernel_sizes=[8, 4, 3],
            strides=[4, 2, 1], paddings=[0, 0, 1], activation_class=nn.ELU`` (TorchRL's defaults).
        mlp_net_kwargs (dict, optional): merged into ``out_features=action_dim, depth=2, num_cells=200,
            activation_class=nn.ELU``.
        use_avg_pooling (bool, optional): average-pool the feature maps instead of flattening them.
            Defaults to ``False``.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import DdpgCnnActor
        >>> action, hidden = DdpgCnnActor(3)(torch.randn(2, 3, 64, 64))
        >>> action.shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        action_dim: int,
        conv_net_kwargs: dict | None = None,
        mlp_net_kwargs: dict | None = None,
        use_avg_pooling: bool = False,
        device=None,
    ) -> None:
        super().__init__()
        conv = {"num_cells": [32, 64, 64], "kernel_sizes": [8, 4, 3], "strides": [4, 2, 1], "paddings": [0, 0, 1],
                "activation_class": nn.ELU}
        self.convnet = ConvNet(**_conv_kwargs(conv, conv_net_kwargs, use_avg_pooling, device))
        mlp = {"out_features": action_dim, "depth": 2, "num_cells": 200, "activation_class": nn.ELU,
               "device": device}
        mlp.update(mlp_net_kwargs or {})
        self.mlp = MLP(**mlp)

    def forward(self, observation: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.convnet(observation)
        return self.mlp(hidden), hidden


class DdpgMlpActor(nn.Module):
    """DDPG actor on vectors: an :class:`MLP` from observation to action.

    Args:
        action_dim (int): action size.
        mlp_net_kwargs (dict, optional): merged into ``out_features=action_dim, num_cells=[400, 300],
            activation_class=nn.ELU``.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import DdpgMlpActor
        >>> DdpgMlpActor(2)(torch.randn(5, 11)).shape
        torch.Size([5, 2])
    """

    def __init__(self, action_dim: int, mlp_net_kwargs: dict | None = None, device=None) -> None:
        super().__init__()
        mlp = {"out_features": action_dim, "num_cells": [400, 300], "activation_class": nn.ELU, "device": device}
        mlp.update(mlp_net_kwargs or {})
        self.mlp = MLP(**mlp)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        return self.mlp(observation)


class DdpgCnnQNet(nn.Module):
    """DDPG critic on images: ``MLP(cat(ConvNet(observation), action))``.

    Args:
        conv_net_kwargs (dict, optional): merged into ``num_cells=[32, 64, 128], kernel_sizes=[8, 4, 3],
            strides=[4, 2, 1], paddings=[0, 0, 1], activation_class=nn.ELU`` (TorchRL's defaults).
        mlp_net_kwargs (dict, optional): merged into ``out_features=1, depth=2, num_cells=200,
            activation_class=nn.ELU``.
        use_avg_pooling (bool, optional): average-pool the feature maps. Defaults to ``True``.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import DdpgCnnQNet
        >>> DdpgCnnQNet()(torch.randn(2, 3, 64, 64), torch.randn(2, 4)).shape
        torch.Size([2, 1])
    """

    def __init__(
        self,
        conv_net_kwargs: dict | None = None,
        mlp_net_kwargs: dict | None = None,
        use_avg_pooling: bool = True,
        device=None,
    ) -> None:
        super().__init__()
        conv = {"num_cells": [32, 64, 128], "kernel_sizes": [8, 4, 3], "strides": [4, 2, 1],
                "paddings": [0, 0, 1], "activation_class": nn.ELU}
        self.convnet = ConvNet(**_conv_kwargs(conv, conv_net_kwargs, use_avg_pooling, device))
        mlp = {"out_features": 1, "depth": 2, "num_cells": 200, "activation_class": nn.ELU, "device": device}
        mlp.update(mlp_net_kwargs or {})
        self.mlp = MLP(**mlp)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.convnet(observation), action)


class DdpgMlpQNet(nn.Module):
    """DDPG critic on vectors: ``net2(cat(net1(observation), action))``.

    Args:
        mlp_net_kwargs_net1 (dict, optional): merged into ``out_features=400, depth=0,
            activation_class=nn.ELU, activate_last_layer=True``.
        mlp_net_kwargs_net2 (dict, optional): merged into ``out_features=1, num_cells=[300],
            activation_class=nn.ELU``.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import DdpgMlpQNet
        >>> DdpgMlpQNet()(torch.randn(5, 11), torch.randn(5, 2)).shape
        torch.Size([5, 1])
    """

    def __init__(
        self, mlp_net_kwargs_net1: dict | None = None, mlp_net_kwargs_net2: dict | None = None, device=None
    ) -> None:
        super().__init__()
        net1 = {"out_features": 400, "depth": 0, "activation_class": nn.ELU, "activate_last_layer": True,
                "device": device}
        net1.update(mlp_net_kwargs_net1 or {})
        net2 = {"out_features": 1, "num_cells": [300], "activation_class": nn.ELU, "device": device}
        net2.update(mlp_net_kwargs_net2 or {})
        self.mlp1 = MLP(**net1)
        self.mlp2 = MLP(**net2)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.mlp2(self.mlp1(observation), action)
