"""Markdown table of the learning checks in ``benchmarks/learning/results/*.json`` (for ``BENCHMARKS.md``).

One row per result file: final deterministic evaluation (mean ± std over seeds, each seed's value being the
mean over its evaluation episodes), seeds whose final evaluation clears the threshold, frames and training
seconds to the first evaluation at or above the threshold (mean over seeds, min-max in brackets), the same
to the env's maximum return where it has one (CartPole: 500), frames/s, and the budget.

    python benchmarks/learning/summarize.py            # prints the table
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MAX_RETURN = {"CartPole-v1": 500.0}


def _first(curve: list[dict], level: float) -> tuple[float, float] | None:
    for row in curve:
        if row.get("eval_return") is not None and row["eval_return"] >= level:
            return row["frames"], row["seconds"]
    return None


def _span(values: list[float], fmt: str) -> str:
    if not values:
        return "not reached"
    mean = statistics.fmean(values)
    if len(values) == 1:
        return fmt.format(mean)
    return f"{fmt.format(mean)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def row(path: Path) -> str:
    data = json.loads(path.read_text())
    agg, seeds = data["aggregate"], data["seeds"]
    thr = agg["threshold"]
    finals = [s["final_eval_return"] for s in seeds]
    std = statistics.pstdev(finals) if len(finals) > 1 else 0.0
    hits = [_first(s["curve"], thr) for s in seeds]
    reached = [h for h in hits if h is not None]
    cells = [
        f"{agg['algo'].upper()} {agg['env']}",
        f"{statistics.fmean(finals):.1f} ± {std:.1f}",
        f"{sum(f >= thr for f in finals)}/{len(finals)} ≥ {thr:g}",
        f"{_span([h[0] / 1000 for h in reached], '{:.0f}k')} ({len(reached)}/{len(seeds)} seeds)",
        _span([h[1] for h in reached], "{:.0f} s"),
    ]
    top = MAX_RETURN.get(agg["env"])
    if top is not None:
        tops = [t for t in (_first(s["curve"], top) for s in seeds) if t is not None]
        cells.append(f"{_span([t[0] / 1000 for t in tops], '{:.0f}k')} / {_span([t[1] for t in tops], '{:.0f} s')}")
    else:
        cells.append("-")
    cells += [f"{agg['fps_mean']:.0f}", f"{agg['frames_budget'] / 1000:.0f}k"]
    return "| " + " | ".join(cells) + " |"


def main() -> int:
    files = sorted((HERE / "results").glob("*.json"))
    if not files:
        print("no results in benchmarks/learning/results/", file=sys.stderr)
        return 1
    print("| check | final eval (3 seeds) | seeds ≥ threshold | frames to threshold | train seconds to threshold "
          "| frames / seconds to max return | frames/s | budget |")
    print("|---|---|---|---|---|---|---|---|")
    for path in files:
        print(row(path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
