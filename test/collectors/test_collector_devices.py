"""Collectors across devices: where the env, the policy and the batches live, and the host syncs per batch.

As in ``test/envs/test_env_devices.py``, the ``accelerator_branches`` fixture makes every tensor report
``is_cpu == False`` so that the collector takes the branches it takes on a GPU while the data stays on the CPU,
and :func:`~torchrl.testing._host_syncs.count_host_syncs` sees the reads that would wait for the GPU. Routing
is checked with the ``meta`` device (data can be moved there, never read back); real CUDA tests exist only
where a CUDA device is present.
"""
from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.collectors import Collector
from torchrl.collectors._policy_call import make_actor
from torchrl.envs import PendulumEnv
from torchrl.testing import get_available_devices
from torchrl.testing._host_syncs import count_host_syncs

CUDA = [d for d in get_available_devices() if d.type == "cuda"]


@pytest.fixture
def accelerator_branches(monkeypatch):
    monkeypatch.setattr(torch.Tensor, "is_cpu", property(lambda self: False))


def _policy(bias: float = 0.5) -> TensorDictModule:
    net = nn.Linear(3, 1)
    nn.init.zeros_(net.weight)
    nn.init.constant_(net.bias, bias)
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def _collect(max_frames_per_traj, batches: int = 4):
    collector = Collector(PendulumEnv(batch_size=[4], seed=0), _policy(), frames_per_batch=100, total_frames=-1,
                          max_frames_per_traj=max_frames_per_traj)
    it = iter(collector)
    next(it)  # setup: specs, caches, the first reset
    with count_host_syncs() as syncs:
        data = [next(it) for _ in range(batches)]
    collector.shutdown()
    return syncs, data


@pytest.mark.parametrize("accelerator", [False, True])
def test_collector_iteration_no_sync_without_episode_ends(request, accelerator):
    if accelerator:
        request.getfixturevalue("accelerator_branches")
    syncs, data = _collect(None)
    if accelerator:  # the done flags are known all-False on the host: nothing waits for the device
        assert syncs.count == 0, syncs.report()
    else:  # on the CPU, only the done test's cheap byte comparison of the flags, once per step (4 x 25 steps)
        assert syncs.count == 100 and all("any_true" in str(e) for e in syncs.events), syncs.report()
    assert data[-1]["collector", "traj_ids"].unique().tolist() == [0, 1, 2, 3]


def test_collector_iteration_one_sync_per_episode_end(accelerator_branches):
    syncs, data = _collect(10)
    # 4 batches of 25 steps, every episode ends each 10 steps: 10 steps with resets, one read at each
    assert syncs.count == 10, syncs.report()
    assert all(s.op == "Tensor.tolist" and "any_done" in str(s) for s in syncs.events)


def test_trajectory_ids_same_on_both_branches(monkeypatch):
    _, cpu = _collect(7, batches=3)
    monkeypatch.setattr(torch.Tensor, "is_cpu", property(lambda self: False))
    _, accel = _collect(7, batches=3)
    for a, b in zip(cpu, accel):
        assert torch.equal(a["collector", "traj_ids"], b["collector", "traj_ids"])
    # 4 envs, episodes of 7 steps: ids advance by 4 at each end, in sub-env order
    ids = cpu[0]["collector", "traj_ids"]
    assert ids[:, 0].tolist() == [ids[0, 0].item() + i for i in range(4)]
    steps = ids.diff(dim=1)
    assert set(steps.unique().tolist()) == {0, 4}
    # every env ends an episode each 7 steps, all at the same steps: 3 or 4 changes in 25 steps
    changes = (steps != 0).sum(1).tolist()
    assert len(set(changes)) == 1 and changes[0] in (3, 4)


# -- routing ---------------------------------------------------------------------------------------------------------
def test_policy_device_gets_a_copy_and_the_data():
    env = PendulumEnv(batch_size=[2], seed=0, device="cpu")
    policy = _policy()
    act, module, wrapped = make_actor(policy, env, policy_device=torch.device("meta"), env_device=None)
    assert next(module.parameters()).device == torch.device("meta")
    assert next(policy.parameters()).device == torch.device("cpu")  # the user's policy is not moved
    out = act(env.reset())
    assert out["action"].device == torch.device("meta")  # inputs went to the policy's device


def test_policy_on_env_device_is_called_as_is():
    env = PendulumEnv(batch_size=[2], seed=0, device="cpu")
    policy = _policy()
    act, module, wrapped = make_actor(policy, env, policy_device=torch.device("cpu"), env_device=env.device)
    assert module is policy and wrapped is policy
    assert act(env.reset())["action"].device == torch.device("cpu")


