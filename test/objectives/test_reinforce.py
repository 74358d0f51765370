from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from test.objectives._onpolicy_nets import (
    GAMMA,
    LMBDA,
    actor_params,
    advantage_and_target,
    batch,
    critic_net,
    critic_value,
    gae,
    tanh_actor,
    tanh_normal_log_prob,
)
from test.objectives.loss_contract import LossContract
from torchrl.objectives import ReinforceLoss


def reinforce_reference(loss, td, target_critic=None):
    obs = td["observation"]
    if target_critic is None:
        adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    else:
        with torch.no_grad():
            v, nv = critic_value(loss, obs), target_critic(td["next", "observation"])
            adv, target = gae(v, nv, td["next", "reward"], td["next", "done"], td["next", "terminated"])
    loc, scale = actor_params(loss, obs)
    value = critic_value(loss, obs)
    return {
        "loss_actor": -tanh_normal_log_prob(loc, scale, td["action"]) * adv.squeeze(-1),
        "loss_value": F.smooth_l1_loss(value, target, reduction="none").squeeze(-1),
    }


class TestReinforceContract(LossContract):
    loss_cls = ReinforceLoss
    loss_terms = ("loss_actor", "loss_value")
    renames = {"reward": "rew", "done": "dn", "terminated": "term", "action": "act"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        return ReinforceLoss(tanh_actor(), critic_net(), **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return reinforce_reference(loss, td)


class TestReinforceDelayedContract(TestReinforceContract):
    """``delay_value=True``: next-state values from the target critic (updated by the target updaters)."""

    def make_loss(self, **kwargs):
        return super().make_loss(delay_value=True, **kwargs)

    def reference(self, loss, td):
        target = loss._functionals["critic_network"].target_module.module
        return reinforce_reference(loss, td, target_critic=target)


pytestmark = pytest.mark.filterwarnings("ignore:No target network updater")


def test_target_critic_differs_after_a_step():
    loss = TestReinforceDelayedContract().make_loss(reduction="none")
    with torch.no_grad():
        for p in loss.critic_network.parameters():
            p.add_(0.3)
    td = batch()
    out = loss(td)
    ref = TestReinforceDelayedContract().reference(loss, td)
    torch.testing.assert_close(out["loss_actor"], ref["loss_actor"])
    assert not torch.allclose(out["loss_actor"], reinforce_reference(loss, td)["loss_actor"])


def test_critic_is_required_and_given_advantage_used():
    # as TorchRL: a REINFORCE loss without a critic is refused
    with pytest.raises(TypeError, match="ReinforceLoss: critic_network is required"):
        ReinforceLoss(tanh_actor(), reduction="none")
    torch.manual_seed(0)
    loss = ReinforceLoss(tanh_actor(), critic_net(), reduction="none")
    assert loss.out_keys == ["loss_actor", "loss_value"]
    td = batch()
    td["advantage"] = torch.randn(8, 1)
    td["value_target"] = torch.randn(8, 1)
    out = loss(td)
    loc, scale = actor_params(loss, td["observation"])
    torch.testing.assert_close(out["loss_actor"],
                               -tanh_normal_log_prob(loc, scale, td["action"]) * td["advantage"].squeeze(-1))
    assert sorted(out.keys()) == ["loss_actor", "loss_value"]


def test_value_clip_fraction_is_output():
    loss = ReinforceLoss(tanh_actor(), critic_net(), clip_value=0.1)
    td = batch()
    td["advantage"], td["value_target"], td["state_value"] = torch.randn(8, 1), torch.randn(8, 1), torch.zeros(8, 1)
    out = loss(td)
    assert sorted(out.keys()) == ["loss_actor", "loss_value", "value_clip_fraction"]
    assert loss.out_keys == ["loss_actor", "loss_value"]  # TorchRL does not list it
    assert 0 <= out["value_clip_fraction"] <= 1


def test_in_keys_do_not_need_the_log_prob():
    loss = TestReinforceContract().make_loss()
    assert "action_log_prob" not in loss.in_keys
    td = batch().exclude("action_log_prob")
    assert torch.isfinite(loss(td)["loss_actor"])


def test_gamma_keyword_is_refused():
    with pytest.raises(TypeError, match="gamma / lambda parameters through the loss constructor"):
        ReinforceLoss(tanh_actor(), critic_net(), gamma=0.5)
    assert GAMMA == 0.99 and LMBDA == 0.95
