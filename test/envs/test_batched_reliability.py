"""``ParallelEnv`` under failure: worker exceptions, killed workers, clean shutdown, leaks, bad factories."""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest
import torch

from torchrl.envs.batched_envs import ParallelEnv, SerialEnv
from torchrl.testing import CountingEnv, CountingEnvCountPolicy


class FaultyEnv(CountingEnv):
    """Raises from ``_step`` at its ``fail_at``-th step, or from ``_reset`` when ``fail_reset``."""

    def __init__(self, fail_at: int = 10**9, fail_reset: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.fail_at = fail_at
        self.fail_reset = fail_reset
        self.steps = 0

    def _step(self, tensordict):
        self.steps += 1
        if self.steps >= self.fail_at:
            raise ZeroDivisionError(f"simulated failure at step {self.steps}")
        return super()._step(tensordict)

    def _reset(self, tensordict, **kwargs):
        if self.fail_reset:
            raise KeyError("simulated reset failure")
        return super()._reset(tensordict, **kwargs)


class PidEnv(CountingEnv):
    def pid(self) -> int:
        return os.getpid()


def children() -> set[int]:
    """PIDs of this process's live (non-zombie) children, read from /proc (no psutil needed)."""
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


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def _foreign_torch_file(name: str) -> bool:
    """A torch shared-memory file (``torch_<pid>_...``) made by a live process outside this one's tree, e.g.
    another test worker running at the same time."""
    parts = name.split("_")
    if len(parts) < 3 or parts[0] != "torch" or not parts[1].isdigit():
        return False
    pid, me = int(parts[1]), os.getpid()
    while pid not in (None, 0, 1):
        if pid == me:
            return False
        pid = _parent(pid)
    return int(parts[1]) != me and _parent(int(parts[1])) is not None


def shm_files() -> set[str]:
    """Shared-memory files, minus other processes' collector and torch files (tests may run in parallel
    workers)."""
    if not os.path.isdir("/dev/shm"):
        return set()
    mine = f"torchrl-collector-{os.getpid()}-"
    return {
        f for f in os.listdir("/dev/shm")
        if (not f.startswith("torchrl-collector-") or f.startswith(mine)) and not _foreign_torch_file(f)
    }


@pytest.fixture
def no_leaks():
    before_children, before_shm = children(), shm_files()
    yield
    gc.collect()
    deadline = time.monotonic() + 5
    while children() - before_children and time.monotonic() < deadline:
        time.sleep(0.05)
    assert children() - before_children == set()
    assert not mp.active_children()
    assert shm_files() - before_shm == set()


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts processes through /proc")


class TestWorkerExceptions:
    def test_step_error_names_worker_and_keeps_traceback(self, no_leaks):
        env = ParallelEnv(2, FaultyEnv, create_env_kwargs=[{}, {"fail_at": 3}])
        env.reset()
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match="ParallelEnv worker 1 failed during step: ZeroDivisionError: simulated") as info:
            env.rollout(10, break_when_any_done=False)
        assert time.monotonic() - t0 < 1.0
        message = str(info.value)
        assert "Worker 1 traceback" in message and "in _step" in message and "raise ZeroDivisionError" in message
        assert isinstance(info.value.__cause__, ZeroDivisionError)
        env.close()
        assert env.is_closed

    def test_env_stays_usable_after_an_error(self, no_leaks):
        env = ParallelEnv(2, FaultyEnv, create_env_kwargs=[{}, {"fail_at": 2}], allow_step_when_done=True)
        td = env.reset()
        td["action"] = torch.ones(2, 1, dtype=torch.int8)
        env.step(td)
        with pytest.raises(RuntimeError, match="worker 1 failed during step"):
            env.step(td)
        assert env.max_steps == [5, 5]  # replies stay in order after the failure
        env.close()

    def test_reset_error(self, no_leaks):
        env = ParallelEnv(2, FaultyEnv, create_env_kwargs=[{"fail_reset": True}, {}])
        with pytest.raises(RuntimeError, match="worker 0 failed during reset: KeyError: 'simulated reset failure'") as info:
            env.reset()
        assert isinstance(info.value.__cause__, KeyError)
        env.close()

    def test_factory_error_at_start(self, no_leaks):
        def factory():
            raise OSError("no display")

        env = ParallelEnv.__new__(ParallelEnv)
        with pytest.raises(OSError, match="no display"):  # raised by the metadata probe at construction
            env.__init__(2, factory)

    def test_factory_error_in_worker(self, no_leaks):
        env = ParallelEnv(2, FaultyEnv)
        env.update_kwargs([{}, {"no_such_option": 1}])
        with pytest.raises(RuntimeError, match="worker 1 failed during start \\(building its env\\): TypeError"):
            env.start()
        assert env.is_closed

    def test_changing_specs_detected_in_worker(self, no_leaks):
        env = ParallelEnv(2, CountingEnv)
        env.update_kwargs([{}, {"batch_size": [3]}])
        with pytest.raises(ValueError, match="worker 1 failed during start.*batch size: shape \\(\\) vs \\(3,\\)"):
            env.reset()

    def test_missing_remote_method(self, no_leaks):
        env = ParallelEnv(2, CountingEnv)
        with pytest.raises(AttributeError, match="ParallelEnv has no attribute 'nope', and neither have its sub-envs"):
            env.nope
        env.close()


