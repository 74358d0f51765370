from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from test.objectives.loss_contract import LossContract, functional
from torchrl.modules import MLP
from torchrl.objectives import DDPGLoss, ValueEstimators

pytestmark = pytest.mark.filterwarnings("ignore:No target network updater")

N_OBS, N_ACT = 3, 2


def actor_net():
    return TensorDictModule(MLP(in_features=N_OBS, out_features=N_ACT, num_cells=[16]), ["observation"], ["action"])


def critic_net():
    return TensorDictModule(
        MLP(in_features=N_OBS + N_ACT, out_features=1, num_cells=[16]), ["observation", "action"],
        ["state_action_value"],
    )


def batch(batch_size=(8,), seed=1):
    g = torch.Generator().manual_seed(seed)
    terminated = torch.rand(*batch_size, 1, generator=g) < 0.2
    return TensorDict(
        {
            "observation": torch.randn(*batch_size, N_OBS, generator=g),
            "action": torch.rand(*batch_size, N_ACT, generator=g) * 2 - 1,
            "next": {
                "observation": torch.randn(*batch_size, N_OBS, generator=g),
                "reward": torch.randn(*batch_size, 1, generator=g),
                "done": terminated | (torch.rand(*batch_size, 1, generator=g) < 0.2),
                "terminated": terminated,
            },
        },
        batch_size,
    )


def ddpg_reference(loss, td, gamma=0.99):
    actor, critic = loss.actor_network.module, loss.value_network.module
    obs, nobs = td["observation"], td["next", "observation"]
    q_pi = functional(critic, loss.value_network_params, obs, actor(obs), detach=True)
    loss_actor = -q_pi.squeeze(-1)
    pred = critic(obs, td["action"]).squeeze(-1)
    with torch.no_grad():
        next_action = functional(actor, loss.target_actor_network_params, nobs)
        next_q = functional(critic, loss.target_value_network_params, nobs, next_action).squeeze(-1)
        not_term = (~td["next", "terminated"].squeeze(-1)).float()
        target = td["next", "reward"].squeeze(-1) + gamma * not_term * next_q
    return {"loss_actor": loss_actor, "loss_value": F.mse_loss(pred, target, reduction="none")}


class TestDDPGContract(LossContract):
    loss_cls = DDPGLoss
    loss_terms = ("loss_actor", "loss_value")
    renames = {"reward": "rew", "done": "dn", "terminated": "term"}
    optional_in_keys = (("next", "action"), "priority_weight")  # listed as TorchRL does, not needed

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        return DDPGLoss(actor_net(), critic_net(), **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return ddpg_reference(loss, td)


class TestDDPGDelayedActorContract(TestDDPGContract):
    def make_loss(self, **kwargs):
        loss = super().make_loss(delay_actor=True, **kwargs)
        with torch.no_grad():  # make the target actor differ from the online one
            for v in loss.target_actor_network_params.values(True, True):
                v.mul_(0.5)
        return loss

    def make_lazy_loss(self, monkeypatch, **kwargs):
        # a lazy target actor exists only after the first call: build the delayed-actor loss unperturbed
        return super().make_lazy_loss(
            monkeypatch, build=lambda **kw: TestDDPGContract.make_loss(self, delay_actor=True, **kw), **kwargs)


def test_actor_loss_does_not_train_the_critic():
    loss = TestDDPGContract().make_loss()
    loss_actor, meta = loss.loss_actor(batch())
    assert meta == {}
    loss_actor.backward()
    assert all(p.grad is not None for p in loss.actor_network.parameters())
    assert all(p.grad is None for p in loss.value_network.parameters())
    assert all(p.requires_grad for p in loss.value_network.parameters())


def test_loss_value_metadata_and_priority():
    loss = TestDDPGContract().make_loss(reduction="none")
    td = batch()
    value, meta = loss.loss_value(td)
    torch.testing.assert_close(meta["td_error"], value.detach())
    torch.testing.assert_close(td["td_error"], value.detach())
    assert meta["pred_value"].shape == meta["target_value"].shape == (8,)
    assert not meta["pred_value"].requires_grad


def test_separate_losses_keeps_shared_parameters_out_of_the_critic_loss():
    torch.manual_seed(0)
    trunk = torch.nn.Linear(N_OBS, 8)
    actor = TensorDictModule(torch.nn.Sequential(trunk, torch.nn.Tanh(), torch.nn.Linear(8, N_ACT)),
                             ["observation"], ["action"])

    class Critic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk, self.head = trunk, torch.nn.Linear(8 + N_ACT, 1)

        def forward(self, obs, action):
            return self.head(torch.cat([self.trunk(obs).tanh(), action], -1))

    critic = TensorDictModule(Critic(), ["observation", "action"], ["state_action_value"])
    for separate, expect_grad in ((True, False), (False, True)):
        loss = DDPGLoss(actor, critic, separate_losses=separate)
        for p in loss.parameters():
            p.grad = None
        loss.loss_value(batch())[0].backward()
        assert (trunk.weight.grad is not None) is expect_grad
        assert loss.value_network.module.head.weight.grad is not None


def test_td1_estimator_against_functional():
    from torchrl.objectives.value.functional import vec_td1_return_estimate

    loss = TestDDPGContract().make_loss(reduction="none")
    loss.make_value_estimator(ValueEstimators.TD1, gamma=0.8)
    td = batch((2, 5))
    actor, critic = loss.actor_network.module, loss.value_network.module
    with torch.no_grad():
        na = actor(td["next", "observation"])
        nq = functional(critic, loss.target_value_network_params, td["next", "observation"], na)
    target = vec_td1_return_estimate(
        0.8, nq, td["next", "reward"], td["next", "done"], td["next", "terminated"], time_dim=1
    ).squeeze(-1)
    pred = critic(td["observation"], td["action"]).squeeze(-1)
    torch.testing.assert_close(loss(td)["loss_value"], (pred - target).pow(2))


def test_output_keys_and_shapes():
    loss = TestDDPGContract().make_loss()
    td = batch()
    out = loss(td)
    # TorchRL's outputs: its listing plus the TD error (also written into the batch)
    assert loss.out_keys == ["loss_actor", "loss_value", "pred_value", "target_value", "pred_value_max",
                             "target_value_max"]
    assert sorted(out.keys()) == sorted(loss.out_keys + ["td_error"])
    assert out["pred_value"].shape == (8,) and out["pred_value_max"] == out["pred_value"].max()
    assert out["target_value_max"] == out["target_value"].max()
    torch.testing.assert_close(out["td_error"], td["td_error"])


def test_in_keys_as_torchrl():
    loss = TestDDPGContract().make_loss()
    # the critic's inputs at "next" (the next action too) and the priority weights, as TorchRL lists them
    assert set(loss.in_keys) == {"observation", "action", ("next", "observation"), ("next", "action"),
                                 ("next", "reward"), ("next", "done"), ("next", "terminated"), "priority_weight"}


def test_missing_observation_names_the_key():
    loss = TestDDPGContract().make_loss()
    td = batch()
    del td["next", "observation"]
    with pytest.raises(KeyError, match=r"\('next', 'observation'\) not found"):
        loss(td)
