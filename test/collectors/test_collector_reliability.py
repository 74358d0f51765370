"""Process collectors under failure: worker exceptions, killed workers, and clean shutdown (no child
process, no shared-memory file, no semaphore left behind) after shutdown(), a ``with`` block, or GC."""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from torchrl.collectors import MultiAsyncCollector, MultiSyncCollector
from torchrl.testing import CountingEnv

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts processes through /proc")


class FaultyEnv(CountingEnv):
    """Raises ``ZeroDivisionError`` from its ``fail_at``-th step."""

    def __init__(self, fail_at: int = 10**9, **kwargs):
        super().__init__(**kwargs)
        self.fail_at = fail_at
        self.steps = 0

    def _step(self, tensordict):
        self.steps += 1
        if self.steps >= self.fail_at:
            raise ZeroDivisionError(f"simulated failure at step {self.steps}")
        return super()._step(tensordict)


class SlowEnv(CountingEnv):
    def _step(self, tensordict):
        time.sleep(0.01)
        return super()._step(tensordict)


def children() -> set[int]:
    """PIDs of this process's live (non-zombie) children, read from /proc."""
    me, out = os.getpid(), set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(pid))
    return out


def our_shm() -> set[str]:
    """Shared-memory files of this process's collectors, and POSIX semaphores."""
    if not os.path.isdir("/dev/shm"):
        return set()
    mine = f"torchrl-collector-{os.getpid()}-"
    return {f for f in os.listdir("/dev/shm") if f.startswith(mine) or f.startswith("sem.")}


@pytest.fixture
def no_leaks():
    before_children, before_shm = children(), our_shm()
    yield
    gc.collect()
    deadline = time.monotonic() + 10
    while children() - before_children and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children() - before_children == set()
    assert not mp.active_children()
    assert our_shm() - before_shm == set()


def test_worker_exception_surfaces_with_traceback(no_leaks):
    collector = MultiSyncCollector([CountingEnv, lambda: FaultyEnv(fail_at=15)], None, frames_per_batch=20, total_frames=100)
    it = iter(collector)
    next(it)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="MultiSyncCollector worker 1 failed during collect: ZeroDivisionError: simulated failure at step 15") as info:
        next(it)
    assert time.monotonic() - start < 10
    assert "Worker 1 traceback" in str(info.value) and "in _step" in str(info.value)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    with pytest.raises(RuntimeError, match="cannot continue: worker 1 raised ZeroDivisionError during collect"):
        next(iter(collector))
    collector.shutdown()


def test_failing_env_factory_raises_at_construction(no_leaks):
    def bad():
        raise ValueError("no such env")

    with pytest.raises(RuntimeError, match="worker 1 failed during start \\(building its collector\\): ValueError: no such env"):
        MultiAsyncCollector([CountingEnv, bad], None, frames_per_batch=4)


def test_killed_worker_raises_instead_of_hanging(no_leaks):
    collector = MultiSyncCollector([CountingEnv, SlowEnv], None, frames_per_batch=400, total_frames=-1)
    it = iter(collector)
    next(it)
    victim = collector._pool.procs[1].pid
    threading.Timer(0.3, os.kill, (victim, signal.SIGKILL)).start()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="worker 1 died during collect \\(exit code -9, killed by SIGKILL\\)"):
        next(it)
    assert time.monotonic() - start < 10
    collector.shutdown()


def test_killed_idle_worker_is_detected_by_async_collector(no_leaks):
    collector = MultiAsyncCollector([CountingEnv, CountingEnv], None, frames_per_batch=10, total_frames=-1)
    os.kill(collector._pool.procs[0].pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match="worker 0 (died|is unreachable)"):
        for _ in range(50):
            next(iter(collector))
    collector.shutdown()


def test_shutdown_with_block_and_gc_leave_nothing(no_leaks):
    collector = MultiSyncCollector([CountingEnv] * 2, None, frames_per_batch=20, total_frames=40)
    list(collector)
    pids = [p.pid for p in collector._pool.procs]
    assert set(pids) <= children()
    collector.shutdown()
    collector.shutdown()  # idempotent
    with MultiAsyncCollector([CountingEnv] * 2, None, frames_per_batch=10, total_frames=30) as async_collector:
        list(async_collector)
    dropped = MultiSyncCollector([CountingEnv] * 2, None, frames_per_batch=20, total_frames=40)
    next(iter(dropped))
    del dropped


def test_shutdown_while_workers_are_busy(no_leaks):
    collector = MultiAsyncCollector([SlowEnv] * 2, None, frames_per_batch=2000, total_frames=-1)
    it = iter(collector)
    time.sleep(0.2)  # both workers are in the middle of a 20 s batch
    start = time.monotonic()
    collector.shutdown(timeout=1.0)
    assert time.monotonic() - start < 8
    del it


def test_files_of_a_killed_worker_are_removed(no_leaks):
    collector = MultiSyncCollector([CountingEnv] * 2, None, frames_per_batch=20, total_frames=-1)
    next(iter(collector))
    os.kill(collector._pool.procs[0].pid, signal.SIGKILL)
    collector.shutdown()


def test_interpreter_exit_without_shutdown_leaves_nothing():
    script = textwrap.dedent(
        """
        import os, sys
        from torchrl.collectors import MultiSyncCollector
        from torchrl.testing import CountingEnv
        if __name__ == "__main__":
            c = MultiSyncCollector([CountingEnv] * 2, None, frames_per_batch=20, total_frames=-1)
            next(iter(c))
            print(" ".join(str(p.pid) for p in c._pool.procs), os.getpid())
        """
    )
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    *pids, parent = out.stdout.split()
    assert time.monotonic() - start < 120
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
    if os.path.isdir("/dev/shm"):
        assert not [f for f in os.listdir("/dev/shm") if f.startswith(f"torchrl-collector-{parent}-")]


def test_no_worker_exists_after_pipe_error_during_construction(no_leaks, monkeypatch):
    def boom(self, specs, method):
        raise OSError("cannot start")

    from torchrl.collectors import _pool

    monkeypatch.setattr(_pool.WorkerPool, "start", boom)
    with pytest.raises(OSError, match="cannot start"):
        MultiSyncCollector([CountingEnv], None, frames_per_batch=4)
