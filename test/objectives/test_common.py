from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.objectives import DQNLoss, LossModule, SoftUpdate, TD3Loss, ValueEstimators
from torchrl.objectives.value import TD0Estimator


def qnet(dropout: bool = False):
    layers = [nn.Linear(4, 8), nn.Tanh()] + ([nn.Dropout(0.1)] if dropout else []) + [nn.Linear(8, 2)]
    return TensorDictModule(nn.Sequential(*layers), ["observation"], ["action_value"])


def dqn_batch(n=6):
    return TensorDict(
        {"observation": torch.randn(n, 4), "action": nn.functional.one_hot(torch.randint(2, (n,)), 2),
         "next": {"observation": torch.randn(n, 4), "reward": torch.randn(n, 1),
                  "done": torch.zeros(n, 1, dtype=torch.bool)}},
        [n],
    )


class SquaredAction(LossModule):
    @dataclass
    class _AcceptedKeys:
        action: str = "action"
        weight: str = "w"

    _OUT_KEYS = ["loss"]

    def forward(self, tensordict):
        return TensorDict(loss=self._get(tensordict, self.tensor_keys.action).pow(2).mean())


class WithNet(LossModule):
    def __init__(self, net, **kwargs):
        super().__init__()
        self.convert_to_functional(net, "net", **kwargs)


# ------------------------------------------------------------------------------------------------ keys
def test_set_keys_and_tensor_keys():
    loss = SquaredAction()
    assert loss.tensor_keys.action == "action"
    assert loss.in_keys == ["action", "w"]
    loss.set_keys(action=("nested", "act"))
    assert loss.tensor_keys.action == ("nested", "act")
    assert loss.in_keys == [("nested", "act"), "w"]
    td = TensorDict({("nested", "act"): torch.full((3,), 2.0)}, [3])
    assert loss(td)["loss"] == 4.0
    with pytest.raises(ValueError, match="'actoin' is not a key of this loss; its keys are \\['action', 'weight'\\]"):
        loss.set_keys(actoin="a")
    loss.set_keys(action=None)  # as TorchRL: a None key leaves the entry unchanged
    assert loss.tensor_keys.action == ("nested", "act")


def test_missing_key_error_names_key_table_and_remedy():
    loss = SquaredAction()
    with pytest.raises(AttributeError):  # TorchRL raises AttributeError there; ours is both
        loss(TensorDict({"other": torch.zeros(3)}, [3]))
    with pytest.raises(KeyError) as err:
        loss(TensorDict({"other": torch.zeros(3)}, [3]))
    msg = str(err.value)
    assert "'action' (loss.tensor_keys.action) not found" in msg
    assert "{'action': 'action', 'weight': 'w'}" in msg
    assert "loss.set_keys(action=<your key>)" in msg


def test_out_keys_and_functional():
    loss = SquaredAction()
    assert loss.out_keys == ["loss"] and loss.functional is True


# ------------------------------------------------------------------------------------------ parameters
def test_single_network_shares_the_users_parameters():
    net = qnet()
    loss = WithNet(net, create_target_params=True)
    assert loss.net is net
    params = loss.net_params
    assert params["module", "0", "weight"] is net.module[0].weight
    assert [p for p in loss.parameters()] == list(net.parameters())
    target = loss.target_net_params["module", "0", "weight"]
    assert not target.requires_grad and target is not net.module[0].weight
    torch.testing.assert_close(target, net.module[0].weight.detach())
    # TorchRL's names: the network's parameters under net_params, the target's as buffers under target_net_params
    layer_names = [n for n, _ in net.named_parameters()]
    assert sorted(loss.state_dict()) == sorted([f"net_params.{n}" for n in layer_names]
                                               + [f"target_net_params.{n}" for n in layer_names])
    assert [n for n, _ in loss.named_parameters()] == [f"net_params.{n}" for n in layer_names]
    assert [n for n, _ in loss.named_buffers()] == [f"target_net_params.{n}" for n in layer_names]
    other = WithNet(qnet(), create_target_params=True)
    other.load_state_dict(loss.state_dict())  # round trip through the renamed keys
    torch.testing.assert_close(other.target_net_params["module", "0", "weight"], target)
    torch.testing.assert_close(other.net.module[0].weight, net.module[0].weight)
    wrapped = torch.nn.ModuleDict({"loss": loss})  # nested: the prefix is kept
    assert "loss.target_net_params.module.0.bias" in wrapped.state_dict()
    with torch.no_grad():
        net.module[0].weight.add_(1.0)  # an optimizer step on the user's network is the loss's too
    assert torch.equal(loss.net_params["module", "0", "weight"], net.module[0].weight)


