"""Collectors against raw loops doing the same work, measured in the same run (interleaved best-of).

Figures (throughput ratios, higher is better; TorchRL 0.14.1 in brackets):
- ``gym_collector_vs_raw``: ``Collector(GymEnv("Pendulum-v1"), mlp, frames_per_batch=1000)`` vs a raw
  gymnasium loop running the same MLP every step (target >= 0.6 [0.18]).
- ``gym_collector_vs_env_rollout``: the same collector vs ``env.rollout(1000, policy)`` on the same env
  (the env's own step loop; > 1 means the collector adds nothing over stepping the env).
- ``multisync_2w_vs_2raw``: ``MultiSyncCollector`` with 2 workers (same env and MLP, 1000 frames per worker
  per batch) vs two independent raw processes running the raw loop (target >= 0.6 [0.21]).
- ``multisync_start_first_batch_s``: construction plus first batch of that collector, seconds (target < 1
  [2.7]).
- ``pendulum_b256_collector_vs_raw``: ``Collector(PendulumEnv(batch_size=[256]), mlp)`` vs raw torch
  dynamics + the MLP at batch 256, storing the same per-step entries (target >= 0.7).
- ``long_run_*``: RSS (MiB) of the parent and of each worker after the first batch and at the end of a long
  ``MultiSyncCollector`` run (2M CartPole frames, random actions; ``BENCH_COLLECTOR_LONG_FRAMES`` changes it).

Throughput figures are also given as CPU-time ratios (``*_cpu``; for processes: the CPU seconds of the
parent and all workers, against those of the raw processes): on a machine shared with other jobs, the CPU
time a candidate consumed is steadier than its wall time.

Run: ``python benchmarks/bench_collector.py``.
"""
from __future__ import annotations

import math
import multiprocessing as mp
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import interleaved_best, report, rss_mib, single_thread  # noqa: E402

import gymnasium as gym  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402

from torchrl.collectors import Collector, MultiSyncCollector  # noqa: E402
from torchrl.envs import PendulumEnv  # noqa: E402
from torchrl.envs.libs.gym import GymEnv  # noqa: E402

FRAMES = 1000
BATCH = 256
T_BATCHED = 50
LONG_FRAMES = int(os.environ.get("BENCH_COLLECTOR_LONG_FRAMES", 2_000_000))


def make_mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)
    )


def make_policy() -> TensorDictModule:
    return TensorDictModule(make_mlp(), in_keys=["observation"], out_keys=["action"])


def make_gym_pendulum() -> GymEnv:
    return GymEnv("Pendulum-v1")


class RawGym:
    """The baseline: gymnasium's Pendulum-v1 stepped with the MLP's actions, resetting on episode end."""

    def __init__(self, seed: int = 0) -> None:
        self.env = gym.make("Pendulum-v1")
        self.obs, _ = self.env.reset(seed=seed)
        self.mlp = make_mlp()

    def run(self, steps: int) -> None:
        env, mlp, obs = self.env, self.mlp, self.obs
        with torch.no_grad():
            for _ in range(steps):
                action = mlp(torch.from_numpy(obs)).numpy()
                obs, _, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    obs, _ = env.reset()
        self.obs = obs


