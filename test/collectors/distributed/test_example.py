"""The distributed example runs as documented (one machine, the torch.distributed backend)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["distributed", "rpc"])
def test_collect_and_train_example(backend, tmp_path):
    script = os.path.join(ROOT, "examples", "distributed", "collect_and_train.py")
    out = subprocess.run([sys.executable, script, "--backend", backend, "--frames", "2000", "--frames-per-batch", "500"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("batch ")]
    assert len(lines) == 4 and lines[-1].endswith("frames 2000"), out.stdout
