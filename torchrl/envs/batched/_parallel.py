"""``ParallelEnv``: one sub-environment per worker process, data exchanged through shared memory.

The parent allocates the transfer buffers from the specs before starting any worker (one shared tensor
per leaf, all workers' rows); each worker views its row once. A step is: one ``copy_`` per input leaf
(all workers at once), a 5-byte command per worker, a wait on every worker's channel *and* process
sentinel (so that a dead worker raises instead of hanging), then one clone per output leaf. Nothing is
pickled on that path. Errors raised in a worker come back with their traceback and are re-raised here,
naming the worker; the env can then be closed cleanly.
"""
from __future__ import annotations

import multiprocessing as mp
import multiprocessing.util as mp_util
import pickle
import time

import torch
from tensordict import TensorDictBase

from torchrl._fast import fast_get
from torchrl.envs.batched._base import BatchedEnvBase
from torchrl.envs.batched._buffers import allocate
from torchrl.envs.batched._channel import (
    OP_CALL,
    OP_GETATTR,
    OP_RESET,
    OP_RESET_PICKLED,
    OP_SEED,
    OP_STEP_PICKLED,
    REPLY_ERROR,
    Channel,
)
from torchrl.envs.batched._procs import Workers, default_start_method, exit_text, shutdown
from torchrl.envs.batched._serial import SerialEnv
from torchrl.envs.batched._worker import WorkerSpec, worker_main

__all__ = ["ParallelEnv"]

_ERROR_GRACE = 1.0  # seconds to wait for the other workers once one has failed

