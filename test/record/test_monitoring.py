"""LoggerMonitor and Every: schedules, rates, lifecycle, read back from a CSV logger."""
from __future__ import annotations

import time

import pytest
import torch

from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.record import CSVLogger, Every, LoggerMonitor


class Counter:
    def __init__(self):
        self.frames = 0
        self.calls = 0

    def stats(self):
        self.calls += 1
        return {"frames": self.frames, "running": True, "name": "ignored"}


def _csv(logger, name):
    path = f"{logger.experiment.log_dir}/scalars/{name}.csv"
    with open(path) as f:
        return [(int(s), float(v)) for s, v in (line.split(",") for line in f.read().splitlines())]


class TestEvery:
    def test_factories(self):
        assert Every.seconds(2) == Every("seconds", 2.0)
        assert Every.counter("frames", 10) == Every("counter", 10, "frames")

    def test_validation(self):
        with pytest.raises(ValueError, match="interval must be > 0, got 0"):
            Every.seconds(0)
        with pytest.raises(ValueError, match="a counter schedule needs the stats key"):
            Every("counter", 5)
        with pytest.raises(ValueError, match="kind must be 'seconds' or 'counter', got 'steps'"):
            Every("steps", 1)


class TestLoggerMonitor:
    def test_counter_schedule_and_rates(self, tmp_path):
        logger = CSVLogger("m", log_dir=tmp_path)
        target = Counter()
        monitor = LoggerMonitor(logger, background=False)
        name = monitor.watch(target, schedule=Every.counter("frames", 100), step="frames", log_on_start=False)
        assert name == "counter"
        assert monitor.step() == {}  # primes
        target.frames = 50
        assert monitor.step() == {}
        target.frames = 250  # crosses 100 and 200: logged once
        first = monitor.step()["counter"]
        assert first == {"frames": 250.0, "running": 1.0}
        time.sleep(0.05)
        target.frames = 310
        second = monitor.step()["counter"]
        assert 0 < second["frames_per_second"] <= 60 / 0.05
        target.frames = 0  # reset: re-baselined, not logged
        assert monitor.step() == {}
        target.frames = 120
        assert "counter" in monitor.step()
        assert [s for s, _ in _csv(logger, "counter/frames")] == [250, 310, 120]
        assert _csv(logger, "counter/running") == [(250, 1.0), (310, 1.0), (120, 1.0)]

    def test_seconds_schedule_and_default_names(self, tmp_path):
        logger = CSVLogger("m", log_dir=tmp_path)
        monitor = LoggerMonitor(logger, background=False)
        a, b = Counter(), Counter()
        assert monitor.watch(a, schedule=Every.seconds(0.05), log_on_start=False) == "counter"
        assert monitor.watch(b, log_on_start=False) == "counter_1"
        out = monitor.step()
        assert list(out) == ["counter_1"]  # no schedule: every poll; the seconds schedule is primed
        time.sleep(0.06)
        assert sorted(monitor.step()) == ["counter", "counter_1"]
        with pytest.raises(ValueError, match="already watched as 'counter'"):
            monitor.watch(Counter(), name="counter")

    def test_replay_buffer_rates(self, tmp_path):
        logger = CSVLogger("m", log_dir=tmp_path)
        rb = ReplayBuffer(storage=LazyTensorStorage(100))
        monitor = LoggerMonitor(logger, background=False)
        monitor.watch(rb, name="rb", schedule=Every.counter("write_count", 50), log_on_start=False)
        assert monitor.step() == {}
        rb.extend(torch.arange(60))
        logged = monitor.step()["rb"]
        assert logged["write_count"] == 60 and logged["size"] == 60

    def test_start_stop_background(self, tmp_path):
        logger = CSVLogger("m", log_dir=tmp_path)
        target = Counter()
        monitor = LoggerMonitor(logger, poll_interval=0.02)
        monitor.watch(target, name="c")
        with monitor:
            assert len(_csv(logger, "c/frames")) == 1  # log_on_start
            deadline = time.monotonic() + 5
            while target.calls < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
        polls = len(_csv(logger, "c/frames"))
        assert polls >= 4  # start + background polls + final (log_on_close)
        time.sleep(0.05)
        assert len(_csv(logger, "c/frames")) == polls  # stopped
        assert logger.is_alive  # the monitor does not own the logger

    def test_unwatch_logs_final(self, tmp_path):
        logger = CSVLogger("m", log_dir=tmp_path)
        monitor = LoggerMonitor(logger, background=False)
        monitor.watch(Counter(), name="c", log_on_start=False, schedule=Every.seconds(100))
        monitor.step()
        monitor.unwatch("c")
        assert len(_csv(logger, "c/frames")) == 1
        with pytest.raises(KeyError, match="nothing is watched as 'c'"):
            monitor.unwatch("c")

    def test_errors(self, tmp_path):
        logger = CSVLogger("m", log_dir=tmp_path)
        with pytest.raises(ValueError, match="on_error must be"):
            LoggerMonitor(logger, on_error="explode")
        monitor = LoggerMonitor(logger, background=False, on_error="raise")
        with pytest.raises(TypeError, match="has no stats\\(\\) method"):
            monitor.watch(object())

        class Broken:
            def stats(self):
                raise RuntimeError("boom")

        monitor.watch(Broken(), name="broken", log_on_start=False)
        with pytest.raises(RuntimeError, match="boom"):
            monitor.step()
        warner = LoggerMonitor(logger, background=False)
        warner.watch(Broken(), name="broken")
        with pytest.warns(UserWarning, match="monitoring 'broken' failed: RuntimeError: boom"):
            assert warner.step() == {}
        quiet = LoggerMonitor(logger, background=False, on_error="ignore")
        quiet.watch(Counter(), name="c", schedule=Every.counter("missing", 1))
        assert quiet.step() == {}

    def test_stats_fn(self, tmp_path):
        logger = CSVLogger("m", log_dir=tmp_path)
        monitor = LoggerMonitor(logger, background=False)
        monitor.watch([1, 2, 3], name="lst", stats_fn=lambda t, scale: {"n": len(t) * scale}, stats_kwargs={"scale": 2})
        assert monitor.step() == {"lst": {"n": 6.0}}
