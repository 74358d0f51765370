"""Differential testing: runs scenario files under this checkout's torchrl and under TorchRL 0.14.1.

usage (from the project root):
    python tools/parity/run.py                      # every file in scenarios/, both packages, live
    python tools/parity/run.py scenarios/envs.py    # some files (paths relative to tools/parity or absolute)
    python tools/parity/run.py --record             # also store TorchRL's results in recorded/<file>.json
    python tools/parity/run.py --recorded           # compare ours with the stored results (no TorchRL needed)
    options: -k NAME (only scenarios whose name contains NAME), -v (list every scenario), --ours PY, --anchor PY

TorchRL runs from ``$TORCHRL_ANCHOR_VENV`` (default ``~/.cache/torchrl-anchor-venv``; ``../shared/bench/
compare.sh`` builds it). Differences listed in ``deliberate.json`` ("file::scenario": reason) are reported,
not counted as failures. Exit status: 0 when every other scenario agrees.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _compare import differences  # noqa: E402

MARK = "@@parity@@"
ANCHOR = Path(os.environ.get("TORCHRL_ANCHOR_VENV", Path.home() / ".cache" / "torchrl-anchor-venv")) / "bin" / "python"


def run_file(python: str, path: Path, names: list[str], timeout: float = 600.0) -> dict:
    """Runs ``path``'s scenarios under ``python`` in a fresh process and a directory without a torchrl package."""
    with tempfile.TemporaryDirectory() as cwd:
        env = dict(os.environ, PYTHONHASHSEED="0", CUDA_VISIBLE_DEVICES="")
        env.pop("PYTHONPATH", None)
        proc = subprocess.run([python, str(HERE / "_child.py"), str(path), *names], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith(MARK):
            return json.loads(line[len(MARK):])
    raise RuntimeError(f"{python} {path.name}: no result (exit {proc.returncode}):\n{proc.stderr[-3000:]}")


def load_deliberate() -> dict[str, str]:
    path = HERE / "deliberate.json"
    return json.loads(path.read_text()) if path.exists() else {}


def compare_file(path: Path, ours: dict, theirs: dict, deliberate: dict[str, str]) -> tuple[dict, list[str]]:
    """Counts and report lines for one file."""
    counts = {"run": 0, "same": 0, "differ": 0, "deliberate": 0}
    lines = []
    for name, expected in theirs["results"].items():
        counts["run"] += 1
        got = ours["results"].get(name, {"raises": "<missing>", "mro": [], "message": "scenario not run"})
        diffs = differences(got, expected)
        tag = f"{path.name}::{name}"
        if not diffs:
            counts["same"] += 1
            lines.append(f"  same        {tag}")
        elif tag in deliberate:
            counts["deliberate"] += 1
            lines.append(f"  deliberate  {tag}: {deliberate[tag]}")
        else:
            counts["differ"] += 1
            lines.append(f"  DIFFERS     {tag}")
            lines += [f"      {d}" for d in diffs[:8]]
    return counts, lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*")
    parser.add_argument("--record", action="store_true")
    parser.add_argument("--recorded", action="store_true")
    parser.add_argument("-k", dest="keyword", default="")
    parser.add_argument("-v", dest="verbose", action="store_true")
    parser.add_argument("--ours", default=sys.executable)
    parser.add_argument("--anchor", default=str(ANCHOR))
    args = parser.parse_args(argv)
    files = [Path(f) if Path(f).is_absolute() else (Path.cwd() / f if (Path.cwd() / f).exists() else HERE / f)
             for f in args.files] or sorted((HERE / "scenarios").glob("*.py"))
    deliberate = load_deliberate()
    total = {"run": 0, "same": 0, "differ": 0, "deliberate": 0}
    for path in files:
        recorded = HERE / "recorded" / f"{path.stem}.json"
        if args.recorded:
            theirs = json.loads(recorded.read_text())
        else:
            theirs = run_file(args.anchor, path, [])
            if args.record:
                recorded.write_text(json.dumps(theirs, indent=1, sort_keys=False) + "\n")
        if args.keyword:
            theirs = dict(theirs, results={k: v for k, v in theirs["results"].items() if args.keyword in k})
        ours = run_file(args.ours, path, list(theirs["results"]) if args.keyword else [])
        counts, lines = compare_file(path, ours, theirs, deliberate)
        for k in total:
            total[k] += counts[k]
        print(f"{path.name}: {counts['run']} scenarios, {counts['same']} same, {counts['differ']} differ, "
              f"{counts['deliberate']} deliberate")
        for line in lines:
            if args.verbose or not line.startswith("  same"):
                print(line)
    print(json.dumps({"parity": total}))
    return 1 if total["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())
