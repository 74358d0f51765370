"""Spec sampling on the hot path: ``Composite.rand()`` / ``Composite.zero()`` against hand-built TensorDicts.

A typical environment spec (5 leaves, one of them nested) is sampled with ``rand()`` and ``zero()``; the
reference builds the same TensorDict by hand (same tensor ops, ``TensorDict(dict, batch_size=...)``) in the
same process. Also timed: ``is_in`` on a sample (what ``check_env_specs`` does per step) against the same
checks written by hand. Ratios are spec time / hand time (target: <= 2). Unbatched and batched ([16]).

Run: ``python benchmarks/bench_specs.py``. The last line printed is one JSON object of the figures.
"""
from __future__ import annotations

import json
import time

import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Categorical, Composite, Unbounded

torch.set_num_threads(1)

REPEATS = 7
N = 5_000


def make_spec(batch: tuple[int, ...]) -> Composite:
    spec = Composite(
        observation=Unbounded(shape=(*batch, 4)),
        action=Bounded(-1.0, 1.0, shape=(*batch, 2)),
        reward=Unbounded(shape=(*batch, 1)),
        done=Categorical(2, shape=(*batch, 1), dtype=torch.bool),
        shape=batch,
    )
    spec["info", "step_count"] = Bounded(0, 1000, shape=(*batch, 1), dtype=torch.int64)
    return spec


def hand_rand(batch: tuple[int, ...]):
    size = torch.Size(batch)
    low, high = -torch.ones(*batch, 2), torch.ones(*batch, 2)

    def run():
        return TensorDict(
            {
                "observation": torch.randn(*batch, 4),
                "action": torch.lerp(low, high, torch.rand(*batch, 2)),
                "reward": torch.randn(*batch, 1),
                "done": torch.randint(0, 2, (*batch, 1), dtype=torch.bool),
                "info": TensorDict({"step_count": torch.randint(0, 1001, (*batch, 1))}, batch_size=size),
            },
            batch_size=size,
        )

    return run


def hand_zero(batch: tuple[int, ...]):
    size = torch.Size(batch)

    def run():
        return TensorDict(
            {
                "observation": torch.zeros(*batch, 4),
                "action": torch.zeros(*batch, 2),
                "reward": torch.zeros(*batch, 1),
                "done": torch.zeros((*batch, 1), dtype=torch.bool),
                "info": TensorDict({"step_count": torch.zeros((*batch, 1), dtype=torch.int64)}, batch_size=size),
            },
            batch_size=size,
        )

    return run


def hand_is_in(td: TensorDict):
    def run():
        obs, action = td["observation"], td["action"]
        ok = obs.dtype == torch.float32 and obs.shape[-1:] == (4,)
        ok = ok and action.dtype == torch.float32 and bool((action >= -1).all()) and bool((action <= 1).all())
        ok = ok and td["reward"].dtype == torch.float32 and td["done"].dtype == torch.bool
        step = td["info", "step_count"]
        return ok and bool((step >= 0).all()) and bool((step <= 1000).all())

    return run


def best_time(fn, n: int = N) -> float:
    """Best of REPEATS runs of ``n`` calls, in microseconds per call."""
    for _ in range(200):
        fn()
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best * 1e6


def main() -> dict:
    figures: dict[str, float] = {}
    for name, batch in (("unbatched", ()), ("batch16", (16,))):
        spec = make_spec(batch)
        sample = spec.rand()
        ref = hand_rand(batch)()
        assert spec.is_in(sample) and spec.is_in(ref), "spec and reference disagree"
        assert set(sample.keys(True, True)) == set(ref.keys(True, True))
        for what, ours, theirs in (
            ("rand", spec.rand, hand_rand(batch)),
            ("zero", spec.zero, hand_zero(batch)),
            ("is_in", lambda: spec.is_in(sample), hand_is_in(sample)),
        ):
            t_ours, t_hand = best_time(ours), best_time(theirs)
            figures[f"{what}_{name}_us"] = round(t_ours, 2)
            figures[f"{what}_{name}_hand_us"] = round(t_hand, 2)
            figures[f"{what}_{name}_ratio"] = round(t_ours / t_hand, 3)
            print(f"{what:6s} {name:10s} spec {t_ours:7.2f} us   hand {t_hand:7.2f} us   ratio {t_ours / t_hand:5.2f}")
    print(json.dumps(figures))
    return figures


if __name__ == "__main__":
    main()