def test_without_target_the_target_is_a_detached_view():
    net = qnet()
    loss = WithNet(net)
    target = loss.target_net_params["module", "0", "weight"]
    assert not target.requires_grad
    with torch.no_grad():
        net.module[0].weight.add_(1.0)
    assert torch.equal(target, net.module[0].weight.detach())
    assert loss._target_pairs() == []


def test_dtype_conversion_keeps_views_in_sync():
    loss = WithNet(qnet(), create_target_params=True)
    loss.double()
    assert loss.net_params["module", "0", "weight"].dtype == torch.float64
    assert loss.target_net_params["module", "0", "weight"].dtype == torch.float64
    # the target TensorDict and the target network share their storage (in-place updates reach both)
    target = loss.target_net_params["module", "0", "weight"]
    assert target.data_ptr() == loss._target_net.module[0].weight.data_ptr()


def test_ensemble_parameters():
    torch.manual_seed(0)
    net = qnet()
    loss = WithNet(net, expand_dim=3, create_target_params=True)
    w = loss.net_params["module", "0", "weight"]
    assert w.shape == (3, 8, 4) and isinstance(w, nn.Parameter)
    torch.testing.assert_close(w[0].detach(), net.module[0].weight.detach())
    assert not torch.equal(w[1], w[2])
    assert loss.target_net_params.batch_size == (3,)
    assert not loss.target_net_params["module", "0", "weight"].requires_grad
    names = [n for n, _ in loss.named_parameters()]
    assert all(n.startswith("net_params.") for n in names)
    with pytest.raises(RuntimeError, match="is an ensemble of 3 networks"):
        loss.get_stateful_net("net")


def test_ensemble_from_list_and_shared_parameters():
    nets = [qnet(), qnet()]
    loss = WithNet(nets, expand_dim=2)
    torch.testing.assert_close(loss.net_params["module", "2", "bias"][1].detach(), nets[1].module[2].bias.detach())
    shared = WithNet(qnet(), expand_dim=2, compare_against=list(nets[0].parameters()))
    assert shared.net_params["module", "0", "weight"].requires_grad  # not shared: a fresh parameter
    net = nets[0]
    tied = WithNet(net, expand_dim=2, compare_against=[net.module[0].weight])
    view = tied.net_params["module", "0", "weight"]
    assert not isinstance(view, nn.Parameter)
    with torch.no_grad():
        net.module[0].weight.mul_(2.0)
    torch.testing.assert_close(view[1], net.module[0].weight.detach())


def test_stateful_net_round_trip():
    loss = WithNet(qnet())
    copy = loss.get_stateful_net("net", copy=True)
    assert copy is not loss.net
    other = qnet()
    loss.from_stateful_net("net", other)
    torch.testing.assert_close(loss.net.module[0].weight, other.module[0].weight)
    assert loss.get_stateful_net("net") is loss.net


def test_reset_parameters_recursive_moves_targets_too():
    loss = WithNet(qnet(), create_target_params=True)
    before = loss.net_params.detach().clone()
    loss.reset_parameters_recursive()
    assert not torch.equal(before["module", "0", "weight"], loss.net_params["module", "0", "weight"])
    torch.testing.assert_close(loss.target_net_params["module", "0", "weight"],
                               loss.net_params["module", "0", "weight"].detach())


