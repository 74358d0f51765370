"""No host syncs in the loss forward (and backward) of DQN, DDPG, TD3, SAC and clipped PPO, in the value estimators
and in the target-network updaters; what they create lands on the input's device.

Syncs are counted by :func:`torchrl.testing._host_syncs.count_host_syncs`, which sees ``.item()``, ``bool(t)``,
boolean-mask indexing, ``nonzero``... on CPU tensors too. Each loss is called once before counting: the first
call builds the value estimator and reads its coefficients once (a cached host scalar for CPU buffers).
Devices: the CPU and each visible GPU (``get_available_devices``); value math is also run on ``meta`` tensors,
which refuse any mix with a CPU tensor that is not a 0-dim scalar.
"""
from __future__ import annotations

import warnings

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from test.objectives._tiny_losses import BATCH, LOSSES, N_OBS, total
from torchrl.modules import ValueOperator
from torchrl.objectives import HardUpdate, SoftUpdate
from torchrl.objectives.utils import _reduce
from torchrl.objectives.value import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator
from torchrl.objectives.value import functional as vf
from torchrl.testing import get_available_devices
from torchrl.testing._host_syncs import count_host_syncs

DEVICES = get_available_devices()


def _build(name: str, device):
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss, data = LOSSES[name]()
        loss = loss.to(device)
        data = data.to(device)
        loss(data.clone())  # warm-up: builds the value estimator
    return loss, data


# ------------------------------------------------------------------------------------------------- losses
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(LOSSES))
def test_loss_forward_and_backward_have_no_host_sync(name, device):
    loss, data = _build(name, device)
    with count_host_syncs() as syncs:
        out = loss(data.clone())
    assert syncs.count == 0, syncs.report()
    for key, value in out.items():  # logged values stay tensors on the loss's device
        assert isinstance(value, torch.Tensor), key
        assert value.device == device, key
    with count_host_syncs() as syncs:
        total(out).backward()
    assert syncs.count == 0, syncs.report()


@pytest.mark.parametrize("name", ["dqn", "ddpg", "ppo_gae_inside", "ppo_gae_outside"])
def test_loss_runs_on_meta_tensors(name):
    """Every tensor the forward creates follows its inputs: on ``meta`` data and parameters, a tensor made on the
    CPU (other than a 0-dim scalar) would raise. (TD3's and SAC's stacked ensemble parameters cannot be moved to
    ``meta``: tensordict's ``TensorDictParams`` swaps ``.data`` in place, which torch allows between CPU and CUDA
    but not to ``meta``; the CUDA runs of the test above cover them.)"""
    loss, data = _build(name, torch.device("cpu"))
    loss = loss.to("meta")
    out = loss(data.to("meta"))
    assert {v.device.type for v in out.values()} == {"meta"}
    total(out).backward()
    assert {p.grad.device.type for p in loss.parameters() if p.grad is not None} == {"meta"}


@pytest.mark.parametrize("device", DEVICES)
def test_priority_weights_and_mask_add_no_host_sync(device):
    """DQN with prioritized-replay weights, a loss mask and the TD errors written back: still no sync, and the
    masked mean counts only the kept elements."""
    loss, data = _build("dqn", device)
    data["priority_weight"] = torch.rand(BATCH, device=device)
    data["mask"] = torch.arange(BATCH, device=device) % 2 == 0
    loss.loss_mask_key = "mask"
    loss(data.clone())
    batch = data.clone()
    with count_host_syncs() as syncs:
        out = loss(batch)
    assert syncs.count == 0, syncs.report()
    assert batch["td_error"].device == device
    assert torch.isfinite(out["loss"])


def test_masked_mean_is_the_mean_of_the_kept_elements_without_sync():
    values = torch.tensor([1.0, 2.0, float("nan"), 4.0])
    mask = torch.tensor([True, True, False, True])
    with count_host_syncs() as syncs:
        mean = _reduce(values, "mean", mask)
        summed = _reduce(values, "sum", mask)
        none = _reduce(values, "none", mask)
    assert syncs.count == 0, syncs.report()
    assert mean.item() == pytest.approx(7.0 / 3.0)
    assert summed.item() == 7.0
    assert none.tolist() == [1.0, 2.0, 0.0, 4.0]
    empty = _reduce(values, "mean", torch.zeros(4, dtype=torch.bool))
    assert empty.item() == 0.0


# ------------------------------------------------------------------------------------- value estimators
T = 5
ESTIMATORS = {
    "gae": lambda net: GAE(gamma=0.9, lmbda=0.95, value_network=net),
    "gae_loop": lambda net: GAE(gamma=0.9, lmbda=0.95, value_network=net, vectorized=False),
    "td0": lambda net: TD0Estimator(gamma=0.9, value_network=net),
    "td1": lambda net: TD1Estimator(gamma=0.9, value_network=net),
    "td_lambda": lambda net: TDLambdaEstimator(gamma=0.9, lmbda=0.95, value_network=net),
    "td_lambda_loop": lambda net: TDLambdaEstimator(gamma=0.9, lmbda=0.95, value_network=net, vectorized=False),
}


