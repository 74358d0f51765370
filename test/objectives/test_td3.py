from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from test.objectives.loss_contract import LossContract, functional
from torchrl.data import Bounded, Composite, Unbounded
from torchrl.modules import MLP
from torchrl.objectives import TD3Loss

pytestmark = pytest.mark.filterwarnings("ignore:No target network updater")

N_OBS, N_ACT = 3, 2
POLICY_NOISE, NOISE_CLIP = 0.4, 0.3


def actor_net():
    return TensorDictModule(MLP(in_features=N_OBS, out_features=N_ACT, num_cells=[16]), ["observation"], ["action"])


def q_net():
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


def clipped_double_q_target(loss, td, gamma=0.99, low=-1.0, high=1.0):
    """The TD3 target; draws the smoothing noise with one ``randn_like`` (as the loss does)."""
    actor, qnet = loss.actor_network.module, loss.qvalue_network.module
    nobs = td["next", "observation"]
    with torch.no_grad():
        na = functional(actor, loss.target_actor_network_params, nobs)
        if loss.policy_noise > 0:
            na = na + (torch.randn_like(na) * loss.policy_noise).clamp(-loss.noise_clip, loss.noise_clip)
        na = na.clamp(low, high)
        tq = loss.target_qvalue_network_params
        next_q = torch.stack([functional(qnet, tq[i], nobs, na) for i in range(loss.num_qvalue_nets)]).min(0).values
        not_term = (~td["next", "terminated"].squeeze(-1)).float()
        return td["next", "reward"].squeeze(-1) + gamma * not_term * next_q.squeeze(-1)


def td3_reference(loss, td, loss_function=F.smooth_l1_loss):
    actor, qnet = loss.actor_network.module, loss.qvalue_network.module
    obs = td["observation"]
    q_pi = functional(qnet, loss.qvalue_network_params[0], obs, actor(obs), detach=True).squeeze(-1)
    target = clipped_double_q_target(loss, td)
    params = loss.qvalue_network_params
    current = [functional(qnet, params[i], obs, td["action"]).squeeze(-1) for i in range(loss.num_qvalue_nets)]
    loss_q = sum(loss_function(c, target, reduction="none") for c in current)
    return {"loss_actor": -q_pi, "loss_qvalue": loss_q}


