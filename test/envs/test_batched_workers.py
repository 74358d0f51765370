"""The worker layer shared by ParallelEnv and the process collectors (``torchrl/envs/_workers``), and the
transport seam under ``MultiCollector``."""
from __future__ import annotations

import gc
import multiprocessing as mp
import os
import signal
import time

import pytest
import torch
from tensordict import TensorDict

from torchrl._fast import set_fast_paths
from torchrl.collectors import MultiSyncCollector
from torchrl.collectors._pool import PipeTransport, Transport
from torchrl.envs._workers import (
    REPLY_VALUE,
    Channel,
    Server,
    SharedBlock,
    ShmLayout,
    WorkerPool,
    WorkerSpec,
    new_prefix,
    remove_prefixed,
)
from torchrl.testing import CountingEnv


class _Counter:
    def __init__(self, start: int) -> None:
        self.value = start

    def add(self, x: int) -> int:
        self.value += x
        return self.value

    def fail(self):
        raise ZeroDivisionError("on purpose")


class _CounterServer(Server):
    def handle(self, op, message):
        if op == b"p":
            return REPLY_VALUE + b"pong"
        return super().handle(op, message)


class _CounterSpec(WorkerSpec):
    builds = "its counter"

    def __init__(self, start: int, fail: bool = False) -> None:
        self.start = start
        self.fail = fail

    def build(self, idx):
        if self.fail:
            raise ValueError(f"cannot build counter {idx}")
        return _CounterServer(_Counter(self.start + idx))


@pytest.fixture
def pool():
    p = WorkerPool("Test", new_prefix("torchrl-test-"))
    yield p
    p.shutdown()
    assert not [c for c in mp.active_children() if c.name.startswith("Test-worker")]


def test_channel_carries_short_and_long_messages():
    a, b = mp.Pipe(duplex=True)
    ca, cb = Channel(a), Channel(b)
    for message in (b"s", b"K" + os.urandom(3000)):
        ca.send(message)
        assert cb.recv() == message
    ca.close()
    with pytest.raises(EOFError):
        cb.recv()
    cb.close()


def test_calls_errors_and_own_opcodes(pool):
    pool.start([_CounterSpec(10), _CounterSpec(10)], "fork")
    assert pool.call(range(2), "add", (1,)) == {0: 11, 1: 12}
    assert pool.call([1], "value", mode="get") == {1: 12}
    assert pool.call([0], "add", mode="probe") == {0: (True, None)}
    pool.send(0, b"p")
    assert pool.collect([0], "ping") == {0: REPLY_VALUE + b"pong"}
    with pytest.raises(RuntimeError, match="Test worker 1 failed during fail\\(\\): ZeroDivisionError: on purpose") as info:
        pool.call([1], "fail")
    assert "Worker 1 traceback" in str(info.value) and isinstance(info.value.__cause__, ZeroDivisionError)
    assert pool.failed is None and pool.call([0], "value", mode="get") == {0: 11}  # a failed call is not fatal


def test_build_error_keeps_its_type_when_asked():
    p = WorkerPool("Test", keep=(ValueError,))
    try:
        with pytest.raises(ValueError, match="worker 1 failed during start \\(building its counter\\): ValueError"):
            p.start([_CounterSpec(0), _CounterSpec(0, fail=True)], "fork")
    finally:
        p.shutdown()


def test_death_is_detected_at_once(pool):
    pool.start([_CounterSpec(0), _CounterSpec(0)], "fork")
    os.kill(pool.procs[1].pid, signal.SIGKILL)
    pool.procs[1].join(5)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"worker 1 died during .*killed by SIGKILL"):
        pool.call(range(2), "add", (1,))
    assert time.monotonic() - start < 1.0
    with pytest.raises(RuntimeError, match="cannot continue: worker 1 died"):
        pool.check()


def test_a_death_is_reported_before_another_workers_reply(pool):
    # an async consumer waits on every worker: a dead one must not hide behind a live one that keeps answering
    pool.start([_CounterSpec(0), _CounterSpec(0)], "fork")
    os.kill(pool.procs[1].pid, signal.SIGKILL)
    pool.procs[1].join(5)
    pool.send(0, b"p")
    assert pool.conns[0].poll(5)  # worker 0's reply is ready (and is looked at first)
    with pytest.raises(RuntimeError, match=r"worker 1 died during collect .*killed by SIGKILL"):
        pool.wait_any([0, 1], "collect")


