"""A tiny soak (``benchmarks/soak.py``): checkpoints, a killed worker resumed from the last checkpoint, exact
frame count, loadable checkpoints and no leaked files (the full 2M-frame run's figures are in BENCHMARKS.md)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import soak  # noqa: E402


@pytest.mark.slow
def test_soak_smoke(capsys):
    # a loose memory check: a run this short has not reached its steady state
    code = soak.main(["--frames", "20000", "--checkpoint-every", "1", "--capacity", "10000", "--sample-size", "64",
                      "--rss-tolerance", "1.0"])
    figures = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and figures["passed"]
    assert figures["worker_killed"] and figures["restarts"] == 1
    assert figures["frames_exact"] and figures["frames"] == 20000
    assert figures["checkpoints"] >= 2 and figures["checkpoints_loadable"]
    assert figures["leaked_files"] == 0
