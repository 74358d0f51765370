"""Re-exports of the control transforms (issue 20); `torchrl.envs.transforms` exports every name in ``__all__``."""
from torchrl.envs.transforms._finite_tensordict_check import FiniteTensorDictCheck
from torchrl.envs.transforms._remove_empty_specs import RemoveEmptySpecs
from torchrl.envs.transforms._batch_size_transform import BatchSizeTransform
from torchrl.envs.transforms._expand_as import ExpandAs
from torchrl.envs.transforms._stack import Stack
from torchrl.envs.transforms._unary_transform import UnaryTransform
from torchrl.envs.transforms._hash import Hash
from torchrl.envs.transforms._timer import Timer
from torchrl.envs.transforms._policy_age_filter import PolicyAgeFilter
from torchrl.envs.transforms._pin_memory_transform import PinMemoryTransform
from torchrl.envs.transforms._module_transform import ModuleTransform
from torchrl.envs.transforms._vec_gym_env_transform import VecGymEnvTransform
from torchrl.envs.transforms._decode_video_transform import DecodeVideoTransform

__all__: list[str] = ["FiniteTensorDictCheck", "RemoveEmptySpecs", "BatchSizeTransform", "ExpandAs", "Stack", "UnaryTransform", "Hash", "Timer", "PolicyAgeFilter", "PinMemoryTransform", "ModuleTransform", "VecGymEnvTransform", "DecodeVideoTransform"]
