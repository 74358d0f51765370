from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import distributions as D

from test.objectives.loss_contract import LossContract, functional
from torchrl._fast import set_fast_paths
from torchrl.data import Bounded, Categorical as CategoricalSpec, OneHot
from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import DiscreteSACLoss, SACLoss, ValueEstimators
from torchrl.objectives._sac_common import StackedMLP

pytestmark = pytest.mark.filterwarnings("ignore:No target network updater")

N_OBS, N_ACT, N_CAT = 3, 2, 4
GAMMA = 0.99


_NO_SPEC = object()


def actor_net(spec=_NO_SPEC):
    """A TanhNormal actor with a Bounded action spec (``spec=None``: without one)."""
    if spec is _NO_SPEC:
        spec = Bounded(-1.0, 1.0, (N_ACT,))
    net = TensorDictModule(
        torch.nn.Sequential(MLP(in_features=N_OBS, out_features=2 * N_ACT, num_cells=[16]), NormalParamExtractor()),
        ["observation"], ["loc", "scale"],
    )
    return ProbabilisticActor(net, ["loc", "scale"], spec=spec, distribution_class=TanhNormal)


def q_net():
    return ValueOperator(MLP(in_features=N_OBS + N_ACT, out_features=1, num_cells=[16]), ["observation", "action"])


def v_net():
    return ValueOperator(MLP(in_features=N_OBS, out_features=1, num_cells=[16]), ["observation"])


def batch(batch_size=(8,), seed=1, discrete=None):
    g = torch.Generator().manual_seed(seed)
    terminated = torch.rand(*batch_size, 1, generator=g) < 0.2
    if discrete is None:
        action = torch.rand(*batch_size, N_ACT, generator=g) * 1.8 - 0.9
    else:
        idx = torch.randint(N_CAT, batch_size, generator=g)
        action = F.one_hot(idx, N_CAT).long() if discrete == "one-hot" else idx
    return TensorDict(
        {
            "observation": torch.randn(*batch_size, N_OBS, generator=g),
            "action": action,
            "next": {
                "observation": torch.randn(*batch_size, N_OBS, generator=g),
                "reward": torch.randn(*batch_size, 1, generator=g),
                "done": terminated | (torch.rand(*batch_size, 1, generator=g) < 0.2),
                "terminated": terminated,
            },
        },
        batch_size,
    )


# ------------------------------------------------------------------------------------------- reference
def tanh_sample(loc, scale):
    """A reparameterised TanhNormal draw (one ``randn`` of ``loc``'s shape) and its log-density."""
    u = loc + scale * torch.randn_like(loc)
    log_det = 2 * (math.log(2) - u - F.softplus(-2 * u))
    return u.tanh(), (D.Normal(loc, scale).log_prob(u) - log_det).sum(-1)


def qs(loss, params, obs, action, detach=False):
    qnet = loss.qvalue_network.module
    return torch.stack([functional(qnet, params[i], obs, action, detach=detach).squeeze(-1)
                        for i in range(loss.num_qvalue_nets)])


def sac_reference(loss, td, loss_fn=F.smooth_l1_loss, target_entropy=-float(N_ACT)):
    actor = loss.actor_network.module[0].module
    obs, nobs = td["observation"], td["next", "observation"]
    alpha = loss.log_alpha.detach().exp()
    not_term = (~td["next", "terminated"]).float().squeeze(-1)
    with torch.no_grad():
        if loss.value_network is None:
            na, nlp = tanh_sample(*actor(nobs))
            nv = (qs(loss, loss.target_qvalue_network_params, nobs, na) - alpha * nlp).min(0).values
        else:
            nv = loss._functionals["value_network"].target_module.module(nobs).squeeze(-1)
        target = td["next", "reward"].squeeze(-1) + GAMMA * not_term * nv
    q = qs(loss, loss.qvalue_network_params, obs, td["action"])
    per_member = torch.stack([loss_fn(q[i], target, reduction="none") for i in range(q.shape[0])])
    a, lp = tanh_sample(*actor(obs))
    min_q = qs(loss, loss.qvalue_network_params, obs, a, detach=True).min(0).values
    out = {
        "loss_qvalue": per_member.sum(0) if loss.value_network is None else per_member.mean(0),
        "loss_actor": alpha * lp - min_q,
        "loss_alpha": -loss.log_alpha * (lp.detach() + target_entropy),
    }
    if loss.value_network is not None:
        value = loss.value_network.module(obs).squeeze(-1)
        out["loss_value"] = loss_fn(value, (min_q - alpha * lp).detach(), reduction="none")
    return out


