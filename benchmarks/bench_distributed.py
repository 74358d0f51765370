"""Distributed collectors against ``MultiSyncCollector`` doing the same work, measured in the same run.

Two workers on ``GymEnv("Pendulum-v1")`` with an MLP policy, ``--frames`` frames (default 20,000) in batches of
``--frames-per-batch`` (default 1,000, an equal share per worker). Each candidate is built, run to the end and
shut down, in alternation with the others (best of ``--repeats``):

- ``<name>_setup_s``: construction to the first batch, seconds (targets: ``DistributedCollector`` with the
  ``"mp"`` launcher < 3 s [TorchRL 0.14.1 here: 6.6 s]; ``RayCollector`` < 5 s including ``ray.init``).
- ``<name>_vs_multisync``: steady throughput (frames after the first batch per second) against
  ``MultiSyncCollector``'s (target >= 0.8).

Candidates: ``distributed`` (``DistributedCollector(sync=True, launcher="mp")``, gloo on loopback), ``rpc``
(``RPCCollector(sync=True, launcher="mp")``), ``ray`` (``RayCollector(sync=True)``, when Ray is installed; Ray is
started by the candidate and stopped after it, so its start is part of the setup).

Run: ``python benchmarks/bench_distributed.py [--frames N] [--only distributed,rpc]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _common import report  # noqa: E402

from tensordict.nn import TensorDictModule  # noqa: E402

from torchrl.collectors import MultiSyncCollector  # noqa: E402
from torchrl.collectors.distributed import DistributedCollector, RPCCollector  # noqa: E402
from torchrl.envs.libs.gym import GymEnv  # noqa: E402


def make_env() -> GymEnv:
    return GymEnv("Pendulum-v1")


def make_policy() -> TensorDictModule:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def _ray_collector(**kwargs):
    from torchrl.collectors.distributed import RayCollector

    return RayCollector([make_env, make_env], make_policy(), sync=True, **kwargs)


CANDIDATES = {
    "multisync": lambda **kw: MultiSyncCollector([make_env, make_env], make_policy(), **kw),
    "distributed": lambda **kw: DistributedCollector([make_env, make_env], make_policy(), sync=True, launcher="mp", **kw),
    "rpc": lambda **kw: RPCCollector([make_env, make_env], make_policy(), sync=True, launcher="mp", **kw),
    "ray": _ray_collector,
}


def run(name: str, frames: int, frames_per_batch: int) -> tuple[float, float]:
    """(setup seconds, steady frames per second) of one full run of candidate ``name``."""
    t0 = time.perf_counter()
    collector = CANDIDATES[name](frames_per_batch=frames_per_batch, total_frames=frames)
    try:
        it = iter(collector)
        first = next(it)
        t1 = time.perf_counter()
        n = 0
        for batch in it:
            n += batch.numel()
        t2 = time.perf_counter()
    finally:
        collector.shutdown()
        if name == "ray":
            import ray

            ray.shutdown()
    assert first.numel() == frames_per_batch and n == frames - frames_per_batch, (first.shape, n)
    return t1 - t0, n / (t2 - t1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--frames-per-batch", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default=None, help="comma-separated candidates besides multisync")
    args = parser.parse_args()
    names = [n for n in CANDIDATES if n != "multisync"]
    if args.only:
        names = [n for n in args.only.split(",") if n in CANDIDATES and n != "multisync"]
    try:
        import ray  # noqa: F401
        from torchrl.collectors.distributed import RayCollector  # noqa: F401
    except ImportError:
        names = [n for n in names if n != "ray"]
    setup = {n: float("inf") for n in ["multisync", *names]}
    speed = {n: 0.0 for n in setup}
    for _ in range(args.repeats):
        for name in setup:
            s, fps = run(name, args.frames, args.frames_per_batch)
            setup[name] = min(setup[name], s)
            speed[name] = max(speed[name], fps)
    figures = {"multisync_setup_s": setup["multisync"], "multisync_fps": speed["multisync"]}
    for name in names:
        figures[f"{name}_setup_s"] = setup[name]
        figures[f"{name}_vs_multisync"] = speed[name] / speed["multisync"]
    report(figures)


if __name__ == "__main__":
    main()
