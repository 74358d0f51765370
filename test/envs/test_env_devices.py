"""Envs and transforms on a device: where their data lives, and the host syncs their hot paths make.

Host syncs are counted with :func:`torchrl.testing._host_syncs.count_host_syncs`. On CPU tensors some hot paths
read values on the host on purpose (cheap there: e.g. the done test compares the bytes of CPU flags); every such
shortcut is conditioned on ``tensor.is_cpu``. The ``accelerator_branches`` fixture makes every tensor report
``is_cpu == False``, so the code takes the branches it takes on a GPU while the data stays on the CPU, and the
counter then sees exactly the reads that would wait for the GPU. Tests for real CUDA devices are generated only
where one is present (``get_available_devices``) and carry the ``cuda`` marker.
"""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from torchrl.envs import (
    Compose,
    DeviceCastTransform,
    DoubleToFloat,
    InitTracker,
    ObservationNorm,
    PendulumEnv,
    RewardSum,
    StepCounter,
    TransformedEnv,
)
from torchrl.envs._done import known_value, mark_false, mark_true
from torchrl.envs.transforms import Transform, VecNorm
from torchrl.testing import CountingEnv, get_available_devices
from torchrl.testing._host_syncs import count_host_syncs

CUDA = [d for d in get_available_devices() if d.type == "cuda"]


@pytest.fixture
def accelerator_branches(monkeypatch):
    """Every tensor reports ``is_cpu == False``: the hot paths take their accelerator branches on CPU data."""
    monkeypatch.setattr(torch.Tensor, "is_cpu", property(lambda self: False))


def _syncs(fn) -> int:
    with count_host_syncs() as syncs:
        fn()
    return syncs.count


def _common_transforms(max_steps: int | None) -> Compose:
    return Compose(
        StepCounter(max_steps),
        RewardSum(),
        InitTracker(),
        DoubleToFloat(),
        ObservationNorm(loc=0.5, scale=2.0, in_keys=["observation"]),
        VecNorm(in_keys=["observation"]),
        DeviceCastTransform("cpu", "cpu"),
    )


class _ReadsOnEveryStep(Transform):
    """What the budgets below must catch: a transform that reads a value on the host at every step."""

    def _step(self, tensordict, next_tensordict):
        float(next_tensordict["reward"].sum())
        return next_tensordict


def _assert_only_cpu_done_reads(long, short, *, per_step: int, steps: int) -> None:
    """``long`` made the reads of ``short`` plus ``per_step`` cheap CPU reads of done flags per extra step."""
    def others(syncs):
        # (a byte comparison, or bool(t.any()) with the fast paths off)
        return [e.op for e in syncs.events if not (e.op in ("Tensor.numpy", "aten._local_scalar_dense.default")
                                                   and "any_true" in str(e))]

    assert long.count - short.count == per_step * steps, long.report()
    assert others(long) == others(short), long.report()  # e.g. a new .item() at each step would show here


# -- done flags known on the host --------------------------------------------------------------------------------
def test_cpu_flags_are_not_marked():
    """CPU flags are read on the host cheaply: the bookkeeping is for flags on an accelerator only."""
    flag = mark_false(torch.zeros(3, 1, dtype=torch.bool))
    assert known_value(flag) is None


def test_marks_follow_versions(accelerator_branches):
    flag = mark_false(torch.zeros(3, 1, dtype=torch.bool))
    assert known_value(flag) is False
    flag[0] = True  # an in-place write makes the mark stale
    assert known_value(flag) is None
    assert known_value(flag.clone()) is None  # copies are not marked
    mask = mark_true(torch.ones(2, dtype=torch.bool))
    assert known_value(mask) is True
    mask.view(2, 1).fill_(False)  # a write through a view bumps the shared version too
    assert known_value(mask) is None


def test_marks_survive_many_newer_ones(accelerator_branches):
    flag = mark_false(torch.zeros(1, dtype=torch.bool))
    for _ in range(1500):  # more than one generation of marks
        mark_false(torch.zeros(1, dtype=torch.bool))
    assert known_value(flag) is False


