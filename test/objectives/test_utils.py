from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

import torchrl.objectives.utils as U
from torchrl.objectives import DQNLoss, HardUpdate, SoftUpdate, ValueEstimators
from torchrl.objectives.utils import (
    KLAdaptiveLR,
    TargetNetUpdater,
    build_value_estimator,
    default_value_kwargs,
    dispatch_value_estimator,
    distance_loss,
    get_value_estimator_entry,
    group_optimizers,
    hold_out_net,
    hold_out_params,
    next_state_value,
    register_value_estimator,
    symexp,
    symlog,
    two_hot_cross_entropy,
    two_hot_decode,
    two_hot_encode,
)
from torchrl.objectives.value import GAE, MultiAgentGAE, TD0Estimator, TD1Estimator, TDLambdaEstimator, VTrace


def qnet(out=2):
    return TensorDictModule(nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, out)), ["observation"],
                            ["action_value"])


# ----------------------------------------------------------------------------------------- registry
def test_value_estimators_enum():
    # TorchRL 0.14.1's members, in its order
    assert [v.name for v in ValueEstimators] == ["TD0", "TD1", "TDLambda", "GAE", "MAGAE", "VTrace"]
    assert ValueEstimators.MAGAE.value == "Multi-agent generalized advantage estimate"


@pytest.mark.parametrize(
    "value_type,cls,kwargs",
    [
        (ValueEstimators.TD0, TD0Estimator, {"gamma": 0.99, "differentiable": True}),
        (ValueEstimators.TD1, TD1Estimator, {"gamma": 0.99, "differentiable": True}),
        (ValueEstimators.TDLambda, TDLambdaEstimator, {"gamma": 0.99, "lmbda": 0.95, "differentiable": True}),
        (ValueEstimators.GAE, GAE, {"gamma": 0.99, "lmbda": 0.95, "differentiable": True}),
        (ValueEstimators.MAGAE, MultiAgentGAE, {"gamma": 0.99, "lmbda": 0.95, "differentiable": True}),
        (ValueEstimators.VTrace, VTrace, {"gamma": 0.99, "differentiable": True}),
    ],
)
def test_registry_entries_and_defaults(value_type, cls, kwargs):
    assert get_value_estimator_entry(value_type).cls is cls
    defaults = default_value_kwargs(value_type)
    assert defaults == kwargs
    defaults["gamma"] = 0.0
    assert default_value_kwargs(value_type)["gamma"] == 0.99


def test_unknown_value_type():
    with pytest.raises(NotImplementedError, match="No value estimator is registered for 'nope'"):
        get_value_estimator_entry("nope")


def test_register_custom_estimator_and_dispatch():
    @register_value_estimator("TD0-half", default_kwargs={"gamma": 0.5})
    class HalfTD0(TD0Estimator):
        pass

    loss = DQNLoss(qnet(), action_space="one-hot")
    est = build_value_estimator(loss, "TD0-half")
    assert isinstance(est, HalfTD0) and est.gamma.item() == 0.5 and est.value_network is loss.value_network
    with pytest.raises(NotImplementedError, match="DQNLoss does not support the 'TD0-half' value estimator"):
        dispatch_value_estimator(loss, "TD0-half", supported=loss.supported_value_estimators)
    got = dispatch_value_estimator(loss, "TD0-half", supported=["TD0-half"], tensor_keys={"reward": "r", "done": None},
                                   gamma=0.25)
    assert loss.value_estimator is got and loss.value_type == "TD0-half"
    assert got.gamma.item() == 0.25 and got.tensor_keys.reward == "r"


# ---------------------------------------------------------------------------------------- distances
def test_distance_loss_known_answers():
    a, b = torch.tensor([0.0, 0.5, 3.0]), torch.tensor([1.0, 0.0, 0.0])
    torch.testing.assert_close(distance_loss(a, b, "l2"), torch.tensor([1.0, 0.25, 9.0]))
    torch.testing.assert_close(distance_loss(a, b, "l1"), torch.tensor([1.0, 0.5, 3.0]))
    torch.testing.assert_close(distance_loss(a, b, "smooth_l1"), torch.tensor([0.5, 0.125, 2.5]))


