"""RayCollector against MultiSyncCollector: setup (construction to first batch, ``ray.init`` included) and
steady throughput, 2 Pendulum workers, in one process.

Run: ``python benchmarks/bench_distributed_ray.py --frames 20000`` (prints the figures; the throughput ratio
is RayCollector's frames per second over MultiSyncCollector's).
"""
from __future__ import annotations

import argparse
import time

from torchrl.collectors import MultiSyncCollector
from torchrl.envs import PendulumEnv


def run(build, frames: int, frames_per_batch: int) -> tuple[float, float]:
    """(seconds from construction to the first batch, steady frames per second after it)."""
    start = time.perf_counter()
    collector = build(frames, frames_per_batch)
    try:
        it = iter(collector)
        next(it)
        setup = time.perf_counter() - start
        steady = time.perf_counter()
        n = 0
        for batch in it:
            n += batch.numel()
        fps = n / max(time.perf_counter() - steady, 1e-9)
    finally:
        collector.shutdown()
    return setup, fps


def build_multi(frames: int, frames_per_batch: int):
    return MultiSyncCollector([PendulumEnv, PendulumEnv], None, frames_per_batch=frames_per_batch, total_frames=frames)


def build_ray(frames: int, frames_per_batch: int):
    from torchrl.collectors.distributed import RayCollector

    return RayCollector([PendulumEnv, PendulumEnv], None, frames_per_batch=frames_per_batch, total_frames=frames,
                        sync=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--frames-per-batch", type=int, default=200)
    args = parser.parse_args()
    m_setup, m_fps = run(build_multi, args.frames, args.frames_per_batch)
    print(f"MultiSyncCollector: setup {m_setup:.2f} s, {m_fps:,.0f} frames/s")
    r_setup, r_fps = run(build_ray, args.frames, args.frames_per_batch)
    print(f"RayCollector (ray.init included): setup {r_setup:.2f} s, {r_fps:,.0f} frames/s")
    r2_setup, r2_fps = run(build_ray, args.frames, args.frames_per_batch)
    print(f"RayCollector (Ray running): setup {r2_setup:.2f} s, {r2_fps:,.0f} frames/s")
    print(f"throughput ratio Ray / MultiSync: {max(r_fps, r2_fps) / m_fps:.2f}")
    import ray

    ray.shutdown()


if __name__ == "__main__":
    main()