def raw_worker(conn, steps: int) -> None:
    torch.set_num_threads(1)
    raw = RawGym()
    while conn.recv() == "go":
        start = time.process_time()
        raw.run(steps)
        conn.send(time.process_time() - start)


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` (from /proc, clock-tick resolution)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RawProcesses:
    """Two persistent processes running the raw loop; one call runs both once and returns the wall time
    (``cpu()`` returns the CPU seconds both consumed instead)."""

    def __init__(self, n: int, steps: int) -> None:
        ctx = mp.get_context("fork")
        self.conns, self.procs = [], []
        for _ in range(n):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=raw_worker, args=(child, steps), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def _run(self) -> tuple[float, float]:
        start = time.perf_counter()
        for conn in self.conns:
            conn.send("go")
        cpu = sum(conn.recv() for conn in self.conns)
        return time.perf_counter() - start, cpu

    def __call__(self) -> float:
        return self._run()[0]

    def cpu(self) -> float:
        return self._run()[1]

    def close(self) -> None:
        for conn in self.conns:
            conn.send("stop")
        for proc in self.procs:
            proc.join(5)


def raw_pendulum_batched(mlp, th, thdot, steps: int):
    """Pendulum-v1 dynamics at batch 256 with the MLP, storing the entries a collected batch holds."""
    g, m, l, dt, max_speed, max_torque = 10.0, 1.0, 1.0, 0.05, 8.0, 2.0
    n = th.shape[0]
    obs = torch.empty(n, steps, 3)
    next_obs = torch.empty(n, steps, 3)
    acts = torch.empty(n, steps, 1)
    rews = torch.empty(n, steps, 1)
    with torch.no_grad():
        o = torch.stack([th.cos(), th.sin(), thdot], -1)
        for t in range(steps):
            obs[:, t] = o
            u = mlp(o)
            acts[:, t] = u
            u = u.squeeze(-1).clamp(-max_torque, max_torque)
            norm = ((th + math.pi) % (2 * math.pi)) - math.pi
            costs = norm**2 + 0.1 * thdot**2 + 0.001 * u**2
            thdot = (thdot + (3 * g / (2 * l) * th.sin() + 3.0 / (m * l**2) * u) * dt).clamp(-max_speed, max_speed)
            th = th + thdot * dt
            rews[:, t] = -costs.unsqueeze(-1)
            o = torch.stack([th.cos(), th.sin(), thdot], -1)
            next_obs[:, t] = o
    return th, thdot


def cpu_timed(fn):
    def run() -> float:
        start = time.process_time()
        fn()
        return time.process_time() - start

    return run


def main() -> None:
    single_thread()
    figures: dict[str, float] = {}

    # -- single process, gymnasium Pendulum -------------------------------------------------------------------
    raw = RawGym()
    collector = Collector(make_gym_pendulum(), make_policy(), frames_per_batch=FRAMES)
    it = iter(collector)
    best = interleaved_best({"raw": lambda: raw.run(FRAMES), "ours": lambda: next(it)})
    figures["gym_collector_vs_raw"] = best["raw"] / best["ours"]
    best_cpu = interleaved_best({"raw": cpu_timed(lambda: raw.run(FRAMES)), "ours": cpu_timed(lambda: next(it))})
    figures["gym_collector_vs_raw_cpu"] = best_cpu["raw"] / best_cpu["ours"]
    rollout_env = make_gym_pendulum()
    rollout_policy = make_policy()

    def env_rollout():
        with torch.no_grad():
            rollout_env.rollout(FRAMES, rollout_policy, break_when_any_done=False)

    best_floor = interleaved_best({"rollout": env_rollout, "ours": lambda: next(it)})
    figures["gym_collector_vs_env_rollout"] = best_floor["rollout"] / best_floor["ours"]
    figures["gym_collector_us_per_frame"] = best["ours"] / FRAMES * 1e6
    figures["gym_raw_us_per_frame"] = best["raw"] / FRAMES * 1e6
    collector.shutdown()

    # -- single process, batched PendulumEnv ---------------------------------------------------------------------
    mlp = make_mlp()
    state = {"th": torch.rand(BATCH) * 2 * math.pi - math.pi, "thdot": torch.rand(BATCH) * 2 - 1}

    def raw_batched():
        state["th"], state["thdot"] = raw_pendulum_batched(mlp, state["th"], state["thdot"], T_BATCHED)

    batched = Collector(PendulumEnv(batch_size=[BATCH]), TensorDictModule(mlp, ["observation"], ["action"]),
                        frames_per_batch=BATCH * T_BATCHED)
    it_b = iter(batched)
    best = interleaved_best({"raw": raw_batched, "ours": lambda: next(it_b)})
    figures["pendulum_b256_collector_vs_raw"] = best["raw"] / best["ours"]
    best_cpu = interleaved_best({"raw": cpu_timed(raw_batched), "ours": cpu_timed(lambda: next(it_b))})
    figures["pendulum_b256_collector_vs_raw_cpu"] = best_cpu["raw"] / best_cpu["ours"]
    batched.shutdown()

    # -- two workers vs two raw processes --------------------------------------------------------------------------
    start = time.perf_counter()
    multi = MultiSyncCollector([make_gym_pendulum] * 2, make_policy(), frames_per_batch=2 * FRAMES)
    it_m = iter(multi)
    next(it_m)
    figures["multisync_start_first_batch_s"] = time.perf_counter() - start
    raws = RawProcesses(2, FRAMES)
    best = interleaved_best({"raw": raws, "ours": lambda: next(it_m)})
    figures["multisync_2w_vs_2raw"] = best["raw"] / best["ours"]
    pids = [p.pid for p in multi._pool.procs]

    def ours_cpu() -> float:  # parent + both workers
        before = time.process_time() + sum(proc_cpu_seconds(pid) for pid in pids)
        next(it_m)
        return time.process_time() + sum(proc_cpu_seconds(pid) for pid in pids) - before

    best_cpu = interleaved_best({"raw": raws.cpu, "ours": ours_cpu})
    figures["multisync_2w_vs_2raw_cpu"] = best_cpu["raw"] / best_cpu["ours"]
    raws.close()
    multi.shutdown()

    # -- long run: memory stays flat -----------------------------------------------------------------------------------
    long_run = MultiSyncCollector([lambda: GymEnv("CartPole-v1")] * 2, None, frames_per_batch=4000, total_frames=LONG_FRAMES)
    pids = [p.pid for p in long_run._pool.procs]
    start = time.perf_counter()
    for i, _ in enumerate(long_run):
        if i == 0:
            figures["long_run_parent_rss_start_mib"] = rss_mib()
            for w, pid in enumerate(pids):
                figures[f"long_run_worker{w}_rss_start_mib"] = rss_mib(pid)
    figures["long_run_parent_rss_end_mib"] = rss_mib()
    for w, pid in enumerate(pids):
        figures[f"long_run_worker{w}_rss_end_mib"] = rss_mib(pid)
    figures["long_run_frames"] = float(long_run._frames)
    figures["long_run_seconds"] = time.perf_counter() - start
    long_run.shutdown()
    report(figures)


if __name__ == "__main__":
    main()
