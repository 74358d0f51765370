"""``torchrl.envs``: the environment API, native environments, transforms, and utilities."""
from torchrl._utils._exploration import ExplorationType, exploration_type, set_exploration_type
from torchrl.envs.common import EnvBase
from torchrl.envs._wrapper import _EnvWrapper
from torchrl.envs.batched_envs import ParallelEnv, SerialEnv
from torchrl.envs.custom import PendulumEnv, TicTacToeEnv
from torchrl.envs.env_creator import EnvCreator, EnvMetaData, env_creator, get_env_metadata
from torchrl.envs.gym_like import GymLikeEnv, default_info_dict_reader
from torchrl.envs.libs.envpool import MultiThreadedEnv, MultiThreadedEnvWrapper
from torchrl.envs.libs.gym import GymEnv, GymWrapper, gym_backend, register_gym_spec_conversion, set_gym_backend
from torchrl.envs.transforms import *  # noqa: F401,F403
from torchrl.envs.transforms import __all__ as _transform_names
from torchrl.envs.utils import (
    MarlGroupMapType,
    RandomPolicy,
    check_env_specs,
    check_marl_grouping,
    get_available_libraries,
    make_composite_from_td,
    step_mdp,
    terminated_or_truncated,
)

__all__ = [
    "EnvBase",
    "EnvCreator",
    "EnvMetaData",
    "ParallelEnv",
    "SerialEnv",
    "env_creator",
    "get_env_metadata",
    "GymEnv",
    "GymLikeEnv",
    "GymWrapper",
    "MultiThreadedEnv",
    "MultiThreadedEnvWrapper",
    "default_info_dict_reader",
    "gym_backend",
    "register_gym_spec_conversion",
    "set_gym_backend",
    "ExplorationType",
    "MarlGroupMapType",
    "PendulumEnv",
    "TicTacToeEnv",
    "RandomPolicy",
    "check_env_specs",
    "check_marl_grouping",
    "exploration_type",
    "get_available_libraries",
    "make_composite_from_td",
    "set_exploration_type",
    "step_mdp",
    "terminated_or_truncated",
    *_transform_names,
]
