"""Environment transforms: ``Transform``, ``Compose``, ``TransformedEnv`` and the transform library."""
from torchrl.envs.transforms.compose import Compose
from torchrl.envs.transforms.init_tracker import InitTracker
from torchrl.envs.transforms.reward_sum import RewardSum
from torchrl.envs.transforms.step_counter import StepCounter
from torchrl.envs.transforms.transform import ObservationTransform, Transform
from torchrl.envs.transforms.transformed_env import TransformedEnv

__all__ = [
    "Compose",
    "InitTracker",
    "ObservationTransform",
    "RewardSum",
    "StepCounter",
    "Transform",
    "TransformedEnv",
]
