"""``ParallelEnv``: one sub-environment per worker process, data exchanged through shared memory.

The parent allocates the transfer buffers from the specs before starting any worker (one shared tensor
per leaf, all workers' rows; with ``memmap=True`` in one file the workers map); each worker views its row once. A step is: one ``copy_``
per input leaf (all workers at once), a 5-byte command per worker, a wait on every worker's channel *and*
process sentinel (so that a dead worker raises instead of hanging), then one clone per output leaf.
Nothing is pickled on that path. Processes, waits, errors and shutdown are the worker layer's
(:mod:`torchrl.envs._workers`); the env's commands are served by :mod:`._worker`.
"""
from __future__ import annotations

import multiprocessing as mp
import pickle
import tempfile

import torch
from tensordict import TensorDictBase

from torchrl._fast import fast_get
from torchrl.data.tensor_specs import Composite
from torchrl.envs._workers import SharedBlock, WorkerPool, default_start_method, frame, new_prefix
from torchrl.envs.batched._base import BatchedEnvBase
from torchrl.envs.batched._serial import SerialEnv
from torchrl.envs.batched._specs import dynamic_key
from torchrl.envs.batched._worker import (
    OP_RESET,
    OP_RESET_PICKLED,
    OP_STEP,
    OP_STEP_PICKLED,
    EnvWorkerSpec,
    split_buffers,
)

__all__ = ["ParallelEnv"]

_STEP = frame(OP_STEP)  # the complete wire form of a step command
_UNUSABLE = "ParallelEnv cannot be used anymore: {failed}. Call close() and start() again."


