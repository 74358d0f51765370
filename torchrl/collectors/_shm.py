"""Shared batch files of process collectors: kept as an import path; they live in the worker layer
(:mod:`torchrl.envs._workers.shared`)."""
from __future__ import annotations

from torchrl.envs._workers.shared import ShmLayout, new_prefix, remove_prefixed, shm_dir

__all__ = ["ShmLayout", "new_prefix", "remove_prefixed", "shm_dir"]
