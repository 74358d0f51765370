"""Batched environments (private package; public names are re-exported by ``torchrl.envs`` and
``torchrl.envs.batched_envs``): ``SerialEnv`` runs sub-envs in this process, ``ParallelEnv`` in worker
processes that exchange data through shared memory."""
from torchrl.envs.batched._base import BatchedEnvBase
from torchrl.envs.batched._parallel import ParallelEnv
from torchrl.envs.batched._serial import SerialEnv

__all__ = ["BatchedEnvBase", "ParallelEnv", "SerialEnv"]