def test_collector_policy_device_and_weight_updates():
    policy = _policy(0.5)
    collector = Collector(PendulumEnv(batch_size=[2], seed=0), policy, frames_per_batch=4, total_frames=-1,
                          policy_device="meta", env_device="cpu")
    assert collector.env.device == torch.device("cpu")
    assert next(collector.policy.parameters()).device == torch.device("meta")
    assert next(policy.parameters()).device == torch.device("cpu")
    collector.update_policy_weights_()  # pulls the CPU weights into the copy on the policy device
    assert next(collector.policy.parameters()).device == torch.device("meta")
    collector.shutdown()


@pytest.mark.parametrize("device", get_available_devices())
def test_collector_device_sets_env_policy_and_storage(device):
    collector = Collector(PendulumEnv(batch_size=[2], seed=0), _policy(), frames_per_batch=6, total_frames=6,
                          device=device)
    batch = next(iter(collector))
    assert collector.env.device == device and collector.storing_device == device
    assert all(v.device == device for v in batch.values(True, True))
    collector.shutdown()


@pytest.mark.parametrize(
    "given, expected",
    [
        ({}, (None, None, None)),
        ({"device": "cpu"}, ("cpu", "cpu", "cpu")),
        ({"env_device": "cpu", "policy_device": "cpu"}, ("cpu", "cpu", "cpu")),  # they agree: batches stay there
        ({"env_device": "cpu"}, ("cpu", None, None)),
        ({"policy_device": "meta"}, (None, "meta", None)),
        ({"env_device": "cpu", "policy_device": "meta"}, ("cpu", "meta", None)),
        ({"storing_device": "meta"}, (None, None, "meta")),
    ],
)
def test_collector_device_attributes(given, expected):
    """TorchRL's rules (checked against TorchRL 0.14.1 with CPU devices): ``device`` fills the others, and
    ``storing_device`` defaults to the env's device when env and policy devices agree."""
    collector = Collector(PendulumEnv(batch_size=[2], seed=0), _policy(), frames_per_batch=4, total_frames=4, **given)
    found = (collector.env_device, collector.policy_device, collector.storing_device)
    assert found == tuple(None if d is None else torch.device(d) for d in expected)
    collector.shutdown()


def test_collector_storing_device():
    collector = Collector(PendulumEnv(batch_size=[2], seed=0), _policy(), frames_per_batch=6, total_frames=6,
                          storing_device="meta")
    batch = next(iter(collector))
    assert batch.device == torch.device("meta")
    assert all(v.device == torch.device("meta") for v in batch.values(True, True))
    collector.shutdown()


# -- real CUDA -------------------------------------------------------------------------------------------------------
# (defined only where a CUDA device is present: no test is generated, or skipped, elsewhere)
if CUDA:

    @pytest.mark.cuda
    @pytest.mark.parametrize("device", CUDA)
    def test_cuda_cpu_env_policy_on_device(device):
        policy = _policy(0.25).to(device)
        collector = Collector(PendulumEnv(batch_size=[2], seed=0), policy, frames_per_batch=10, total_frames=10,
                              env_device="cpu", storing_device="cpu")
        batch = next(iter(collector))
        assert batch["action"].device.type == "cpu"
        torch.testing.assert_close(batch["action"], torch.full_like(batch["action"], 0.25))
        collector.shutdown()

    @pytest.mark.cuda
    @pytest.mark.parametrize("device", CUDA)
    def test_cuda_multiprocess_weights_synchronised(device):
        policy = _policy(0.25).to(device)
        collector = Collector([lambda: PendulumEnv(batch_size=[2], seed=0)] * 2, policy, frames_per_batch=8,
                              total_frames=-1, env_device="cpu", policy_device=device, storing_device="cpu")
        it = iter(collector)
        first = next(it)
        torch.testing.assert_close(first["action"], torch.full_like(first["action"], 0.25))
        with torch.no_grad():
            policy.module.bias.fill_(-0.75)
        collector.update_policy_weights_()
        next(it)  # (a batch may have been started before the update)
        later = next(it)
        torch.testing.assert_close(later["action"], torch.full_like(later["action"], -0.75))
        collector.shutdown()

    @pytest.mark.cuda
    @pytest.mark.parametrize("device", CUDA)
    def test_cuda_collector_iteration_without_syncs(device):
        collector = Collector(PendulumEnv(batch_size=[64], seed=0, device=device), _policy().to(device),
                              frames_per_batch=64 * 20, total_frames=-1)
        it = iter(collector)
        next(it)
        torch.cuda.synchronize(device)
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(3):
                batch = next(it)
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert batch.device == device
        collector.shutdown()