class TestSACContract(LossContract):
    loss_cls = SACLoss
    loss_terms = ("loss_actor", "loss_qvalue", "loss_alpha")
    renames = {"reward": "rew", "done": "dn", "terminated": "term"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        kwargs.setdefault("alpha_init", 0.5)
        return SACLoss(actor_net(), q_net(), **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return sac_reference(loss, td)


class TestSACv1Contract(TestSACContract):
    loss_terms = ("loss_actor", "loss_qvalue", "loss_alpha", "loss_value")

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        return SACLoss(actor_net(), q_net(), v_net(), alpha_init=0.5, **kwargs)


class TestSACThreeNetsContract(TestSACContract):
    def make_loss(self, **kwargs):
        return super().make_loss(num_qvalue_nets=3, loss_function="l2", target_entropy=-0.5, **kwargs)

    def reference(self, loss, td):
        return sac_reference(loss, td, loss_fn=F.mse_loss, target_entropy=-0.5)


def test_fixed_alpha_is_a_buffer():
    loss = TestSACContract().make_loss(fixed_alpha=True, reduction="none")
    assert "log_alpha" not in dict(loss.named_parameters()) and "log_alpha" in dict(loss.named_buffers())
    td = batch()
    torch.manual_seed(0)
    out = loss(td.clone())
    torch.manual_seed(0)
    ref = sac_reference(loss, td.clone())
    for key in ("loss_actor", "loss_qvalue", "loss_alpha"):
        torch.testing.assert_close(out[key], ref[key].detach())
    assert not out["loss_alpha"].requires_grad


class _GenericQ(torch.nn.Module):
    """Not a plain MLP: the loss evaluates it through the generic (vmap / loop) ensemble path."""

    def __init__(self):
        super().__init__()
        self.body = MLP(in_features=N_OBS + N_ACT, out_features=1, num_cells=[16])

    def forward(self, obs, action):
        return self.body(torch.cat([obs, action], -1))


class TestSACGenericQContract(TestSACContract):
    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        q = ValueOperator(_GenericQ(), ["observation", "action"])
        loss = SACLoss(actor_net(), q, alpha_init=0.5, **kwargs)
        assert loss._q.stacked is None
        return loss


# ------------------------------------------------------------------------------------ discrete SAC
def discrete_actor():
    net = TensorDictModule(MLP(in_features=N_OBS, out_features=N_CAT, num_cells=[16]), ["observation"], ["logits"])
    return ProbabilisticActor(net, ["logits"], distribution_class=OneHotCategorical)


def discrete_q():
    return TensorDictModule(MLP(in_features=N_OBS, out_features=N_CAT, num_cells=[16]), ["observation"],
                            ["action_value"])


def discrete_reference(loss, td, categorical=False):
    actor = loss.actor_network.module[0].module
    qnet = loss.qvalue_network.module
    obs, nobs = td["observation"], td["next", "observation"]
    alpha = loss.log_alpha.detach().exp()
    n = loss.num_qvalue_nets

    def qv(params, x, detach=False):
        return torch.stack([functional(qnet, params[i], x, detach=detach) for i in range(n)])

    with torch.no_grad():
        p = torch.softmax(actor(nobs), -1)
        nv = (p * (qv(loss.target_qvalue_network_params, nobs).min(0).values - alpha * p.log())).sum(-1)
        target = td["next", "reward"].squeeze(-1) + GAMMA * (~td["next", "terminated"]).float().squeeze(-1) * nv
    q = qv(loss.qvalue_network_params, obs)
    idx = td["action"] if categorical else td["action"].argmax(-1)
    chosen = q.gather(-1, idx.expand(n, -1).unsqueeze(-1)).squeeze(-1)
    loss_q = sum(F.smooth_l1_loss(chosen[i], target, reduction="none") for i in range(n))
    p = torch.softmax(actor(obs), -1)
    logp = p.log()
    min_q = qv(loss.qvalue_network_params, obs, detach=True).min(0).values
    return {
        "loss_qvalue": loss_q,
        "loss_actor": (p * (alpha * logp - min_q)).sum(-1),
        "loss_alpha": -loss.log_alpha * ((p * logp).sum(-1).detach() + 0.98 * math.log(N_CAT)),
    }


class TestDiscreteSACContract(LossContract):
    loss_cls = DiscreteSACLoss
    loss_terms = ("loss_actor", "loss_qvalue", "loss_alpha")
    renames = {"reward": "rew", "done": "dn", "terminated": "term", "action": "act"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        return DiscreteSACLoss(discrete_actor(), discrete_q(), action_space="one-hot", num_actions=N_CAT,
                               alpha_init=0.3, **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size, discrete="one-hot")

    def reference(self, loss, td):
        return discrete_reference(loss, td)


class TestDiscreteSACCategoricalContract(TestDiscreteSACContract):
    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        # spec-given action space and number of actions
        actor = discrete_actor()
        return DiscreteSACLoss(actor, discrete_q(), action_space=CategoricalSpec(N_CAT), num_actions=N_CAT,
                               alpha_init=0.3, **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size, discrete="categorical")

    def reference(self, loss, td):
        return discrete_reference(loss, td, categorical=True)


# ------------------------------------------------------------------------------------------- SAC
def test_output_keys_and_scalars():
    loss = TestSACContract().make_loss()
    out = loss(batch())
    assert sorted(out.keys()) == sorted(loss.out_keys)
    torch.testing.assert_close(out["alpha"], torch.tensor(0.5))
    v1 = TestSACv1Contract().make_loss()
    assert "loss_value" in v1.out_keys and sorted(v1(batch()).keys()) == sorted(v1.out_keys)


def test_entropy_and_priority():
    loss = TestSACContract().make_loss(reduction="none", scalar_output_mode="non_tensor")
    td = batch()
    torch.manual_seed(0)
    out = loss(td)
    torch.manual_seed(0)
    actor = loss.actor_network.module[0].module
    with torch.no_grad():
        na, nlp = tanh_sample(*actor(td["next", "observation"]))
        nv = (qs(loss, loss.target_qvalue_network_params, td["next", "observation"], na) - 0.5 * nlp).min(0).values
        target = td["next", "reward"].squeeze(-1) + GAMMA * (~td["next", "terminated"]).float().squeeze(-1) * nv
        q = qs(loss, loss.qvalue_network_params, td["observation"], td["action"])
        _, lp = tanh_sample(*actor(td["observation"]))
    torch.testing.assert_close(td["td_error"], (q - target).abs().max(0).values)
    torch.testing.assert_close(out["entropy"], -lp.mean())


def test_reduction_none_keeps_the_batch_size():
    # as TorchRL: the output has the input's batch size; the scalars are left out (with a warning, once), or
    # kept as non-tensor entries
    loss = TestSACContract().make_loss(reduction="none")
    with pytest.warns(UserWarning, match="reduction='none' cannot include scalar values"):
        out = loss(batch())
    assert out.batch_size == (8,) and sorted(out.keys()) == ["loss_actor", "loss_alpha", "loss_qvalue"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message="No target network updater")
        loss(batch())
        quiet = TestSACContract().make_loss(reduction="none", scalar_output_mode="exclude")(batch())
    assert sorted(quiet.keys()) == ["loss_actor", "loss_alpha", "loss_qvalue"]
    kept = TestSACContract().make_loss(reduction="none", scalar_output_mode="non_tensor")(batch())
    assert kept.batch_size == (8,) and float(kept["alpha"]) == pytest.approx(0.5)


def test_auto_target_entropy():
    torch.manual_seed(0)
    loss = SACLoss(actor_net(), q_net())  # from the actor's spec
    assert float(loss.target_entropy) == -N_ACT
    explicit = SACLoss(actor_net(spec=None), q_net(), action_spec=Bounded(-1.0, 1.0, (5,)))
    assert float(explicit.target_entropy) == -5.0
    assert float(SACLoss(actor_net(spec=None), q_net(), target_entropy=0.25).target_entropy) == 0.25
    # as TorchRL: without any spec the automatic target entropy cannot be inferred (RuntimeError)
    unknown = SACLoss(actor_net(spec=None), q_net())
    with pytest.raises(RuntimeError, match="cannot infer the dimensionality of the action"):
        unknown.target_entropy
    with pytest.raises(RuntimeError, match="cannot infer the dimensionality of the action"):
        unknown(batch())
    # a state dict carries the target entropy over
    unknown.load_state_dict(loss.state_dict())
    assert float(unknown.target_entropy) == -N_ACT


def test_alpha_bounds_and_validation():
    loss = TestSACContract().make_loss(min_alpha=0.6, max_alpha=2.0)
    assert float(loss.alpha) == pytest.approx(0.6)
    with torch.no_grad():
        loss.log_alpha.fill_(5.0)
    assert float(loss(batch())["alpha"]) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="min_alpha .* exceeds max_alpha"):
        TestSACContract().make_loss(min_alpha=2.0, max_alpha=1.0)
    with pytest.raises(ValueError, match="target_entropy must be 'auto' or a number"):
        TestSACContract().make_loss(target_entropy="big")


def test_estimators_and_unsupported_gae():
    loss = TestSACContract().make_loss()
    with pytest.raises(NotImplementedError, match="SACLoss does not support the GAE value estimator"):
        loss.make_value_estimator(ValueEstimators.GAE)
    with pytest.raises(NotImplementedError, match="does not support the VTrace value estimator; supported"):
        loss.make_value_estimator(ValueEstimators.VTrace)


def test_td_lambda_target_against_functional():
    from torchrl.objectives.value.functional import vec_td_lambda_return_estimate

    loss = TestSACv1Contract().make_loss(reduction="none")
    loss.make_value_estimator(ValueEstimators.TDLambda, gamma=0.8, lmbda=0.6)
    td = batch((2, 5))
    with torch.no_grad():
        nv = loss._functionals["value_network"].target_module.module(td["next", "observation"])
        target = vec_td_lambda_return_estimate(0.8, 0.6, nv, td["next", "reward"], td["next", "done"],
                                               td["next", "terminated"], time_dim=1).squeeze(-1)
    q = qs(loss, loss.qvalue_network_params, td["observation"], td["action"])
    expected = torch.stack([F.smooth_l1_loss(q[i], target, reduction="none") for i in range(2)]).mean(0)
    torch.testing.assert_close(loss(td)["loss_qvalue"], expected)


def test_skip_done_states_bootstraps_live_states_only():
    loss = TestSACContract().make_loss(reduction="none", skip_done_states=True)
    td = batch()
    term = td["next", "terminated"].squeeze(-1)
    assert term.any() and (~term).any()
    torch.manual_seed(0)
    loss(td)
    actor = loss.actor_network.module[0].module
    torch.manual_seed(0)
    with torch.no_grad():
        nobs = td["next", "observation"][~term]
        na, nlp = tanh_sample(*actor(nobs))
        nv = torch.zeros(8)
        nv[~term] = (qs(loss, loss.target_qvalue_network_params, nobs, na) - 0.5 * nlp).min(0).values
        target = td["next", "reward"].squeeze(-1) + GAMMA * nv
        q = qs(loss, loss.qvalue_network_params, td["observation"], td["action"])
    torch.testing.assert_close(td["td_error"], (q - target).abs().max(0).values)


def test_scalar_output_mode():
    td = batch()
    out = TestSACContract().make_loss(reduction="none", scalar_output_mode="exclude")(td.clone())
    assert "alpha" not in out.keys() and out["loss_actor"].shape == (8,)
    out = TestSACContract().make_loss(reduction="none", scalar_output_mode="non_tensor")(td.clone())
    assert out["alpha"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="scalar_output_mode must be"):
        TestSACContract().make_loss(scalar_output_mode="drop")


def test_prioritized_weights_scale_the_q_loss():
    loss = TestSACContract().make_loss(reduction="none")
    td = batch()
    torch.manual_seed(0)
    plain = loss(td.clone())
    td["priority_weight"] = torch.linspace(0.1, 1.0, 8)
    torch.manual_seed(0)
    weighted = loss(td.clone())
    torch.testing.assert_close(weighted["loss_qvalue"], plain["loss_qvalue"] * td["priority_weight"])
    torch.testing.assert_close(weighted["loss_actor"], plain["loss_actor"])


def test_stacked_mlp_matches_member_by_member():
    torch.manual_seed(0)
    with set_fast_paths(True):  # the stacked route is a fast path (off: the general ensemble call)
        loss = TestSACContract().make_loss(num_qvalue_nets=3)
        assert isinstance(loss._q.stacked, StackedMLP)
        td = batch((2, 3))
        inputs = {"observation": td["observation"], "action": td["action"]}
        got = loss._q(loss.qvalue_network_params, inputs, td.batch_size)
        with set_fast_paths(False):
            torch.testing.assert_close(loss._q(loss.qvalue_network_params, inputs, td.batch_size), got)
    want = torch.stack([functional(loss.qvalue_network.module, loss.qvalue_network_params[i], td["observation"],
                                   td["action"]) for i in range(3)])
    torch.testing.assert_close(got, want)
    assert StackedMLP.build(TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout()),
                                             ["x"], ["y"])) is None