def _trajectories(device) -> TensorDict:
    def values(*shape):
        return torch.empty(*shape, device=device) if device == "meta" else torch.randn(*shape, device=device)

    flags = torch.zeros(2, T, 1, dtype=torch.bool, device=device)
    return TensorDict({
        "observation": values(2, T, N_OBS), "state_value": values(2, T, 1),
        "next": {"observation": values(2, T, N_OBS), "state_value": values(2, T, 1), "reward": values(2, T, 1),
                 "done": flags, "terminated": flags.clone()},
    }, [2, T], device=device)


@pytest.mark.parametrize("with_network", [False, True])
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
@pytest.mark.parametrize("device", [*DEVICES, torch.device("meta")])
def test_value_estimator_stays_on_the_input_device_without_sync(name, device, with_network):
    net = ValueOperator(nn.Linear(N_OBS, 1), in_keys=["observation"]).to(device) if with_network else None
    estimator = ESTIMATORS[name](net)  # coefficient buffers stay on the CPU: 0-dim, they mix with any device
    data = _trajectories(device)
    estimator(data.clone())
    with count_host_syncs() as syncs:
        out = estimator(data)
    assert syncs.count == 0, syncs.report()
    assert {"advantage", "value_target"} <= set(out.keys())
    assert {v.device for v in out.values(True, True)} == {device}


@pytest.mark.parametrize("per_step_gamma", [False, True])
@pytest.mark.parametrize(
    "fn", ["generalized_advantage_estimate", "vec_generalized_advantage_estimate", "td_lambda_return_estimate",
           "vec_td_lambda_return_estimate", "td1_return_estimate", "vec_td1_return_estimate"],
)
def test_functional_value_math_creates_its_intermediates_on_the_input_device(fn, per_step_gamma):
    meta = torch.device("meta")
    value, next_value, reward = (torch.empty(2, T, 1, device=meta) for _ in range(3))
    done = torch.zeros(2, T, 1, dtype=torch.bool, device=meta)
    gamma = torch.full((2, T, 1), 0.9, device=meta) if per_step_gamma else 0.9
    f = getattr(vf, fn)
    if "advantage" in fn:
        out = f(gamma, 0.95, value, next_value, reward, done, done)
    elif "lambda" in fn:
        out = f(gamma, 0.95, next_value, reward, done, done)
    else:
        out = f(gamma, next_value, reward, done, done)
    for tensor in out if isinstance(out, tuple) else (out,):
        assert tensor.device == meta
        assert tensor.shape == (2, T, 1)


@pytest.mark.parametrize("fn", ["generalized_advantage_estimate", "vec_generalized_advantage_estimate"])
def test_gae_has_no_host_sync(fn):
    value, next_value, reward = (torch.randn(2, T, 1) for _ in range(3))
    done = torch.zeros(2, T, 1, dtype=torch.bool)
    done[0, 2] = True
    with count_host_syncs() as syncs:
        getattr(vf, fn)(0.9, 0.95, value, next_value, reward, done, done)
    assert syncs.count == 0, syncs.report()


# ------------------------------------------------------------------------------------- target networks
class _Recorder:
    def __init__(self, monkeypatch, name: str):
        self.calls = 0
        original = getattr(torch, name)

        def wrapped(*args, **kwargs):
            self.calls += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(torch, name, wrapped)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["dqn", "td3", "sac"])
def test_target_updates_are_foreach_in_place_and_sync_free(name, device, monkeypatch):
    loss, _ = _build(name, device)
    lerp = _Recorder(monkeypatch, "_foreach_lerp_")
    copy = _Recorder(monkeypatch, "_foreach_copy_")
    soft = SoftUpdate(loss, tau=0.25)
    targets = [(k, t) for k, t in loss.named_buffers() if "target" in k and t.is_floating_point()]
    sources = {k: p for k, p in loss.named_parameters()}
    assert targets
    before = {k: (t.data_ptr(), t.clone()) for k, t in targets}
    with count_host_syncs() as syncs:
        soft.step()
    assert syncs.count == 0, syncs.report()
    assert lerp.calls == 1
    checked = 0
    for key, target in targets:
        ptr, old = before[key]
        assert target.data_ptr() == ptr and target.device == device  # written in place, where it was
        source = sources.get(key.replace("target_", "", 1))
        if source is not None:  # the ensemble's shared buffers have no trainable twin
            torch.testing.assert_close(target, 0.75 * old + 0.25 * source.detach())
            checked += 1
    assert checked == len(sources) if name != "sac" else checked > 0  # SAC's actor has no target
    hard = HardUpdate(loss, value_network_update_interval=2)
    with count_host_syncs() as syncs:
        hard.step()
        hard.step()
    assert syncs.count == 0, syncs.report()
    assert copy.calls == 1
    for key, target in targets:
        source = sources.get(key.replace("target_", "", 1))
        if source is not None:
            assert torch.equal(target, source.detach())


def test_soft_update_runs_on_meta_parameters():
    """Nothing the updater creates lives on the CPU: the whole update runs on ``meta`` parameters."""
    loss, _ = _build("dqn", torch.device("cpu"))
    loss = loss.to("meta")
    SoftUpdate(loss, eps=0.9).step()
    HardUpdate(loss, value_network_update_interval=1).step()
    assert {t.device.type for k, t in loss.named_buffers() if "target" in k} == {"meta"}
