"""GAE on [16 envs x 1000 steps]: ``vec_generalized_advantage_estimate`` and the loop version
``generalized_advantage_estimate`` against a tight reverse-time torch loop written here, same process.

Run: ``python benchmarks/bench_gae.py``. Prints one line per measurement, then one JSON object of the figures
(``speedup_*`` = raw-loop time / our time; > 1 means we are faster). Target: ``speedup_vec >= 2``.
"""
from __future__ import annotations

import json
import statistics
import time

import torch

from torchrl.objectives.value.functional import generalized_advantage_estimate, vec_generalized_advantage_estimate

GAMMA, LMBDA = 0.99, 0.95


def raw_loop_gae(gamma, lmbda, value, next_value, reward, done, terminated):
    """The tight hand-written baseline: time-major slices, one fused multiply-add per step."""
    delta = reward + gamma * next_value * (~terminated) - value
    coef = (gamma * lmbda) * (~done)
    deltas, coefs = delta.transpose(0, 1).unbind(0), coef.transpose(0, 1).unbind(0)
    acc = torch.zeros_like(deltas[0])
    out = []
    for t in range(len(deltas) - 1, -1, -1):
        acc = torch.addcmul(deltas[t], coefs[t], acc)
        out.append(acc)
    out.reverse()
    advantage = torch.stack(out, 1)
    return advantage, advantage + value


def make_batch(envs: int, steps: int, seed: int = 0, requires_grad: bool = False):
    gen = torch.Generator().manual_seed(seed)
    shape = (envs, steps, 1)
    value, next_value, reward = (torch.randn(shape, generator=gen) for _ in range(3))
    terminated = torch.rand(shape, generator=gen) < 0.01
    done = terminated | (torch.rand(shape, generator=gen) < 0.01)
    if requires_grad:
        value.requires_grad_()
        next_value.requires_grad_()
    return value, next_value, reward, done, terminated


def median_ms(fn, repeats: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure(envs: int, steps: int, repeats: int) -> dict:
    batch = make_batch(envs, steps)
    args = (GAMMA, LMBDA, *batch)
    ref_adv, _ = raw_loop_gae(*args)
    for fn in (vec_generalized_advantage_estimate, generalized_advantage_estimate):
        torch.testing.assert_close(fn(*args)[0], ref_adv, rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        loop_ms = median_ms(lambda: raw_loop_gae(*args), repeats)
        vec_ms = median_ms(lambda: vec_generalized_advantage_estimate(*args), repeats * 5)
        nonvec_ms = median_ms(lambda: generalized_advantage_estimate(*args), repeats)
    return {"loop_ms": loop_ms, "vec_ms": vec_ms, "nonvec_ms": nonvec_ms}


def measure_backward(envs: int, steps: int, repeats: int) -> dict:
    batch = make_batch(envs, steps, requires_grad=True)
    args = (GAMMA, LMBDA, *batch)

    def run(fn):
        return lambda: fn(*args)[0].sum().backward()

    return {
        "loop_fwd_bwd_ms": median_ms(run(raw_loop_gae), repeats),
        "vec_fwd_bwd_ms": median_ms(run(vec_generalized_advantage_estimate), repeats * 5),
    }


def main() -> None:
    figures: dict = {"shape": [16, 1000, 1], "threads": torch.get_num_threads(), "torch": torch.__version__}
    main_run = measure(16, 1000, repeats=30)
    figures.update(main_run)
    figures["speedup_vec"] = main_run["loop_ms"] / main_run["vec_ms"]
    figures["speedup_nonvec"] = main_run["loop_ms"] / main_run["nonvec_ms"]
    print(f"[16 x 1000] raw loop {main_run['loop_ms']:.3f} ms")
    print(f"[16 x 1000] vec_generalized_advantage_estimate {main_run['vec_ms']:.3f} ms "
          f"-> {figures['speedup_vec']:.1f}x the loop")
    print(f"[16 x 1000] generalized_advantage_estimate {main_run['nonvec_ms']:.3f} ms "
          f"-> {figures['speedup_nonvec']:.2f}x the loop")

    grad_run = measure_backward(16, 1000, repeats=20)
    figures.update(grad_run)
    figures["speedup_vec_fwd_bwd"] = grad_run["loop_fwd_bwd_ms"] / grad_run["vec_fwd_bwd_ms"]
    print(f"[16 x 1000] forward+backward: loop {grad_run['loop_fwd_bwd_ms']:.3f} ms, vec "
          f"{grad_run['vec_fwd_bwd_ms']:.3f} ms -> {figures['speedup_vec_fwd_bwd']:.1f}x")

    long_run = measure(16, 10_000, repeats=5)
    figures["long_10000_loop_ms"] = long_run["loop_ms"]
    figures["long_10000_vec_ms"] = long_run["vec_ms"]
    figures["speedup_vec_10000_steps"] = long_run["loop_ms"] / long_run["vec_ms"]
    print(f"[16 x 10000] raw loop {long_run['loop_ms']:.2f} ms, vec {long_run['vec_ms']:.2f} ms "
          f"-> {figures['speedup_vec_10000_steps']:.1f}x")
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in figures.items()}))


if __name__ == "__main__":
    main()
