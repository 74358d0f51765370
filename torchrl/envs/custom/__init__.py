"""Native environments written in torch (no external simulator)."""
from torchrl.envs.custom.pendulum import PendulumEnv

__all__ = ["PendulumEnv"]
