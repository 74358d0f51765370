"""TorchRL's module path for the batched environments (implemented in :mod:`torchrl.envs.batched`)."""
from torchrl.envs._env_extras import register_extra_hook
from torchrl.envs.batched import BatchedEnvBase, ParallelEnv, SerialEnv

__all__ = ["BatchedEnvBase", "ParallelEnv", "SerialEnv"]


def _make_parallel(create_env_fn, *, num_envs: int = 1, **kwargs):
    return ParallelEnv(num_envs, create_env_fn, **kwargs)


register_extra_hook("make_parallel", _make_parallel)