class TestDeadWorkers:
    def test_sigkill_is_detected(self, no_leaks):
        env = ParallelEnv(2, PidEnv)
        td = env.reset()
        os.kill(env[1].pid(), signal.SIGKILL)
        t0 = time.monotonic()
        with pytest.raises(RuntimeError, match=r"worker 1 died during step \(exit code -9, killed by SIGKILL\)"):
            env.step(env.rand_action(td))
        assert time.monotonic() - t0 < 2.0
        with pytest.raises(RuntimeError, match="cannot be used anymore: worker 1 died"):
            env.step(env.rand_action(td))
        env.close()

    def test_sigkill_while_idle_then_reset(self, no_leaks):
        env = ParallelEnv(3, PidEnv)
        env.reset()
        os.kill(env[0].pid(), signal.SIGKILL)
        time.sleep(0.2)
        with pytest.raises(RuntimeError, match="worker 0 died"):
            env.reset()
        env.close()
        env.start()  # a closed env can be started again
        assert env.reset().batch_size == (3,)
        env.close()


class TestCleanup:
    def test_close_leaves_no_child(self, no_leaks):
        env = ParallelEnv(3, CountingEnv)
        before = children()
        env.reset()
        assert len(children() - before) == 3
        env.close()

    def test_garbage_collection_leaves_no_child(self, no_leaks):
        env = ParallelEnv(2, CountingEnv)
        env.rollout(3, CountingEnvCountPolicy(env.action_spec))
        assert len(mp.active_children()) == 2
        del env
        gc.collect()

    def test_memmap_files_are_removed(self, no_leaks, tmp_path, monkeypatch):
        monkeypatch.setenv("TMPDIR", str(tmp_path))
        monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
        env = ParallelEnv(2, CountingEnv, memmap=True, shared_memory=False)
        env.reset()
        assert any(p.name.startswith("torchrl_batched_") for p in tmp_path.iterdir())
        env.close()
        assert not any(p.name.startswith("torchrl_batched_") for p in tmp_path.iterdir())

    def test_serial_close(self):
        env = SerialEnv(2, CountingEnv)
        subs = [env[0], env[1]]
        env.close()
        assert env.is_closed and all(sub.is_closed for sub in subs)


@pytest.mark.slow
def test_spawn_without_main_guard_explains_the_fix(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            """
            from torchrl.envs import PendulumEnv
            from torchrl.envs.batched_envs import ParallelEnv

            env = ParallelEnv(1, PendulumEnv, mp_start_method="spawn")
            env.reset()
            env.close()
            print("DONE")
            """
        )
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert result.returncode != 0
    assert 'must run under `if __name__ == "__main__":`' in result.stderr
    assert "worker 0 died during start" in result.stderr
