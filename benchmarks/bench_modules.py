"""TensorDict modules against the bare computation they wrap (same process, interleaved best-of).

Figures (time ratios, lower is better):
- ``prob_actor_b1_vs_bare`` / ``prob_actor_b1024_vs_bare``: ``ProbabilisticActor(TanhNormal,
  return_log_prob=True)`` forward (TensorDict in, sampling as in a collector) against the bare
  ``nn.Module`` plus a hand-written tanh-normal sample and log-probability. Targets: <= 1.3 at batch 1,
  <= 1.05 at batch 1024. ``..._paired_median``: the median over rounds of the ratio of two adjacent
  calls, robust to load that drifts between rounds.
- ``prob_actor_b1_vs_bare_dist`` / ``..._b1024_...``: the same against the bare module plus our
  ``TanhNormal`` distribution object (isolates the TensorDict plumbing).
- ``lstm_step_b8_vs_raw``: one collection step of ``LSTMModule`` (batch 8, state read from and written to
  the TensorDict) against a raw ``nn.LSTM`` call on the same tensors.
- ``lstm_recurrent_vs_segments``: ``LSTMModule`` in recurrent mode on 32 sequences of 64 steps with
  resets (episode starts) inside them, against ``nn.LSTM`` run segment by segment (the loop one writes
  without reset support). ``lstm_recurrent_scan_vs_segments``: the same with ``recurrent_backend="scan"``.

Run: ``python benchmarks/bench_modules.py``.
"""
from __future__ import annotations

import math
import os
import statistics
import sys
import time

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from tensordict.nn.distributions import NormalParamExtractor
from torch import nn

sys.path.insert(0, os.path.dirname(__file__))
from _common import interleaved_best, report, single_thread  # noqa: E402

from torchrl._utils._exploration import ExplorationType, set_exploration_type  # noqa: E402
from torchrl.modules.distributions import TanhNormal  # noqa: E402
from torchrl.modules.tensordict_module import LSTMModule, ProbabilisticActor, set_recurrent_mode  # noqa: E402

LOW, HIGH = -1.0, 1.0


def _actor_case(batch: int, calls: int, repeats: int) -> dict[str, float]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 256), nn.Tanh(), nn.Linear(256, 2), NormalParamExtractor())
    params = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    actor = ProbabilisticActor(
        params,
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": LOW, "high": HIGH},
        return_log_prob=True,
    )
    obs = torch.randn(batch, 3) if batch > 1 else torch.randn(3)
    batch_size = [batch] if batch > 1 else []
    half_range = (HIGH - LOW) / 2
    log_half_range = math.log(half_range)
    log_sqrt_2pi = 0.5 * math.log(2 * math.pi)

    data = TensorDict(observation=obs, batch_size=batch_size)

    def with_actor():
        for _ in range(calls):
            actor(data)  # outputs are overwritten in place, as in a rollout's reused step data
        return None

    def bare_handwritten():
        for _ in range(calls):
            loc, scale = net(obs)
            noise = torch.randn_like(loc)
            u = loc + scale * noise
            t = torch.tanh(u)
            action = t * half_range + (HIGH + LOW) / 2
            log_prob = -(noise * noise) / 2 - scale.log() - log_sqrt_2pi
            log_prob = log_prob - torch.log1p(-t * t + 1e-6) - log_half_range
            log_prob.sum(-1), action

    def bare_dist():
        for _ in range(calls):
            loc, scale = net(obs)
            TanhNormal(loc, scale, low=LOW, high=HIGH).rsample_and_log_prob()

    # one call per repetition, many repetitions: the best ones fit in a quiet slice of a busy machine.
    # Sampling as a collector does (exploration type RANDOM).
    fns = {"actor": with_actor, "bare": bare_handwritten, "dist": bare_dist}
    best = {name: float("inf") for name in fns}
    paired = []
    with set_exploration_type(ExplorationType.RANDOM):
        interleaved_best(fns, repeats=1)  # warm-up
        for _ in range(repeats):  # one interleaved round per call: adjacent measurements of each candidate
            round_ = interleaved_best(fns, repeats=1)
            paired.append(round_["actor"] / round_["bare"])
            best = {name: min(best[name], round_[name]) for name in fns}
    out = {name: value / calls for name, value in best.items()}
    out["paired_median"] = statistics.median(paired)
    return out


