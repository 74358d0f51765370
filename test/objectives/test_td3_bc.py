from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from test.objectives.loss_contract import LossContract, functional
from test.objectives.test_td3 import NOISE_CLIP, POLICY_NOISE, actor_net, batch, clipped_double_q_target, q_net
from torchrl.objectives import TD3BCLoss

pytestmark = pytest.mark.filterwarnings("ignore:No target network updater")


def td3bc_reference(loss, td, alpha=2.5):
    actor, qnet = loss.actor_network.module, loss.qvalue_network.module
    obs = td["observation"]
    pi = actor(obs)
    q = functional(qnet, loss.qvalue_network_params[0], obs, pi, detach=True).squeeze(-1)
    bc = ((pi - td["action"]) ** 2).mean()
    lmbd = alpha / q.abs().mean().detach()
    target = clipped_double_q_target(loss, td)
    params = loss.qvalue_network_params
    current = [functional(qnet, params[i], obs, td["action"]).squeeze(-1) for i in range(loss.num_qvalue_nets)]
    loss_q = sum(F.smooth_l1_loss(c, target, reduction="none") for c in current)
    return {"loss_actor": -lmbd * q + bc, "loss_qvalue": loss_q}


class TestTD3BCContract(LossContract):
    loss_cls = TD3BCLoss
    loss_terms = ("loss_actor", "loss_qvalue")
    renames = {"reward": "rew", "done": "dn", "terminated": "term"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        kwargs.setdefault("bounds", (-1.0, 1.0))
        return TD3BCLoss(actor_net(), q_net(), policy_noise=POLICY_NOISE, noise_clip=NOISE_CLIP, **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return td3bc_reference(loss, td)


def test_alpha_and_metadata():
    loss = TestTD3BCContract().make_loss(alpha=1.0, reduction="none")
    td = batch()
    torch.manual_seed(0)
    out = loss(td.clone())
    torch.manual_seed(0)
    ref = td3bc_reference(loss, td.clone(), alpha=1.0)
    torch.testing.assert_close(out["loss_actor"], ref["loss_actor"])
    q = out["state_action_value_actor"]
    torch.testing.assert_close(out["lmbd"], 1.0 / q.abs().mean())
    pi = loss.actor_network.module(td["observation"])
    torch.testing.assert_close(out["bc_loss"], F.mse_loss(pi, td["action"]).detach())
    assert not out["lmbd"].requires_grad


def test_actor_and_data_action_shapes_must_match():
    loss = TestTD3BCContract().make_loss()
    td = batch()
    td["action"] = td["action"][..., :1]
    with pytest.raises(RuntimeError, match=r"policy_action \(8, 2\), 'action' \(8, 1\)"):
        loss.actor_loss(td)
