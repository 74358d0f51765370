"""``Evaluator(backend="process")``: evaluations run in one worker process of the collectors' worker layer.

The worker builds a thread-backend evaluator (``worker_cls``) from the env factory and the policy (or its
factory), then serves ``evaluate(weights, step)`` calls over the pool's pipe; a worker exception comes back
with its traceback, and a worker that dies makes the next wait raise instead of hanging. At most one
evaluation is in flight at a time.
"""
from __future__ import annotations

import pickle
from multiprocessing.connection import wait as mp_wait
from typing import Any, Callable

import cloudpickle

from torchrl.collectors._multi_worker import OP_CALL, WorkerSpec
from torchrl.collectors._pool import WorkerPool, default_start_method
from torchrl.envs._workers.shared import new_prefix

__all__ = ["ProcessEvaluation"]


class ProcessEvaluation:
    """The parent side of a process-backed evaluator.

    Args:
        worker_cls: the class built in the worker as ``worker_cls(env, policy, create_env_kwargs=...,
            worker_idx=0, **kwargs)``; it must have ``evaluate(weights, step)`` and ``shutdown(raise_on_error)``.
        env: the env factory (or an env, pickled to the worker).
        policy / policy_factory: the policy or its factory (called in the worker).
        kwargs: the evaluator's other options.

    Keyword Args:
        start_method: the multiprocessing start method (default: the collectors').
    """

    def __init__(self, worker_cls: type, env: Any, policy: Any, policy_factory: Callable | None, kwargs: dict, *,
                 start_method: str | None = None) -> None:
        # the factory travels with the options: the worker's evaluator calls it with the env it builds
        spec = WorkerSpec(create_env_fn=env, create_env_kwargs={}, policy=policy, policy_factory=None,
                          shared_weights=None, collector_class=worker_cls,
                          collector_kwargs=dict(kwargs, policy_factory=policy_factory), num_threads=1,
                          prefix=new_prefix())
        self.pool = WorkerPool("Evaluator(backend='process')", spec.prefix)
        self.pool.start([spec], start_method or default_start_method())
        self.in_flight = False

    def send(self, weights, step: int | None) -> None:
        """Starts ``evaluate(weights, step)`` in the worker (one at a time)."""
        self.pool.check()
        self.pool.send(0, OP_CALL + cloudpickle.dumps(("evaluate", (weights, step), {}, True)))
        self.in_flight = True

    def ready(self, timeout: float | None) -> bool:
        """Whether the in-flight evaluation has answered (or its worker died) within ``timeout`` seconds."""
        if not self.in_flight:
            return False
        return bool(mp_wait([self.pool.conns[0], self.pool.procs[0].sentinel], timeout))

    def receive(self) -> dict:
        """The in-flight evaluation's result (raises ``RuntimeError`` with the worker's traceback if it failed)."""
        self.in_flight = False
        msg = self.pool.collect([0], "evaluate")[0]
        return pickle.loads(msg[1:])

    def evaluate(self, weights, step: int | None) -> dict:
        if self.in_flight:  # a background evaluation is running: wait for it first (its result is kept)
            raise RuntimeError("Evaluator: an evaluation is already running in the worker; wait() for it first.")
        self.send(weights, step)
        return self.receive()

    def shutdown(self, timeout: float | None = None) -> None:
        self.pool.shutdown(timeout)