def test_stacked_mlp_gradients_match_member_by_member():
    torch.manual_seed(0)
    loss = TestSACContract().make_loss(num_qvalue_nets=3)
    td = batch((2, 3))
    obs = td["observation"].clone().requires_grad_()
    params = loss.qvalue_network_params
    got = loss._q(params, {"observation": obs, "action": td["action"]}, td.batch_size)
    weights = torch.linspace(0.5, 2.0, got.numel()).reshape(got.shape)
    leaves = [p for p in params.values(True, True)]
    got_grads = torch.autograd.grad((got * weights).sum(), leaves + [obs])
    copies = params.detach().clone().requires_grad_()
    obs2 = td["observation"].clone().requires_grad_()
    want = torch.stack([functional(loss.qvalue_network.module, copies[i], obs2, td["action"]) for i in range(3)])
    want_grads = torch.autograd.grad((want * weights).sum(), list(copies.values(True, True)) + [obs2])
    torch.testing.assert_close(got, want)
    for g, w in zip(got_grads, want_grads):
        torch.testing.assert_close(g, w)


def test_list_of_q_networks_and_separate_losses():
    torch.manual_seed(0)
    nets = [q_net(), q_net()]
    loss = SACLoss(actor_net(), nets)
    for i, net in enumerate(nets):
        torch.testing.assert_close(loss.qvalue_network_params["module", "0", "weight"][i].detach(),
                                   net.module[0].weight.detach())
    trunk = torch.nn.Linear(N_OBS, 8)

    class Q(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk, self.head = trunk, torch.nn.Linear(8 + N_ACT, 1)

        def forward(self, obs, action):
            return self.head(torch.cat([self.trunk(obs).tanh(), action], -1))

    actor = ProbabilisticActor(
        TensorDictModule(torch.nn.Sequential(trunk, torch.nn.Tanh(), torch.nn.Linear(8, 2 * N_ACT),
                                             NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        ["loc", "scale"], distribution_class=TanhNormal)
    loss = SACLoss(actor, ValueOperator(Q(), ["observation", "action"]), separate_losses=True,
                   action_spec=Bounded(-1.0, 1.0, (N_ACT,)))
    assert not isinstance(loss.qvalue_network_params["module", "trunk", "weight"], torch.nn.Parameter)
    out = loss(batch())
    out["loss_qvalue"].backward()
    assert trunk.weight.grad is None


def test_missing_and_misshaped_inputs():
    loss = TestSACContract().make_loss()
    td = batch().exclude("observation")
    with pytest.raises(KeyError, match="'observation'.*key table"):
        loss(td)
    td = batch()
    td["next", "reward"] = torch.zeros(8, 3)
    with pytest.raises(RuntimeError, match=r"shapes differ.*'reward'\) \(8, 3\)"):
        loss(td)


# ---------------------------------------------------------------------------------------- discrete
def test_discrete_defaults_and_num_actions():
    torch.manual_seed(0)
    # as TorchRL: the automatic target entropy needs num_actions (a spec is not enough)
    with pytest.raises(ValueError, match="num_actions needs to be provided if target_entropy == 'auto'"):
        DiscreteSACLoss(discrete_actor(), discrete_q(), action_space=OneHot(N_CAT))
    with pytest.warns(UserWarning, match="assuming one-hot"):
        loss = DiscreteSACLoss(discrete_actor(), discrete_q(), num_actions=N_CAT)
    out = loss(batch(discrete="one-hot"))
    assert sorted(out.keys()) == sorted(loss.out_keys)
    assert float(loss.target_entropy) == pytest.approx(0.98 * math.log(N_CAT))
    spec_actor = ProbabilisticActor(discrete_actor().module[0], ["logits"], spec=OneHot(N_CAT),
                                    distribution_class=OneHotCategorical)
    loss = DiscreteSACLoss(spec_actor, discrete_q(), num_actions=N_CAT, target_entropy_weight=0.5)
    assert loss.action_space == "one-hot" and loss.num_actions == N_CAT
    assert float(loss.target_entropy) == pytest.approx(0.5 * math.log(N_CAT))
    assert float(DiscreteSACLoss(spec_actor, discrete_q(), target_entropy=-1.0).target_entropy) == -1.0
    assert loss.tensor_keys.log_prob == "log_prob"  # listed in the key table as TorchRL


def test_discrete_masked_actions_stay_finite():
    from torchrl.modules import MaskedOneHotCategorical

    torch.manual_seed(0)
    net = TensorDictModule(MLP(in_features=N_OBS, out_features=N_CAT, num_cells=[16]), ["observation"], ["logits"])
    actor = ProbabilisticActor(net, {"logits": "logits", "mask": "action_mask"},
                               distribution_class=MaskedOneHotCategorical)
    loss = DiscreteSACLoss(actor, discrete_q(), action_space="one-hot", num_actions=N_CAT)
    td = batch(discrete="one-hot")
    mask = torch.ones(8, N_CAT, dtype=torch.bool)
    mask[:, 0] = False
    td["action_mask"] = mask
    td["next", "action_mask"] = mask
    out = loss(td)
    for key in ("loss_actor", "loss_qvalue", "loss_alpha"):
        assert torch.isfinite(out[key]), key


def test_discrete_action_shape_error():
    loss = TestDiscreteSACContract().make_loss()
    td = batch(discrete="one-hot")
    td["action"] = torch.zeros(8, N_CAT + 1, dtype=torch.long)
    with pytest.raises(RuntimeError, match=r"action \(8, 5\), action_value \(8, 4\)"):
        loss(td)


def test_discrete_gae_not_supported():
    with pytest.raises(NotImplementedError, match="DiscreteSACLoss does not support the GAE"):
        TestDiscreteSACContract().make_loss().make_value_estimator(ValueEstimators.GAE)


def test_actor_must_be_probabilistic_with_one_action_tensor():
    from test.objectives._onpolicy_nets import composite_actor

    deterministic = TensorDictModule(torch.nn.Linear(N_OBS, N_ACT), ["observation"], ["action"])
    with pytest.raises(TypeError, match="probabilistic module with get_dist"):
        SACLoss(deterministic, q_net())
    with pytest.raises(TypeError, match="composite .* action"):
        SACLoss(composite_actor(), q_net())