# -- sync budgets: PendulumEnv ------------------------------------------------------------------------------------
@pytest.mark.parametrize("accelerator", [False, True])
@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_pendulum_rollout_makes_no_sync_per_step(request, accelerator, break_when_any_done):
    if accelerator:
        request.getfixturevalue("accelerator_branches")
    env = PendulumEnv(batch_size=[8], seed=0)
    env.rollout(1, break_when_any_done=break_when_any_done)
    with count_host_syncs() as short:
        env.rollout(1, break_when_any_done=break_when_any_done)
    with count_host_syncs() as long:
        env.rollout(100, break_when_any_done=break_when_any_done)
    if accelerator:
        # the env never ends an episode: its done flags are known all-False on the host and never read; nothing
        # at all waits for the device, setup included (the parameters stay tensors)
        assert long.count == 0, long.report()
    else:
        # on the CPU: the same setup reads (the parameters, once per rollout), plus the done test's cheap byte
        # comparison of the CPU flags at each step, and nothing else
        _assert_only_cpu_done_reads(long, short, per_step=1, steps=99)


def test_pendulum_step_and_maybe_reset_no_sync(accelerator_branches):
    env = PendulumEnv(batch_size=[4], seed=0)
    td = env.reset()
    env.rand_action(td.clone())  # (the action spec's first draw caches whether its box is finite: setup)
    with count_host_syncs() as syncs:
        for _ in range(20):
            td, nxt = env.step_and_maybe_reset(env.rand_action(td))
            td = nxt
    assert syncs.count == 0, syncs.report()


def test_pendulum_per_pendulum_params_on_accelerator(accelerator_branches):
    """Parameters that differ per pendulum take the same sync-free path, with the same dynamics."""
    env = PendulumEnv(seed=0)
    params = env.gen_params(batch_size=[3])
    params["params", "g"] = torch.tensor([9.0, 10.0, 11.0])
    td = env.reset(params)
    td["action"] = torch.zeros(3, 1)
    th, thdot = td["th"].clone(), td["thdot"].clone()
    with count_host_syncs() as syncs:
        out = env.step(td)["next"]
    assert syncs.count == 0, syncs.report()
    expected_thdot = (thdot + 3 * torch.tensor([9.0, 10.0, 11.0]) / 2 * th.sin() * 0.05).clamp(-8, 8)
    torch.testing.assert_close(out["thdot"], expected_thdot)


# -- sync budgets: TransformedEnv with the common transforms ------------------------------------------------------
@pytest.mark.parametrize("accelerator", [False, True])
def test_transformed_rollout_no_sync_until_an_episode_can_end(request, accelerator):
    if accelerator:
        request.getfixturevalue("accelerator_branches")
    env = TransformedEnv(PendulumEnv(batch_size=[4], seed=0), _common_transforms(max_steps=1000))
    env.rollout(2)
    with count_host_syncs() as short:
        env.rollout(1, break_when_any_done=False)
    with count_host_syncs() as long:
        env.rollout(100, break_when_any_done=False)
    if accelerator:  # StepCounter knows on the host that no counter reaches 1000: the flags are known, not read
        assert long.count == 0, long.report()
    else:
        _assert_only_cpu_done_reads(long, short, per_step=1, steps=99)


def test_transformed_rollout_one_sync_per_reset_step(accelerator_branches):
    env = TransformedEnv(PendulumEnv(batch_size=[4], seed=0), _common_transforms(max_steps=10))
    env.rollout(2)  # setup: specs built (and validated) once
    with count_host_syncs() as syncs:
        data = env.rollout(100, break_when_any_done=False)
    # every episode ends at steps 10, 20, ..., 100: one read of the done flags then (which also finds that every
    # row ends, so the reset that follows reads nothing), none at the other 90 steps
    assert syncs.count == 10, syncs.report()
    assert data["next", "truncated"].sum().item() == 40
    assert data["next", "step_count"][:, -1].squeeze(-1).tolist() == [10] * 4


def test_partial_resets_one_sync_per_step(accelerator_branches):
    env = TransformedEnv(PendulumEnv(batch_size=[4], seed=0), Compose(StepCounter(5), RewardSum(), InitTracker()))
    env.rollout(2)
    td = env.reset()
    td["step_count"] = torch.tensor([[0], [1], [2], [3]])  # episodes end at different steps: partial resets
    with count_host_syncs() as syncs:
        data = env.rollout(20, auto_reset=False, tensordict=td, break_when_any_done=False)
    # the done test reads the flags once per step; the reset that follows reads nothing more (its done-after-reset
    # check ran on the base env's fresh flags, which the transformed env does not read again)
    assert syncs.count == 20, syncs.report()
    assert all("any_done" in str(event) for event in syncs.events)
    assert data["next", "step_count"].squeeze(-1)[3].tolist() == [4, 5, 1, 2, 3] * 4


