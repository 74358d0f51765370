from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from test.objectives._onpolicy_nets import (
    actor_params,
    advantage_and_target,
    batch,
    categorical_actor,
    critic_net,
    critic_value,
    tanh_actor,
    tanh_normal_log_prob,
    tanh_normal_mc_entropy,
)
from test.objectives.loss_contract import LossContract
from torchrl.objectives import A2CLoss


def a2c_reference(loss, td, entropy_coeff=0.01, critic_coeff=1.0, loss_fn=F.smooth_l1_loss):
    obs = td["observation"]
    adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    loc, scale = actor_params(loss, obs)
    log_prob = tanh_normal_log_prob(loc, scale, td["action"])
    value = critic_value(loss, obs)
    return {
        "loss_objective": -log_prob * adv.squeeze(-1),
        "loss_entropy": -entropy_coeff * tanh_normal_mc_entropy(loc, scale),
        "loss_critic": critic_coeff * loss_fn(value, target, reduction="none").squeeze(-1),
    }


class TestA2CContract(LossContract):
    loss_cls = A2CLoss
    loss_terms = ("loss_objective", "loss_critic", "loss_entropy")
    renames = {"reward": "rew", "done": "dn", "terminated": "term", "action": "act"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        return A2CLoss(tanh_actor(), critic_net(), **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return a2c_reference(loss, td)


class TestA2CCoefficientsContract(TestA2CContract):
    def make_loss(self, **kwargs):
        return super().make_loss(entropy_coeff=0.2, critic_coeff=0.4, loss_critic_type="l2", **kwargs)

    def reference(self, loss, td):
        return a2c_reference(loss, td, entropy_coeff=0.2, critic_coeff=0.4, loss_fn=F.mse_loss)


def test_out_keys_and_entropy_closed_form():
    torch.manual_seed(0)
    loss = A2CLoss(categorical_actor(), critic_net(), clip_value=0.5, reduction="none")
    td = batch(kind="categorical")
    td["state_value"] = torch.zeros(8, 1)
    out = loss(td)
    # TorchRL's listing leaves value_clip_fraction out (it is output)
    assert loss.out_keys == ["loss_objective", "loss_critic", "entropy", "loss_entropy"]
    assert sorted(out.keys()) == sorted(loss.out_keys + ["value_clip_fraction"])
    logits = loss.actor_network.module[0].module(td["observation"])
    logp = torch.log_softmax(logits, -1)
    entropy = -(logp.exp() * logp).sum(-1)
    torch.testing.assert_close(out["loss_entropy"], -0.01 * entropy)
    torch.testing.assert_close(out["entropy"], entropy.mean())


def test_in_keys_leave_the_log_prob_out():
    loss = A2CLoss(tanh_actor(), critic_net())
    assert "action_log_prob" not in loss.in_keys  # as TorchRL: A2C does not read it
    assert {"observation", "action", ("next", "reward"), ("next", "observation")} <= set(loss.in_keys)


def test_critic_is_required():
    with pytest.raises(TypeError, match="A2CLoss: critic_network is required"):
        A2CLoss(tanh_actor())


def test_critic_coeff_none_leaves_the_critic_out():
    torch.manual_seed(0)
    loss = A2CLoss(tanh_actor(), critic_net(), critic_coeff=None)
    out = loss(batch())
    assert "loss_critic" not in out.keys() and "loss_critic" not in loss.out_keys


def test_advantage_is_detached_and_given_advantage_used():
    loss = TestA2CContract().make_loss(reduction="none", entropy_bonus=False)
    td = batch()
    td["advantage"] = torch.full((8, 1), 2.0, requires_grad=True)
    td["value_target"] = torch.zeros(8, 1)
    out = loss(td)
    loc, scale = actor_params(loss, td["observation"])
    torch.testing.assert_close(out["loss_objective"], -2.0 * tanh_normal_log_prob(loc, scale, td["action"]))
    out["loss_objective"].sum().backward()
    assert td["advantage"].grad is None


def test_loss_critic_method_and_errors():
    loss = TestA2CContract().make_loss()
    td = batch()
    with pytest.raises(KeyError, match="'value_target'.*Run a value estimator"):
        loss.loss_critic(td)
    adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    td["value_target"] = target
    value, fraction = loss.loss_critic(td)
    assert fraction is None
    torch.testing.assert_close(value, F.smooth_l1_loss(critic_value(loss, td["observation"]), target,
                                                       reduction="none").squeeze(-1))
    td["advantage"] = torch.zeros(8, 4)
    with pytest.raises(RuntimeError, match=r"advantage \(8, 4\), log_prob \(8,\)"):
        loss(td)


def test_get_entropy_bonus_and_deprecated_coef():
    with pytest.warns(DeprecationWarning, match="entropy_coef"):
        loss = A2CLoss(categorical_actor(), critic_net(), entropy_coef=0.5)
    assert float(loss.entropy_coeff) == pytest.approx(0.5)
    dist = torch.distributions.Categorical(logits=torch.zeros(3, 4))
    torch.testing.assert_close(loss.get_entropy_bonus(dist), torch.full((3,), float(torch.log(torch.tensor(4.0)))))
