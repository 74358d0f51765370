"""Environment transforms: ``Transform``, ``Compose``, ``TransformedEnv`` and the transform library."""
from torchrl.envs.transforms._action_mask import ActionMask
from torchrl.envs.transforms._auto_reset import AutoResetEnv, AutoResetTransform
from torchrl.envs.transforms._cat_tensors import CatTensors
from torchrl.envs.transforms._clip import ClipTransform
from torchrl.envs.transforms._compose import Compose
from torchrl.envs.transforms._device_cast import DeviceCastTransform
from torchrl.envs.transforms._dtype_cast import DoubleToFloat, DTypeCastTransform
from torchrl.envs.transforms._exclude_transform import ExcludeTransform
from torchrl.envs.transforms._frame_skip_transform import FrameSkipTransform
from torchrl.envs.transforms._gsde_noise import gSDENoise
from torchrl.envs.transforms._init_tracker import InitTracker
from torchrl.envs.transforms._noop_reset_env import NoopResetEnv
from torchrl.envs.transforms._observation_norm import ObservationNorm
from torchrl.envs.transforms._rename_transform import RenameTransform
from torchrl.envs.transforms._reward_clipping import RewardClipping
from torchrl.envs.transforms._reward_scaling import RewardScaling
from torchrl.envs.transforms._reward_sum import RewardSum
from torchrl.envs.transforms._select_transform import SelectTransform
from torchrl.envs.transforms._squeeze import SqueezeTransform, UnsqueezeTransform
from torchrl.envs.transforms._step_counter import StepCounter
from torchrl.envs.transforms._tensordict_primer import TensorDictPrimer
from torchrl.envs.transforms._traj_counter import TrajCounter
from torchrl.envs.transforms._transform import ObservationTransform, Transform
from torchrl.envs.transforms._transformed_env import TransformedEnv
from torchrl.envs.transforms.vecnorm import VecNorm
from torchrl.envs.transforms import (  # noqa: E402
    _family_actions,
    _family_control,
    _family_encoders,
    _family_pixels,
    _family_rewards,
    _family_state,
    _family_stats,
    _family_time,
    _family_trajectory,
)
from torchrl.envs.transforms._family_actions import *  # noqa: F401,F403
from torchrl.envs.transforms._family_control import *  # noqa: F401,F403
from torchrl.envs.transforms._family_encoders import *  # noqa: F401,F403
from torchrl.envs.transforms._family_pixels import *  # noqa: F401,F403
from torchrl.envs.transforms._family_rewards import *  # noqa: F401,F403
from torchrl.envs.transforms._family_state import *  # noqa: F401,F403
from torchrl.envs.transforms._family_stats import *  # noqa: F401,F403
from torchrl.envs.transforms._family_time import *  # noqa: F401,F403
from torchrl.envs.transforms._family_trajectory import *  # noqa: F401,F403

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
for _family in (
    _family_actions,
    _family_control,
    _family_encoders,
    _family_pixels,
    _family_rewards,
    _family_state,
    _family_stats,
    _family_time,
    _family_trajectory,
):
    __all__ += _family.__all__
del _family
