"""TorchRL's module path for the VIP encoder and reward transforms (re-exports)."""
from torchrl.envs.transforms._vip import VIPTransform
from torchrl.envs.transforms._vip_reward import VIPRewardTransform

__all__ = ["VIPRewardTransform", "VIPTransform"]
