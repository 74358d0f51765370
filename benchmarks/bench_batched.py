"""Batched environments: ``ParallelEnv`` against gymnasium's ``AsyncVectorEnv``, ``SerialEnv`` against a raw loop.

Figures (same process, interleaved best-of; ratios are throughput, higher is better):
- ``parallel_native_vs_async``: ``ParallelEnv(2, PendulumEnv).rollout(1000, policy=mlp)`` against
  ``gymnasium.vector.AsyncVectorEnv`` with 2 ``Pendulum-v1`` stepped 1000 times with the same MLP
  (target >= 1.5).
- ``parallel_gym_vs_async``: the same with gymnasium's own ``Pendulum-v1`` inside each worker (through
  ``torchrl.envs.libs.gym.GymEnv``), so both sides run identical physics and only the transport differs.
- ``parallel_start_s`` / ``async_start_s``: construction plus first reset, in seconds (target < 1 s).
- ``serial_vs_raw``: ``SerialEnv(2, PendulumEnv).rollout(1000)`` against stepping the two envs by hand
  and stacking once at the end, in CPU time of this process (robust to other processes' load).
- ``*_cpu_vs_async``: the same comparisons in total CPU time per step (main process + workers, read from
  ``/proc`` on Linux): what a step costs the machine, independent of how busy other processes keep it.

Run: ``python benchmarks/bench_batched.py``.
"""
from __future__ import annotations

import os
import sys
import time

import gymnasium as gym
import torch
from tensordict.nn import TensorDictModule
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from _common import interleaved_best, report, single_thread  # noqa: E402

from torchrl.envs import PendulumEnv  # noqa: E402
from torchrl.envs.batched_envs import ParallelEnv, SerialEnv  # noqa: E402
from torchrl.envs.libs.gym import GymEnv  # noqa: E402

T = 1000
WORKERS = 2

def make_gym_pendulum():
    return GymEnv("Pendulum-v1")


def make_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))


_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_of(pids) -> float:
    """CPU seconds (user + system) of processes ``pids`` (Linux ``/proc``; 0 elsewhere)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        total += int(fields[11]) + int(fields[12])
    return total / _TCK


class _Timed:
    """Runs ``fn`` and returns its wall time; keeps the best total CPU time (this process + ``pids``)."""

    def __init__(self, fn, pids=()):
        self.fn, self.pids, self.best_cpu = fn, list(pids), float("inf")

    def __call__(self) -> float:
        c0, p0, t0 = _cpu_of(self.pids), time.process_time(), time.perf_counter()
        self.fn()
        t1, p1, c1 = time.perf_counter(), time.process_time(), _cpu_of(self.pids)
        self.best_cpu = min(self.best_cpu, (p1 - p0) + (c1 - c0))
        return t1 - t0


def async_rollout(venv, mlp) -> None:
    obs, _ = venv.reset(seed=0)
    with torch.no_grad():
        for _ in range(T):
            action = mlp(torch.as_tensor(obs, dtype=torch.float32)).numpy()
            obs, rew, term, trunc, _ = venv.step(action)


def parallel_rollout(env, policy) -> None:
    with torch.no_grad():
        env.rollout(T, policy, break_when_any_done=False)


def raw_serial(envs) -> None:
    """Two envs stepped by hand (public step + step_mdp), one stack per env at the end."""
    tds = [env.reset() for env in envs]
    steps = [[] for _ in envs]
    for _ in range(T):
        for i, env in enumerate(envs):
            td = env.step(env.rand_action(tds[i]))
            steps[i].append(td)
            tds[i] = env.step_mdp(td)
    torch.stack([torch.stack(s) for s in steps])


def start_time(make) -> float:
    t0 = time.perf_counter()
    env = make()
    env.reset()
    elapsed = time.perf_counter() - t0
    env.close()
    return elapsed


def main() -> None:
    single_thread()
    mlp = make_mlp()
    policy = TensorDictModule(mlp, in_keys=["observation"], out_keys=["action"])

    venv = gym.vector.AsyncVectorEnv([lambda: gym.make("Pendulum-v1")] * WORKERS)
    native = ParallelEnv(WORKERS, PendulumEnv)
    gymmed = ParallelEnv(WORKERS, make_gym_pendulum)
    native.set_seed(0)
    gymmed.set_seed(0)
    serial = SerialEnv(WORKERS, PendulumEnv)
    raw_envs = [PendulumEnv(seed=i) for i in range(WORKERS)]

    runs = {  # (set_seed started the workers; their pids are read for the CPU figures)
        "async": _Timed(lambda: async_rollout(venv, mlp), [p.pid for p in venv.processes]),
        "parallel_native": _Timed(lambda: parallel_rollout(native, policy), [p.pid for p in native._workers.procs]),
        "parallel_gym": _Timed(lambda: parallel_rollout(gymmed, policy), [p.pid for p in gymmed._workers.procs]),
        "serial": _Timed(lambda: serial.rollout(T, break_when_any_done=False)),
        "raw_serial": _Timed(lambda: raw_serial(raw_envs)),
    }
    best = interleaved_best(runs, repeats=12)  # about 3 s per round; more rounds, steadier bests
    cpu = {name: run.best_cpu for name, run in runs.items()}
    starts = interleaved_best(
        {
            "parallel": lambda: start_time(lambda: ParallelEnv(WORKERS, PendulumEnv)),
            "async": lambda: start_time(lambda: gym.vector.AsyncVectorEnv([lambda: gym.make("Pendulum-v1")] * WORKERS)),
        },
        repeats=3,
    )
    venv.close()
    native.close()
    gymmed.close()
    serial.close()
    figures = {
        "parallel_native_vs_async": best["async"] / best["parallel_native"],
        "parallel_gym_vs_async": best["async"] / best["parallel_gym"],
        "serial_vs_raw": cpu["raw_serial"] / cpu["serial"],
        "parallel_native_cpu_vs_async": cpu["async"] / cpu["parallel_native"],
        "parallel_gym_cpu_vs_async": cpu["async"] / cpu["parallel_gym"],
        "parallel_start_s": starts["parallel"],
        "async_start_s": starts["async"],
        "parallel_native_us_per_step": best["parallel_native"] / T * 1e6,
        "parallel_gym_us_per_step": best["parallel_gym"] / T * 1e6,
        "async_us_per_step": best["async"] / T * 1e6,
        "serial_us_per_step": best["serial"] / T * 1e6,
        "serial_wall_vs_raw": best["raw_serial"] / best["serial"],
    }
    report(figures)


if __name__ == "__main__":
    main()
