"""The worker side of process collectors: one process, one :class:`~torchrl.collectors.Collector`, one pipe.

Protocol (one ``send_bytes`` message each way, first byte = opcode; only ``w`` has no reply):

=======  =============================================  ==================================================
opcode   parent → worker                                worker → parent
=======  =============================================  ==================================================
``c``    collect one batch                              ``b``: the batch is in the shared buffers;
                                                        ``B`` + pickle(:class:`ShmLayout`): new buffers
                                                        (first batch, or the structure changed);
                                                        ``P`` + pickle(batch): not shareable, sent by value
``w``    pickle(weights): apply before the next batch   (none; a failure is reported at the next command)
``m``    cloudpickle((path, args, kwargs, call))    ``K`` + pickle(attribute, or its call's result)
``x``    shut down and exit                             ``K`` + pickle(None)
=======  =============================================  ==================================================

Any failure is answered with ``E`` + pickle((exception or None, type name, message, traceback text)); the
worker keeps serving. Collecting pickles nothing: the collector stacks its steps straight into the
shared buffers and the reply is one byte.
"""
from __future__ import annotations

import pickle
import signal
import traceback
from typing import Any, Callable

import cloudpickle
import torch

from torchrl.collectors._base import resolve_attr
from torchrl.collectors._loop import tree_template
from torchrl.collectors._shm import ShmLayout
from torchrl.collectors._single import Collector

__all__ = ["OP_COLLECT", "OP_WEIGHTS", "OP_CALL", "OP_CLOSE", "WorkerSpec", "error_payload", "worker_main"]

OP_COLLECT = b"c"
OP_WEIGHTS = b"w"
OP_CALL = b"m"
OP_CLOSE = b"x"


def error_payload(err: BaseException) -> bytes:
    """``E`` + pickle of ``(exception or None, type name, message, formatted traceback)``."""
    tb = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    exc: BaseException | None = err
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001 - unpicklable exceptions travel as text only
        exc = None
    try:
        return b"E" + pickle.dumps((exc, type(err).__name__, str(err), tb))
    except Exception:  # noqa: BLE001
        return b"E" + pickle.dumps((None, type(err).__name__, str(err), tb))


class WorkerSpec:
    """What one worker needs to build its collector (cloudpickled when the start method is not ``fork``).

    Attributes:
        create_env_fn / create_env_kwargs: the env factory and its arguments.
        policy / policy_factory: the policy (or its factory).
        shared_weights: the policy weights in shared memory (``None``: the worker keeps its own copy);
            kept out of the cloudpickled part so that their memory stays shared under ``spawn``.
        collector_class / collector_kwargs: the collector built in the worker.
        num_threads: torch threads of the worker.
        prefix: name prefix of the shared batch files.
    """

    def __init__(self, *, create_env_fn: Callable, create_env_kwargs: dict, policy: Any, policy_factory: Callable | None,
                 shared_weights, collector_class: type, collector_kwargs: dict, num_threads: int, prefix: str) -> None:
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = create_env_kwargs
        self.policy = policy
        self.policy_factory = policy_factory
        self.shared_weights = shared_weights
        self.collector_class = collector_class
        self.collector_kwargs = collector_kwargs
        self.num_threads = num_threads
        self.prefix = prefix

    _PICKLED = ("create_env_fn", "create_env_kwargs", "policy", "policy_factory", "collector_class", "collector_kwargs")

    def __getstate__(self) -> dict:
        state = {k: v for k, v in self.__dict__.items() if k not in self._PICKLED}
        state["_payload"] = cloudpickle.dumps({k: self.__dict__[k] for k in self._PICKLED})
        return state

    def __setstate__(self, state: dict) -> None:
        state = dict(state)
        self.__dict__.update(cloudpickle.loads(state.pop("_payload")))
        self.__dict__.update(state)

    def build(self, idx: int) -> Collector:
        policy = self.policy_factory() if self.policy_factory is not None else self.policy
        if self.shared_weights is not None and isinstance(policy, torch.nn.Module):
            self.shared_weights.to_module(policy)
        return self.collector_class(
            self.create_env_fn,
            policy,
            create_env_kwargs=self.create_env_kwargs,
            worker_idx=idx,
            **self.collector_kwargs,
        )


class _Buffers:
    """The shared buffers a worker's collector writes into (replaced when the batch structure changes)."""

    def __init__(self, prefix: str, idx: int) -> None:
        self.prefix = prefix
        self.idx = idx
        self.count = 0
        self.layout: ShmLayout | None = None

    def publish(self, collector: Collector, batch) -> bytes:
        loop = collector._loop
        if self.layout is not None and batch is loop.out:
            return b"b"
        if tree_template(batch) is None:
            loop.out = None
            self.layout = None
            return b"P" + pickle.dumps(batch)
        self.count += 1
        layout = ShmLayout.plan(batch, f"{self.prefix}-w{self.idx}-{self.count}")
        shared = layout.create()
        shared.update_(batch)
        loop.out = shared
        self.layout = layout
        return b"B" + pickle.dumps(layout)


def worker_main(idx: int, conn, spec: WorkerSpec, close_fds: list) -> None:
    """Entry point of a worker process: builds the collector, then serves commands until ``x`` or EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the parent, which shuts us down.
    for other in close_fds:
        try:
            other.close()
        except OSError:
            pass
    torch.set_num_threads(spec.num_threads)
    try:
        collector = spec.build(idx)
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send_bytes(error_payload(err))
        conn.close()
        return
    conn.send_bytes(b"k")
    buffers = _Buffers(spec.prefix, idx)
    deferred: BaseException | None = None
    recv, send = conn.recv_bytes, conn.send_bytes
    while True:
        try:
            msg = recv()
        except (EOFError, OSError):  # the parent is gone
            break
        op = msg[:1]
        try:
            if op == OP_WEIGHTS:
                try:
                    collector.update_policy_weights_(pickle.loads(msg[1:]))
                except BaseException as err:  # noqa: BLE001 - reported with the next reply
                    deferred = err
                continue
            if deferred is not None and op != OP_CLOSE:
                err, deferred = deferred, None
                raise RuntimeError(f"applying new policy weights failed: {type(err).__name__}: {err}") from err
            if op == OP_COLLECT:
                send(buffers.publish(collector, collector.rollout()))
            elif op == OP_CALL:
                path, args, kwargs, call = cloudpickle.loads(msg[1:])
                target = resolve_attr(collector, path)
                send(b"K" + pickle.dumps(target(*args, **kwargs) if call else target))
            elif op == OP_CLOSE:
                try:
                    collector.shutdown(raise_on_error=False)
                finally:
                    send(b"K" + pickle.dumps(None))
                break
            else:
                raise RuntimeError(f"unknown collector worker command {op!r}")
        except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
            try:
                send(error_payload(err))
            except (OSError, EOFError):
                break
    conn.close()
