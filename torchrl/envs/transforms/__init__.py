"""Environment transforms: ``Transform``, ``Compose``, ``TransformedEnv`` and the transform library."""
from torchrl.envs.transforms.action_mask import ActionMask
from torchrl.envs.transforms.auto_reset import AutoResetEnv, AutoResetTransform
from torchrl.envs.transforms.cat_tensors import CatTensors
from torchrl.envs.transforms.clip import ClipTransform
from torchrl.envs.transforms.compose import Compose
from torchrl.envs.transforms.device_cast import DeviceCastTransform
from torchrl.envs.transforms.dtype_cast import DoubleToFloat, DTypeCastTransform
from torchrl.envs.transforms.exclude_transform import ExcludeTransform
from torchrl.envs.transforms.frame_skip_transform import FrameSkipTransform
from torchrl.envs.transforms.gsde_noise import gSDENoise
from torchrl.envs.transforms.init_tracker import InitTracker
from torchrl.envs.transforms.noop_reset_env import NoopResetEnv
from torchrl.envs.transforms.observation_norm import ObservationNorm
from torchrl.envs.transforms.rename_transform import RenameTransform
from torchrl.envs.transforms.reward_clipping import RewardClipping
from torchrl.envs.transforms.reward_scaling import RewardScaling
from torchrl.envs.transforms.reward_sum import RewardSum
from torchrl.envs.transforms.select_transform import SelectTransform
from torchrl.envs.transforms.squeeze import SqueezeTransform, UnsqueezeTransform
from torchrl.envs.transforms.step_counter import StepCounter
from torchrl.envs.transforms.tensordict_primer import TensorDictPrimer
from torchrl.envs.transforms.traj_counter import TrajCounter
from torchrl.envs.transforms.transform import ObservationTransform, Transform
from torchrl.envs.transforms.transformed_env import TransformedEnv
from torchrl.envs.transforms.vecnorm import VecNorm

__all__ = [
    "ActionMask",
    "AutoResetEnv",
    "AutoResetTransform",
    "CatTensors",
    "ClipTransform",
    "Compose",
    "DeviceCastTransform",
    "DoubleToFloat",
    "DTypeCastTransform",
    "ExcludeTransform",
    "FrameSkipTransform",
    "InitTracker",
    "NoopResetEnv",
    "ObservationNorm",
    "ObservationTransform",
    "RenameTransform",
    "RewardClipping",
    "RewardScaling",
    "RewardSum",
    "SelectTransform",
    "SqueezeTransform",
    "StepCounter",
    "TensorDictPrimer",
    "TrajCounter",
    "Transform",
    "TransformedEnv",
    "UnsqueezeTransform",
    "VecNorm",
    "gSDENoise",
]
