"""TorchRL's ``torchrl.trainers.trainers`` import path: re-exports the trainer and its hooks."""
from __future__ import annotations

from torchrl.trainers import *  # noqa: F401,F403
from torchrl.trainers import __all__ as _all
from torchrl.trainers._hook_base import REWARD_KEY

__all__ = list(_all) + ["REWARD_KEY"]
