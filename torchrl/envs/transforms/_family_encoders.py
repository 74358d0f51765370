"""Re-exports of the pretrained-encoder transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._r3m import R3MTransform
from torchrl.envs.transforms._vc1 import VC1Transform
from torchrl.envs.transforms._vip import VIPTransform
from torchrl.envs.transforms._vip_reward import VIPRewardTransform

__all__: list[str] = ["R3MTransform", "VC1Transform", "VIPRewardTransform", "VIPTransform"]
