"""The worker side of process collectors: a :class:`~torchrl.envs._workers.Server` over one
:class:`~torchrl.collectors.Collector`.

Commands besides the worker layer's common ones (``m``: remote calls with dotted paths, ``x``: close):

=======  =============================================  ==================================================
opcode   parent -> worker                               worker -> parent
=======  =============================================  ==================================================
``c``    collect one batch                              ``b``: the batch is in the shared buffers;
                                                        ``B`` + pickle(:class:`ShmLayout`): new buffers
                                                        (first batch, or the structure changed);
                                                        ``P`` + pickle(batch): not shareable, sent by value
``w``    pickle(weights): apply before the next batch   (none; a failure is reported at the next command)
=======  =============================================  ==================================================

Collecting pickles nothing: the collector stacks its steps straight into the shared buffers and the
reply is one byte.
"""
from __future__ import annotations

import pickle
from typing import Any, Callable

import torch

from torchrl.collectors._base import resolve_attr
from torchrl.collectors._loop import tree_template
from torchrl.collectors._single import Collector
from torchrl.envs._workers import OP_CALL, OP_CLOSE, Server, ShmLayout, WorkerSpec as _LayerSpec

__all__ = ["OP_CALL", "OP_CLOSE", "OP_COLLECT", "OP_WEIGHTS", "CollectorServer", "WorkerSpec"]

OP_COLLECT = b"c"
OP_WEIGHTS = b"w"
REPLY_SAME = b"b"
REPLY_NEW = b"B"
REPLY_PICKLED = b"P"


class WorkerSpec(_LayerSpec):
    """What one worker needs to build its collector (factories and policies travel through cloudpickle).

    Attributes:
        create_env_fn / create_env_kwargs: the env factory and its arguments.
        policy / policy_factory: the policy (or its factory).
        shared_weights: the policy weights in shared memory (``None``: the worker keeps its own copy);
            kept out of the cloudpickled part so that their memory stays shared under ``spawn``.
        collector_class / collector_kwargs: the collector built in the worker.
        num_threads: torch threads of the worker.
        prefix: name prefix of the shared batch files (set by the transport when ``None``).
    """

    CLOUDPICKLED = ("create_env_fn", "create_env_kwargs", "policy", "policy_factory", "collector_class",
                    "collector_kwargs")
    builds = "its collector"

    def __init__(self, *, create_env_fn: Callable, create_env_kwargs: dict, policy: Any, policy_factory: Callable | None,
                 shared_weights, collector_class: type, collector_kwargs: dict, num_threads: int,
                 prefix: str | None = None) -> None:
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = create_env_kwargs
        self.policy = policy
        self.policy_factory = policy_factory
        self.shared_weights = shared_weights
        self.collector_class = collector_class
        self.collector_kwargs = collector_kwargs
        self.num_threads = num_threads
        self.prefix = prefix

    def build(self, idx: int) -> CollectorServer:
        policy = self.policy_factory() if self.policy_factory is not None else self.policy
        if self.shared_weights is not None and isinstance(policy, torch.nn.Module):
            self.shared_weights.to_module(policy)
        collector = self.collector_class(
            self.create_env_fn,
            policy,
            create_env_kwargs=self.create_env_kwargs,
            worker_idx=idx,
            **self.collector_kwargs,
        )
        return CollectorServer(collector, self.prefix, idx)


class CollectorServer(Server):
    """Serves one collector: batches into shared files, weights, remote calls on dotted paths.

    Args:
        collector: the worker's collector.
        prefix / idx: name prefix of the shared batch files, and this worker's index.
    """

    def __init__(self, collector: Collector, prefix: str, idx: int) -> None:
        super().__init__(collector)
        self.prefix = prefix
        self.idx = idx
        self.count = 0
        self.layout: ShmLayout | None = None
        self.deferred: BaseException | None = None  # a weight update that failed, reported at the next command

    def resolve(self, target: Any, path: str) -> Any:
        return resolve_attr(target, path)

    def handle(self, op: bytes, message: bytes) -> bytes | None:
        if op == OP_WEIGHTS:
            try:
                self.target.update_policy_weights_(pickle.loads(message[1:]))
            except BaseException as err:  # noqa: BLE001 - reported with the next reply
                self.deferred = err
            return None
        if self.deferred is not None:
            err, self.deferred = self.deferred, None
            raise RuntimeError(f"applying new policy weights failed: {type(err).__name__}: {err}") from err
        if op == OP_COLLECT:
            return self.publish(self.target.rollout())
        return super().handle(op, message)

    def publish(self, batch) -> bytes:
        """The reply for a collected batch: it is in the shared buffers already, or in new ones, or pickled."""
        loop = self.target._loop
        if self.layout is not None and batch is loop.out:
            return REPLY_SAME
        if tree_template(batch) is None:
            loop.out = None
            self.layout = None
            return REPLY_PICKLED + pickle.dumps(batch)
        self.count += 1
        layout = ShmLayout.plan(batch, f"{self.prefix}-w{self.idx}-{self.count}")
        shared = layout.create()
        shared.update_(batch)
        loop.out = shared
        self.layout = layout
        return REPLY_NEW + pickle.dumps(layout)

    def close(self) -> None:
        self.target.shutdown(raise_on_error=False)