def test_done_after_reset_still_raises_on_accelerator(accelerator_branches):
    class DoneAfterReset(CountingEnv):
        def _reset(self, td):
            out = super()._reset(td)
            out["done"] = torch.ones(*self.batch_size, 1, dtype=torch.bool)
            return out

    with pytest.raises(RuntimeError, match="True right after reset"):
        DoneAfterReset(batch_size=[3]).reset()
    env = DoneAfterReset(batch_size=[3])
    td = DoneAfterReset(batch_size=[3], allow_done_after_reset=True).reset()
    td["_reset"] = torch.tensor([[True], [False], [False]])
    with count_host_syncs() as syncs, pytest.raises(RuntimeError, match="True right after reset"):
        env.reset(td)
    assert syncs.count == 1, syncs.report()  # the flags of the reset rows, read once


def test_transformed_rollout_break_when_any_done_at_most_one_sync_per_step(accelerator_branches):
    env = TransformedEnv(PendulumEnv(batch_size=[4], seed=0), _common_transforms(max_steps=30))
    env.rollout(2)
    with count_host_syncs() as syncs:
        data = env.rollout(100, break_when_any_done=True)
    assert data.shape == (4, 30)
    assert syncs.count <= 1, syncs.report()  # the step that ends the episodes; StepCounter knew the others


def test_budget_catches_a_read_on_every_step(accelerator_branches):
    env = TransformedEnv(PendulumEnv(batch_size=[4], seed=0), Compose(StepCounter(1000), _ReadsOnEveryStep()))
    env.rollout(2)
    with count_host_syncs() as syncs:
        env.rollout(50, break_when_any_done=False)
    assert syncs.count == 50
    assert "_step" in syncs.report()


# -- where data lives ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", get_available_devices())
def test_pendulum_everything_on_its_device(device):
    env = PendulumEnv(device=device, batch_size=[5], seed=0)
    td = env.reset()
    for spec in (env.full_observation_spec, env.full_action_spec, env.full_done_spec, env.full_reward_spec):
        assert spec.device == device
        assert all(v.device == device for v in spec.rand().values(True, True))
        assert all(v.device == device for v in spec.zero().values(True, True))
    assert all(v.device == device for v in td.values(True, True))
    data = env.rollout(7, break_when_any_done=False)
    assert all(v.device == device for v in data.values(True, True))
    assert data["next", "done"].dtype == torch.bool and not data["next", "done"].any()


@pytest.mark.parametrize("device", get_available_devices())
def test_transforms_state_on_the_env_device(device):
    env = TransformedEnv(PendulumEnv(device=device, batch_size=[3], seed=0), _common_transforms(max_steps=4))
    data = env.rollout(6, break_when_any_done=False)
    assert all(v.device == device for v in data.values(True, True))
    assert data["next", "step_count"].device == device
    assert data["next", "step_count"].squeeze(-1)[0].tolist() == [1, 2, 3, 4, 1, 2]
    vecnorm = env.transform[5]
    assert all(v.device == device for v in vecnorm._td.values(True, True))  # the running statistics


def test_observation_norm_follows_the_observation_device():
    """The buffers stay where they were given (as TorchRL's); the math runs on the observation's device."""
    t = ObservationNorm(loc=torch.tensor([1.0, 2.0]), scale=torch.tensor([2.0, 4.0]), in_keys=["obs"])
    out = t(TensorDict(obs=torch.zeros(3, 2, device="meta"), batch_size=[3]))
    assert out["obs"].device == torch.device("meta")
    assert t.loc.device == torch.device("cpu")
    cpu = t(TensorDict(obs=torch.ones(1, 2), batch_size=[1]))["obs"]
    torch.testing.assert_close(cpu, torch.tensor([[3.0, 6.0]]))


def test_vecnorm_statistics_on_the_data_device():
    t = VecNorm(in_keys=["obs"])
    out = t(TensorDict(obs=torch.zeros(4, 3, device="meta"), batch_size=[4]))
    assert out["obs"].device == torch.device("meta")
    assert {v.device.type for v in t._td.values(True, True)} == {"meta"}


