"""``torchrl.envs.libs``: wrappers of third-party environment libraries.

Each library lives in its own module (``gym.py`` for gymnasium / gym), with private helpers beside it
(``_gym_backend.py``, ``_gym_specs.py``, ``_gym_utils.py``, ``_gym_vec.py``). Importing this package does
not import any of the wrapped libraries.
"""
from torchrl.envs.libs.envpool import MultiThreadedEnv, MultiThreadedEnvWrapper
from torchrl.envs.libs.gym import GymEnv, GymWrapper, gym_backend, register_gym_spec_conversion, set_gym_backend

__all__ = [
    "GymEnv",
    "GymWrapper",
    "MultiThreadedEnv",
    "MultiThreadedEnvWrapper",
    "gym_backend",
    "register_gym_spec_conversion",
    "set_gym_backend",
]
