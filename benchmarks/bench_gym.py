"""Gym wrapper: ``GymEnv(...).rollout`` against the raw gymnasium loop on the same env.

Figures (throughput ratios, higher is better; same process, interleaved best-of):
- ``cartpole_vs_raw``: ``GymEnv("CartPole-v1").rollout(10_000, break_when_any_done=False)`` vs
  ``env.step(env.action_space.sample())`` (with ``reset()`` on episode end). Target >= 0.25
  (TorchRL 0.14.1: 0.026).
- ``pendulum_vs_raw``: the same for ``Pendulum-v1`` (a continuous action).
- ``vec8_vs_raw``: ``GymEnv("CartPole-v1", num_envs=8, vectorization_mode="sync")`` rollout vs the raw
  ``SyncVectorEnv`` loop (its autoreset handling the episode ends).
- ``*_us_per_step``: absolute times.

Times are CPU time of the benchmarking thread (``time.thread_time``): every candidate here runs on this
one thread (torch limited to one thread, ``sync`` vector envs), and CPU time is far less sensitive than
wall time to other processes competing for the machine's cores.

Run: ``python benchmarks/bench_gym.py``.
"""
from __future__ import annotations

import os
import sys
import time

import gymnasium as gym

sys.path.insert(0, os.path.dirname(__file__))
from _common import interleaved_best, report, single_thread  # noqa: E402

from torchrl.envs.libs.gym import GymEnv  # noqa: E402

T = 10_000
T_VEC = 1_000
N_VEC = 8


def raw_loop(env, steps: int) -> float:
    env.reset(seed=0)
    sample, step = env.action_space.sample, env.step
    t0 = time.thread_time()
    for _ in range(steps):
        _, _, terminated, truncated, _ = step(sample())
        if terminated or truncated:
            env.reset()
    return time.thread_time() - t0


def raw_vec_loop(env, steps: int) -> float:
    env.reset(seed=0)
    sample, step = env.action_space.sample, env.step
    t0 = time.thread_time()
    for _ in range(steps):
        step(sample())
    return time.thread_time() - t0


def rollout(env, steps: int) -> float:
    t0 = time.thread_time()
    env.rollout(steps, break_when_any_done=False)
    return time.thread_time() - t0


def main() -> None:
    single_thread()
    raw_cartpole, raw_pendulum = gym.make("CartPole-v1"), gym.make("Pendulum-v1")
    raw_vec = gym.make_vec("CartPole-v1", num_envs=N_VEC, vectorization_mode="sync")
    cartpole, pendulum = GymEnv("CartPole-v1"), GymEnv("Pendulum-v1")
    vec = GymEnv("CartPole-v1", num_envs=N_VEC, vectorization_mode="sync")
    best = interleaved_best(
        {
            "raw_cartpole": lambda: raw_loop(raw_cartpole, T),
            "ours_cartpole": lambda: rollout(cartpole, T),
            "raw_pendulum": lambda: raw_loop(raw_pendulum, T),
            "ours_pendulum": lambda: rollout(pendulum, T),
            "raw_vec8": lambda: raw_vec_loop(raw_vec, T_VEC),
            "ours_vec8": lambda: rollout(vec, T_VEC),
        },
        repeats=7,
    )
    report(
        {
            "cartpole_vs_raw": best["raw_cartpole"] / best["ours_cartpole"],
            "pendulum_vs_raw": best["raw_pendulum"] / best["ours_pendulum"],
            "vec8_vs_raw": best["raw_vec8"] / best["ours_vec8"],
            "cartpole_us_per_step": best["ours_cartpole"] / T * 1e6,
            "raw_cartpole_us_per_step": best["raw_cartpole"] / T * 1e6,
            "pendulum_us_per_step": best["ours_pendulum"] / T * 1e6,
            "raw_pendulum_us_per_step": best["raw_pendulum"] / T * 1e6,
            "vec8_us_per_step": best["ours_vec8"] / T_VEC * 1e6,
            "raw_vec8_us_per_step": best["raw_vec8"] / T_VEC * 1e6,
        }
    )


if __name__ == "__main__":
    main()
