"""Environment stepping: our ``PendulumEnv`` rollouts against the same dynamics in a raw torch loop.

Figures (ratios of throughput, higher is better; same process, interleaved best-of):
- ``pendulum_b1_vs_raw``: ``PendulumEnv().rollout(2000)`` vs a raw loop at batch 1 (target >= 0.8).
- ``pendulum_b256_vs_raw``: ``PendulumEnv`` rollout at batch 256 vs a raw loop at batch 256 (>= 0.8).
- ``transformed_cost_vs_bare``: per-step time of ``TransformedEnv(PendulumEnv(), Compose(StepCounter(200),
  RewardSum()))`` over the bare env's (target <= 1.3): the median over 40 rounds of the ratio of two adjacent
  500-step rollouts (the order alternating between rounds), so that load which drifts between rounds cancels;
  ``transformed_cost_vs_bare_best`` is the ratio of the two fastest rollouts.
- ``*_cpu``: the same ratios in CPU time of this thread (single-threaded torch, no I/O): steadier than wall
  time when other processes share the machine.
- ``*_paired_median``: the median over rounds of the ratio of two adjacent (wall-time) measurements.

Run: ``python benchmarks/bench_env.py``.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import interleaved_best, report, single_thread  # noqa: E402

from torchrl.envs import Compose, PendulumEnv, RewardSum, StepCounter, TransformedEnv  # noqa: E402

T_SINGLE = 2000
BATCH = 256
T_BATCHED = 200


def angle_normalize(x):
    return ((x + math.pi) % (2 * math.pi)) - math.pi


def raw_pendulum(batch: int, steps: int, clock=time.perf_counter) -> float:
    """The same dynamics, random actions and per-step storage as a rollout, written as plain torch."""
    g, m, l, dt, max_speed, max_torque = 10.0, 1.0, 1.0, 0.05, 8.0, 2.0
    gen = torch.Generator().manual_seed(0)
    th = torch.rand(batch, generator=gen) * 2 * math.pi - math.pi
    thdot = torch.rand(batch, generator=gen) * 2 - 1
    obs = torch.empty(steps, batch, 3)
    acts = torch.empty(steps, batch, 1)
    rews = torch.empty(steps, batch, 1)
    t0 = clock()
    for t in range(steps):
        u = (torch.rand(batch, 1) * 2 - 1) * max_torque
        acts[t] = u
        u = u.squeeze(-1).clamp(-max_torque, max_torque)
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * u**2
        new_thdot = (thdot + (3 * g / (2 * l) * th.sin() + 3.0 / (m * l**2) * u) * dt).clamp(-max_speed, max_speed)
        th = th + new_thdot * dt
        thdot = new_thdot
        rews[t] = -costs.unsqueeze(-1)
        obs[t] = torch.stack([th.cos(), th.sin(), thdot], -1)
    return clock() - t0


def transformed_rounds(bare, transformed, rounds: int = 40, steps: int = 500) -> dict:
    """Per-step cost of ``transformed`` over ``bare`` (rollouts that never stop early): paired medians of
    wall and CPU time over ``rounds`` adjacent pairs, the order alternating, and the ratio of the bests."""
    times = {"bare": [], "transformed": []}
    cpu = {"bare": [], "transformed": []}
    envs = {"bare": bare, "transformed": transformed}
    for env in envs.values():
        env.rollout(steps, break_when_any_done=False)  # warm-up
    for r in range(rounds):
        for name in ("bare", "transformed") if r % 2 == 0 else ("transformed", "bare"):
            w0, c0 = time.perf_counter(), time.thread_time()
            envs[name].rollout(steps, break_when_any_done=False)
            times[name].append(time.perf_counter() - w0)
            cpu[name].append(time.thread_time() - c0)
    return {
        "wall": statistics.median(t / b for t, b in zip(times["transformed"], times["bare"])),
        "cpu": statistics.median(t / b for t, b in zip(cpu["transformed"], cpu["bare"])),
        "best": min(times["transformed"]) / min(times["bare"]),
        "us_per_step": min(times["transformed"]) / steps * 1e6,
    }


def main() -> None:
    single_thread()
    env1 = PendulumEnv(seed=0)
    env_b = PendulumEnv(seed=0)
    td_b = env_b.gen_params(batch_size=[BATCH])
    env_t = TransformedEnv(PendulumEnv(seed=0), Compose(StepCounter(200), RewardSum()))

    def batched_rollout(clock) -> float:
        # the initial state is drawn outside the timed region, as the raw loop draws its own before its clock
        start = env_b.reset(td_b.clone())
        t0 = clock()
        env_b.rollout(T_BATCHED, auto_reset=False, tensordict=start)
        return clock() - t0

    def candidates(clock):
        return {
            "raw_b1": lambda: raw_pendulum(1, T_SINGLE, clock),
            "ours_b1": lambda: env1.rollout(T_SINGLE),
            "raw_b256": lambda: raw_pendulum(BATCH, T_BATCHED, clock),
            "ours_b256": lambda: batched_rollout(clock),
        }

    # about 1 s per round: enough rounds for each best to land in a quiet slice; the paired medians (median
    # over rounds of the ratio of two adjacent measurements) are robust to load that drifts between rounds
    pairs = {"b1": ("raw_b1", "ours_b1"), "b256": ("raw_b256", "ours_b256")}
    rounds = {clock: [] for clock in (time.perf_counter, time.thread_time)}
    for clock, results in rounds.items():
        fns = candidates(clock)
        interleaved_best(fns, repeats=1)  # warm-up
        results.extend(interleaved_best(fns, repeats=1) for _ in range(15))
    best = {k: min(r[k] for r in rounds[time.perf_counter]) for k in candidates(time.perf_counter)}
    cpu = {k: min(r[k] for r in rounds[time.thread_time]) for k in best}

    def paired(name, clock):
        num, den = pairs[name]
        return statistics.median(r[num] / r[den] for r in rounds[clock])

    transformed = transformed_rounds(env1, env_t)
    figures = {
        "pendulum_b1_vs_raw": best["raw_b1"] / best["ours_b1"],
        "pendulum_b256_vs_raw": best["raw_b256"] / best["ours_b256"],
        "transformed_cost_vs_bare": transformed["wall"],
        "transformed_cost_vs_bare_best": transformed["best"],
        "pendulum_b1_vs_raw_cpu": cpu["raw_b1"] / cpu["ours_b1"],
        "pendulum_b256_vs_raw_cpu": cpu["raw_b256"] / cpu["ours_b256"],
        "transformed_cost_vs_bare_cpu": transformed["cpu"],
        "pendulum_b1_vs_raw_paired_median": paired("b1", time.perf_counter),
        "pendulum_b256_vs_raw_paired_median": paired("b256", time.perf_counter),
        "pendulum_b1_us_per_step": best["ours_b1"] / T_SINGLE * 1e6,
        "raw_b1_us_per_step": best["raw_b1"] / T_SINGLE * 1e6,
        "transformed_us_per_step": transformed["us_per_step"],
    }
    report(figures)


if __name__ == "__main__":
    main()
