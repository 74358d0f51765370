"""Environment transforms: ``Transform``, ``Compose``, ``TransformedEnv`` and the transform library."""
from torchrl.envs.transforms.cat_tensors import CatTensors
from torchrl.envs.transforms.clip import ClipTransform
from torchrl.envs.transforms.compose import Compose
from torchrl.envs.transforms.device_cast import DeviceCastTransform
from torchrl.envs.transforms.dtype_cast import DoubleToFloat, DTypeCastTransform
from torchrl.envs.transforms.init_tracker import InitTracker
from torchrl.envs.transforms.observation_norm import ObservationNorm
from torchrl.envs.transforms.reward_clipping import RewardClipping
from torchrl.envs.transforms.reward_scaling import RewardScaling
from torchrl.envs.transforms.reward_sum import RewardSum
from torchrl.envs.transforms.squeeze import SqueezeTransform, UnsqueezeTransform
from torchrl.envs.transforms.step_counter import StepCounter
from torchrl.envs.transforms.transform import ObservationTransform, Transform
from torchrl.envs.transforms.transformed_env import TransformedEnv
from torchrl.envs.transforms.vecnorm import VecNorm

__all__ = [
    "CatTensors",
    "ClipTransform",
    "Compose",
    "DTypeCastTransform",
    "DeviceCastTransform",
    "DoubleToFloat",
    "InitTracker",
    "ObservationNorm",
    "ObservationTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SqueezeTransform",
    "StepCounter",
    "Transform",
    "TransformedEnv",
    "UnsqueezeTransform",
    "VecNorm",
]
