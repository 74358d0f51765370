"""Atomic checkpoint writes (a file or a directory) that clean up after writers that died mid-way.

A checkpoint is written under a temporary name next to its target and renamed over the target once
complete, so the target always holds a whole checkpoint. The temporary's name carries the writer's host
and process id (``.{target}.tmp-{host}-{pid}-{random}``): when a writer is killed mid-way (``SIGKILL``, the
machine's OOM killer) its temporary stays behind, and the next save or load of the same target removes
the temporaries of that target whose writer process is gone. A temporary whose writer still runs (a
concurrent save) is never touched, nor are the temporaries of other targets or other hosts.

A save that fails (no space left on the device, an object that cannot be saved...) removes its own partial
temporary and leaves the previous checkpoint as it was; an ``OSError`` is re-raised with a message saying
that the previous checkpoint is intact and where it is.
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import uuid
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_directory", "atomic_file", "remove_stale_temporaries", "resolve_directory"]

_BACKUP = ".{}.previous"  # a directory checkpoint moved aside while the new one is renamed into place


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", socket.gethostname()) or "host"


def temporary_path(path: Path) -> Path:
    """A fresh temporary name for ``path``, next to it, naming this host and process."""
    return path.parent / f".{path.name}.tmp-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a process of another user: alive
        return True
    except OSError:
        return True
    return True


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Removes the temporaries of ``path`` left by writers on this host whose process is gone.

    Only names of the form ``.{path.name}.tmp-{host}-{pid}-{random}`` in ``path``'s directory are
    considered; the current process's own temporaries and those of live processes are kept.

    Returns:
        The removed paths.
    """
    path = Path(path).expanduser().absolute()
    pattern = re.compile(rf"^\.{re.escape(path.name)}\.tmp-(?P<host>.+)-(?P<pid>\d+)-[0-9a-f]{{8}}$")
    host, me = _host(), os.getpid()
    removed = []
    try:
        entries = list(os.scandir(path.parent))
    except FileNotFoundError:
        return removed
    for entry in entries:
        match = pattern.match(entry.name)
        if match is None or match["host"] != host:
            continue
        pid = int(match["pid"])
        if pid == me or _pid_alive(pid):
            continue
        stale = Path(entry.path)
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        removed.append(stale)
    return removed


def _remove(tmp: Path) -> None:
    if tmp.is_dir() and not tmp.is_symlink():
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _failed(err: OSError, path: Path, previous: Path | None, tmp: Path) -> OSError:
    where = (
        f"the previous checkpoint at {str(previous)!r} is intact"
        if previous is not None
        else f"there was no previous checkpoint at {str(path)!r}"
    )
    reason = err.strerror or str(err) or type(err).__name__
    message = (
        f"saving the checkpoint {str(path)!r} failed ({reason}); its partial temporary {str(tmp)!r} was removed "
        f"and {where}."
    )
    return type(err)(err.errno, message) if err.errno is not None else type(err)(message)


@contextlib.contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """Yields a temporary file path to write; it replaces ``path`` when the block succeeds.

    Stale temporaries of ``path`` are removed first. If the block raises, the temporary is removed and
    ``path`` is left as it was (an ``OSError`` is re-raised with a message saying so).
    """
    path = Path(path).expanduser().absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = temporary_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as err:
        _remove(tmp)
        raise _failed(err, path, path if path.is_file() else None, tmp) from err
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path: str | Path) -> Iterator[Path]:
    """Yields a fresh temporary directory that replaces the directory ``path`` when the block succeeds.

    The old directory is moved aside (``.{name}.previous``), the new one renamed into place, and the old
    one removed. A process killed between the two renames leaves the old checkpoint under its backup name:
    :func:`resolve_directory` reads it there, and the next save moves it back first. Stale temporaries of
    ``path`` are removed before writing. If the block raises, the temporary directory is removed and
    ``path`` is left as it was (an ``OSError`` is re-raised with a message saying so).
    """
    path = Path(path).expanduser().absolute()
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    backup = path.parent / _BACKUP.format(path.name)
    if backup.exists():
        if path.exists():
            shutil.rmtree(backup)
        else:
            os.replace(backup, path)  # a swap was interrupted: the backup is the last complete checkpoint
    tmp = temporary_path(path)
    tmp.mkdir()
    try:
        yield tmp
    except OSError as err:
        _remove(tmp)
        raise _failed(err, path, path if path.is_dir() else None, tmp) from err
    except BaseException:
        _remove(tmp)
        raise
    if path.exists():
        os.replace(path, backup)
    os.replace(tmp, path)
    shutil.rmtree(backup, ignore_errors=True)


def resolve_directory(path: str | Path) -> Path | None:
    """The directory holding the checkpoint saved at ``path`` (its backup if a swap was interrupted), or
    ``None``; stale temporaries of ``path`` are removed on the way."""
    path = Path(path).expanduser().absolute()
    remove_stale_temporaries(path)
    if path.exists():
        return path
    backup = path.parent / _BACKUP.format(path.name)
    return backup if backup.exists() else None