class TestTD3Contract(LossContract):
    loss_cls = TD3Loss
    loss_terms = ("loss_actor", "loss_qvalue")
    renames = {"reward": "rew", "done": "dn", "terminated": "term"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        kwargs.setdefault("bounds", (-1.0, 1.0))
        kwargs.setdefault("policy_noise", POLICY_NOISE)
        return TD3Loss(actor_net(), q_net(), noise_clip=NOISE_CLIP, **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return td3_reference(loss, td)


class TestTD3LoopContract(TestTD3Contract):
    def make_loss(self, **kwargs):
        return super().make_loss(deactivate_vmap=True, **kwargs)


class TestTD3ThreeNetsContract(TestTD3Contract):
    def make_loss(self, **kwargs):
        return super().make_loss(num_qvalue_nets=3, loss_function="l2", **kwargs)

    def reference(self, loss, td):
        return td3_reference(loss, td, loss_function=F.mse_loss)


def test_ensemble_members_are_distinct_and_trainable():
    loss = TestTD3Contract().make_loss()
    params = loss.qvalue_network_params
    assert params.batch_size == (2,)
    w = params["module", "0", "weight"]
    assert isinstance(w, torch.nn.Parameter) and w.shape[0] == 2
    assert not torch.equal(w[0], w[1])
    names = [n for n, _ in loss.named_parameters()]
    assert any(n.startswith("qvalue_network_params") for n in names)
    assert not any("target" in n for n in names)


def test_list_of_qvalue_networks_is_stacked():
    torch.manual_seed(0)
    nets = [q_net(), q_net(), q_net()]
    loss = TD3Loss(actor_net(), nets, bounds=(-1.0, 1.0))
    assert loss.num_qvalue_nets == 3
    for i, net in enumerate(nets):
        torch.testing.assert_close(loss.qvalue_network_params["module", "0", "weight"][i].detach(),
                                   net.module[0].weight.detach())


@pytest.mark.parametrize("n", [2, 5])  # 5 members: the plain-module path vmaps
def test_vmap_and_loop_agree(n):
    td = batch()
    a = TestTD3Contract().make_loss(num_qvalue_nets=n)
    b = TestTD3Contract().make_loss(num_qvalue_nets=n, deactivate_vmap=True)
    torch.manual_seed(3)
    out_a = a(td.clone())
    torch.manual_seed(3)
    out_b = b(td.clone())
    for key in ("loss_actor", "loss_qvalue", "pred_value", "target_value"):
        torch.testing.assert_close(out_a[key], out_b[key])


def test_noise_is_clipped_and_actions_bounded():
    loss = TestTD3Contract().make_loss(bounds=(-0.1, 0.1))
    td = batch()
    loss(td)
    torch.manual_seed(0)
    out = loss(td.clone())
    torch.manual_seed(0)
    ref = clipped_double_q_target(loss, td, low=-0.1, high=0.1)
    torch.manual_seed(0)
    torch.testing.assert_close(out["target_value"], ref)


@pytest.mark.parametrize(
    "spec",
    [Bounded(-2.0, 2.0, shape=(N_ACT,)), Composite(action=Bounded(-2.0, 2.0, shape=(N_ACT,)))],
)
def test_bounds_from_action_spec(spec):
    loss = TD3Loss(actor_net(), q_net(), action_spec=spec)
    assert torch.equal(loss.max_action, torch.full((N_ACT,), 2.0))
    assert torch.equal(loss.min_action, torch.full((N_ACT,), -2.0))


def test_bounds_errors():
    with pytest.raises(ValueError, match="action bounds are unknown"):
        TD3Loss(actor_net(), q_net())
    with pytest.raises(ValueError, match="not both"):
        TD3Loss(actor_net(), q_net(), bounds=(-1, 1), action_spec=Bounded(-1.0, 1.0, shape=(N_ACT,)))
    with pytest.raises(ValueError, match="must be bounded"):
        TD3Loss(actor_net(), q_net(), action_spec=Unbounded(shape=(N_ACT,)))
    with pytest.raises(ValueError, match="lower bound must be below"):
        TD3Loss(actor_net(), q_net(), bounds=(1.0, -1.0))


def test_priority_is_max_td_error_over_ensemble():
    loss = TestTD3Contract().make_loss(reduction="none")
    td = batch()
    out = loss(td)
    expected = (out["pred_value"] - out["target_value"]).pow(2).max(0).values
    torch.testing.assert_close(td["td_error"], expected)


def test_actor_loss_leaves_q_networks_untouched():
    loss = TestTD3Contract().make_loss()
    loss_actor, meta = loss.actor_loss(batch())
    loss_actor.backward()
    assert loss.qvalue_network_params["module", "0", "weight"].grad is None
    assert all(p.grad is not None for p in loss.actor_network.parameters())
    # every Q-network on the policy's action, as TorchRL ([num_qvalue_nets, *B]); the loss reads the first
    assert meta["state_action_value_actor"].shape == (2, 8)
    torch.testing.assert_close(loss_actor, -meta["state_action_value_actor"][0].mean())


def test_separate_losses_shares_parameters_as_views():
    torch.manual_seed(0)
    trunk = torch.nn.Linear(N_OBS, 8)
    actor = TensorDictModule(torch.nn.Sequential(trunk, torch.nn.Tanh(), torch.nn.Linear(8, N_ACT)),
                             ["observation"], ["action"])

    class Q(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk, self.head = trunk, torch.nn.Linear(8 + N_ACT, 1)

        def forward(self, obs, action):
            return self.head(torch.cat([self.trunk(obs).tanh(), action], -1))

    loss = TD3Loss(actor, TensorDictModule(Q(), ["observation", "action"], ["state_action_value"]),
                   bounds=(-1.0, 1.0), separate_losses=True)
    shared = loss.qvalue_network_params["module", "trunk", "weight"]
    assert not isinstance(shared, torch.nn.Parameter)
    with torch.no_grad():
        trunk.weight.add_(1.0)
    torch.testing.assert_close(shared[1], trunk.weight.detach())
    assert loss(batch())["loss_qvalue"].requires_grad


def test_td_lambda_estimator_against_functional():
    from torchrl.objectives import ValueEstimators
    from torchrl.objectives.value.functional import vec_td_lambda_return_estimate

    loss = TestTD3Contract().make_loss(reduction="none", policy_noise=0.0)
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.8, lmbda=0.6)
    td = batch((2, 5))
    actor, qnet = loss.actor_network.module, loss.qvalue_network.module
    nobs = td["next", "observation"]
    with torch.no_grad():
        na = functional(actor, loss.target_actor_network_params, nobs).clamp(-1, 1)
        tq = loss.target_qvalue_network_params
        nq = torch.minimum(functional(qnet, tq[0], nobs, na), functional(qnet, tq[1], nobs, na))
    target = vec_td_lambda_return_estimate(
        0.8, 0.6, nq, td["next", "reward"], td["next", "done"], td["next", "terminated"], time_dim=1
    ).squeeze(-1)
    out = loss(td)
    torch.testing.assert_close(out["target_value"], target)
