"""``Progress``: tqdm bar over frames, plain lines without tqdm."""
from __future__ import annotations

import io
import sys

import pytest

from torchrl.train import Progress


def test_lines_every_interval_and_eval_lines():
    out = io.StringIO()
    progress = Progress(1000, "sac X", bar=False, line_every=300, stream=out)
    for frames in (100, 200, 300, 400, 700):
        progress.update(frames, train_return=-float(frames))
    progress.update(700, eval_return=-123.45)
    progress.close()
    lines = out.getvalue().splitlines()
    assert [line.split(" frames")[0] for line in lines] == ["sac X 300/1000", "sac X 700/1000", "sac X 700/1000"]
    assert lines[0].endswith("return -300.0") and " f/s | " in lines[0]
    assert lines[1].endswith("return -700.0")
    assert lines[2] == "sac X 700/1000 frames | eval -123.5"
    assert not progress.uses_bar


def test_close_prints_the_last_line_once():
    out = io.StringIO()
    progress = Progress(250, "td3", bar=False, line_every=100, stream=out)
    progress.update(100)
    progress.update(250)
    progress.close()
    lines = out.getvalue().splitlines()
    assert [line.split(" frames")[0] for line in lines] == ["td3 100/250", "td3 250/250"]
    assert lines[0].endswith("return -")


def test_resumed_progress_starts_at_initial():
    out = io.StringIO()
    progress = Progress(1000, "ddpg", initial=600, bar=False, line_every=500, stream=out)
    progress.update(700)
    assert out.getvalue() == ""  # 500 was passed before the resume
    progress.update(1000)
    assert out.getvalue().startswith("ddpg 1000/1000 frames")


def test_tqdm_bar_shows_rate_and_returns():
    pytest.importorskip("tqdm")  # the utils extra; installed in the test environment
    out = io.StringIO()
    progress = Progress(1000, "sac", bar=True, stream=out)
    assert progress.uses_bar
    progress.update(500, train_return=-150.0)
    progress.update(1000, eval_return=-140.0)
    progress.close()
    text = out.getvalue()
    assert "1.00k/1.00k" in text and "f/s" in text
    assert "return -150.0 | eval -140.0" in text


def test_without_tqdm_falls_back_to_lines(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    out = io.StringIO()
    progress = Progress(100, "sac", bar=True, line_every=100, stream=out)
    assert not progress.uses_bar
    progress.update(100, train_return=-1.0)
    assert out.getvalue().startswith("sac 100/100 frames")
