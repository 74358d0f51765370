"""Native environments written in torch (no external simulator)."""
from torchrl.envs.custom.pendulum import PendulumEnv
from torchrl.envs.custom.tictactoeenv import TicTacToeEnv

__all__ = ["PendulumEnv", "TicTacToeEnv"]