def test_finalizer_shuts_down():
    class Owner:
        pass

    owner = Owner()
    p = WorkerPool("Test")
    finalizer = p.finalize_with(owner)
    p.start([_CounterSpec(0)], "fork")
    del owner
    assert not finalizer.still_active() and p.closed and p.procs == []
    assert not [c for c in mp.active_children() if c.name.startswith("Test-worker")]


class _ParentOnly:
    """Garbage (a reference cycle) whose finalizer kills any process but the one that made it, as the
    finalizer of a native handle (an envpool thread pool) crashes a forked child."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.me = self

    def __del__(self) -> None:
        if os.getpid() != self.pid:
            os.kill(os.getpid(), signal.SIGSEGV)
        _ParentOnly.finalized_in_parent += 1


_ParentOnly.finalized_in_parent = 0


class _CollectingSpec(_CounterSpec):
    def build(self, idx):
        gc.collect()  # a collection in the child, as allocation pressure may trigger at any time
        return super().build(idx)


def test_forked_worker_does_not_collect_inherited_garbage(pool):
    gc.collect()
    gc.disable()  # keep the cycle uncollected until the fork
    try:
        _ParentOnly()
        pool.start([_CollectingSpec(0), _CollectingSpec(0)], "fork")
        assert pool.call(range(2), "add", (1,)) == {0: 1, 1: 2}
    finally:
        gc.enable()
    before = _ParentOnly.finalized_in_parent
    gc.collect()
    assert _ParentOnly.finalized_in_parent == before + 1  # the parent still collects its own garbage


def test_shared_block_is_shared_between_mappings():
    prefix = new_prefix("torchrl-test-")
    try:
        block = SharedBlock(prefix, [((2, 3), torch.float32), ((4,), torch.int64), ((), torch.bool)])
        mine = block.create()
        theirs = block.attach(unlink=True)
        assert not os.path.exists(prefix)
        mine[0].fill_(1.5)
        theirs[1].copy_(torch.arange(4))
        assert theirs[0].sum().item() == 9.0 and mine[1].tolist() == [0, 1, 2, 3]
        assert [t.shape for t in theirs] == [torch.Size([2, 3]), torch.Size([4]), torch.Size([])]
    finally:
        remove_prefixed(prefix)


@pytest.mark.parametrize("fast", [True, False])
def test_shm_layout_round_trip(fast):
    td = TensorDict({"a": torch.arange(6).reshape(3, 2), "n": {"b": torch.ones(3, 4, dtype=torch.bool)}}, [3])
    prefix = new_prefix("torchrl-test-")
    with set_fast_paths(fast):
        try:
            layout = ShmLayout.plan(td, prefix)
            shared = layout.create()
            shared.update_(td)
            seen = layout.attach()
            assert list(seen.keys(True, True)) == list(td.keys(True, True))
            assert (seen == td).all() and seen["n"].batch_size == torch.Size([3])
        finally:
            remove_prefixed(prefix)


class InProcessTransport(Transport):
    """A transport with no process at all: what a new backend implements (the seam's contract)."""

    def start(self, specs):
        self.servers = [spec.build(i) for i, spec in enumerate(specs)]
        self.asked: set[int] = set()

    def request(self, idx):
        self.asked.add(idx)

    def receive_all(self, idxs):
        self.asked -= set(idxs)
        return {i: self.servers[i].target.rollout() for i in idxs}

    def receive_any(self, idxs):
        i = min(idxs)
        return i, self.receive_all([i])[i].clone()

    def call(self, idxs, path, args=(), kwargs=None, *, mode="call"):
        out = {}
        for i in idxs:
            value = self.servers[i].resolve(self.servers[i].target, path)
            out[i] = value(*args, **(kwargs or {})) if mode == "call" else value
        return out

    def push_weights(self, idx, weights):
        self.servers[idx].target.update_policy_weights_(weights)

    def check(self):
        pass

    def shutdown(self, timeout=None):
        for server in getattr(self, "servers", ()):
            server.close()
        self.servers = []


def test_a_transport_plugs_in_without_touching_the_front_door():
    class InProcessCollector(MultiSyncCollector):
        transport_class = InProcessTransport

    assert issubclass(MultiSyncCollector.transport_class, Transport) and MultiSyncCollector.transport_class is PipeTransport
    before = set(mp.active_children())
    collector = InProcessCollector([CountingEnv] * 2, None, frames_per_batch=8, total_frames=16)
    try:
        batches = list(collector)
        assert [b.batch_size for b in batches] == [torch.Size([2, 4])] * 2
        assert set(mp.active_children()) == before
        assert collector.get_distant_attr("frames_per_batch") == [4, 4]
    finally:
        collector.shutdown()