class ParallelEnv(BatchedEnvBase):
    """Runs ``num_workers`` environments in worker processes, as one env of batch size ``num_workers``.

    Workers start on first use (``reset``, ``step``, ``rollout``, ``set_seed``, attribute access) or with
    :meth:`start`, so an unstarted env can be sent to another process. ``fork`` is the default start
    method on Linux (a few milliseconds per worker); with ``spawn``/``forkserver`` the main script must be
    guarded by ``if __name__ == "__main__":``. Unknown attributes are read from every worker (a list);
    methods are called on every worker (a list of results); ``env[i]`` addresses worker ``i`` alone.

    See :class:`~torchrl.envs.batched.BatchedEnvBase` for the arguments.

    Raises:
        RuntimeError: a worker raised (the message names the worker and carries its traceback; the original
            exception is chained), or a worker died.
        ValueError: the sub-envs do not share their spec structure.

    Examples:
        >>> from torchrl.envs import ParallelEnv, PendulumEnv
        >>> env = ParallelEnv(2, PendulumEnv)
        >>> env.rollout(10)["next", "observation"].shape
        torch.Size([2, 10, 3])
        >>> env.close()
    """

    def __new__(cls, *args, **kwargs):
        num_workers = args[0] if args else kwargs.get("num_workers")
        if kwargs.get("serial_for_single") and num_workers == 1:
            return SerialEnv(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        method = self.mp_start_method
        if method is not None and method not in mp.get_all_start_methods():
            raise ValueError(
                f"ParallelEnv: mp_start_method={method!r} is not available here; choose one of {mp.get_all_start_methods()}."
            )
        if self._use_buffers and self._has_non_tensor_specs():
            if kwargs.get("use_buffers"):
                raise ValueError("ParallelEnv: use_buffers=True is not possible with NonTensor specs; use use_buffers=False.")
            self._use_buffers = False
        dynamic = dynamic_key(Composite(output_spec=self.output_spec, input_spec=self.input_spec, shape=self.batch_size))
        if self._use_buffers and dynamic is not None:  # (e.g. MultiAction's action chunks)
            if kwargs.get("use_buffers"):
                raise ValueError(
                    f"ParallelEnv: use_buffers=True is not possible with the dynamic (-1) dim of spec {dynamic!r}: shared "
                    f"buffers have fixed shapes; use use_buffers=False (the default for such envs)."
                )
            self._use_buffers = False
        self._workers = None
        self._finalizer = None
        self._shared = None

    @classmethod
    def make_parallel(cls, *args, num_envs: int = 1, **parallel_kwargs) -> "ParallelEnv":
        """``ParallelEnv(num_envs, create_env_fn, **parallel_kwargs)``."""
        return cls(num_envs, *args, **parallel_kwargs)

    def _has_non_tensor_specs(self) -> bool:
        for spec in (self.output_spec, self.input_spec):
            for _, leaf in spec.items(include_nested=True, leaves_only=True):
                if leaf is not None and leaf.dtype is None:
                    return True
        return False

    # -- lifetime -------------------------------------------------------------------------------------
    def _start_workers(self) -> None:
        method = self.mp_start_method or default_start_method()
        layouts = self._layouts
        pool = WorkerPool("ParallelEnv", new_prefix("torchrl_batched_", tempfile.gettempdir()), fatal=("start",), keep=(ValueError,),
                          remedy="the env cannot continue: call close()", unusable=_UNUSABLE)
        block, device_buffers = None, None
        self._workers = pool
        self._finalizer = pool.finalize_with(self)
        try:
            if self._use_buffers:
                sub = self._sub_device
                if self.memmap and (sub is None or sub.type == "cpu"):  # one file the workers map by name
                    leaves = [(s, d) for layout in layouts.values() for s, d in zip(layout.shapes, layout.dtypes)]
                    block = SharedBlock(pool.prefix, leaves)
                    self._shared = split_buffers(layouts, block.create())
                else:  # shared-memory tensors (inherited, or sent through torch's reductions); device tensors
                    device = sub if sub is not None and sub.type != "cpu" else None
                    device_buffers = {
                        name: [torch.zeros(s, dtype=d, device=device) for s, d in zip(layout.shapes, layout.dtypes)]
                        for name, layout in layouts.items()
                    }
                    if device is None:
                        for tensors in device_buffers.values():
                            for t in tensors:
                                t.share_memory_()
                    self._shared = device_buffers
            specs = [
                EnvWorkerSpec(self._fns[i], self._kwargs[i], layouts, block, device_buffers, self._worker_metas[i].specs,
                              self.num_sub_threads)
                for i in range(self.num_workers)
            ]
            pool.start(specs, method, daemon=self.daemon)
        except BaseException:
            self._shutdown_workers()
            raise

    def _shutdown_workers(self) -> None:
        finalizer = self._finalizer
        if finalizer is not None:
            finalizer()
        self._workers = None
        self._finalizer = None
        self._shared = None

    # -- talking to workers ------------------------------------------------------------------------------
    def _live(self) -> WorkerPool:
        """The started pool, with no reply left unread (raises if a worker died)."""
        if self._closed:
            self.start()
        pool = self._workers
        pool.check()
        if any(pool.pending):
            pool.drain()
        return pool

    def _request(self, op: bytes, payload, idxs, what: str) -> dict[int, object]:
        """A cold-path command: pickled payload out, pickled values back."""
        pool = self._live()
        idxs = list(idxs)
        message = op + pickle.dumps(payload)
        for i in idxs:
            pool.send(i, message, what=what)
        return {i: pickle.loads(msg[1:]) for i, msg in pool.collect(idxs, what).items()}

    # -- step / reset ---------------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase, rows: list[int] | None = None) -> TensorDictBase:
        # rows: the workers a "_step" mask selects (the others are not stepped; their output rows keep the
        # last step's values). A batched worker steps all of its rows.
        pool = self._workers
        if pool is None or pool.failed is not None or any(pool.pending):
            pool = self._live()
        buffers = self._shared
        if buffers is None:
            return self._step_pickled(tensordict, rows)
        layouts = self._layouts
        non_blocking = self.non_blocking
        dst, src = [], []
        for key, buf in zip(layouts["step_in"].keys, buffers["step_in"]):
            value = fast_get(tensordict, key)
            if value is not None:
                dst.append(buf)
                src.append(value)
        if len(dst) == 1:
            dst[0].copy_(src[0], non_blocking=non_blocking)
        else:
            try:
                torch._foreach_copy_(dst, src, non_blocking=non_blocking)
            except (RuntimeError, TypeError):
                for a, b in zip(dst, src):
                    a.copy_(b)
        if rows is None:
            pool.broadcast(_STEP, "step")
            pool.collect(pool.everyone, "step")
        else:
            for i in rows:
                pool.send(i, OP_STEP, what="step")
            pool.collect(rows, "step")
        cast = self._cast_out
        if cast is None:
            leaves = [b.clone() for b in buffers["step_out"]]
        else:
            leaves = [b.to(cast, non_blocking=non_blocking) for b in buffers["step_out"]]
        self._last_step = leaves
        return layouts["step_out"].build(leaves, self.batch_size, self.device)

    def _step_pickled(self, tensordict: TensorDictBase, rows: list[int] | None = None) -> TensorDictBase:
        lin = self._layouts["step_in"]
        cols = [x.unbind(0) if x is not None else None for x in lin.read(tensordict)]
        n = self.num_workers
        pool = self._workers
        idxs = range(n) if rows is None else rows
        for i in idxs:
            row = lin.build([c[i] if c is not None else None for c in cols], self._sub_batch)
            pool.send(i, OP_STEP_PICKLED + pickle.dumps(row), what="step")
        replies = pool.collect(idxs, "step")
        outs = {i: pickle.loads(replies[i][1:]) for i in idxs}
        if rows is not None:  # the workers not stepped: their last step's output (zeros before the first)
            last = getattr(self, "_last_pickled", None)
            template = next(iter(outs.values()))
            for i in range(n):
                if i not in outs:
                    outs[i] = last[i] if last is not None else template.clone().zero_()
        out = torch.stack([outs[i] for i in range(n)], 0)
        self._last_pickled = out
        if self.device is not None and out.device != self.device:
            out = out.to(self.device)
        self._last_step = self._layouts["step_out"].read(out)
        return out

    def _reset_workers(self, tensordict: TensorDictBase | None, rows: list[int], kwargs: dict) -> list:
        self._live()
        inputs = self._reset_inputs(tensordict)
        buffers = self._shared
        if buffers is None:
            return self._reset_pickled(inputs, rows, kwargs)
        present = None
        if inputs is not None:
            present = [j for j, x in enumerate(inputs) if x is not None]
            for j in present:
                buffers["reset_in"][j].copy_(inputs[j])
        missing: set[int] = set()
        if rows:
            for value in self._request(OP_RESET, (present, kwargs), rows, "reset").values():
                missing.update(value)
        cast = self._cast_out
        return [
            None if j in missing else (buf.clone() if cast is None else buf.to(cast))
            for j, buf in enumerate(buffers["reset_out"])
        ]

    def _reset_pickled(self, inputs, rows: list[int], kwargs: dict) -> list:
        lin, lout = self._layouts["reset_in"], self._layouts["reset_out"]
        cols = [x.unbind(0) if x is not None else None for x in inputs] if inputs is not None else None
        pool = self._workers
        for i in rows:
            td = lin.build([c[i] if c is not None else None for c in cols], self._sub_batch) if cols is not None else None
            pool.send(i, OP_RESET_PICKLED + pickle.dumps((td, kwargs)), what="reset")
        outs = {i: pickle.loads(msg[1:]) for i, msg in pool.collect(rows, "reset").items()}
        leaves = []
        for key, zero in zip(lout.keys, lout.zeros()):
            values = [fast_get(outs[i], key) if i in outs else None for i in range(self.num_workers)]
            if any(values[i] is None for i in rows):
                leaves.append(None)
                continue
            leaves.append(torch.stack([zero[i] if v is None else v for i, v in enumerate(values)]))
        return leaves

    # -- seeding and remote attributes --------------------------------------------------------------------------
    def _seed_worker(self, idx: int, seed: int | None, static_seed: bool) -> int | None:
        return self._live().call([idx], "set_seed", (seed,), {"static_seed": static_seed})[idx]

    def _probe(self, name: str, idxs, missing: str) -> dict:
        """``{worker: (is_method, value)}`` of attribute ``name`` (``missing``: the AttributeError message)."""
        try:
            return self._live().call(idxs, name, mode="probe")
        except RuntimeError as err:
            if isinstance(err.__cause__, AttributeError):
                raise AttributeError(missing) from err
            raise

    def _remote_getattr(self, name: str):
        n = self.num_workers
        replies = self._probe(name, range(n), f"ParallelEnv has no attribute {name!r}, and neither have its sub-envs.")
        if all(replies[i][0] for i in range(n)):

            def call_all(*args, **kwargs):
                return self._remote_call(name, args, kwargs)

            return call_all
        return [replies[i][1] for i in range(n)]

    def _remote_call(self, name: str, args: tuple, kwargs: dict, workers: list[int] | None = None) -> list:
        idxs = range(self.num_workers) if workers is None else workers
        replies = self._live().call(idxs, name, args, kwargs)
        return [replies[i] for i in idxs]

    def __getitem__(self, index: int) -> "_WorkerHandle":
        """A handle on worker ``index``: ``env[i].attr`` reads one worker's attribute, ``env[i].method()`` calls it."""
        n = self.num_workers
        if not isinstance(index, int) or not -n <= index < n:
            raise IndexError(f"ParallelEnv[{index!r}]: expected a worker index in [0, {n}).")
        return _WorkerHandle(self, index % n)

    def __setitem__(self, index, value) -> None:
        raise TypeError(
            "ParallelEnv sub-environments live in worker processes and cannot be replaced; build a new ParallelEnv "
            "(a list of create_env_fn gives each worker its own factory)."
        )


class _WorkerHandle:
    """``env[i]`` of a :class:`ParallelEnv`: attribute reads and method calls on one worker's env."""

    def __init__(self, env: ParallelEnv, index: int) -> None:
        self._env = env
        self._index = index

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        env, i = self._env, self._index
        env._check_open()
        is_method, value = env._probe(name, [i], f"ParallelEnv worker {i}'s env has no attribute {name!r}.")[i]
        if is_method:
            return lambda *args, **kwargs: env._remote_call(name, args, kwargs, workers=[i])[0]
        return value

    def __repr__(self) -> str:
        return f"<ParallelEnv worker {self._index}>"
