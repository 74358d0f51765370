"""TorchRL's historical module path for the transform library (re-exports)."""
from torchrl.envs.transforms import *  # noqa: F401,F403
from torchrl.envs.transforms import __all__  # noqa: F401
from torchrl.envs.transforms._spec_edit import _apply_to_composite  # noqa: F401  (the Pendulum tutorial's import)
