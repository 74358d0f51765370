"""Dueling Q-networks (Wang et al., 2016): ``Q = V + A - mean(A)``."""
from __future__ import annotations

import torch
from torch import nn

from torchrl.modules.models._convnet import ConvNet
from torchrl.modules.models._mlp import MLP

__all__ = ["DuelingCnnDQNet", "DuelingMlpDQNet"]


def _dueling(value: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
    return value + advantage - advantage.mean(dim=-1, keepdim=True)


class DuelingMlpDQNet(nn.Module):
    """A dueling Q-network on vector inputs: a shared MLP trunk, then value and advantage MLP heads.

    The output is ``value + advantage - advantage.mean(-1, keepdim=True)``.

    Args:
        out_features (int or shape): number of actions (advantage head outputs).
        out_features_value (int, optional): value head outputs. Defaults to ``1``.
        mlp_kwargs_feature (dict, optional): :class:`MLP` options of the trunk, merged into the defaults
            ``num_cells=[256, 256], out_features=256, activation_class=nn.ELU, activate_last_layer=True``
            (lazy input size unless ``in_features`` is given).
        mlp_kwargs_output (dict, optional): :class:`MLP` options of each head, merged into
            ``depth=1, num_cells=512, activation_class=nn.ELU``.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import DuelingMlpDQNet
        >>> net = DuelingMlpDQNet(4, mlp_kwargs_feature={"in_features": 8})
        >>> net(torch.randn(3, 8)).shape
        torch.Size([3, 4])
    """

    def __init__(
        self,
        out_features: int | torch.Size,
        out_features_value: int = 1,
        mlp_kwargs_feature: dict | None = None,
        mlp_kwargs_output: dict | None = None,
        device=None,
    ) -> None:
        super().__init__()
        feature = {"num_cells": [256, 256], "out_features": 256, "activation_class": nn.ELU,
                   "activate_last_layer": True, "device": device}
        feature.update(mlp_kwargs_feature or {})
        self.features = MLP(**feature)
        head = {"depth": 1, "num_cells": 512, "activation_class": nn.ELU, "device": device}
        head.update(mlp_kwargs_output or {})  # lazy input size unless given, as TorchRL
        self.advantage = MLP(**{**head, "out_features": out_features})
        self.value = MLP(**{**head, "out_features": out_features_value})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return _dueling(self.value(x), self.advantage(x))


class DuelingCnnDQNet(nn.Module):
    """A dueling Q-network on images: a :class:`ConvNet` trunk, then value and advantage MLP heads.

    Args:
        out_features (int): number of actions.
        out_features_value (int, optional): value head outputs. Defaults to ``1``.
        cnn_kwargs (dict, optional): :class:`ConvNet` options, merged into the Atari defaults
            ``num_cells=[32, 64, 64], kernel_sizes=[8, 4, 3], strides=[4, 2, 1]``.
        mlp_kwargs (dict, optional): :class:`MLP` options of each head (lazy input size), merged into
            ``depth=1, num_cells=512, activation_class=nn.ELU``.
        device (torch.device, optional): device of the parameters.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import DuelingCnnDQNet
        >>> net = DuelingCnnDQNet(6)
        >>> net(torch.randn(2, 4, 84, 84)).shape
        torch.Size([2, 6])
    """

    def __init__(
        self,
        out_features: int,
        out_features_value: int = 1,
        cnn_kwargs: dict | None = None,
        mlp_kwargs: dict | None = None,
        device=None,
    ) -> None:
        super().__init__()
        cnn = {"num_cells": [32, 64, 64], "kernel_sizes": [8, 4, 3], "strides": [4, 2, 1], "device": device}
        cnn.update(cnn_kwargs or {})
        self.features = ConvNet(**cnn)
        head = {"depth": 1, "num_cells": 512, "activation_class": nn.ELU, "device": device}
        head.update(mlp_kwargs or {})
        self.advantage = MLP(**{**head, "out_features": out_features})
        self.value = MLP(**{**head, "out_features": out_features_value})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        return _dueling(self.value(x), self.advantage(x))
