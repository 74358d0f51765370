"""DistributedCollector and DistributedSyncCollector on the "mp" launcher (gloo on loopback)."""
from __future__ import annotations

import os
import signal
import time

import pytest
import torch
import torch.distributed as dist

from test.collectors.distributed._helpers import counting_policy, descendants, make_env, set_value
from torchrl.collectors import Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.collectors.distributed import (
    DistributedCollector,
    DistributedSyncCollector,
    DistributedWeightUpdater,
)


def _bad_env():
    raise ValueError("no env on this node")


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("collector_class", ["single", "sync", "async"])
def test_frames_shapes_and_names(sync, collector_class):
    before = set(descendants())
    per_node = 1 if collector_class == "single" else 2
    collector = DistributedCollector([make_env, make_env], counting_policy(), frames_per_batch=40, total_frames=200,
                                     sync=sync, launcher="mp", collector_class=collector_class,
                                     num_workers_per_collector=per_node)
    try:
        batches = list(collector)
    finally:
        collector.shutdown()
    assert sum(b.numel() for b in batches) == 200
    assert len(batches) == 5
    for b in batches:
        # TorchRL's shapes: sync stacks one flattened share per node; async delivers one node's batch
        assert b.shape == ((2, 20) if sync else (40,))
        assert b.names[-1] == "time"
        assert ("collector", "traj_ids") in b.keys(True)
        if collector_class == "single":  # consecutive steps of one env (Pendulum never ends by itself)
            assert torch.equal(b["next", "observation"][..., :-1, :], b["observation"][..., 1:, :])
    ids = torch.cat([b["collector", "traj_ids"].reshape(-1) for b in batches])
    assert ids.min() == 0  # global ids: the two nodes' trajectories are told apart
    if sync:
        first = batches[0]["collector", "traj_ids"]
        assert set(first[0].tolist()).isdisjoint(first[1].tolist())
    assert set(descendants()) - before == set()  # no node process left


def test_collector_class_as_a_class():
    collector = DistributedCollector([make_env], None, frames_per_batch=10, total_frames=20, sync=True,
                                     launcher="mp", collector_class=MultiSyncCollector, num_workers_per_collector=2)
    try:
        assert [b.shape for b in collector] == [torch.Size([1, 10])] * 2
    finally:
        collector.shutdown()


def test_random_policy():
    collector = DistributedCollector([make_env, make_env], None, frames_per_batch=20, total_frames=40, sync=True,
                                     launcher="mp")
    try:
        batches = list(collector)
    finally:
        collector.shutdown()
    actions = torch.cat([b["action"].reshape(-1) for b in batches])
    assert actions.abs().max() <= 2.0 and actions.std() > 0.1  # Pendulum's action space, sampled


def test_sync_weight_update_reaches_every_node_before_its_next_batch():
    policy = counting_policy(0.0)
    collector = DistributedCollector([make_env, make_env], policy, frames_per_batch=20, total_frames=100, sync=True,
                                     launcher="mp")
    try:
        for i, batch in enumerate(collector):
            assert (batch["action"] == float(i)).all(), (i, batch["action"].unique())
            set_value(policy, i + 1.0)
            collector.update_policy_weights_()
    finally:
        collector.shutdown()


def test_async_weight_update_reaches_each_node_after_its_batch_in_flight():
    policy = counting_policy(0.0)
    collector = DistributedCollector([make_env, make_env], policy, frames_per_batch=10, total_frames=-1, sync=False,
                                     launcher="mp")
    try:
        it = iter(collector)
        next(it)
        set_value(policy, 7.0)
        collector.update_policy_weights_()
        # each node may deliver the batch it had started (old weights); every later batch is new
        seen = [next(it)["action"].unique().tolist() for _ in range(6)]
        assert all(s == [7.0] for s in seen[2:]), seen
    finally:
        collector.shutdown()