def test_device_cast_moves_specs():
    # (tensors cannot live on "cpu:1", but specs and TensorDicts can name it: the spec routing is visible)
    env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0, device="cpu"), DeviceCastTransform("cpu:1"))
    assert env.device == torch.device("cpu:1")
    for spec in (env.full_observation_spec, env.full_action_spec, env.full_reward_spec, env.full_done_spec):
        assert spec.device == torch.device("cpu:1")
    assert env.base_env.full_action_spec.device == torch.device("cpu")
    assert env.transform.orig_device == torch.device("cpu")


def test_device_cast_moves_data_both_ways():
    # (data can be copied to the meta device, not out of it: each direction is checked as a move to meta)
    out = DeviceCastTransform("meta", "cpu")(TensorDict(obs=torch.zeros(2, 3), batch_size=[2]))
    assert out["obs"].device == torch.device("meta")
    back = DeviceCastTransform("cpu", "meta").inv(TensorDict(action=torch.zeros(2, 1), batch_size=[2], device="cpu"))
    assert back["action"].device == torch.device("meta")
    keyed = DeviceCastTransform("meta", "cpu", in_keys=["obs"])
    out = keyed(TensorDict(obs=torch.zeros(2), other=torch.zeros(2), batch_size=[2]))
    assert (out["obs"].device.type, out["other"].device.type) == ("meta", "cpu")
    keyed = DeviceCastTransform("cpu", "meta", in_keys_inv=["action"])
    back = keyed.inv(TensorDict(action=torch.zeros(2), batch_size=[2]))
    assert back["action"].device == torch.device("meta")


def test_step_counter_counts_on_the_data_device():
    counter = StepCounter(3)
    env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0), counter)
    td = env.reset()
    meta = td.to("meta")  # what the counter sees behind a DeviceCastTransform to another device
    nxt = TensorDict(done=torch.zeros(2, 1, dtype=torch.bool, device="meta"), batch_size=[2], device="meta")
    out = counter._step(meta, nxt)
    assert out["step_count"].device == out["truncated"].device == torch.device("meta")


# -- real CUDA ----------------------------------------------------------------------------------------------------
# (defined only where a CUDA device is present: no test is generated, or skipped, elsewhere)
if CUDA:

    @pytest.mark.cuda
    @pytest.mark.parametrize("device", CUDA)
    @pytest.mark.parametrize("batch", [1, 1024])
    def test_cuda_rollout_without_syncs(device, batch):
        env = PendulumEnv(device=device, batch_size=[batch], seed=0)
        policy = torch.nn.Linear(3, 1, device=device)
        actor = TensorDictModule(policy, in_keys=["observation"], out_keys=["action"])
        td = env.reset()
        env.rollout(3, actor, tensordict=td, auto_reset=False)  # warm-up (caches, constants)
        torch.cuda.synchronize(device)
        torch.cuda.set_sync_debug_mode("error")
        try:
            with torch.no_grad():
                data = env.rollout(50, actor, tensordict=env.reset(td.clone()), auto_reset=False, break_when_any_done=False)
                for _ in range(20):
                    td, nxt = env.step_and_maybe_reset(actor(td))
                    td = nxt
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert data["next", "observation"].device == device

    @pytest.mark.cuda
    @pytest.mark.parametrize("device", CUDA)
    def test_cuda_transformed_env_resets_with_one_read(device):
        env = TransformedEnv(PendulumEnv(device=device, batch_size=[16], seed=0), _common_transforms(max_steps=5))
        data = env.rollout(20, break_when_any_done=False)
        assert data["next", "step_count"].squeeze(-1)[0].tolist() == [1, 2, 3, 4, 5] * 4
        assert data["next", "truncated"].device == device


@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_pendulum_rollout_on_the_meta_device_reads_nothing(break_when_any_done):
    # a meta tensor has no values: any host read raises, so the whole rollout running proves none happens
    env = PendulumEnv(device="meta", batch_size=[4])
    with count_host_syncs() as syncs:
        rollout = env.rollout(10, break_when_any_done=break_when_any_done)
    assert rollout.batch_size == torch.Size([4, 10]) and rollout["next", "reward"].device.type == "meta"
    assert syncs.count == 0, syncs.report()
