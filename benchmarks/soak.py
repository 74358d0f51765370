"""Soak: a long off-policy collection run with checkpoints and a killed worker.

``MultiSyncCollector`` (2 workers, each a ``PendulumEnv(batch_size=[25])``, an MLP policy) feeds a prioritized replay buffer on a
memmap storage; after each batch the buffer is sampled and the sampled priorities are updated, as a training
loop does. Every ``--checkpoint-every`` batches the buffer (``dumps``) and the collector's state are written
to an atomic checkpoint directory, which is then loaded back into fresh objects and compared. Halfway
through, worker 0 is killed with ``SIGKILL``: the next batch raises, the collector is shut down, and a new
collector and buffer resume from the last checkpoint, as a training script would.

Checks (all must hold, else the exit status is 1):

- ``frames_exact``: the frames delivered, counted from the last restored checkpoint, add up to exactly
  ``--frames``, and the collector's own count agrees;
- ``rss_growth_parent`` / ``rss_growth_workers``: resident memory at the end against its level after the
  warm-up (the first 20% of the frames, by which time the buffer's memmap is fully touched), within 5%;
- ``leaked_files``: no shared-memory file of the collectors left in ``/dev/shm`` and no checkpoint
  temporary left next to the checkpoint, once the run is over;
- ``checkpoints_loadable``: every checkpoint loaded back (buffer length, content of a sample of indices,
  collector frame count).

Run: ``python benchmarks/soak.py`` (2M frames, a few minutes on two cores); ``--frames 50000 --checkpoint-every 2``
for a smoke run.
The last line printed is one JSON object with the figures.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

import torch
from tensordict.nn import TensorDictModule

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import rss_mib  # noqa: E402

from torchrl._utils._atomic import atomic_directory  # noqa: E402
from torchrl.collectors import MultiSyncCollector  # noqa: E402
from torchrl.data import LazyMemmapStorage, TensorDictPrioritizedReplayBuffer  # noqa: E402
from torchrl.envs import PendulumEnv  # noqa: E402


def make_policy() -> TensorDictModule:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1), torch.nn.Tanh())
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def make_env() -> PendulumEnv:
    return PendulumEnv(batch_size=[25])


def make_collector(args, policy) -> MultiSyncCollector:
    return MultiSyncCollector([make_env] * 2, policy, frames_per_batch=args.frames_per_batch,
                              total_frames=args.frames)


def make_buffer(args, scratch: Path) -> TensorDictPrioritizedReplayBuffer:
    return TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, batch_size=args.sample_size,
                                             storage=LazyMemmapStorage(args.capacity, scratch_dir=scratch))


def save(path: Path, rb, collector, delivered: int) -> None:
    with atomic_directory(path) as tmp:
        rb.dumps(tmp / "buffer")
        torch.save({"collector": collector.state_dict(), "delivered": delivered}, tmp / "state.pt")


def load(path: Path, rb, collector=None) -> int:
    rb.loads(path / "buffer")
    state = torch.load(path / "state.pt", weights_only=False)
    if collector is not None:
        collector.load_state_dict(state["collector"])
    return int(state["delivered"])


def verify(path: Path, args, scratch: Path, rb) -> bool:
    """Loads the checkpoint into a fresh buffer and compares it with ``rb``."""
    other = make_buffer(args, scratch)
    load(path, other)
    if len(other) != len(rb):
        return False
    idx = torch.randint(len(rb), (64,))
    same = torch.equal(other.storage[idx]["observation"], rb.storage[idx]["observation"])
    other.storage._storage = None  # release the memmap files of the copy
    return bool(same)


def shm_files(prefix_glob: str = "/dev/shm/torchrl*") -> set[str]:
    return set(glob.glob(prefix_glob))


def run(args) -> dict:
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp(prefix="torchrl-soak-"))
    ckpt, scratch = root / "checkpoint", root / "scratch"
    shm_before = shm_files()
    policy = make_policy()
    collector = make_collector(args, policy)
    rb = make_buffer(args, scratch)
    delivered, batches, killed, restarts, checkpoints, loadable = 0, 0, False, 0, 0, True
    warm_parent = warm_workers = None
    trace: list[tuple[int, float]] = []  # (frames delivered, parent RSS MiB) at each checkpoint
    start = time.perf_counter()
    while True:
        try:
            for batch in collector:
                rb.extend(batch.reshape(-1))
                delivered += batch.numel()
                batches += 1
                sample = rb.sample()
                rb.update_priority(sample["index"], sample["observation"].abs().sum(-1) + 1e-3)
                if warm_parent is None and delivered >= 0.2 * args.frames:
                    warm_parent = rss_mib()
                    warm_workers = [rss_mib(p.pid) for p in collector._pool.procs]
                if batches % args.checkpoint_every == 0:
                    trace.append((delivered, round(rss_mib(), 1)))
                    save(ckpt, rb, collector, delivered)
                    checkpoints += 1
                    loadable &= verify(ckpt, args, scratch / f"check{checkpoints}", rb)
                if not killed and delivered >= args.frames // 2 and checkpoints:
                    os.kill(collector._pool.procs[0].pid, signal.SIGKILL)  # a worker dies mid-run
                    killed = True
            break
        except RuntimeError as err:
            if not killed or "died" not in str(err):
                raise
            restarts += 1
            collector.shutdown()
            collector = make_collector(args, policy)
            rb = make_buffer(args, scratch / f"restart{restarts}")
            delivered = load(ckpt, rb, collector)
    end_parent = rss_mib()
    end_workers = [rss_mib(p.pid) for p in collector._pool.procs]
    frames_collector = collector._frames
    collector.shutdown()
    elapsed = time.perf_counter() - start
    leaked = sorted(shm_files() - shm_before) + [str(p) for p in ckpt.parent.glob(".checkpoint.tmp-*")]
    figures = {
        "frames": delivered,
        "frames_exact": delivered == args.frames and frames_collector == args.frames,
        "fps": delivered / elapsed,
        "seconds": elapsed,
        "batches": batches,
        "checkpoints": checkpoints,
        "checkpoints_loadable": loadable,
        "worker_killed": killed,
        "restarts": restarts,
        "rss_parent_warm_mib": warm_parent or 0.0,
        "rss_parent_end_mib": end_parent,
        "rss_growth_parent": end_parent / warm_parent - 1 if warm_parent else 0.0,
        # the restarted workers' memory against the first workers' warm level
        "rss_growth_workers": max(end_workers) / max(warm_workers) - 1 if warm_workers else 0.0,
        "leaked_files": len(leaked),
    }
    for path in leaked:
        print(f"leaked: {path}", file=sys.stderr)
    print("parent RSS (MiB) at each checkpoint:", trace, file=sys.stderr)
    return figures


def passed(figures: dict, tolerance: float = 0.05) -> bool:
    return bool(
        figures["frames_exact"] and figures["checkpoints_loadable"] and figures["worker_killed"]
        and figures["restarts"] == 1 and figures["leaked_files"] == 0
        and abs(figures["rss_growth_parent"]) <= tolerance and abs(figures["rss_growth_workers"]) <= tolerance
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=2_000_000)
    parser.add_argument("--frames-per-batch", type=int, default=5000, help="a multiple of 50 (2 workers x 25 envs)")
    parser.add_argument("--capacity", type=int, default=200_000)
    parser.add_argument("--sample-size", type=int, default=256)
    parser.add_argument("--checkpoint-every", type=int, default=50, help="batches between checkpoints")
    parser.add_argument("--rss-tolerance", type=float, default=0.05)
    args = parser.parse_args(argv)
    figures = run(args)
    ok = passed(figures, args.rss_tolerance)
    for key, value in figures.items():
        print(f"{key:>28}: {value}")
    print(json.dumps({**{k: (round(v, 4) if isinstance(v, float) else v) for k, v in figures.items()}, "passed": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
