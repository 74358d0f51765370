"""Losses and value estimators."""
from torchrl.objectives.utils import (  # noqa: F401
    HardUpdate,
    KLAdaptiveLR,
    SoftUpdate,
    TargetNetUpdater,
    ValueEstimators,
    add_random_module,
    default_value_kwargs,
    distance_loss,
    group_optimizers,
    hold_out_net,
    hold_out_params,
    next_state_value,
    symexp,
    symlog,
    two_hot_cross_entropy,
    two_hot_decode,
    two_hot_encode,
)
from torchrl.objectives import value  # noqa: F401
from torchrl.objectives.common import AUTO_LOSS_MASK_KEYS, LossModule  # noqa: F401
from torchrl.objectives.dqn import DistributionalDQNLoss, DQNLoss  # noqa: F401
from torchrl.objectives.ddpg import DDPGLoss  # noqa: F401
from torchrl.objectives.td3 import TD3Loss  # noqa: F401
from torchrl.objectives.td3_bc import TD3BCLoss  # noqa: F401
from torchrl.objectives.ppo import ClipPPOLoss, KLPENPPOLoss, PPOLoss  # noqa: F401
from torchrl.objectives.a2c import A2CLoss  # noqa: F401
from torchrl.objectives.reinforce import ReinforceLoss  # noqa: F401
from torchrl.objectives.sac import DiscreteSACLoss, SACLoss  # noqa: F401
