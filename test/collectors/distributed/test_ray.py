"""RayCollector on a local Ray instance (started once for the module): shapes, weights, restarts, cleanup."""
from __future__ import annotations

import os
import signal
import time

import pytest
import torch

ray = pytest.importorskip("ray", reason="RayCollector needs the ray package")

from test.collectors.distributed._helpers import counting_policy, make_env, set_value  # noqa: E402
from torchrl.collectors import Collector, RayWeightUpdater  # noqa: E402
from torchrl.collectors.distributed import RayCollector  # noqa: E402
from torchrl.data import LazyTensorStorage, ReplayBuffer  # noqa: E402
from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv  # noqa: E402


def counted_env():
    return TransformedEnv(PendulumEnv(), StepCounter())


def _bad_env():
    raise ValueError("no env in this actor")


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    started = not ray.is_initialized()
    if started:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 object_store_memory=100 * 1024 ** 2)
    yield
    if started:
        ray.shutdown()


def _all_cpus_free(timeout: float = 10.0) -> bool:
    """Whether every CPU of the cluster is free again (no actor of ours holds a share)."""
    total = ray.cluster_resources()["CPU"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if abs(ray.available_resources().get("CPU", 0.0) - total) < 1e-6:
            return True
        time.sleep(0.1)
    return False


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sync", [True, False])
@pytest.mark.parametrize("collector_class", ["single", "sync", "async"])
def test_frames_shapes_and_names(sync, collector_class):
    per_node = 1 if collector_class == "single" else 2
    collector = RayCollector([make_env, make_env], None, frames_per_batch=40, total_frames=120, sync=sync,
                             collector_class=collector_class, num_workers_per_collector=per_node)
    try:
        batches = list(collector)
    finally:
        collector.shutdown()
    assert sum(b.numel() for b in batches) == 120 and len(batches) == 3
    for b in batches:
        assert b.shape == ((2, 20) if sync else (40,))  # TorchRL's: sync stacks a share per node
        assert b.names[-1] == "time"
        if collector_class == "single":  # consecutive steps of one env
            assert torch.equal(b["next", "observation"][..., :-1, :], b["observation"][..., 1:, :])
    actions = torch.cat([b["action"].reshape(-1) for b in batches])
    assert actions.abs().max() <= 2.0 and actions.std() > 0.1  # policy=None: random actions in the action space
    if sync:
        ids = batches[0]["collector", "traj_ids"]
        assert set(ids[0].tolist()).isdisjoint(ids[1].tolist())  # global ids across nodes
    assert _all_cpus_free()


def test_weight_updates_controls_and_shutdown_leaves_no_actor():
    policy = counting_policy(0.0)
    collector = RayCollector(make_env, policy, num_collectors=2, frames_per_batch=20, total_frames=100, sync=True)
    pids = collector._pool.pids()
    try:
        assert isinstance(collector.weight_updater, RayWeightUpdater)
        assert len(collector.remote_collectors) == collector.num_workers == 2
        for i, batch in enumerate(collector):  # every actor applies the new weights before its next batch
            assert (batch["action"] == float(i)).all(), (i, batch["action"].unique())
            set_value(policy, i + 1.0)
            collector.update_policy_weights_()
        seeds = collector.set_seed(7)
        assert isinstance(seeds, list) and len(seeds) == 2 and seeds[0] != seeds[1]
        states = collector.state_dict()
        assert isinstance(states, list) and len(states) == 2
        collector.load_state_dict(states)
        assert collector.get_distant_attr("frames_per_batch") == [10, 10]
        assert collector.map_fn("set_seed", [(1,), (2,)]) != [None, None]
    finally:
        collector.shutdown()
    assert _all_cpus_free()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)
    with pytest.raises(RuntimeError, match="shut down"):
        collector.set_seed(1)


def _no_duplicates(batches) -> None:
    frames = torch.cat([torch.stack([b["collector", "traj_ids"].reshape(-1), b["step_count"].reshape(-1)], -1)
                        for b in batches])
    assert frames.unique(dim=0).shape[0] == frames.shape[0]  # (trajectory, step): each delivered once


@pytest.mark.parametrize("how", ["ray.kill", "SIGKILL"])
def test_dead_actor_is_restarted_and_totals_stay_exact(how):
    policy = counting_policy(3.0)
    collector = RayCollector([counted_env, counted_env], policy, frames_per_batch=20, total_frames=200, sync=False)
    batches = []
    try:
        collector.update_policy_weights_()
        for i, batch in enumerate(collector):
            batches.append(batch.clone())
            if i == 1:
                if how == "ray.kill":
                    ray.kill(collector.remote_collectors[0], no_restart=True)
                else:
                    os.kill(collector._pool.pids()[0], signal.SIGKILL)
        assert collector.num_restarts == [1, 0]
    finally:
        collector.shutdown()
    assert sum(b.numel() for b in batches) == 200 and len(batches) == 10
    _no_duplicates(batches)
    assert all((b["action"] == 3.0).all() for b in batches)  # the rebuilt actor got the last weights
    assert _all_cpus_free()


def test_forced_weight_pushes_and_giving_up_after_max_restarts():
    class Fragile(RayCollector):
        max_restarts = 0

    policy = counting_policy(5.0)
    collector = Fragile([make_env], policy, frames_per_batch=10, total_frames=100, sync=False,
                        max_weight_update_interval=1)
    try:
        it = iter(collector)
        next(it)
        assert next(it)["action"].unique().tolist() == [5.0]  # pushed without update_policy_weights_()
        ray.kill(collector.remote_collectors[0], no_restart=True)
        with pytest.raises(RuntimeError, match="node 0 died 1 times.*giving up after 0 restarts"):
            next(it)
    finally:
        collector.shutdown()


def test_actor_error_carries_its_traceback():
    with pytest.raises(RuntimeError, match="no env in this actor"):
        RayCollector([_bad_env], None, frames_per_batch=10, total_frames=10)
    assert _all_cpus_free()


def test_replay_buffer_and_backend_ray():
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    collector = Collector(make_env, None, backend="ray", num_collectors=2, frames_per_batch=20, total_frames=60,
                          replay_buffer=rb)
    try:
        assert isinstance(collector, RayCollector) and collector.num_workers == 2
        assert list(collector) == [None, None, None]
        assert len(rb) == 60
    finally:
        collector.shutdown()


def test_too_many_collectors_for_the_cluster():
    with pytest.raises(RuntimeError, match="too few for 300 collectors"):
        RayCollector([make_env] * 300, None, frames_per_batch=300, total_frames=300)


def _counting_policy_maker(env):
    return counting_policy(0.0)


def test_eval_worker_submit_poll_and_from_name():
    from torchrl.collectors.distributed import RayEvalWorker

    with pytest.raises(RuntimeError, match="num_gpus=1 but the Ray cluster has 0 GPUs"):
        RayEvalWorker(None, make_env, _counting_policy_maker)
    worker = RayEvalWorker(None, make_env, _counting_policy_maker, num_gpus=0, name="torchrl-test-eval")
    try:
        assert worker.poll() is None  # nothing submitted
        weights = counting_policy(2.0)
        worker.submit(weights, max_steps=15)
        deadline = time.monotonic() + 60
        result = None
        while result is None and time.monotonic() < deadline:
            result = worker.poll(timeout=1.0)
        assert result["steps"] == 15 and isinstance(result["reward"], float) and result["reward"] < 0
        other = RayEvalWorker.from_name("torchrl-test-eval")
        other.submit(None, max_steps=5)
        assert other.poll(timeout=60)["steps"] == 5
    finally:
        worker.shutdown()
    assert _all_cpus_free()
