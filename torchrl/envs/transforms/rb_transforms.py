"""TorchRL's module path for the replay-buffer transforms (re-exports)."""
from torchrl.envs.transforms._multi_step_transform import MultiStepTransform
from torchrl.envs.transforms._next_state_reconstructor import NextStateReconstructor
from torchrl.envs.transforms._policy_age_filter import PolicyAgeFilter

__all__ = ["MultiStepTransform", "NextStateReconstructor", "PolicyAgeFilter"]
