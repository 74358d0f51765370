"""Re-exports of the rewards transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._binarize_reward import BinarizeReward
from torchrl.envs.transforms._linearise_rewards import LineariseRewards
from torchrl.envs.transforms._sign_transform import SignTransform
from torchrl.envs.transforms._success_reward import SuccessReward
from torchrl.envs.transforms._target_return import TargetReturn

__all__: list[str] = ["BinarizeReward", "LineariseRewards", "SignTransform", "SuccessReward", "TargetReturn"]
