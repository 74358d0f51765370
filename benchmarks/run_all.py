"""Runs every speed benchmark (``bench_*.py``) one after the other and collects their figures.

Each script prints, as its last line, one JSON object of ratio figures measured against a raw loop in the same
process. This runner keeps those lines in ``benchmarks/results/speed.json`` (``{script: figures}``) with the
date, the machine's core count and the versions of torch and tensordict; ``BENCHMARKS.md`` quotes them.

    python benchmarks/run_all.py                    # every script
    python benchmarks/run_all.py gym env            # bench_gym.py and bench_env.py only (merged into the file)

Not run in CI: the whole set takes several minutes and wants a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "speed.json"


def run_script(path: Path) -> dict:
    """Runs one benchmark script; returns its figures and wall-clock seconds (or the error it printed)."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=HERE.parent)
    seconds = round(time.perf_counter() - t0, 1)
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-5:], "seconds": seconds}
    try:
        figures = json.loads(lines[-1])
    except json.JSONDecodeError:
        return {"error": [f"last line is not JSON: {lines[-1][:200]}"], "seconds": seconds}
    return {"figures": figures, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="benchmarks to run, e.g. gym env loss (default: all)")
    args = parser.parse_args(argv)
    scripts = sorted(HERE.glob("bench_*.py"))
    if args.names:
        wanted = {f"bench_{name.removeprefix('bench_').removesuffix('.py')}.py" for name in args.names}
        unknown = wanted - {s.name for s in scripts}
        if unknown:
            parser.error(f"unknown benchmark(s) {sorted(unknown)}; available: {[s.stem[6:] for s in scripts]}")
        scripts = [s for s in scripts if s.name in wanted]
    import tensordict
    import torch

    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["_machine"] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "tensordict": tensordict.__version__,
    }
    failed = 0
    for script in scripts:
        print(f"== {script.name}", flush=True)
        outcome = run_script(script)
        results[script.stem] = outcome
        if "error" in outcome:
            failed += 1
            print("   failed:\n     " + "\n     ".join(outcome["error"]), flush=True)
        else:
            for key, value in outcome["figures"].items():
                print(f"   {key:>46}: {value}", flush=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    print(f"figures written to {RESULTS}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
