"""The submitit launchers (submitit's local executor: no SLURM here) and the Collector backends."""
from __future__ import annotations

import pytest
import torch

from test.collectors.backend_contract import BackendContract
from test.collectors.distributed._helpers import descendants, make_env
from torchrl.collectors import Collector
from torchrl.collectors.distributed import DistributedCollector, RPCCollector, submitit_delayed_launcher
from torchrl.weight_update import DistributedWeightSyncScheme



@pytest.mark.slow
def test_submitit_launcher_runs_nodes_as_jobs(tmp_path):
    before = set(descendants())
    collector = DistributedCollector([make_env, make_env], None, frames_per_batch=20, total_frames=40, sync=True,
                                     launcher="submitit", slurm_kwargs={"folder": str(tmp_path), "timeout_min": 5})
    try:
        assert [b.shape for b in collector] == [torch.Size([2, 10])] * 2
        jobs = collector._pool.launcher.jobs
        assert sorted(jobs) == [1, 2]
    finally:
        collector.shutdown()
    assert all(job.done() for job in jobs.values())
    assert set(descendants()) - before == set()


def _delayed_main(framework: str):
    cls = DistributedCollector if framework == "distributed" else RPCCollector
    collector = cls([make_env, make_env], None, frames_per_batch=20, total_frames=40, sync=True,
                    launcher="submitit_delayed")
    try:
        return [tuple(b.shape) for b in collector]
    finally:
        collector.shutdown()


@pytest.mark.slow
def test_delayed_launcher_nodes_wait_for_the_main_job(tmp_path):
    conf = {"folder": str(tmp_path), "timeout_min": 5}
    main = submitit_delayed_launcher(num_jobs=2, framework="distributed", submitit_main_conf=conf,
                                     submitit_collection_conf=conf)(_delayed_main)
    assert main("distributed") == [(2, 10), (2, 10)]


def test_delayed_launcher_needs_its_decorator(monkeypatch):
    monkeypatch.delenv("TORCHRL_RENDEZVOUS_FILE", raising=False)
    with pytest.raises(RuntimeError, match="submitit_delayed_launcher"):
        DistributedCollector([make_env], None, frames_per_batch=10, launcher="submitit_delayed")
    with pytest.raises(ValueError, match="framework must be one of"):
        submitit_delayed_launcher(num_jobs=1, framework="mpi")


def test_weight_sync_scheme_on_nodes():
    from test.collectors.distributed._helpers import counting_policy, set_value

    policy = counting_policy(1.0)
    collector = DistributedCollector([make_env, make_env], policy, frames_per_batch=20, total_frames=60, sync=True,
                                     launcher="mp", weight_sync_schemes={"policy": DistributedWeightSyncScheme()})
    try:
        for i, batch in enumerate(collector):
            assert (batch["action"] == 1.0 + i).all()
            set_value(policy, 2.0 + i)
            collector.update_policy_weights_()
    finally:
        collector.shutdown()


class TestDistributedBackendContract(BackendContract):
    backend = "distributed"
    num_collectors = 2


class TestRPCBackendContract(BackendContract):
    backend = "rpc"
    num_collectors = 2


def test_backend_options_reach_the_launcher_and_nodes():
    collector = Collector(make_env, None, frames_per_batch=20, total_frames=20, backend="distributed",
                          num_collectors=2, sync=False, backend_options={"launcher": "mp"}, max_frames_per_traj=4)
    try:
        assert isinstance(collector, DistributedCollector)
        assert collector._pool.launcher_name == "mp"
        batch = next(iter(collector))
        assert batch.shape == (20,)
        assert collector.get_distant_attr("max_frames_per_traj") == [4, 4]
    finally:
        collector.shutdown()
