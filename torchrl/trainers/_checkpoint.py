"""Trainer checkpoints: atomic writes and the global random-number-generator states.

A checkpoint is one ``torch.save`` file holding the trainer's :meth:`~torchrl.trainers.Trainer.state_dict`.
It is written to a temporary file in the destination's directory and renamed over the destination once
complete (``os.replace`` is atomic on POSIX and Windows), so an interrupted save never leaves a truncated
checkpoint behind: the previous one stays intact. The temporary's name carries the writer's pid: a save
killed mid-way leaves it behind, and the next save or load of the same checkpoint removes it (see
:mod:`torchrl._utils._atomic`). A save that fails (e.g. no space left) removes its temporary and raises an
``OSError`` saying that the previous checkpoint is intact, and where.
"""
from __future__ import annotations

import os
import pathlib
import random
from typing import Any

import numpy as np
import torch

from torchrl._utils._atomic import atomic_file, remove_stale_temporaries

__all__ = ["atomic_save", "load_checkpoint", "rng_state", "set_rng_state"]


def atomic_save(obj: Any, path: str | pathlib.Path) -> pathlib.Path:
    """``torch.save(obj, path)`` through a temporary file renamed over ``path`` when complete."""
    path = pathlib.Path(path)
    with atomic_file(path) as tmp:
        with open(tmp, "wb") as handle:
            torch.save(obj, handle)
            handle.flush()
            os.fsync(handle.fileno())
    return path


def load_checkpoint(path: str | pathlib.Path, **kwargs) -> dict:
    """Reads a checkpoint written by :func:`atomic_save` (``kwargs`` go to ``torch.load``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    path = pathlib.Path(path)
    remove_stale_temporaries(path)
    if not path.is_file():
        raise FileNotFoundError(f"Trainer.load_from_file: no checkpoint at {str(path)!r}.")
    # The checkpoint holds TensorDicts, counters and hook states (plain Python objects), not only tensors.
    kwargs.setdefault("weights_only", False)
    return torch.load(path, **kwargs)


def rng_state() -> dict[str, Any]:
    """The states of the global generators a training run draws from: torch (CPU and CUDA), numpy, random."""
    state = {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restores :func:`rng_state`."""
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
