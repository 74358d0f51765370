"""Runs a save in a child process and SIGKILLs it mid-way (shared by the checkpoint tests)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

READY = "SAVE-IN-PROGRESS"

# imported first by every child: ``block_after(module, name)`` wraps ``module.name`` so that the wrapped call
# runs for real, then announces READY on stdout and sleeps until the parent kills the process.
PRELUDE = f"""
import sys, time
def block_after(module, name):
    real = getattr(module, name)
    def wrapped(*args, **kwargs):
        out = real(*args, **kwargs)
        for a in args:
            if hasattr(a, "flush"):
                a.flush()
        print({READY!r}, flush=True)
        time.sleep(600)
        return out
    setattr(module, name, wrapped)
"""


def kill_mid_save(code: str, cwd: Path, timeout: float = 120.0) -> int:
    """Runs ``PRELUDE + code`` in a child; once it prints READY, SIGKILLs it and reaps it. Returns its pid."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    child = subprocess.Popen(
        [sys.executable, "-c", PRELUDE + code], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = child.stdout.readline()
        if line.strip() != READY:
            child.kill()
            _, err = child.communicate(timeout=timeout)
            raise AssertionError(f"the child did not reach the save: {line!r}\n{err}")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=timeout)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    return child.pid


def temporaries(directory: Path, name: str) -> list[Path]:
    """The temporaries of the checkpoint ``name`` in ``directory``."""
    return sorted(p for p in Path(directory).iterdir() if p.name.startswith(f".{name}.tmp-"))


def size_of(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
