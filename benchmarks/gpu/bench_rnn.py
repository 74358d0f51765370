"""Recurrent-mode kernels of ``LSTMModule`` on one device: each backend's forward + backward, and what "auto" picks.

Problem (a PPO/R2D2-style training batch): 256 sequences of 1,000 steps, 64 observation features, an LSTM with
128 hidden units (1 layer), episodes restarting at random steps (``is_init`` True with probability 1/200, plus
step 0), the stored recurrent states read at every restart. Each backend (``"pad"``: cuDNN/oneDNN fused kernels
on padded segments; ``"scan"``: masked recurrence in eager torch; ``"triton"``: compiled cells, CUDA with
triton only, also timed with ``recurrent_matmul_precision="tf32"``) runs forward + ``backward()`` of the
features' sum: one warm-up call (compilation included, reported as ``<backend>_first_s``), then the median of
``iters`` timed calls, the device synchronised around each. Then a module with ``recurrent_backend="auto"``
runs once: its first call measures the candidates (its own timings are reported as ``auto_measured_ms``) and
``auto_choice`` must be the fastest of them (``auto_is_fastest_measured``). ``max_diff_vs_pad`` checks that the
backends computed the same features.

Run: ``python benchmarks/gpu/bench_rnn.py [--device cuda] [--small]``; prints one JSON line. ``--small`` runs a
tiny problem in a few seconds on a CPU (a smoke test; its figures mean nothing). ``run(device)`` is what
``benchmarks/gpu/bench_gpu.py`` calls.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from tensordict import TensorDict

from torchrl.modules.tensordict_module import LSTMModule, set_recurrent_mode
from torchrl.modules.tensordict_module import _recurrent_base
from torchrl.modules.tensordict_module._recurrent_auto import problem_key

SIZES = {"n": 256, "steps": 1000, "features": 64, "hidden": 128, "iters": 3}
SMALL = {"n": 4, "steps": 50, "features": 8, "hidden": 16, "iters": 2}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _data(device: torch.device, n: int, steps: int, features: int, hidden: int) -> TensorDict:
    gen = torch.Generator().manual_seed(0)
    is_init = torch.rand(n, steps, 1, generator=gen) < 1 / 200
    is_init[:, 0] = True
    return TensorDict(
        x=torch.randn(n, steps, features, generator=gen),
        is_init=is_init,
        recurrent_state_h=torch.randn(n, steps, 1, hidden, generator=gen) * 0.1,
        recurrent_state_c=torch.randn(n, steps, 1, hidden, generator=gen) * 0.1,
        batch_size=[n, steps],
    ).to(device)


def _module(backend: str, device: torch.device, features: int, hidden: int, **kwargs) -> LSTMModule:
    torch.manual_seed(0)
    return LSTMModule(
        input_size=features, hidden_size=hidden, in_key="x", out_key="y", recurrent_backend=backend, device=device,
        **kwargs,
    )


def _time_backend(module: LSTMModule, data: TensorDict, device: torch.device, iters: int) -> tuple[float, float, torch.Tensor]:
    """``(first call s, median s per call, features)`` of forward + backward."""

    def call():
        module.zero_grad(set_to_none=True)
        with set_recurrent_mode(True):
            out = module(data.copy())
        out["y"].sum().backward()
        return out["y"].detach()

    _sync(device)
    start = time.perf_counter()
    features = call()
    _sync(device)
    first = time.perf_counter() - start
    times = []
    for _ in range(iters):
        _sync(device)
        start = time.perf_counter()
        call()
        _sync(device)
        times.append(time.perf_counter() - start)
    return first, statistics.median(times), features


def run(device: torch.device | str = "cuda", *, small: bool = False) -> dict:
    """Times every backend available on ``device`` and the ``"auto"`` choice; returns the figures (ms)."""
    device = torch.device(device)
    sizes = SMALL if small else SIZES
    data = _data(device, sizes["n"], sizes["steps"], sizes["features"], sizes["hidden"])
    cases = {"pad": {}, "scan": {}}
    if device.type == "cuda" and _recurrent_base._has_triton():
        cases["triton"] = {}
        cases["triton_tf32"] = {"recurrent_matmul_precision": "tf32"}
    result: dict = {"device": str(device), **{k: v for k, v in sizes.items()}, "reset_rate": 1 / 200}
    result["segments"] = int(data["is_init"].sum())
    reference = None
    for name, kwargs in cases.items():
        module = _module(name.split("_")[0], device, sizes["features"], sizes["hidden"], **kwargs)
        first, per_call, features = _time_backend(module, data, device, sizes["iters"])
        result[f"{name}_ms"] = per_call * 1e3
        result[f"{name}_first_s"] = first
        if reference is None:
            reference = features
        else:
            result[f"{name}_max_diff_vs_pad"] = float((features - reference).abs().max())
    auto = _module("auto", device, sizes["features"], sizes["hidden"])
    first, per_call, _ = _time_backend(auto, data, device, sizes["iters"])
    key = problem_key(auto.lstm, data["x"], True)
    measured = _recurrent_base.AUTO.timings[key]
    choice = _recurrent_base.AUTO.choices[key]
    result["auto_choice"] = choice
    result["auto_measured_ms"] = {k: v * 1e3 for k, v in measured.items()}
    result["auto_is_fastest_measured"] = choice == min(measured, key=measured.get)
    result["auto_first_call_s"] = first
    result["auto_ms"] = per_call * 1e3
    timed = {k: result[f"{k}_ms"] for k in ("pad", "scan", "triton") if f"{k}_ms" in result}
    result["fastest_here"] = min(timed, key=timed.get)
    return result


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--small", action="store_true", help="a tiny problem (CPU smoke run; figures mean nothing)")
    args = parser.parse_args(argv)
    result = run(args.device, small=args.small)
    print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in result.items()}, default=str))
    return result


if __name__ == "__main__":
    main()
