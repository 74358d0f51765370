"""CI smoke run of ``benchmarks/bench_transforms.py --small``: every section runs and reports finite figures
(their values mean nothing at these sizes; the measured ratios are in BENCHMARKS.md)."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_every_section_reports_figures():
    proc = subprocess.run(
        [sys.executable, "benchmarks/bench_transforms.py", "--small"], cwd=REPO, capture_output=True, text=True,
        timeout=600, env={"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ("pixel_pipeline_vs_hand", "catframes_rb_hand_vs_ours", "vecnormv2_vs_hand", "observationnorm_vs_hand"):
        assert math.isfinite(figures[name]) and figures[name] > 0, (name, figures)
    assert figures["pixel_stack_shape"] == 4  # CatFrames(4) over one gray channel
    # frames are stored once per step at "pixels" and once at ("next", "pixels"); stacks are not stored
    assert figures["catframes_rb_pixel_bytes_per_step"] == 2 * figures["catframes_rb_frame_bytes"]
