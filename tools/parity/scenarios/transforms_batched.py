"""Transforms with batched envs (SerialEnv inside and outside the transform, batch-sized envs) and in replay
buffers (deterministic envs from ``../_transform_envs.py``); ParallelEnv is in ``transforms_parallel.py``."""
import torch
from tensordict import TensorDict

from _transform_envs import CountEnv, ramp_policy, report, specs
from torchrl.data import LazyTensorStorage, ReplayBuffer, SamplerWithoutReplacement
from torchrl.envs import (
    Compose,
    InitTracker,
    RenameTransform,
    RewardScaling,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
)


def _names(transform):
    return [type(t).__name__ for t in transform]


# -- batched envs ------------------------------------------------------------------------------------------------
def _batched(env):
    try:
        return {"reset": env.reset(), "rollout": env.rollout(6, ramp_policy(), break_when_any_done=False),
                "batch_size": env.batch_size}
    finally:
        env.close()


def scenario_serial_inside_transform():
    return _batched(TransformedEnv(SerialEnv(2, CountEnv), Compose(StepCounter(3), RewardSum(), InitTracker())))


def scenario_transform_inside_serial():
    return _batched(SerialEnv(2, lambda: TransformedEnv(CountEnv(), Compose(StepCounter(3), RewardSum()))))


def scenario_serial_inside_transform_specs():
    env = TransformedEnv(SerialEnv(2, CountEnv), Compose(StepCounter(3), RewardSum(), InitTracker()))
    try:
        return specs(env)
    finally:
        env.close()


def scenario_batch_size_env_partial_done():
    env = TransformedEnv(CountEnv(max_count=2, batch_size=[3]), Compose(StepCounter(), RewardSum(), InitTracker()))
    return report(env, steps=6)


# -- replay buffers --------------------------------------------------------------------------------------------------
def _data():
    return TensorDict(observation=torch.arange(12.0).reshape(4, 3), reward=torch.arange(4.0).reshape(4, 1),
                      done=torch.zeros(4, 1, dtype=torch.bool), batch_size=[4])


def scenario_replay_buffer_transform_on_sample():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=4,
                      transform=Compose(RewardScaling(1.0, 2.0), RenameTransform(["observation"], ["obs"])))
    rb.extend(_data())
    return {"sample": rb.sample(), "stored": rb[:]}


def scenario_replay_buffer_append_transform():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=4)
    rb.append_transform(RewardScaling(0.0, 10.0))
    rb.insert_transform(0, RewardScaling(1.0, 1.0))
    rb.extend(_data())
    return {"sample": rb.sample(), "names": _names(rb.transform)}


def scenario_serial_partial_reset_counters():
    env = TransformedEnv(SerialEnv(2, lambda: CountEnv(max_count=10)), Compose(StepCounter(), RewardSum(), InitTracker()))
    try:
        td = env.reset()
        policy = ramp_policy()
        for _ in range(3):
            td = env.step(policy(td))["next"].clone()
        td["_reset"] = torch.tensor([[False], [True]])
        return env.reset(td).select("step_count", "episode_reward", "is_init", "count")
    finally:
        env.close()
