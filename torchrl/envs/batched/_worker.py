"""The worker side of :class:`~torchrl.envs.ParallelEnv`: one process, one env, one channel.

The worker builds its env, checks its specs against the ones the parent allocated buffers for, views
its row of every shared buffer once, and then serves commands (see :mod:`._channel` for the protocol).
A buffered step reads the inputs from the shared memory, runs ``env._step_output`` and writes the
outputs back in place; nothing is pickled on that path.
"""
from __future__ import annotations

import pickle
import signal
import traceback
from typing import Any, Callable

import cloudpickle
import torch

from torchrl._fast import fast_get
from torchrl.envs.batched._buffers import Layout
from torchrl.envs.batched._channel import (
    OP_CALL,
    OP_CLOSE,
    OP_GETATTR,
    OP_RESET,
    OP_RESET_PICKLED,
    OP_SEED,
    OP_STEP,
    OP_STEP_PICKLED,
    REPLY_ERROR,
    REPLY_OK,
    REPLY_VALUE,
    Channel,
)
from torchrl.envs.batched._specs import describe, first_difference

__all__ = ["WorkerSpec", "error_payload", "worker_main"]


class WorkerSpec:
    """Everything a worker needs, built once in the parent (pickled only with ``spawn``/``forkserver``).

    Attributes:
        create_env_fn / create_env_kwargs: the env factory (cloudpickled for spawn).
        layouts: ``{"step_in", "step_out", "reset_in", "reset_out"}`` :class:`Layout` of the batched env.
        buffers: the shared tensors of each layout (all workers' rows), or ``None`` without buffers.
        expected: the structural description of the specs each worker's env must have.
        num_threads: torch threads inside the worker.
    """

    def __init__(self, create_env_fn: Callable, create_env_kwargs: dict, layouts: dict[str, Layout] | None,
                 buffers: dict[str, list[torch.Tensor]] | None, expected: Any, num_threads: int) -> None:
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = create_env_kwargs
        self.layouts = layouts
        self.buffers = buffers
        self.expected = expected
        self.num_threads = num_threads

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["create_env_fn"] = cloudpickle.dumps(self.create_env_fn)
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        state["create_env_fn"] = cloudpickle.loads(state["create_env_fn"])
        self.__dict__.update(state)


def error_payload(err: BaseException) -> bytes:
    """Pickle of ``(exception or None, type name, message, formatted traceback)``."""
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    try:
        exc_bytes = pickle.dumps(err)
        pickle.loads(exc_bytes)
        exc = err
    except Exception:
        exc = None
    try:
        return pickle.dumps((exc, type(err).__name__, str(err), tb))
    except Exception:
        return pickle.dumps((None, type(err).__name__, str(err), tb))


class _Rows:
    """One worker's views of one layout's shared buffers, and the TensorDicts built over them."""

    def __init__(self, layout: Layout, buffers: list[torch.Tensor], idx: int, sub_batch: torch.Size) -> None:
        self.layout = layout
        self.views = [b[idx] for b in buffers]
        self.sub_batch = sub_batch

    def td(self, present: list[int] | None = None):
        """A fresh TensorDict structure over the row views (fresh so that envs that replace entries in
        their input never detach it from the shared memory)."""
        views = self.views
        if present is not None:
            keep = set(present)
            views = [v if i in keep else None for i, v in enumerate(views)]
        return self.layout.build(views, self.sub_batch)

    def write(self, td) -> list[int]:
        """Copies ``td``'s leaves into the row; returns the indices of leaves ``td`` does not have."""
        missing = []
        srcs, dsts = [], []
        for i, (key, view) in enumerate(zip(self.layout.keys, self.views)):
            value = fast_get(td, key)
            if value is None:
                missing.append(i)
            else:
                srcs.append(value)
                dsts.append(view)
        try:
            torch._foreach_copy_(dsts, srcs)
        except (RuntimeError, TypeError):
            for d, s in zip(dsts, srcs):
                d.copy_(s)
        return missing


def _check_specs(env, expected) -> None:
    diff = first_difference(expected, describe(env))
    if diff is not None:
        raise ValueError(
            f"the env built by create_env_fn has different specs from the ones the batched env was built with: "
            f"{diff}. Every worker's env must have the same spec structure."
        )


def worker_main(idx: int, conn, spec: WorkerSpec, close_fds: list) -> None:
    """Entry point of a worker process: builds the env, then serves commands until ``x`` or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it closes us.
    for other in close_fds:
        try:
            other.close()
        except OSError:
            pass
    torch.set_num_threads(spec.num_threads)
    chan = Channel(conn)
    try:
        env = spec.create_env_fn(**spec.create_env_kwargs)
        if spec.expected is not None:
            _check_specs(env, spec.expected)
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
        chan.send(REPLY_ERROR, error_payload(err))
        chan.close()
        return
    chan.send(REPLY_OK)
    rows = {}
    if spec.buffers is not None:
        sub_batch = env.batch_size
        rows = {name: _Rows(spec.layouts[name], spec.buffers[name], idx, sub_batch) for name in spec.buffers}
    step_in, step_out = rows.get("step_in"), rows.get("step_out")
    recv, send, send_raw, ok = chan.recv, chan.send, chan.send_raw, chan.hot_ok
    step_output = env._step_output
    fast_step = None  # the env's own step into the shared rows, once it offers one (after its first checks)
    fast_tries = 2  # envs that offer one do so once their first step is validated
    while True:
        try:
            op, payload = recv()
        except (EOFError, OSError):  # the parent is gone
            break
        try:
            if op == OP_STEP:
                if fast_step is None and fast_tries:
                    fast_tries -= 1
                    fast_step = env._row_stepper(step_in.layout.keys, step_in.views, step_out.layout.keys, step_out.views)
                missing = fast_step() if fast_step is not None else step_out.write(step_output(step_in.td()))
                if missing:
                    keys = [step_out.layout.keys[j] for j in missing]
                    raise KeyError(f"the env's step did not return {keys}, although its specs declare them")
                send_raw(ok)
                continue
            if op == OP_CLOSE:
                try:
                    env.close(raise_if_closed=False)
                finally:
                    send(REPLY_VALUE, pickle.dumps(None))
                break
            value = _serve(env, op, pickle.loads(payload) if payload else None, rows)
            send(REPLY_VALUE, pickle.dumps(value))
        except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
            try:
                send(REPLY_ERROR, error_payload(err))
            except (OSError, EOFError):
                break
    chan.close()


def _serve(env, op: bytes, payload: Any, rows: dict) -> Any:
    """The cold-path commands (everything but a buffered step)."""
    if op == OP_RESET:
        present, kwargs = payload
        reset_in = rows["reset_in"]
        td = reset_in.td(present) if present is not None else None
        return rows["reset_out"].write(env.reset(td, **kwargs))
    if op == OP_STEP_PICKLED:
        return env._step_output(payload)
    if op == OP_RESET_PICKLED:
        td, kwargs = payload
        return env.reset(td, **kwargs)
    if op == OP_SEED:
        seed, static_seed = payload
        return env.set_seed(seed, static_seed=static_seed)
    if op == OP_GETATTR:
        value = getattr(env, payload)
        if callable(value) and not isinstance(value, (torch.Tensor, torch.nn.Module)):
            return True, None
        return False, value
    if op == OP_CALL:
        name, args, kwargs = payload
        return getattr(env, name)(*args, **kwargs)
    raise RuntimeError(f"unknown ParallelEnv command {op!r}")
