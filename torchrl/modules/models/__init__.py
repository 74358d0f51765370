"""``torchrl.modules.models``: networks as plain ``nn.Module``s (a few are TensorDict modules, as noted).

One concept per file: ``mlp.py``, ``convnet.py`` (2d/3d), ``dueling.py``, ``distributional.py``, ``noisy.py``,
``lstm_net.py``, ``multiagent_base.py``/``multiagent.py``, ``mixers.py``, ``ddpg.py``, ``batchrenorm.py``,
``dropout.py``, ``model_based.py`` (Dreamer), ``two_hot.py``, ``cross_group_critic.py``; ``utils.py`` holds
reshaping layers and the scale mappings. ``models.py``, ``exploration.py`` and ``multiagent.py`` also keep
TorchRL's import paths alive.
"""
from __future__ import annotations

from torchrl.modules.models.batchrenorm import BatchRenorm1d
from torchrl.modules.models._convnet import Conv2dNet, Conv3dNet, ConvNet
from torchrl.modules.models.cross_group_critic import CrossCriticGroupSpec, CrossGroupCritic
from torchrl.modules.models._ddpg import DdpgCnnActor, DdpgCnnQNet, DdpgMlpActor, DdpgMlpQNet
from torchrl.modules.models._distributional import DistributionalDQNnet
from torchrl.modules.models._dropout import ConsistentDropout
from torchrl.modules.models._dueling import DuelingCnnDQNet, DuelingMlpDQNet
from torchrl.modules.models._lstm_net import LSTMNet
from torchrl.modules.models._mixers import QMixer, VDNMixer
from torchrl.modules.models._mlp import MLP
from torchrl.modules.models.model_based import (
    DreamerActor,
    ObsDecoder,
    ObsEncoder,
    RSSMPosterior,
    RSSMPrior,
    RSSMRollout,
)
from torchrl.modules.models.multiagent import MultiAgentConvNet, MultiAgentMLP, MultiAgentNetBase
from torchrl.modules.models._noisy import NoisyLazyLinear, NoisyLinear, reset_noise
from torchrl.modules.models._two_hot import SymExpTwoHot
from torchrl.modules.models.utils import (
    biased_softplus,
    expln,
    inv_softplus,
    mappings,
    SquashDims,
    Squeeze2dLayer,
    SqueezeLayer,
)

__all__ = [
    "BatchRenorm1d",
    "ConsistentDropout",
    "Conv2dNet",
    "Conv3dNet",
    "ConvNet",
    "CrossCriticGroupSpec",
    "CrossGroupCritic",
    "DdpgCnnActor",
    "DdpgCnnQNet",
    "DdpgMlpActor",
    "DdpgMlpQNet",
    "DistributionalDQNnet",
    "DreamerActor",
    "DuelingCnnDQNet",
    "DuelingMlpDQNet",
    "LSTMNet",
    "MLP",
    "MultiAgentConvNet",
    "MultiAgentMLP",
    "MultiAgentNetBase",
    "NoisyLazyLinear",
    "NoisyLinear",
    "ObsDecoder",
    "ObsEncoder",
    "QMixer",
    "RSSMPosterior",
    "RSSMPrior",
    "RSSMRollout",
    "SquashDims",
    "Squeeze2dLayer",
    "SqueezeLayer",
    "SymExpTwoHot",
    "VDNMixer",
    "biased_softplus",
    "expln",
    "inv_softplus",
    "mappings",
    "reset_noise",
]
