"""A first look: roll out a small policy on the native Pendulum and print what happened.

Runs on CPU in a few seconds, with no simulator to install:

    python examples/rollout_demo.py
"""
from __future__ import annotations

import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.envs import Compose, PendulumEnv, RewardSum, StepCounter, TransformedEnv, check_env_specs


def main() -> None:
    torch.manual_seed(0)
    env = TransformedEnv(PendulumEnv(batch_size=[8], seed=0), Compose(StepCounter(max_steps=200), RewardSum()))
    check_env_specs(env)
    policy = TensorDictModule(
        nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 1), nn.Tanh()),
        in_keys=["observation"],
        out_keys=["action"],
    )
    start = time.perf_counter()
    with torch.no_grad():
        data = env.rollout(200, policy=policy)
    elapsed = time.perf_counter() - start
    steps = data.numel()
    returns = data["next", "episode_reward"][:, -1].squeeze(-1)
    print(f"rolled out {data.batch_size[0]} pendulums for {data.batch_size[1]} steps ({steps} env steps) in {elapsed:.2f} s")
    print(f"episode returns of the untrained policy: mean {returns.mean():.1f}, min {returns.min():.1f}, max {returns.max():.1f}")
    print(f"every episode was truncated at 200 steps: {bool(data['next', 'truncated'][:, -1].all())}")
    print("keys collected:", sorted(str(k) for k in data.keys(include_nested=True, leaves_only=True)))


if __name__ == "__main__":
    main()
