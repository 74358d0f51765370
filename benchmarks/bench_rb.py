"""Replay-buffer throughput as ratios to raw preallocated tensors indexed with ``torch.randint`` (same run).

Transition = observation[17] f32, action[6] f32, next/observation[17] f32, next/reward[1] f32, next/done[1] bool.
Figures are CPU time of this process (other processes on a shared machine do not count), each measured in
interleaved blocks with its reference, best block kept, so that load from other processes hits both sides alike:

- ``TensorDictReplayBuffer(LazyTensorStorage(1e6))``: ``sample(256)`` and ``extend`` of 1000-transition batches;
- ``TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5)``: ``sample`` + ``update_priority`` vs raw uniform sampling,
  with 300k stored transitions, then with the 1M buffer full;
- ``LazyMemmapStorage(1e6)``: ``sample(256)``;
- sampling time with 10M vs 100k stored transitions (ours and raw);
- ``SliceSampler`` (1M transitions, 1000-step trajectories, 8 slices of 32) vs ``RandomSampler``, samples/s.

Run: ``python benchmarks/bench_rb.py [--quick]``. The last line printed is one JSON object of the figures.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time

import torch
from tensordict import TensorDict

from torchrl.data import (
    LazyMemmapStorage,
    LazyTensorStorage,
    RandomSampler,
    SliceSampler,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)

torch.set_num_threads(1)
OBS, ACT = 17, 6
EXT_BATCH = 1000
SAMPLE_BATCH = 256


def make_batch(n: int = EXT_BATCH, obs: int = OBS, done_every: int | None = None) -> TensorDict:
    done = torch.rand(n, 1) < 0.01 if done_every is None else (torch.arange(1, n + 1) % done_every == 0).unsqueeze(-1)
    return TensorDict(
        {
            "observation": torch.randn(n, obs),
            "action": torch.randn(n, ACT),
            "next": TensorDict(
                {"observation": torch.randn(n, obs), "reward": torch.randn(n, 1), "done": done}, batch_size=[n]
            ),
        },
        batch_size=[n],
    )


class Raw:
    """The reference: one preallocated tensor per entry, slice-copy extend, ``torch.randint`` + indexing."""

    def __init__(self, capacity: int, obs: int = OBS):
        self.leaves = [
            torch.empty(capacity, obs),
            torch.empty(capacity, ACT),
            torch.empty(capacity, obs),
            torch.empty(capacity, 1),
            torch.empty(capacity, 1, dtype=torch.bool),
        ]
        self.capacity, self.cursor, self.size = capacity, 0, 0

    def extend(self, items) -> None:
        n = items[0].shape[0]
        i = self.cursor
        if i + n <= self.capacity:
            for dst, src in zip(self.leaves, items):
                dst[i : i + n] = src
        else:
            idx = torch.arange(i, i + n) % self.capacity
            for dst, src in zip(self.leaves, items):
                dst[idx] = src
        self.cursor = (i + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, b: int = SAMPLE_BATCH):
        idx = torch.randint(0, self.size, (b,))
        return [leaf[idx] for leaf in self.leaves], idx


def raw_items(batch: TensorDict):
    return [batch.get(k) for k in ("observation", "action", ("next", "observation"), ("next", "reward"), ("next", "done"))]


def per_call(fn, calls: int) -> float:
    # CPU time of this process: other processes on a shared machine do not count (everything is
    # single-threaded here, so CPU time is the time the work takes)
    t0 = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - t0) / calls


def paired(ours, raw, calls: int, blocks: int) -> tuple[float, float]:
    """Best seconds per call of ``ours`` and ``raw``, measured in alternating blocks."""
    for _ in range(10):
        ours()
        raw()
    best_ours = best_raw = float("inf")
    for _ in range(blocks):
        best_raw = min(best_raw, per_call(raw, calls))
        best_ours = min(best_ours, per_call(ours, calls))
    return best_ours, best_raw


def fill(extend, items, n: int) -> None:
    for i in range(n // EXT_BATCH):
        extend(items[i % len(items)])


def main(quick: bool = False) -> dict:
    calls, blocks = (50, 6) if quick else (100, 15)
    capacity = 1_000_000
    batches = [make_batch() for _ in range(8)]
    raw_batches = [raw_items(b) for b in batches]
    res: dict[str, float] = {}

    raw = Raw(capacity)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), batch_size=SAMPLE_BATCH)
    fill(rb.extend, batches, 300_000)
    fill(raw.extend, raw_batches, 300_000)
    counter = iter(range(10**9))
    t_ours, t_raw = paired(
        lambda: rb.extend(batches[next(counter) % 8]), lambda: raw.extend(raw_batches[next(counter) % 8]), calls, blocks
    )
    res["ratio_tdrb_extend_vs_raw"] = t_raw / t_ours
    t_ours, t_raw = paired(rb.sample, raw.sample, calls, blocks)
    res["ratio_tdrb_sample_vs_raw"] = t_raw / t_ours
    res["tdrb_sample_us_per_call"] = t_ours * 1e6
    res["raw_sample_us_per_call"] = t_raw * 1e6

    prb = TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=LazyTensorStorage(capacity), batch_size=SAMPLE_BATCH
    )
    fill(prb.extend, batches, rb.write_count)
    priorities = torch.rand(SAMPLE_BATCH) + 1e-3

    def sample_and_update():
        batch = prb.sample()
        prb.update_priority(batch["index"], priorities)

    t_ours, t_raw = paired(prb.sample, raw.sample, calls, blocks)
    res["ratio_tdprb_sample_vs_raw_uniform"] = t_raw / t_ours
    t_ours, t_raw = paired(sample_and_update, raw.sample, calls, blocks)
    res["ratio_tdprb_sample_update_vs_raw_uniform"] = t_raw / t_ours
    res["tdprb_sample_update_us_per_call"] = t_ours * 1e6
    # the same with the 1M buffer full: the prefix sums and searches then span every block
    raw_full = Raw(capacity)
    fill(raw_full.extend, raw_batches, capacity)
    fill(prb.extend, batches, capacity - len(prb))
    t_ours, t_raw = paired(sample_and_update, raw_full.sample, calls, blocks)
    res["ratio_tdprb_sample_update_full_vs_raw_uniform"] = t_raw / t_ours
    del prb, raw_full

    scratch = tempfile.mkdtemp(prefix="bench_rb_memmap_")
    try:
        mrb = TensorDictReplayBuffer(storage=LazyMemmapStorage(capacity, scratch_dir=scratch), batch_size=SAMPLE_BATCH)
        fill(mrb.extend, batches, rb.write_count)
        t_ours, t_raw = paired(mrb.sample, raw.sample, calls, blocks)
        res["ratio_memmap_sample_vs_raw"] = t_raw / t_ours
        del mrb
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    # sampling time vs capacity: 100k and 10M stored transitions (4-dim observations to bound memory); each
    # pair is measured interleaved, so that both sizes see the same machine load
    small = [make_batch(obs=4) for _ in range(8)]
    big_size = 1_000_000 if quick else 10_000_000
    ours, raws = {}, {}
    for size in (100_000, big_size):
        ours[size] = TensorDictReplayBuffer(storage=LazyTensorStorage(size), batch_size=SAMPLE_BATCH)
        raws[size] = Raw(size, obs=4)
        fill(ours[size].extend, small, size)
        fill(raws[size].extend, [raw_items(b) for b in small], size)
    t_small, t_big = paired(ours[100_000].sample, ours[big_size].sample, calls, blocks)
    res["scaling_big_vs_100k_ours"] = t_big / t_small
    t_small, t_big = paired(raws[100_000].sample, raws[big_size].sample, calls, blocks)
    res["scaling_big_vs_100k_raw"] = t_big / t_small
    t_ours, t_raw = paired(ours[big_size].sample, raws[big_size].sample, calls, blocks)
    res["scaling_big_vs_raw"] = t_raw / t_ours
    del ours, raws

    # SliceSampler vs RandomSampler on 1M transitions made of 1000-step trajectories
    traj = [make_batch(done_every=1000) for _ in range(8)]
    slice_rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(capacity), sampler=SliceSampler(num_slices=8), batch_size=SAMPLE_BATCH
    )
    random_rb = TensorDictReplayBuffer(
        storage=LazyTensorStorage(capacity), sampler=RandomSampler(), batch_size=SAMPLE_BATCH
    )
    fill(slice_rb.extend, traj, capacity)
    fill(random_rb.extend, traj, capacity)
    t_slice, t_random = paired(slice_rb.sample, random_rb.sample, calls, blocks)
    res["slice_sampler_samples_per_s"] = SAMPLE_BATCH / t_slice
    res["random_sampler_samples_per_s"] = SAMPLE_BATCH / t_random
    res["ratio_slice_vs_random"] = t_random / t_slice

    for key, value in res.items():
        print(f"{key:45s} {value:12.4g}")
    print(json.dumps({k: round(v, 4) for k, v in res.items()}))
    return res


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and a 1M (not 10M) scaling point")
    main(parser.parse_args().quick)
