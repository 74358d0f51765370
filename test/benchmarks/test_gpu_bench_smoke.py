"""The GPU benchmark's CPU smoke run (``benchmarks/gpu/bench_gpu.py --small``): every section runs and reports
figures (their values mean nothing at these sizes; the GPU figures are in BENCHMARKS.md)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_every_section_runs_on_cpu_with_small_sizes():
    proc = subprocess.run(
        [sys.executable, "benchmarks/gpu/bench_gpu.py", "--small", "--device", "cpu", "--compile-backend", "aot_eager"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
        env={"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["device"] == "cpu" and result["small"] is True
    for name in ("rb", "pendulum", "sac", "ppo", "collector", "gae", "rnn"):
        section = result[name]
        assert "error" not in section, (name, section)
    assert result["rb"]["sample_device"] == "cpu"
    assert result["sac"]["loss_max_abs_diff"] < 1e-5  # compiled and eager losses agree on the same batch
    assert result["rnn"]["auto_is_fastest_measured"] is True
    figures = [result["rb"]["sample_vs_raw"], result["pendulum"]["b64_vs_raw"], result["ppo"]["fwd_bwd_vs_raw"],
               result["collector"]["frames_per_s"], result["gae"]["vec_vs_loop"], result["sac"]["speedup"]]
    assert all(math.isfinite(f) and f > 0 for f in figures)


def test_run_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(REPO / "benchmarks/gpu/run.sh")]).returncode == 0
