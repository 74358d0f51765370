"""Transforms with ParallelEnv inside and outside the transform (deterministic envs from ``../_transform_envs.py``)."""
from _transform_envs import CountEnv, ramp_policy
from torchrl.envs import Compose, InitTracker, ParallelEnv, RewardSum, StepCounter, TransformedEnv


def _batched(env):
    try:
        return {"reset": env.reset(), "rollout": env.rollout(6, ramp_policy(), break_when_any_done=False),
                "batch_size": env.batch_size}
    finally:
        env.close()


def scenario_parallel_inside_transform():
    return _batched(TransformedEnv(ParallelEnv(2, CountEnv), Compose(StepCounter(3), RewardSum(), InitTracker())))


def _make_transformed():
    return TransformedEnv(CountEnv(), Compose(StepCounter(3), RewardSum()))


def scenario_transform_inside_parallel():
    return _batched(ParallelEnv(2, _make_transformed))
