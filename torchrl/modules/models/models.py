"""Import path kept from TorchRL (``torchrl.modules.models.models``); the classes live in their own files."""
from __future__ import annotations

from torchrl.modules.models._convnet import Conv2dNet, Conv3dNet, ConvNet
from torchrl.modules.models._ddpg import DdpgCnnActor, DdpgCnnQNet, DdpgMlpActor, DdpgMlpQNet
from torchrl.modules.models._distributional import DistributionalDQNnet
from torchrl.modules.models._dueling import DuelingCnnDQNet, DuelingMlpDQNet
from torchrl.modules.models._lstm_net import LSTMNet
from torchrl.modules.models._mlp import MLP

__all__ = [
    "Conv2dNet",
    "Conv3dNet",
    "ConvNet",
    "DdpgCnnActor",
    "DdpgCnnQNet",
    "DdpgMlpActor",
    "DdpgMlpQNet",
    "DistributionalDQNnet",
    "DuelingCnnDQNet",
    "DuelingMlpDQNet",
    "LSTMNet",
    "MLP",
]
