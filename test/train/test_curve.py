"""``curve.csv`` round trips and the learning-curve PNG."""
from __future__ import annotations

import sys

import pytest

from torchrl.train import CURVE_COLUMNS, LearningCurve, plot_learning_curves, read_curve


def test_round_trip_and_continuation(tmp_path):
    path = tmp_path / "curve.csv"
    curve = LearningCurve(path)
    curve.add(100, 1.25, cpu_seconds=1.0, train_return=-1500.5)
    curve.add(200, 2.5, eval_return=-1200.0)
    curve.close()
    assert path.read_text().splitlines() == [",".join(CURVE_COLUMNS), "100,1.250,1.000,-1500.5,", "200,2.500,,,-1200"]
    again = LearningCurve(path)  # a resumed run appends
    assert [r["frames"] for r in again.rows] == [100.0, 200.0]
    assert again.rows[1] == {"frames": 200.0, "seconds": 2.5, "cpu_seconds": None, "train_return": None,
                             "eval_return": -1200.0}
    again.add(300, 3.0, train_return=-900.0)
    again.close()
    assert [r["frames"] for r in read_curve(path)] == [100.0, 200.0, 300.0]
    assert path.read_text().count("frames") == 1  # no second header


def test_read_curve_rejects_other_files(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("step,value\n1,2\n")
    with pytest.raises(ValueError, match=r"has columns \['step', 'value'\], expected \['frames'"):
        read_curve(path)


def test_plot_writes_png(tmp_path):
    pytest.importorskip("matplotlib")  # the utils extra; installed in the test environment
    rows = [{"frames": 100.0 * i, "seconds": float(i), "cpu_seconds": None, "train_return": -1000.0 + 100 * i,
             "eval_return": None if i % 2 else -900.0 + 100 * i} for i in range(1, 8)]
    path = tmp_path / "sub" / "curve.png"
    assert plot_learning_curves({"seed 0": rows, "seed 1": rows[:3]}, path, title="t", threshold=-200.0)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_without_matplotlib_returns_false(tmp_path, monkeypatch):
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)
    path = tmp_path / "curve.png"
    assert plot_learning_curves({"a": []}, path, title="t") is False
    assert not path.exists()
