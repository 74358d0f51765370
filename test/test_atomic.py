"""``torchrl._utils._atomic``: atomic checkpoint files and directories, stale temporaries, failed saves."""
from __future__ import annotations

import errno
import os
import subprocess
import sys

import pytest

from torchrl._utils import _atomic
from torchrl._utils._atomic import atomic_directory, atomic_file, remove_stale_temporaries, resolve_directory, temporary_path


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_temporary_names_carry_host_and_pid(tmp_path):
    tmp = temporary_path(tmp_path / "ckpt.pt")
    assert tmp.parent == tmp_path and tmp.name.startswith(".ckpt.pt.tmp-")
    assert tmp.name.split("-")[-2] == str(os.getpid())


def test_only_dead_writers_temporaries_of_the_same_target_are_removed(tmp_path):
    host = _atomic._host()
    dead, alive = _dead_pid(), os.getppid()
    stale_file = tmp_path / f".ckpt.pt.tmp-{host}-{dead}-0123abcd"
    stale_dir = tmp_path / f".ckpt.pt.tmp-{host}-{dead}-89abcdef"
    kept = [
        tmp_path / f".ckpt.pt.tmp-{host}-{alive}-0123abcd",  # a concurrent writer, still running
        tmp_path / f".ckpt.pt.tmp-{host}-{os.getpid()}-0123abcd",  # this process's own save
        tmp_path / f".ckpt.pt.tmp-otherhost-{dead}-0123abcd",  # written from another machine
        tmp_path / f".other.pt.tmp-{host}-{dead}-0123abcd",  # another target
        tmp_path / ".ckpt.pt.tmp-unrelated",  # not one of our names
    ]
    stale_file.write_bytes(b"x" * 100)
    stale_dir.mkdir()
    (stale_dir / "storage").write_bytes(b"y" * 100)
    for path in kept:
        path.write_bytes(b"z")
    removed = remove_stale_temporaries(tmp_path / "ckpt.pt")
    assert sorted(removed) == sorted([stale_file, stale_dir])
    assert not stale_file.exists() and not stale_dir.exists()
    assert all(path.exists() for path in kept)


def test_atomic_file_replaces_and_cleans_up(tmp_path):
    target = tmp_path / "c.bin"
    with atomic_file(target) as tmp:
        tmp.write_bytes(b"one")
    stale = tmp_path / f".c.bin.tmp-{_atomic._host()}-{_dead_pid()}-0123abcd"
    stale.write_bytes(b"partial")
    with atomic_file(target) as tmp:
        assert not stale.exists()  # removed before the new write starts
        tmp.write_bytes(b"two")
    assert target.read_bytes() == b"two" and sorted(os.listdir(tmp_path)) == ["c.bin"]


@pytest.mark.parametrize("previous", [True, False])
def test_no_space_left_keeps_the_previous_file(tmp_path, previous):
    target = tmp_path / "c.bin"
    if previous:
        target.write_bytes(b"previous")
    with pytest.raises(OSError) as info:
        with atomic_file(target) as tmp:
            tmp.write_bytes(b"partial")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert info.value.errno == errno.ENOSPC
    message = str(info.value)
    assert "No space left on device" in message and "partial temporary" in message
    if previous:
        assert f"the previous checkpoint at {str(target)!r} is intact" in message
        assert target.read_bytes() == b"previous"
    else:
        assert f"there was no previous checkpoint at {str(target)!r}" in message
    assert sorted(os.listdir(tmp_path)) == (["c.bin"] if previous else [])


def test_atomic_directory_failure_and_interrupted_swap(tmp_path):
    target = tmp_path / "ckpt"
    with atomic_directory(target) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(OSError, match=r"previous checkpoint at .*ckpt' is intact"):
        with atomic_directory(target) as tmp:
            (tmp / "a").write_text("partial")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert sorted(os.listdir(tmp_path)) == ["ckpt"] and (target / "a").read_text() == "1"
    # killed between the two renames: only the backup holds the checkpoint
    os.replace(target, tmp_path / ".ckpt.previous")
    assert resolve_directory(target) == tmp_path / ".ckpt.previous"
    with pytest.raises(RuntimeError, match="boom"):
        with atomic_directory(target):
            assert (target / "a").read_text() == "1"  # moved back before the new write
            raise RuntimeError("boom")
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    assert resolve_directory(tmp_path / "missing") is None