def test_register_coeff_buffer_and_scalar_assignment():
    loss = SquaredAction()
    loss.register_coeff_buffer("entropy_coeff", 0.01)
    buf = loss.entropy_coeff
    assert isinstance(buf, torch.Tensor) and buf.item() == pytest.approx(0.01)
    loss.entropy_coeff = 0.5
    assert loss.entropy_coeff is buf and buf.item() == 0.5
    assert "entropy_coeff" in loss.state_dict()
    loss.register_coeff_buffer("unused", None)
    assert loss.unused is None


def test_vmap_randomness():
    assert WithNet(qnet()).vmap_randomness == "error"
    loss = WithNet(qnet(dropout=True))
    assert loss.vmap_randomness == "different"
    loss.set_vmap_randomness("same")
    assert loss.vmap_randomness == "same"
    with pytest.raises(ValueError, match="vmap randomness must be"):
        loss.set_vmap_randomness("maybe")


# --------------------------------------------------------------------------------------- value estimators
def test_loss_without_estimators_says_so():
    with pytest.raises(NotImplementedError, match="SquaredAction does not support the TD0 value estimator; supported"):
        SquaredAction().make_value_estimator(ValueEstimators.TD0)


def test_value_estimator_is_not_a_submodule():
    loss = DQNLoss(qnet(), action_space="one-hot")
    est = loss.value_estimator
    assert isinstance(est, TD0Estimator) and est.value_network is loss.value_network
    assert "_value_estimator" not in dict(loss.named_children())
    # its coefficients are saved as TorchRL saves them (not its network: that is the loss's own)
    assert [k for k in loss.state_dict() if "estimator" in k] == ["_value_estimator.gamma"]
    fresh = DQNLoss(qnet(), action_space="one-hot")
    fresh.make_value_estimator(gamma=0.7)
    fresh.load_state_dict(loss.state_dict())
    assert float(fresh.value_estimator.gamma) == pytest.approx(0.99)
    DQNLoss(qnet(), action_space="one-hot").load_state_dict(loss.state_dict())  # no estimator yet: ignored
    custom = TD0Estimator(gamma=0.5, value_network=None)
    loss.value_estimator = custom
    assert loss.value_estimator is custom
    assert custom.tensor_keys.value == "chosen_action_value"  # the loss forwarded its keys


def test_make_value_estimator_hyperparameters_and_keys():
    loss = DQNLoss(qnet(), action_space="one-hot")
    loss.set_keys(reward="rew")
    assert loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.7, lmbda=0.3) is loss
    est = loss.value_estimator
    assert est.gamma.item() == pytest.approx(0.7) and est.lmbda.item() == pytest.approx(0.3)
    assert est.tensor_keys.reward == "rew" and est.differentiable
    loss.set_keys(done="d")
    assert est.tensor_keys.done == "d"


def test_target_warning_once_and_not_with_an_updater():
    loss = DQNLoss(qnet(), action_space="one-hot")
    with pytest.warns(UserWarning, match="No target network updater is associated"):
        loss(dqn_batch())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loss(dqn_batch())
        other = DQNLoss(qnet(), action_space="one-hot")
        SoftUpdate(other, tau=0.1)
        other(dqn_batch())


def test_loss_mask_key():
    loss = DQNLoss(qnet(), action_space="one-hot", reduction="none", delay_value=False)
    td = dqn_batch()
    per_elem = loss(td.clone())["loss"]
    loss_mean = DQNLoss(qnet(), action_space="one-hot", delay_value=False)
    loss_mean.load_state_dict(loss.state_dict())
    mask = torch.tensor([True, False, True, True, False, True])
    td[("collector", "mask")] = mask
    loss_mean.loss_mask_key = "auto"
    torch.testing.assert_close(loss_mean(td.clone())["loss"], per_elem[mask].mean())
    loss_mean.loss_mask_key = "m"
    with pytest.raises(KeyError, match="'m' not found"):
        loss_mean(td.clone())
    td["m"] = ~mask
    torch.testing.assert_close(loss_mean(td.clone())["loss"], per_elem[~mask].mean())


