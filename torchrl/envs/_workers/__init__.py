"""The worker layer: worker processes shared by ``ParallelEnv`` and the process collectors (private).

One mechanism for everything a batched env or a multi-process collector needs outside Python objects:

- :mod:`.wire`: messages (``bytes``, first byte an opcode), the framed :class:`Channel` over a pipe, the
  common opcodes (``m`` remote call, ``x`` close; replies ``k``/``K``/``E``), errors with the worker's
  traceback (:func:`error_payload` in the worker, :func:`remote_error` in the parent).
- :mod:`.serve`: the worker side. :func:`worker_main` is the only worker entry point; a
  :class:`WorkerSpec` says what to build there, the :class:`Server` it builds handles the owner's opcodes.
- :mod:`.pool`: the parent side. :class:`WorkerPool` starts workers and waits until they are ready,
  sends commands, collects replies while watching every process sentinel (a death raises within
  milliseconds), and shuts down (also from a finalizer, so no worker outlives its owner).
- :mod:`.shared`: buffers in shared files (:class:`SharedBlock`, :class:`ShmLayout` for TensorDicts).

Users: ``torchrl/envs/batched/_parallel.py`` (parent) and ``_worker.py`` (its :class:`Server`);
``torchrl/collectors/_pool.py`` (the pipe transport of ``MultiCollector``) and ``_multi_worker.py``.
"""
from __future__ import annotations

from torchrl.envs._workers.pool import WorkerPool, default_start_method, exit_text
from torchrl.envs._workers.serve import Server, WorkerSpec, serve, worker_main
from torchrl.envs._workers.shared import SharedBlock, ShmLayout, new_prefix, remove_prefixed, shm_dir
from torchrl.envs._workers.wire import (
    OP_CALL,
    OP_CLOSE,
    REPLY_ERROR,
    REPLY_OK,
    REPLY_VALUE,
    Channel,
    error_payload,
    frame,
    remote_error,
)

__all__ = [
    "Channel", "OP_CALL", "OP_CLOSE", "REPLY_ERROR", "REPLY_OK", "REPLY_VALUE", "Server", "SharedBlock",
    "ShmLayout", "WorkerPool", "WorkerSpec", "default_start_method", "error_payload", "exit_text", "frame",
    "new_prefix", "remote_error", "remove_prefixed", "serve", "shm_dir", "worker_main",
]
