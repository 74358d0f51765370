"""The worker side of :class:`~torchrl.envs.ParallelEnv`: a :class:`~torchrl.envs._workers.Server` over one env.

The worker (started by the worker layer) builds its env, checks its specs against the ones the parent
allocated buffers for, views its row of every shared buffer once, and then serves the env's commands
besides the layer's common ones (remote calls, close):

=========  ============================================  ==========================================
opcode     parent -> worker                              worker -> parent
=========  ============================================  ==========================================
``s``      (none) inputs are in the shared step buffers  ``k``; outputs are in the shared buffers
``r``      pickle: (present input leaves, kwargs)        ``K`` + pickle: indices of missing outputs
``S``      pickle: input TensorDict (no buffers)         ``K`` + pickle: next TensorDict
``R``      pickle: (input TensorDict or None, kwargs)    ``K`` + pickle: reset TensorDict
=========  ============================================  ==========================================

A buffered step reads the inputs from the shared memory, steps the env and writes the outputs back in
place; nothing is pickled on that path.
"""
from __future__ import annotations

import pickle
from typing import Any, Callable

import torch

from torchrl._fast import fast_get
from torchrl.envs._workers import REPLY_OK, REPLY_VALUE, Server, SharedBlock, WorkerSpec
from torchrl.envs.batched._buffers import Layout
from torchrl.envs.batched._specs import describe, first_difference

__all__ = ["EnvServer", "EnvWorkerSpec", "OP_RESET", "OP_RESET_PICKLED", "OP_STEP", "OP_STEP_PICKLED"]

OP_STEP = b"s"
OP_RESET = b"r"
OP_STEP_PICKLED = b"S"
OP_RESET_PICKLED = b"R"


def split_buffers(layouts: dict[str, Layout], tensors: list[torch.Tensor]) -> dict[str, list[torch.Tensor]]:
    """``{layout name: its tensors}`` from the tensors of all layouts, in ``layouts`` order."""
    out, start = {}, 0
    for name, layout in layouts.items():
        out[name] = tensors[start: start + len(layout)]
        start += len(layout)
    return out


class EnvWorkerSpec(WorkerSpec):
    """What one ``ParallelEnv`` worker needs.

    Attributes:
        create_env_fn / create_env_kwargs: the env factory and its arguments (cloudpickled for spawn).
        layouts: ``{"step_in", "step_out", "reset_in", "reset_out"}`` :class:`Layout` of the batched env.
        block: the shared file holding every layout's buffers (all workers' rows), or ``None``.
        buffers: the buffers themselves when they live on an accelerator (no file), else ``None``.
        expected: the structural description of the specs each worker's env must have.
        num_threads: torch threads inside the worker.
    """

    CLOUDPICKLED = ("create_env_fn", "create_env_kwargs")
    builds = "its env"

    def __init__(self, create_env_fn: Callable, create_env_kwargs: dict, layouts: dict[str, Layout] | None,
                 block: SharedBlock | None, buffers: dict[str, list[torch.Tensor]] | None, expected: Any,
                 num_threads: int) -> None:
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = create_env_kwargs
        self.layouts = layouts
        self.block = block
        self.buffers = buffers
        self.expected = expected
        self.num_threads = num_threads

    def build(self, idx: int) -> EnvServer:
        env = self.create_env_fn(**self.create_env_kwargs)
        if self.expected is not None:
            diff = first_difference(self.expected, describe(env))
            if diff is not None:
                raise ValueError(
                    f"the env built by create_env_fn has different specs from the ones the batched env was built "
                    f"with: {diff}. Every worker's env must have the same spec structure."
                )
        buffers = self.buffers
        if self.block is not None:
            buffers = split_buffers(self.layouts, self.block.attach())
        rows = {}
        if buffers is not None:
            rows = {name: _Rows(self.layouts[name], buffers[name], idx, env.batch_size) for name in buffers}
        return EnvServer(env, rows)


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


class EnvServer(Server):
    """Serves one sub-env: buffered and pickled steps and resets, plus the layer's remote calls.

    Args:
        env: the worker's env.
        rows: ``{layout name: _Rows}`` of this worker (empty without shared buffers).
    """

    def __init__(self, env, rows: dict[str, _Rows]) -> None:
        super().__init__(env)
        self.rows = rows
        self.step_in, self.step_out = rows.get("step_in"), rows.get("step_out")
        self.row_step = None  # the env's own step into the shared rows, once it offers one (after its first checks)
        self.row_tries = 2  # envs that offer one do so once their first step is validated

    def handle(self, op: bytes, message: bytes) -> bytes | None:
        if op == OP_STEP:
            step_in, step_out = self.step_in, self.step_out
            if self.row_step is None and self.row_tries:
                self.row_tries -= 1
                self.row_step = self.target._row_stepper(step_in.layout.keys, step_in.views, step_out.layout.keys,
                                                         step_out.views)
            row_step = self.row_step
            missing = row_step() if row_step is not None else step_out.write(self.target._step_output(step_in.td()))
            if missing:
                keys = [step_out.layout.keys[j] for j in missing]
                raise KeyError(f"the env's step did not return {keys}, although its specs declare them")
            return REPLY_OK
        env = self.target
        if op == OP_RESET:
            present, kwargs = pickle.loads(message[1:])
            td = self.rows["reset_in"].td(present) if present is not None else None
            value = self.rows["reset_out"].write(env.reset(td, **kwargs))
        elif op == OP_STEP_PICKLED:
            value = env._step_output(pickle.loads(message[1:]))
        elif op == OP_RESET_PICKLED:
            td, kwargs = pickle.loads(message[1:])
            value = env.reset(td, **kwargs)
        else:
            return super().handle(op, message)
        return REPLY_VALUE + pickle.dumps(value)

    def close(self) -> None:
        self.target.close(raise_if_closed=False)