def test_distance_loss_shapes_and_errors():
    with pytest.raises(RuntimeError, match=r"shapes differ: v1 \(3,\), v2 \(3, 1\)"):
        distance_loss(torch.zeros(3), torch.zeros(3, 1), "l2")
    out = distance_loss(torch.zeros(3), torch.ones(2, 1), "l2", strict_shape=False)
    assert out.shape == (2, 3)
    with pytest.raises(NotImplementedError, match="unknown loss_function 'l3'"):
        distance_loss(torch.zeros(1), torch.zeros(1), "l3")


def test_distance_loss_tensordicts():
    a = TensorDict(x=torch.ones(2), y=torch.zeros(2), batch_size=[2])
    b = TensorDict(x=torch.zeros(2), y=torch.full((2,), 2.0), batch_size=[2])
    out = distance_loss(a, b, "l2")
    torch.testing.assert_close(out["x"], torch.ones(2))
    torch.testing.assert_close(out["y"], torch.full((2,), 4.0))


def test_reduce_with_weights_and_mask():
    x = torch.tensor([1.0, 2.0, 3.0, 4.0])
    w = torch.tensor([1.0, 0.0, 2.0, 1.0])
    mask = torch.tensor([True, True, False, True])
    assert U._reduce(x, "mean", weights=w) == (x * w).mean()
    assert U._reduce(x, "sum", mask=mask) == 7.0
    assert U._reduce(x, "mean", mask=mask) == pytest.approx(7.0 / 3)
    torch.testing.assert_close(U._reduce(x, "none", mask=mask), torch.tensor([1.0, 2.0, 0.0, 4.0]))
    torch.testing.assert_close(U._reduce(x, "none", weights=w.unsqueeze(-1)), x * w)


# ------------------------------------------------------------------------------------ hold out, misc
def test_hold_out_params_blocks_parameter_gradients_only():
    net = nn.Linear(2, 1)
    x = torch.ones(1, 2, requires_grad=True)
    with hold_out_net(net):
        assert not net.weight.requires_grad
        net(x).sum().backward()
    assert net.weight.requires_grad and net.weight.grad is None
    assert x.grad is not None
    frozen = torch.zeros(2)
    live = torch.zeros(2, requires_grad=True)

    @hold_out_params([live, frozen])
    def inside():
        return live.requires_grad, frozen.requires_grad

    assert inside() == (False, False)
    assert live.requires_grad and not frozen.requires_grad


def test_next_state_value():
    td = TensorDict(
        {"next": {"reward": torch.tensor([[1.0], [2.0]]), "done": torch.tensor([[False], [True]]),
                  "terminated": torch.tensor([[False], [False]]), "observation": torch.ones(2, 4)}},
        [2],
    )
    pred = torch.tensor([[10.0], [20.0]])
    torch.testing.assert_close(next_state_value(td, gamma=0.5, pred_next_val=pred), torch.tensor([6.0, 12.0]))
    td["steps_to_next_obs"] = torch.tensor([[1], [2]])
    torch.testing.assert_close(next_state_value(td, gamma=0.5, pred_next_val=pred), torch.tensor([6.0, 7.0]))
    op = TensorDictModule(lambda obs: obs.sum(-1, keepdim=True), ["observation"], ["state_action_value"])
    del td["steps_to_next_obs"]
    torch.testing.assert_close(next_state_value(td, op, gamma=1.0), torch.tensor([5.0, 6.0]))
    with pytest.raises(ValueError, match="pass either `operator`"):
        next_state_value(td)


def test_group_optimizers():
    a, b = nn.Linear(2, 2), nn.Linear(2, 1)
    opt = group_optimizers(torch.optim.Adam(a.parameters(), lr=0.1), torch.optim.Adam(b.parameters(), lr=0.2))
    assert isinstance(opt, torch.optim.Adam)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.2]
    with pytest.raises(ValueError, match="different classes \\(Adam and SGD\\)"):
        group_optimizers(torch.optim.Adam(a.parameters()), torch.optim.SGD(b.parameters(), lr=0.1))


def test_kl_adaptive_lr():
    opt = torch.optim.SGD(nn.Linear(2, 1).parameters(), lr=1e-3)
    sched = KLAdaptiveLR(opt, target_kl=0.01, factor=2.0, min_lr=1e-4, max_lr=3e-3)
    sched.step(0.05)
    assert sched.get_last_lr() == [pytest.approx(5e-4)]
    sched.step(torch.tensor(0.001))
    assert sched.get_last_lr() == [pytest.approx(1e-3)]
    sched.step(0.0)
    sched.step(0.01)
    assert sched.get_last_lr() == [pytest.approx(1e-3)]
    for _ in range(5):
        sched.step(0.001)
    assert sched.get_last_lr() == [pytest.approx(3e-3)]
    state = sched.state_dict()
    other = KLAdaptiveLR(opt, target_kl=1.0)
    other.load_state_dict(state)
    assert other.target_kl == 0.01
    with pytest.raises(ValueError, match="factor must be > 1"):
        KLAdaptiveLR(opt, 0.01, factor=1.0)


