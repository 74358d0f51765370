"""RPCCollector on the "mp" launcher (torch.distributed.rpc over TensorPipe, loopback)."""
from __future__ import annotations

import os
import signal
import time

import pytest
import torch

from test.collectors.distributed._helpers import counting_policy, descendants, make_env, set_value
from torchrl.collectors.distributed import RPCCollector, RPCWeightUpdater


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("collector_class", ["single", "sync", "async"])
def test_frames_shapes_and_names(sync, collector_class):
    before = set(descendants())
    collector = RPCCollector([make_env, make_env], counting_policy(), frames_per_batch=40, total_frames=160, sync=sync,
                             launcher="mp", collector_class=collector_class,
                             num_workers_per_collector=1 if collector_class == "single" else 2)
    try:
        batches = list(collector)
    finally:
        collector.shutdown()
    assert [b.shape for b in batches] == [torch.Size([40])] * 4  # TorchRL: sync concatenates the nodes' shares
    assert all(b.names == ["time"] for b in batches)
    assert set(descendants()) - before == set()


def test_weight_updates_and_default_updater():
    policy = counting_policy(0.0)
    collector = RPCCollector([make_env, make_env], policy, frames_per_batch=20, total_frames=80, sync=True,
                             launcher="mp")
    try:
        assert isinstance(collector.weight_updater, RPCWeightUpdater)
        for i, batch in enumerate(collector):
            assert (batch["action"] == float(i)).all()
            set_value(policy, i + 1.0)
            collector.update_policy_weights_()
    finally:
        collector.shutdown()


def test_node_death_raises_naming_rank():
    collector = RPCCollector([make_env, make_env], None, frames_per_batch=20, total_frames=-1, sync=False,
                             launcher="mp")
    try:
        it = iter(collector)
        next(it)
        os.kill(collector._pool.launcher.procs[1].pid, signal.SIGKILL)
        start = time.monotonic()
        with pytest.raises(RuntimeError, match=r"rank 1 .*died.*SIGKILL"):
            for _ in range(10_000):
                next(it)
        assert time.monotonic() - start < 10
    finally:
        collector.shutdown()


def test_trajs_per_batch_and_remote_calls():
    collector = RPCCollector([make_env], None, frames_per_batch=20, total_frames=40, sync=True, launcher="mp",
                             collector_kwargs={"max_frames_per_traj": 5})
    try:
        batches = list(collector)
        assert collector.get_distant_attr("max_frames_per_traj") == [5]
    finally:
        collector.shutdown()
    assert int(batches[0]["next", "truncated"].sum()) == 4