def test_parameters_exclude_targets_for_every_loss_kind():
    actor = TensorDictModule(nn.Linear(3, 1), ["observation"], ["action"])

    class Q(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 1)

        def forward(self, obs, act):
            return self.lin(torch.cat([obs, act], -1))

    loss = TD3Loss(actor, TensorDictModule(Q(), ["observation", "action"], ["state_action_value"]), bounds=(-1, 1))
    names = [n for n, _ in loss.named_parameters()]
    # TorchRL's names: <network>_params.<path> (the targets are buffers)
    assert sorted(names) == ["actor_network_params.module.bias", "actor_network_params.module.weight",
                             "qvalue_network_params.module.lin.bias", "qvalue_network_params.module.lin.weight"]
    assert sorted(n for n, _ in loss.named_buffers() if "network" in n) == [
        "target_actor_network_params.module.bias", "target_actor_network_params.module.weight",
        "target_qvalue_network_params.module.lin.bias", "target_qvalue_network_params.module.lin.weight"]


class ActorCriticLoss(LossModule):
    """A minimal on-policy loss: the pattern PPO-style losses follow to get GAE / V-trace / TD estimators."""

    @dataclass
    class _AcceptedKeys:
        advantage: str = "advantage"
        value_target: str = "value_target"
        value: str = "state_value"
        reward: str = "reward"
        done: str = "done"
        terminated: str = "terminated"
        sample_log_prob: str = "action_log_prob"

    default_value_estimator = ValueEstimators.GAE
    supported_value_estimators = tuple(ValueEstimators)

    def __init__(self, actor, critic):
        super().__init__()
        self.convert_to_functional(actor, "actor_network")
        self.convert_to_functional(critic, "critic_network")

    def _estimator_networks(self):
        return {"value_network": self.critic_network, "actor_network": self.actor_network}

    def forward(self, tensordict):
        self.value_estimator(tensordict)
        return TensorDict(loss_critic=(tensordict["state_value"] - tensordict["value_target"]).pow(2).mean())


def _actor_critic():
    from tensordict.nn import NormalParamExtractor, ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential

    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(nn.Sequential(nn.Linear(3, 2), NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"],
                                      distribution_class=torch.distributions.Normal),
    )
    critic = TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"])
    return actor, critic


@pytest.mark.parametrize("value_type", list(ValueEstimators))
def test_every_estimator_through_the_registry(value_type):
    actor, critic = _actor_critic()
    loss = ActorCriticLoss(actor, critic)
    loss.make_value_estimator(value_type, gamma=0.9)
    est = loss.value_estimator
    assert est.value_network is critic
    if value_type is ValueEstimators.VTrace:
        assert est.actor_network is actor
    td = TensorDict(
        {"observation": torch.randn(2, 5, 3), "action": torch.randn(2, 5, 1), "action_log_prob": torch.zeros(2, 5, 1),
         "next": {"observation": torch.randn(2, 5, 3), "reward": torch.randn(2, 5, 1),
                  "done": torch.zeros(2, 5, 1, dtype=torch.bool)}},
        [2, 5],
    )
    out = loss(td)
    assert out["loss_critic"].requires_grad
    assert td["advantage"].shape == (2, 5, 1)


def test_vtrace_needs_an_actor():
    class CriticOnly(ActorCriticLoss):
        def _estimator_networks(self):
            return {"value_network": self.critic_network}

    loss = CriticOnly(*_actor_critic())
    with pytest.raises(NotImplementedError, match="has no actor network, so V-trace does not apply"):
        loss.make_value_estimator(ValueEstimators.VTrace)