def test_symlog_two_hot():
    x = torch.tensor([-50.0, -1.0, 0.0, 2.0, 300.0])
    torch.testing.assert_close(symexp(symlog(x)), x)
    assert symlog(torch.tensor(math.e - 1)).item() == pytest.approx(1.0)
    bins = torch.tensor([-1.0, 0.0, 1.0])
    torch.testing.assert_close(two_hot_encode(torch.tensor([0.25, 5.0]), bins),
                               torch.tensor([[0.0, 0.75, 0.25], [0.0, 0.0, 1.0]]))
    assert two_hot_decode(torch.zeros(4, 3), bins).abs().max() == 0
    enc = two_hot_encode(torch.tensor([0.3]), torch.tensor([0.0, 1.0, 4.0]))
    torch.testing.assert_close(two_hot_decode((enc + 1e-9).log(), torch.tensor([0.0, 1.0, 4.0])),
                               torch.tensor([0.3]), atol=1e-6, rtol=0)
    ce = two_hot_cross_entropy(torch.zeros(2, 3), torch.zeros(2, 1), bins)
    torch.testing.assert_close(ce, torch.full((2,), math.log(3)))


def test_add_random_module():
    class Noisy(nn.Module):
        pass

    U.add_random_module(Noisy)
    assert Noisy in U.RANDOM_MODULE_LIST
    assert U._has_random_module(nn.Sequential(nn.Linear(1, 1), Noisy()))


# -------------------------------------------------------------------------------------- target nets
def test_soft_update_arguments():
    loss = DQNLoss(qnet(), action_space="one-hot")
    with pytest.raises(ValueError, match="pass only one of eps"):
        SoftUpdate(loss, eps=0.9, tau=0.1)
    with pytest.raises(RuntimeError, match="neither eps nor tau was provided"):  # TorchRL's type
        SoftUpdate(loss)
    with pytest.raises(ValueError, match=r"eps must be in \[0, 1\], got 1.5"):
        SoftUpdate(loss, eps=1.5)
    assert SoftUpdate(loss, tau=0.2).eps == pytest.approx(0.8)
    assert SoftUpdate(loss, eps=0.9).state_dict() == {"eps": 0.9}


def test_soft_update_copies_integer_buffers():
    net = TensorDictModule(nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2)), ["observation"],
                           ["action_value"])
    loss = DQNLoss(net, action_space="one-hot")
    up = SoftUpdate(loss, eps=0.5)
    net.module[1].num_batches_tracked.fill_(7)
    up.step()
    assert loss.target_value_network_params["module", "1", "num_batches_tracked"].item() == 7


def test_hard_update_counter_and_state():
    loss = DQNLoss(qnet(), action_space="one-hot")
    up = HardUpdate(loss, value_network_update_interval=2)
    with torch.no_grad():
        loss.value_network.module[0].weight.add_(1.0)
    up.step()
    assert up.state_dict() == {"_steps": 1}
    target = loss.target_value_network_params["module", "0", "weight"]
    assert not torch.equal(target, loss.value_network.module[0].weight)
    other = HardUpdate(loss, value_network_update_interval=2)
    other.load_state_dict(up.state_dict())
    other.step()
    assert torch.equal(loss.target_value_network_params["module", "0", "weight"], loss.value_network.module[0].weight)
    with pytest.raises(ValueError, match="must be > 0"):
        HardUpdate(loss, value_network_update_interval=0)


def test_init_copies_and_base_class():
    loss = DQNLoss(qnet(), action_space="one-hot")
    up = SoftUpdate(loss, eps=0.99)
    with torch.no_grad():
        loss.value_network.module[2].bias.add_(3.0)
    up.init_()
    assert up.initialized
    torch.testing.assert_close(loss.target_value_network_params["module", "2", "bias"],
                               loss.value_network.module[2].bias.detach())
    assert "value_network" in repr(up)
    with pytest.raises(RuntimeError, match="has no target parameters"):
        TargetNetUpdater(nn.Linear(1, 1))
