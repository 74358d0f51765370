"""Process collectors: sync/async layouts, global trajectory ids, weight updates reaching every worker,
state, seeding, dispatch from ``Collector`` and the remote helpers."""
from __future__ import annotations

import json
import warnings

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.collectors import (
    AsyncCollector,
    Collector,
    MultiAsyncCollector,
    MultiCollector,
    MultiSyncCollector,
    MultiSyncDataCollector,
    MultiaSyncDataCollector,
    aSyncDataCollector,
)
from torchrl.data import LazyTensorStorage, ReplayBuffer
from torchrl.envs import PendulumEnv
from torchrl.testing import CountingEnv, CountingEnvCountPolicy


def linear_policy(bias: float = 0.0) -> TensorDictModule:
    module = nn.Linear(3, 1)
    with torch.no_grad():
        module.weight.zero_()
        module.bias.fill_(bias)
    return TensorDictModule(module, in_keys=["observation"], out_keys=["action"])


def make_counting():
    return CountingEnv(max_steps=3)


COUNT_POLICY = CountingEnvCountPolicy(make_counting().action_spec)


@pytest.fixture
def closing():
    made = []
    yield made.append
    for collector in made:
        collector.shutdown()


def test_sync_stack_layout_and_global_traj_ids(closing):
    collector = MultiSyncCollector([make_counting] * 2, COUNT_POLICY, frames_per_batch=20, total_frames=40)
    closing(collector)
    first, second = list(collector)
    assert first.batch_size == torch.Size([2, 10])
    assert first["next", "observation"][1].squeeze(-1).tolist() == [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    assert first["collector", "traj_ids"].tolist() == [[0] * 4 + [1] * 4 + [2] * 2, [3] * 4 + [4] * 4 + [5] * 2]
    assert second["collector", "traj_ids"].tolist() == [[2, 2] + [6] * 4 + [7] * 4, [5, 5] + [8] * 4 + [9] * 4]


@pytest.mark.parametrize("cat_results,shape", [(0, [20]), (-1, [20]), ("stack", [2, 10])])
def test_cat_results(closing, cat_results, shape):
    collector = MultiSyncCollector([make_counting] * 2, COUNT_POLICY, frames_per_batch=20, total_frames=20, cat_results=cat_results)
    closing(collector)
    batch = collector.next()
    assert batch.batch_size == torch.Size(shape)
    assert batch["collector", "traj_ids"].reshape(-1).unique().tolist() == [0, 1, 2, 3, 4, 5]


def test_batched_envs_and_per_worker_frames(closing):
    collector = MultiSyncCollector(
        [lambda: CountingEnv(batch_size=[2])] * 2, None, frames_per_batch=[8, 4], total_frames=12, cat_results=-1
    )
    closing(collector)
    assert collector.frames_per_batch_worker(worker_idx=1) == 4
    batch = collector.next()
    assert batch.batch_size == torch.Size([2, 6])
    with pytest.raises(ValueError, match="different frames_per_batch cannot be stacked"):
        MultiSyncCollector([make_counting] * 2, None, frames_per_batch=[8, 4], total_frames=12)


def test_async_delivers_worker_batches(closing):
    collector = MultiAsyncCollector([make_counting] * 2, COUNT_POLICY, frames_per_batch=10, total_frames=60)
    closing(collector)
    batches = list(collector)
    assert [b.batch_size for b in batches] == [torch.Size([10])] * 6
    # every worker batch reads like the counting env's known sequence
    for b in batches:
        obs = b["next", "observation"].squeeze(-1).tolist()
        assert all(b2 == (a % 4) + 1 for a, b2 in zip(range(obs[0] - 1, obs[0] + 9), obs))
    # one global id per episode (each starts at observation 0), numbered consecutively, never shared
    ids = torch.cat([b["collector", "traj_ids"] for b in batches])
    obs = torch.cat([b["observation"].squeeze(-1) for b in batches])
    assert ids.unique().tolist() == list(range(int((obs == 0).sum())))
    for tid in ids.unique():
        assert sorted(obs[ids == tid].tolist()) == list(range(int((ids == tid).sum())))


def test_split_trajs_postproc_and_replay_buffer_run_in_parent(closing):
    collector = MultiSyncCollector([make_counting] * 2, COUNT_POLICY, frames_per_batch=20, total_frames=20, split_trajs=True,
                                   postproc=lambda td: td.set("flag", torch.ones(td.shape)))
    closing(collector)
    batch = collector.next()
    assert batch.batch_size == torch.Size([6, 4]) and batch["collector", "mask"].sum().item() == 20
    assert "flag" in batch.keys()
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    with_rb = MultiAsyncCollector([make_counting] * 2, COUNT_POLICY, frames_per_batch=10, total_frames=30, replay_buffer=rb)
    closing(with_rb)
    assert list(with_rb) == [None, None, None] and len(rb) == 30


def test_trainer_update_reaches_every_worker_before_next_batch(closing):
    policy = linear_policy(0.0)
    collector = MultiSyncCollector([PendulumEnv] * 2, policy, frames_per_batch=8, total_frames=32)
    closing(collector)
    it = iter(collector)
    assert (next(it)["action"] == 0).all()
    with torch.no_grad():  # an optimizer step, in place on the trainer's policy
        policy.module.bias.add_(0.5)
    assert (next(it)["action"] == 0.5).all()
    collector.update_policy_weights_(linear_policy(-0.25))
    assert (next(it)["action"] == -0.25).all()
    assert policy.module.bias.item() == -0.25 and collector.policy_version == 1
    with pytest.raises(ValueError, match="share one copy of the weights; worker_ids must be None"):
        collector.update_policy_weights_(worker_ids=[0])


def test_policy_factory_weights_travel_through_pipes(closing):
    collector = MultiSyncCollector([PendulumEnv] * 2, policy_factory=lambda: linear_policy(0.0), frames_per_batch=8, total_frames=24)
    closing(collector)
    it = iter(collector)
    assert (next(it)["action"] == 0).all()
    collector.update_policy_weights_(linear_policy(0.3))
    assert torch.allclose(next(it)["action"], torch.tensor(0.3))
    collector.update_policy_weights_(linear_policy(0.6), worker_ids=[1])
    batch = next(it)
    assert torch.allclose(batch["action"][0], torch.tensor(0.3)) and torch.allclose(batch["action"][1], torch.tensor(0.6))


def test_async_update_reaches_every_worker(closing):
    policy = linear_policy(0.0)
    collector = MultiAsyncCollector([PendulumEnv] * 2, policy, frames_per_batch=5, total_frames=-1)
    closing(collector)
    it = iter(collector)
    next(it)
    collector.update_policy_weights_(linear_policy(1.0))
    # at most one batch per worker was started before the update (a slow worker may deliver it late);
    # every other batch uses the new weights
    later = [next(it) for _ in range(6)]
    assert sum(not (b["action"] == 1.0).all() for b in later) <= 2
    factory = MultiAsyncCollector([PendulumEnv] * 2, policy_factory=lambda: linear_policy(0.0), frames_per_batch=5)
    closing(factory)
    it = iter(factory)
    next(it)
    factory.update_policy_weights_(linear_policy(1.0))
    later = [next(it) for _ in range(6)]
    assert sum(not (b["action"] == 1.0).all() for b in later) <= 2


def test_seeding_is_reproducible(closing):
    def run(seed):
        collector = MultiSyncCollector([PendulumEnv] * 2, linear_policy(0.1), frames_per_batch=20, total_frames=40)
        closing(collector)
        collector.set_seed(seed)
        return torch.cat([b["observation"] for b in collector], 1)

    a, b, c = run(1), run(1), run(2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert not torch.equal(a[0], a[1])  # workers get different seeds


def test_state_dict_resume(closing):
    collector = MultiSyncCollector([make_counting] * 2, COUNT_POLICY, frames_per_batch=20, total_frames=80)
    closing(collector)
    it = iter(collector)
    next(it)
    state = collector.state_dict()
    assert state["frames"] == 20 and set(state) >= {"worker0", "worker1", "traj_ids"}
    resumed = MultiSyncCollector([make_counting] * 2, COUNT_POLICY, frames_per_batch=20, total_frames=80)
    closing(resumed)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert len(rest) == 3
    # counters and ids continue; episodes restart (the in-flight step is not part of the state)
    assert rest[0]["observation"][:, 0].squeeze(-1).tolist() == [0, 0]
    assert rest[0]["collector", "traj_ids"].tolist() == [[6] * 4 + [7] * 4 + [8] * 2, [9] * 4 + [10] * 4 + [11] * 2]


def test_fake_tensordict_and_remote_helpers(closing):
    collector = MultiSyncCollector([make_counting] * 2, COUNT_POLICY, frames_per_batch=20, total_frames=20)
    closing(collector)
    fake = collector.fake_tensordict()
    real = collector.next()
    assert fake.batch_size == real.batch_size
    assert {k: (v.shape, v.dtype) for k, v in fake.items(True, True)} == {k: (v.shape, v.dtype) for k, v in real.items(True, True)}
    assert collector.getattr_env("max_steps") == 3
    assert collector.get_distant_attr("frames_per_batch") == [10, 10]
    assert collector.map_fn("set_seed", [(1,), (1,)]) == [collector.map_fn("set_seed", [(1,), (1,)])[0]] * 2
    stats = collector.stats("per_worker")
    assert stats["worker0/frames"] == 10 and stats["worker1/frames"] == 10
    assert collector.get_model("policy") is COUNT_POLICY and collector.get_cached_weights("policy") is None
    with pytest.raises(RuntimeError, match="worker 0 failed during env.no_such_attr: AttributeError"):
        collector.getattr_env("no_such_attr")
    assert collector.next() is None  # the failed attribute read leaves the collector usable


def test_reset_selected_workers(closing):
    collector = MultiSyncCollector([lambda: CountingEnv(max_steps=100)] * 2, COUNT_POLICY, frames_per_batch=6, total_frames=12)
    closing(collector)
    collector.next()
    collector.reset([False, True])
    assert collector.next()["observation"][:, 0].squeeze(-1).tolist() == [3, 0]


def test_collector_front_door_and_multicollector_dispatch(closing):
    built = Collector(make_counting, COUNT_POLICY, num_collectors=2, frames_per_batch=8, total_frames=8)
    closing(built)
    assert type(built) is MultiSyncCollector and built.next().batch_size == torch.Size([2, 4])
    built = Collector([make_counting] * 2, COUNT_POLICY, frames_per_batch=8, total_frames=8, sync=False)
    closing(built)
    assert type(built) is MultiAsyncCollector
    built = MultiCollector([make_counting] * 2, None, frames_per_batch=8, sync=False)
    closing(built)
    assert type(built) is MultiAsyncCollector
    single = AsyncCollector(make_counting, COUNT_POLICY, frames_per_batch=5, total_frames=10)
    closing(single)
    assert single.num_workers == 1 and [b.batch_size for b in single] == [torch.Size([5])] * 2
    with pytest.raises(ValueError, match="sync=False contradicts the class"):
        MultiSyncCollector([make_counting], None, frames_per_batch=4, sync=False)
    with pytest.raises(ValueError, match="num_collectors=3 but create_env_fn lists 2"):
        Collector([make_counting] * 2, None, num_collectors=3, frames_per_batch=4)


@pytest.mark.parametrize("alias,target", [(MultiSyncDataCollector, MultiSyncCollector), (MultiaSyncDataCollector, MultiAsyncCollector),
                                          (aSyncDataCollector, AsyncCollector)])
def test_deprecated_aliases(closing, alias, target):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        collector = alias([make_counting], None, frames_per_batch=4, total_frames=4)
    closing(collector)
    assert isinstance(collector, target) and isinstance(collector, alias)
    assert any(f"{alias.__name__} is deprecated; use {target.__name__} instead" in str(w.message) for w in caught)


def test_unsupported_and_invalid_options():
    with pytest.raises(ValueError, match="cat_results must be 'stack', 0 or -1, got 2"):
        MultiSyncCollector([make_counting], None, frames_per_batch=4, cat_results=2)
    with pytest.raises(ValueError, match="cat_results only applies to synchronous collectors"):
        MultiAsyncCollector([make_counting], None, frames_per_batch=4, cat_results=0)
    with pytest.raises(ValueError, match="preemptive_threshold .* is not supported"):
        MultiSyncCollector([make_counting], None, frames_per_batch=4, preemptive_threshold=0.7)
    with pytest.raises(TypeError, match="create_env_fn entries must be env factories"):
        MultiSyncCollector([3], None, frames_per_batch=4)


def test_init_random_frames_and_update_at_each_batch(closing):
    collector = MultiSyncCollector([PendulumEnv] * 2, linear_policy(0.5), frames_per_batch=8, total_frames=24,
                                   init_random_frames=8, update_at_each_batch=True)
    closing(collector)
    first, second, third = list(collector)
    assert not (first["action"] == 0.5).all() and (second["action"] == 0.5).all()
    assert collector.policy_version == 3


def test_worker_profiling(closing, tmp_path):
    collector = MultiSyncCollector([make_counting] * 2, None, frames_per_batch=8, total_frames=24)
    closing(collector)
    collector.enable_profile(workers=[1], num_rollouts=2, warmup_rollouts=1, save_path=tmp_path / "w{worker_idx}.json")
    list(collector)
    assert "traceEvents" in json.loads((tmp_path / "w1.json").read_text())
    assert not (tmp_path / "w0.json").exists()


# ------------------------------------------------------------------------------------------ per-worker devices
@pytest.mark.parametrize("cls", [MultiSyncCollector, MultiAsyncCollector])
def test_devices_may_be_listed_per_worker(cls):
    # as TorchRL (and the README's MultiaSyncDataCollector(devices=[...]) example)
    collector = cls([PendulumEnv] * 2, None, frames_per_batch=8, total_frames=16, device=["cpu", "cpu"],
                    storing_device=["cpu", "cpu"])
    batch = next(iter(collector))
    assert batch.device == torch.device("cpu") and batch.numel() == 8
    collector.shutdown()
    with pytest.raises(RuntimeError, match="does not match the number of workers: 2"):
        cls([PendulumEnv] * 2, None, frames_per_batch=8, total_frames=16, env_device=["cpu"])