_MAIN_GUARD = (
    "ParallelEnv with mp_start_method={method!r} starts its workers by re-importing the main script, so the "
    "code that creates and uses the env must run under `if __name__ == \"__main__\":` (or use "
    "mp_start_method=\"fork\" where available)."
)


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
        d = self.__dict__
        method = d["mp_start_method"]
        if method is not None and method not in mp.get_all_start_methods():
            raise ValueError(
                f"ParallelEnv: mp_start_method={method!r} is not available here; choose one of {mp.get_all_start_methods()}."
            )
        if d["_use_buffers"] and self._has_non_tensor_specs():
            if kwargs.get("use_buffers"):
                raise ValueError("ParallelEnv: use_buffers=True is not possible with NonTensor specs; use use_buffers=False.")
            d["_use_buffers"] = False
        d["_workers"] = None
        d["_finalizer"] = None

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
        d = self.__dict__
        method = d["mp_start_method"] or default_start_method()
        if getattr(mp.current_process(), "_inheriting", False):
            raise RuntimeError(_MAIN_GUARD.format(method=method))
        ctx = mp.get_context(method)
        layouts = d["_layouts"]
        workers = Workers()
        if d["_use_buffers"]:
            buf_device = d["_sub_device"] if d["_sub_device"] is not None and d["_sub_device"].type != "cpu" else None
            workers.buffers = {name: allocate(layout, memmap=d["memmap"], device=buf_device) for name, layout in layouts.items()}
        d["_workers"] = workers
        d["_finalizer"] = mp_util.Finalize(self, shutdown, args=(workers,), exitpriority=10)
        for i in range(d["num_workers"]):
            spec = WorkerSpec(d["_fns"][i], d["_kwargs"][i], layouts, workers.buffers, d["_worker_metas"][i].specs,
                              d["num_sub_threads"])
            parent_end, child_end = ctx.Pipe(duplex=True)
            close_fds = [c.conn for c in workers.chans] if method == "fork" else []
            proc = ctx.Process(
                target=worker_main, args=(i, child_end, spec, close_fds), daemon=d["daemon"], name=f"ParallelEnv-worker-{i}"
            )
            try:
                proc.start()
            except RuntimeError as err:
                self._abort_start()
                if "bootstrapping phase" in str(err):
                    raise RuntimeError(_MAIN_GUARD.format(method=method)) from err
                raise
            except BaseException:
                self._abort_start()
                raise
            child_end.close()
            workers.add(proc, Channel(parent_end))
        try:
            self._collect(range(d["num_workers"]), "start (building its env)", start_method=method)
        except BaseException:
            self._abort_start()
            raise

    def _abort_start(self) -> None:
        d = self.__dict__
        finalizer = d.get("_finalizer")
        if finalizer is not None:
            finalizer()
        d["_workers"] = None
        d["_finalizer"] = None

    def _shutdown_workers(self) -> None:
        self._abort_start()

    # -- talking to workers ------------------------------------------------------------------------------
    def _live(self) -> Workers:
        d = self.__dict__
        if d["_closed"]:
            self.start()
        workers = d["_workers"]
        if workers.failed is not None:
            raise RuntimeError(f"ParallelEnv cannot be used anymore: {workers.failed}. Call close() and start() again.")
        if any(workers.pending):
            workers.drain()
        return workers

    def _collect(self, idxs, what: str, start_method: str | None = None) -> dict[int, bytes]:
        """Waits for one reply from each worker in ``idxs`` (their payloads); raises on an error or a death.

        After the first failure the other workers get ``_ERROR_GRACE`` seconds to answer; replies still
        missing then stay counted in ``pending`` and are read before the next command.
        """
        workers = self.__dict__["_workers"]
        pending = set(idxs)
        for i in pending:
            workers.pending[i] += 1
        replies: dict[int, bytes] = {}
        error = None
        deadline = None
        while pending:
            timeout = None if deadline is None else deadline - time.monotonic()
            if timeout is not None and timeout <= 0:
                break
            for is_sentinel, i in workers.ready(pending, timeout):
                chan = workers.chans[i]
                if i not in pending:  # only a death matters for a worker we expect nothing from
                    if is_sentinel and i not in workers.dead:
                        workers.forget(i)
                        error = error or self._death(workers, i, what, start_method)
                        deadline = deadline or time.monotonic() + _ERROR_GRACE
                    continue
                if is_sentinel and chan.poll():
                    continue  # the reply arrived before the exit: read it through the channel's own event
                try:
                    if is_sentinel:
                        raise EOFError
                    op, payload = chan.recv()
                except (EOFError, OSError):
                    pending.discard(i)
                    workers.pending[i] -= 1
                    workers.forget(i)
                    error = error or self._death(workers, i, what, start_method)
                    deadline = deadline or time.monotonic() + _ERROR_GRACE
                    continue
                pending.discard(i)
                workers.pending[i] -= 1
                if op == REPLY_ERROR:
                    error = error or self._worker_error(i, what, payload)
                    deadline = deadline or time.monotonic() + _ERROR_GRACE
                else:
                    replies[i] = payload
        if error is not None:
            raise error
        return replies

    def _death(self, workers: Workers, i: int, what: str, start_method: str | None) -> RuntimeError:
        proc = workers.procs[i]
        proc.join(0.5)
        workers.failed = f"worker {i} died during {what} ({exit_text(proc.exitcode)})"
        if what.startswith("start"):
            hint = " " + _MAIN_GUARD.format(method=start_method) if start_method in ("spawn", "forkserver") else ""
            return RuntimeError(f"ParallelEnv {workers.failed}.{hint}")
        return RuntimeError(f"ParallelEnv {workers.failed}; the env cannot continue: call close().")

    @staticmethod
    def _worker_error(i: int, what: str, payload: bytes) -> BaseException:
        exc, type_name, message, tb = pickle.loads(payload)
        text = f"ParallelEnv worker {i} failed during {what}: {type_name}: {message}\n\nWorker {i} traceback:\n{tb}"
        # A spec mismatch found by a starting worker keeps its ValueError; everything else is a RuntimeError.
        err: BaseException = ValueError(text) if isinstance(exc, ValueError) and what.startswith("start") else RuntimeError(text)
        err.__cause__ = exc
        err.__suppress_context__ = True
        return err

    def _send_all(self, workers: Workers, op: bytes, payload: bytes, idxs, what: str) -> None:
        for i in idxs:
            try:
                workers.chans[i].send(op, payload)
            except (OSError, ValueError):
                self._send_failed(workers, i, what)

    def _send_failed(self, workers: Workers, i: int, what: str) -> None:
        """A send to worker ``i`` failed: its channel is broken, so the worker is dead."""
        workers.forget(i)
        raise self._death(workers, i, what, None)

    def _request(self, op: bytes, payload, idxs, what: str) -> dict[int, object]:
        """A cold-path command: pickled payload out, pickled values back."""
        workers = self._live()
        idxs = list(idxs)
        self._send_all(workers, op, pickle.dumps(payload), idxs, what)
        return {i: pickle.loads(value) for i, value in self._collect(idxs, what).items()}

    # -- step / reset ---------------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        d = self.__dict__
        workers = d["_workers"]
        if workers is None or workers.failed is not None or any(workers.pending):
            workers = self._live()
        layouts = d["_layouts"]
        if workers.buffers is None:
            return self._step_pickled(tensordict, layouts)
        dst, src = [], []
        for key, buf in zip(layouts["step_in"].keys, workers.buffers["step_in"]):
            value = fast_get(tensordict, key)
            if value is not None:
                dst.append(buf)
                src.append(value)
        if len(dst) == 1:
            dst[0].copy_(src[0], non_blocking=d["non_blocking"])
        else:
            try:
                torch._foreach_copy_(dst, src, non_blocking=d["non_blocking"])
            except (RuntimeError, TypeError):
                for a, b in zip(dst, src):
                    a.copy_(b)
        chans = workers.chans
        pending = workers.pending
        for i, chan in enumerate(chans):
            try:
                chan.send_raw(chan.hot_step)
            except (OSError, ValueError):
                self._send_failed(workers, i, "step")
            pending[i] += 1
        if workers.poller is not None:
            # Hot path: read the acknowledgements as they arrive; deaths and errors take the slow paths.
            left = len(chans)
            fdmap = workers.fdmap
            poll = workers.poller.poll
            while left:
                slow = False
                for fd, _ in poll():
                    is_sentinel, i = fdmap[fd]
                    if is_sentinel or not pending[i]:
                        slow = True
                        continue
                    try:
                        op, payload = chans[i].recv()
                    except (EOFError, OSError):
                        slow = True
                        continue
                    pending[i] -= 1
                    left -= 1
                    if op == REPLY_ERROR:
                        self._raise_step_error(workers, i, payload)
                if slow:
                    self._finish_step(workers)
                    break
        else:
            self._finish_step(workers)
        cast = d["_cast_out"]
        if cast is None:
            leaves = [b.clone() for b in workers.buffers["step_out"]]
        else:
            leaves = [b.to(cast, non_blocking=d["non_blocking"]) for b in workers.buffers["step_out"]]
        return layouts["step_out"].build(leaves, self.batch_size, self.device)

    def _finish_step(self, workers: Workers) -> None:
        """Slow path of a step (a worker died, or no poller here): waits for the remaining acknowledgements."""
        idxs = [i for i, c in enumerate(workers.pending) if c]
        for i in idxs:
            workers.pending[i] -= 1  # _collect counts them again
        self._collect(idxs, "step")

    def _raise_step_error(self, workers: Workers, i: int, payload: bytes) -> None:
        error = self._worker_error(i, "step", payload)
        others = [j for j, c in enumerate(workers.pending) if c]
        if others:
            for j in others:
                workers.pending[j] -= 1
            try:
                self._collect(others, "step")
            except Exception:  # noqa: BLE001 - the first error is the one reported
                pass
        raise error

    def _step_pickled(self, tensordict: TensorDictBase, layouts: dict) -> TensorDictBase:
        lin = layouts["step_in"]
        d = self.__dict__
        cols = [x.unbind(0) if x is not None else None for x in lin.read(tensordict)]
        n = d["num_workers"]
        workers = d["_workers"]
        for i in range(n):
            row = lin.build([c[i] if c is not None else None for c in cols], d["_sub_batch"])
            self._send_all(workers, OP_STEP_PICKLED, pickle.dumps(row), [i], "step")
        replies = self._collect(range(n), "step")
        out = torch.stack([pickle.loads(replies[i]) for i in range(n)], 0)
        if self.device is not None and out.device != self.device:
            out = out.to(self.device)
        return out

    def _reset_workers(self, tensordict: TensorDictBase | None, rows: list[int], kwargs: dict) -> list:
        d = self.__dict__
        workers = self._live()
        layouts = d["_layouts"]
        inputs = self._reset_inputs(tensordict)
        if workers.buffers is None:
            return self._reset_pickled(inputs, rows, kwargs, layouts)
        present = None
        if inputs is not None:
            present = [j for j, x in enumerate(inputs) if x is not None]
            for j in present:
                workers.buffers["reset_in"][j].copy_(inputs[j])
        missing: set[int] = set()
        if rows:
            self._send_all(workers, OP_RESET, pickle.dumps((present, kwargs)), rows, "reset")
            for value in self._collect(rows, "reset").values():
                missing.update(pickle.loads(value))
        cast = d["_cast_out"]
        return [
            None if j in missing else (buf.clone() if cast is None else buf.to(cast))
            for j, buf in enumerate(workers.buffers["reset_out"])
        ]

    def _reset_pickled(self, inputs, rows: list[int], kwargs: dict, layouts: dict) -> list:
        lin, lout = layouts["reset_in"], layouts["reset_out"]
        d = self.__dict__
        cols = [x.unbind(0) if x is not None else None for x in inputs] if inputs is not None else None
        workers = d["_workers"]
        for i in rows:
            td = lin.build([c[i] if c is not None else None for c in cols], d["_sub_batch"]) if cols is not None else None
            self._send_all(workers, OP_RESET_PICKLED, pickle.dumps((td, kwargs)), [i], "reset")
        outs = {i: pickle.loads(value) for i, value in self._collect(rows, "reset").items()}
        leaves = []
        for key, zero in zip(lout.keys, lout.zeros()):
            values = [fast_get(outs[i], key) if i in outs else None for i in range(d["num_workers"])]
            if any(values[i] is None for i in rows):
                leaves.append(None)
                continue
            leaves.append(torch.stack([zero[i] if v is None else v for i, v in enumerate(values)]))
        return leaves

    # -- seeding and remote attributes --------------------------------------------------------------------------
    def _seed_worker(self, idx: int, seed: int | None, static_seed: bool) -> int | None:
        return self._request(OP_SEED, (seed, static_seed), [idx], "set_seed")[idx]

    def _remote_getattr(self, name: str):
        n = self.__dict__["num_workers"]
        try:
            replies = self._request(OP_GETATTR, name, range(n), f"getattr({name!r})")
        except RuntimeError as err:
            if isinstance(err.__cause__, AttributeError):
                raise AttributeError(f"ParallelEnv has no attribute {name!r}, and neither have its sub-envs.") from err
            raise
        if all(replies[i][0] for i in range(n)):

            def call_all(*args, **kwargs):
                return self._remote_call(name, args, kwargs)

            return call_all
        return [replies[i][1] for i in range(n)]

    def _remote_call(self, name: str, args: tuple, kwargs: dict, workers: list[int] | None = None) -> list:
        idxs = range(self.__dict__["num_workers"]) if workers is None else workers
        replies = self._request(OP_CALL, (name, args, kwargs), idxs, f"{name}()")
        return [replies[i] for i in idxs]

    def __getitem__(self, index: int) -> "_WorkerHandle":
        """A handle on worker ``index``: ``env[i].attr`` reads one worker's attribute, ``env[i].method()`` calls it."""
        n = self.__dict__["num_workers"]
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
        try:
            is_method, value = env._request(OP_GETATTR, name, [i], f"getattr({name!r})")[i]
        except RuntimeError as err:
            if isinstance(err.__cause__, AttributeError):
                raise AttributeError(f"ParallelEnv worker {i}'s env has no attribute {name!r}.") from err
            raise
        if is_method:
            return lambda *args, **kwargs: env._remote_call(name, args, kwargs, workers=[i])[0]
        return value

    def __repr__(self) -> str:
        return f"<ParallelEnv worker {self._index}>"