def _segments(starts: torch.Tensor) -> list[tuple[int, int, int]]:
    out = []
    for n in range(starts.shape[0]):
        idx = starts[n].nonzero().squeeze(-1).tolist()
        bounds = sorted(set([0] + idx)) + [starts.shape[1]]
        out += [(n, a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    return out


def _lstm_case(backend: str) -> dict[str, float]:
    torch.manual_seed(0)
    n, steps, features, hidden = 32, 64, 16, 64
    module = LSTMModule(input_size=features, hidden_size=hidden, in_key="x", out_key="y", recurrent_backend=backend)
    lstm = module.lstm
    starts = torch.rand(n, steps) < 0.05
    starts[:, 0] = True
    data = TensorDict(
        x=torch.randn(n, steps, features),
        is_init=starts.unsqueeze(-1),
        recurrent_state_h=torch.zeros(n, steps, 1, hidden),
        recurrent_state_c=torch.zeros(n, steps, 1, hidden),
        batch_size=[n, steps],
    )
    segments = _segments(starts)
    x = data["x"]

    def module_run():
        with torch.no_grad(), set_recurrent_mode(True):
            module(data.copy())

    def per_segment():
        out = torch.empty(n, steps, hidden)
        with torch.no_grad():
            for row, a, b in segments:
                out[row, a:b] = lstm(x[row : row + 1, a:b])[0][0]
        return out

    with torch.no_grad(), set_recurrent_mode(True):
        ours = module(data.copy())["y"]
    if not torch.allclose(ours, per_segment(), atol=1e-5):
        raise AssertionError("LSTMModule (recurrent mode) differs from the segment-by-segment reference")
    best = interleaved_best({"module": module_run, "segments": per_segment}, repeats=7)
    return {"module": best["module"], "segments": best["segments"], "n_segments": float(len(segments))}


def _lstm_step_case(calls: int, repeats: int) -> dict[str, float]:
    """One collection step (batch 8): the module with its state in a TensorDict vs a raw ``nn.LSTM`` call."""
    torch.manual_seed(0)
    module = LSTMModule(input_size=16, hidden_size=64, in_key="x", out_key="y")
    lstm = module.lstm
    x = torch.randn(8, 16)
    h = torch.zeros(8, 1, 64)
    data = TensorDict(x=x, recurrent_state_h=h, recurrent_state_c=h.clone(), is_init=torch.zeros(8, 1, dtype=torch.bool), batch_size=[8])
    hx = (torch.zeros(1, 8, 64), torch.zeros(1, 8, 64))

    def module_steps():
        with torch.no_grad():
            for _ in range(calls):
                module(data)

    def raw_steps():
        with torch.no_grad():
            for _ in range(calls):
                lstm(x.unsqueeze(1), hx)

    best = interleaved_best({"module": module_steps, "raw": raw_steps}, repeats=repeats)
    return {"module": best["module"] / calls, "raw": best["raw"] / calls}


def main() -> None:
    single_thread()
    figures = {}
    for batch, calls, repeats in ((1, 1, 3000), (1024, 1, 400)):
        case = _actor_case(batch, calls, repeats)
        figures[f"prob_actor_b{batch}_us"] = case["actor"] * 1e6
        figures[f"prob_actor_b{batch}_vs_bare"] = case["actor"] / case["bare"]
        figures[f"prob_actor_b{batch}_vs_bare_paired_median"] = case["paired_median"]
        figures[f"prob_actor_b{batch}_vs_bare_dist"] = case["actor"] / case["dist"]
    step = _lstm_step_case(1, 2000)
    figures["lstm_step_b8_us"] = step["module"] * 1e6
    figures["lstm_step_b8_vs_raw"] = step["module"] / step["raw"]
    pad = _lstm_case("pad")
    figures["lstm_segments"] = pad["n_segments"]
    figures["lstm_recurrent_ms"] = pad["module"] * 1e3
    figures["lstm_recurrent_vs_segments"] = pad["module"] / pad["segments"]
    scan = _lstm_case("scan")
    figures["lstm_recurrent_scan_vs_segments"] = scan["module"] / scan["segments"]
    report(figures)


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"# total {time.perf_counter() - t0:.1f}s", file=sys.stderr)