def test_update_interval_pushes_weights_without_a_call():
    policy = counting_policy(0.0)
    collector = DistributedSyncCollector([make_env, make_env], policy, frames_per_batch=20, total_frames=60,
                                         launcher="mp", update_interval=1)
    try:
        for i, batch in enumerate(collector):
            assert (batch["action"] == float(i)).all()
            set_value(policy, i + 1.0)  # no update_policy_weights_(): the collector pushes before each batch
    finally:
        collector.shutdown()
    assert isinstance(collector.weight_updater, DistributedWeightUpdater)


def test_update_after_each_batch_async():
    policy = counting_policy(0.0)
    collector = DistributedCollector([make_env], policy, frames_per_batch=10, total_frames=50, sync=False,
                                     launcher="mp", update_after_each_batch=True)
    try:
        it = iter(collector)
        next(it)
        set_value(policy, 3.0)
        values = [b["action"].unique().tolist() for b in it]
    finally:
        collector.shutdown()
    assert values[-1] == [3.0] and len(values) == 4


def test_seed_state_dict_and_remote_calls():
    runs = []
    for _ in range(2):
        collector = DistributedCollector([make_env, make_env], None, frames_per_batch=20, total_frames=40, sync=True,
                                         launcher="mp")
        try:
            assert collector.set_seed(3) != 3
            runs.append(torch.cat([b["observation"].reshape(-1) for b in collector]))
            state = collector.state_dict()
            assert {"worker0", "worker1"} <= set(state)
            assert collector.get_distant_attr("frames_per_batch") == [10, 10]
        finally:
            collector.shutdown()
    assert torch.equal(runs[0], runs[1])


def test_node_error_carries_its_traceback():
    before = set(descendants())
    with pytest.raises(RuntimeError, match=r"(?s)worker 1 failed during start.*no env on this node"):
        DistributedCollector([make_env, _bad_env], None, frames_per_batch=20, total_frames=40, sync=True,
                             launcher="mp")
    assert not dist.is_initialized()
    assert set(descendants()) - before == set()


@pytest.mark.parametrize("sync", [True, False])
def test_node_death_raises_within_seconds_naming_rank_and_cause(sync):
    collector = DistributedCollector([make_env, make_env], None, frames_per_batch=20, total_frames=-1, sync=sync,
                                     launcher="mp")
    try:
        it = iter(collector)
        next(it)
        os.kill(collector._pool.launcher.procs[2].pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(RuntimeError, match=r"rank 2 .*died.*SIGKILL"):
            for _ in range(10_000):
                next(it)
        assert time.monotonic() - start < 10
        with pytest.raises(RuntimeError, match="cannot continue"):
            next(iter(collector))
    finally:
        collector.shutdown()
    assert not dist.is_initialized()


def test_existing_default_group_is_refused(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/rdv", rank=0, world_size=1)
    try:
        with pytest.raises(RuntimeError, match="already has a default torch.distributed process group"):
            DistributedCollector([make_env], None, frames_per_batch=10, total_frames=10, launcher="mp")
    finally:
        dist.destroy_process_group()


def test_bad_options():
    with pytest.raises(ValueError, match="launcher must be one of"):
        DistributedCollector([make_env], None, frames_per_batch=10, launcher="slurm")
    with pytest.raises(ValueError, match="collector_class must be"):
        DistributedCollector([make_env], None, frames_per_batch=10, launcher="mp", collector_class="many")


def test_shutdown_twice_and_after_use():
    collector = DistributedCollector([make_env], None, frames_per_batch=10, total_frames=10, launcher="mp")
    list(collector)
    collector.shutdown()
    collector.shutdown()
    with pytest.raises(RuntimeError, match="shut down"):
        collector.state_dict()


def test_classes_run_in_nodes():
    for cls, shape in ((Collector, (2, 10)), (MultiAsyncCollector, (2, 10))):
        collector = DistributedCollector([make_env, make_env], None, frames_per_batch=20, total_frames=20, sync=True,
                                         launcher="mp", collector_class=cls, num_workers_per_collector=2)
        try:
            assert next(iter(collector)).shape == shape
            assert collector.get_distant_attr("__class__.__name__") == [cls.__name__] * 2
        finally:
            collector.shutdown()
