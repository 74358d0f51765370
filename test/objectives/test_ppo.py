from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import distributions as D

from test.objectives._onpolicy_nets import (
    GAMMA,
    LMBDA,
    N_CAT,
    N_OBS,
    actor_params,
    advantage_and_target,
    batch,
    categorical_actor,
    composite_actor,
    critic_net,
    critic_value,
    gae,
    tanh_actor,
    tanh_normal_log_prob,
    tanh_normal_mc_entropy,
)
from test.objectives.loss_contract import LossContract
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import ActorValueOperator, MLP, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss, KLPENPPOLoss, PPOLoss, SoftUpdate, ValueEstimators
from torchrl.objectives.value import GAE

EPS = 0.2


def ppo_reference(loss, td, *, kind="clip", entropy_coeff=0.01, critic_coeff=1.0, normalize=False, adv=None,
                  target=None):
    """PPO in plain torch: GAE, TanhNormal log-probs, clipped objective, MC entropy, smooth-L1 critic."""
    obs = td["observation"]
    if adv is None:
        adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    if normalize:
        adv = (adv - adv.mean()) / adv.std().clamp_min(1e-6)
    adv = adv.squeeze(-1)
    loc, scale = actor_params(loss, obs)
    log_w = tanh_normal_log_prob(loc, scale, td["action"]) - td["action_log_prob"]
    ratio = log_w.exp()
    if kind == "clip":
        objective = -torch.minimum(ratio * adv, ratio.clamp(1 - EPS, 1 + EPS) * adv)
    else:
        objective = -ratio * adv
    out = {"loss_objective": objective,
           "loss_entropy": -entropy_coeff * tanh_normal_mc_entropy(loc, scale)}
    value = critic_value(loss, obs)
    out["loss_critic"] = critic_coeff * F.smooth_l1_loss(value, target, reduction="none").squeeze(-1)
    return out


class TestClipPPOContract(LossContract):
    loss_cls = ClipPPOLoss
    loss_terms = ("loss_objective", "loss_critic", "loss_entropy")
    renames = {"reward": "rew", "done": "dn", "terminated": "term", "action": "act", "sample_log_prob": "lp"}

    def data_key(self, name):
        return {"action": "action", "sample_log_prob": "action_log_prob"}.get(name, super().data_key(name))

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        return ClipPPOLoss(tanh_actor(), critic_net(), clip_epsilon=EPS, **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size)

    def reference(self, loss, td):
        return ppo_reference(loss, td)


class TestPPOContract(TestClipPPOContract):
    loss_cls = PPOLoss

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        return PPOLoss(tanh_actor(), critic_net(), **kwargs)

    def reference(self, loss, td):
        return ppo_reference(loss, td, kind="plain")


class TestClipPPONormalizedContract(TestClipPPOContract):
    def make_loss(self, **kwargs):
        return super().make_loss(normalize_advantage=True, entropy_coeff=0.05, critic_coeff=0.5,
                                 loss_critic_type="smooth_l1", **kwargs)

    def reference(self, loss, td):
        return ppo_reference(loss, td, normalize=True, entropy_coeff=0.05, critic_coeff=0.5)


def kl_reference(loss, td, beta):
    """KLPEN with a categorical actor: exact KL(pi_old || pi)."""
    obs = td["observation"]
    adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    adv = adv.squeeze(-1)
    logits = loss.actor_network.module[0].module(obs)
    idx = td["action"].argmax(-1)
    log_pi = torch.log_softmax(logits, -1)
    log_w = log_pi.gather(-1, idx.unsqueeze(-1)).squeeze(-1) - td["action_log_prob"]
    old = torch.log_softmax(td["logits"], -1)
    kl = (old.exp() * (old - log_pi)).sum(-1)
    entropy = -(log_pi.exp() * log_pi).sum(-1)
    value = critic_value(loss, obs)
    return {
        "loss_objective": -(log_w.exp() * adv - beta * kl),
        "loss_entropy": -0.01 * entropy,
        "loss_critic": F.smooth_l1_loss(value, target, reduction="none").squeeze(-1),
    }, kl


class TestKLPENContract(LossContract):
    loss_cls = KLPENPPOLoss
    loss_terms = ("loss_objective", "loss_critic", "loss_entropy")
    renames = {"reward": "rew", "done": "dn", "terminated": "term"}

    def make_loss(self, **kwargs):
        torch.manual_seed(0)
        return KLPENPPOLoss(categorical_actor(), critic_net(), beta=0.7, **kwargs)

    def make_batch(self, batch_size=None):
        return batch(batch_size or self.batch_size, kind="categorical")

    def reference(self, loss, td):
        return kl_reference(loss, td, 0.7)[0]  # the run resets beta to 0.7 first

    def run(self, loss, td, seed=0):
        loss.reset()  # beta adapts after every call; compare calls at the initial beta
        return super().run(loss, td, seed)


# ------------------------------------------------------------------------------------------ the seeds
def test_readme_ppo_loop_runs_unchanged():
    """The README's PPO loop (seed 004): GAE with average_gae, sum of every loss_* key, backward, step."""
    torch.manual_seed(0)
    actor = tanh_actor()
    critic = critic_net()
    loss_fn = ClipPPOLoss(actor, critic)
    adv_fn = GAE(value_network=critic, average_gae=True, gamma=0.99, lmbda=0.95)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=2e-4)
    data = batch((4, 10))
    with set_exploration_type(ExplorationType.RANDOM), torch.no_grad():
        actor(data)
    adv_fn(data)
    before = [p.detach().clone() for p in loss_fn.parameters()]
    for sample in data.reshape(-1).split(10):
        loss_vals = loss_fn(sample)
        loss_val = sum(value for key, value in loss_vals.items() if key.startswith("loss"))
        loss_val.backward()
        optim.step()
        optim.zero_grad()
    assert all(not torch.equal(a, b) for a, b in zip(before, loss_fn.parameters()))
    # seed 000: the three terms by name
    loss = ClipPPOLoss(actor_network=actor, critic_network=critic)
    losses = loss(data)
    total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
    assert total.shape == () and torch.isfinite(total)


def test_output_keys_and_out_keys_as_torchrl():
    # TorchRL 0.14.1's listings (out_keys) and outputs: loss_critic is always listed, explained_variance and
    # kl_approx are output but not listed; ClipPPO adds ESS, max_ratio and mean_ratio; KLPEN the per-element kl
    listed = {
        PPOLoss: ["loss_objective", "entropy", "loss_entropy", "loss_critic", "value_clip_fraction"],
        ClipPPOLoss: ["loss_objective", "clip_fraction", "entropy", "loss_entropy", "loss_critic",
                      "value_clip_fraction", "ESS", "kl_approx", "max_ratio", "mean_ratio"],
        KLPENPPOLoss: ["loss_objective", "kl", "entropy", "loss_entropy", "loss_critic", "value_clip_fraction"],
    }
    extra_out = {PPOLoss: [], ClipPPOLoss: [], KLPENPPOLoss: []}
    for cls in (PPOLoss, ClipPPOLoss, KLPENPPOLoss):
        torch.manual_seed(0)
        loss = cls(categorical_actor(), critic_net(), clip_value=0.5)
        data = batch(kind="categorical")
        data["state_value"] = torch.zeros(8, 1)
        out = loss(data)
        assert loss.out_keys == listed[cls], cls
        expected = set(listed[cls]) | {"kl_approx", "explained_variance", *extra_out[cls]}
        assert set(out.keys()) == expected, cls
        assert out["explained_variance"].shape == (1,) and out["kl_approx"].shape == ()
        if cls is KLPENPPOLoss:
            assert out["kl"].shape == (8, 1)
    assert PPOLoss(categorical_actor(), critic_net(), entropy_bonus=False).out_keys == ["loss_objective", "loss_critic"]
    assert PPOLoss(categorical_actor()).out_keys == ["loss_objective", "entropy", "loss_entropy", "loss_critic"]


def test_diagnostics_known_values():
    """ESS, kl_approx and clip_fraction computed from the log-weights."""
    loss = TestClipPPOContract().make_loss()
    td = batch()
    adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    td["advantage"], td["value_target"] = adv, target
    out = loss(td)
    with torch.no_grad():
        loc, scale = actor_params(loss, td["observation"])
        lw = tanh_normal_log_prob(loc, scale, td["action"]) - td["action_log_prob"]
    w = lw.exp()
    torch.testing.assert_close(out["ESS"], w.sum() ** 2 / (w ** 2).sum() / 8)
    torch.testing.assert_close(out["max_ratio"], w.max())
    torch.testing.assert_close(out["mean_ratio"], w.mean())
    torch.testing.assert_close(out["kl_approx"], (-lw).mean())
    clipped = ((lw < math.log(1 - EPS)) | (lw > math.log(1 + EPS))).float().mean()
    torch.testing.assert_close(out["clip_fraction"], clipped)
    value = critic_value(loss, td["observation"]).detach()
    ev = 1 - (target - value).var(0, unbiased=False) / target.var(0, unbiased=False)  # along the batch dim
    assert out["explained_variance"].shape == (1,)
    torch.testing.assert_close(out["explained_variance"], ev)


def test_given_advantage_skips_estimator_and_input_untouched():
    loss = TestClipPPOContract().make_loss(reduction="none")
    td = batch()
    keys = set(td.keys(True, True))
    torch.manual_seed(0)
    computed = loss(td)
    assert set(td.keys(True, True)) - keys <= {("next", "state_value")}
    assert "advantage" not in td.keys()
    adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    given = td.clone()
    given["advantage"], given["value_target"] = adv * 2, target
    torch.manual_seed(0)
    out = loss(given)
    torch.testing.assert_close(out["loss_critic"], computed["loss_critic"])
    assert not torch.allclose(out["loss_objective"], computed["loss_objective"])
    torch.manual_seed(0)
    ref = ppo_reference(loss, given, adv=adv * 2, target=target)
    torch.testing.assert_close(out["loss_objective"], ref["loss_objective"])


def test_multidim_batch_gae_along_time():
    loss = TestClipPPOContract().make_loss(reduction="none")
    td = batch((3, 5))
    out = TestClipPPOContract().run(loss, td.clone())
    ref = TestClipPPOContract().run_reference(loss, td.clone())
    for name in ("loss_objective", "loss_critic", "loss_entropy"):
        assert out[name].shape == (3, 5)
        torch.testing.assert_close(out[name], ref[name], atol=1e-5, rtol=1e-5)


def test_asymmetric_clip_epsilon_and_value_clipping():
    torch.manual_seed(0)
    loss = ClipPPOLoss(categorical_actor(), critic_net(), clip_epsilon=(0.1, 0.3), clip_value=True,
                       reduction="none")
    td = batch(kind="categorical")
    adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    old = target + torch.randn(target.shape, generator=torch.Generator().manual_seed(3))
    td["advantage"], td["value_target"], td["state_value"] = adv, target, old
    out = loss(td)
    logits = loss.actor_network.module[0].module(td["observation"])
    lw = torch.log_softmax(logits, -1).gather(-1, td["action"].argmax(-1, keepdim=True)).squeeze(-1)
    lw = lw - td["action_log_prob"]
    a = adv.squeeze(-1)
    ref = -torch.minimum(lw.exp() * a, lw.exp().clamp(0.9, 1.3) * a)
    torch.testing.assert_close(out["loss_objective"], ref)
    value = critic_value(loss, td["observation"])
    clipped = old + (value - old).clamp(-0.1, 0.3)
    ref_critic = torch.maximum(F.smooth_l1_loss(value, target, reduction="none"),
                               F.smooth_l1_loss(clipped, target, reduction="none")).squeeze(-1)
    torch.testing.assert_close(out["loss_critic"], ref_critic)
    frac = ((value - old) != (value - old).clamp(-0.1, 0.3)).float().mean()
    torch.testing.assert_close(out["value_clip_fraction"], frac)


def test_clip_value_needs_stored_values():
    loss = ClipPPOLoss(categorical_actor(), critic_net(), clip_value=0.2)
    # with the advantage computed by the loss, the estimator's values are the stored ones
    assert float(loss(batch(kind="categorical"))["value_clip_fraction"]) == 0.0
    td = batch(kind="categorical")
    td["advantage"] = torch.zeros(8, 1)
    td["value_target"] = torch.zeros(8, 1)
    with pytest.raises(KeyError, match="clip_value needs the values"):
        loss(td)


def test_bad_clip_arguments():
    with pytest.raises(ValueError, match="clip_epsilon must be in"):
        ClipPPOLoss(categorical_actor(), critic_net(), clip_epsilon=1.5)
    with pytest.raises(ValueError, match="clip_value must be a positive float"):
        ClipPPOLoss(categorical_actor(), critic_net(), clip_value=-1.0)


def test_composite_action_per_head_entropy_coefficients():
    torch.manual_seed(0)
    loss = ClipPPOLoss(composite_actor(), critic_net(), entropy_coeff={"cont": 0.02, "disc_entropy": 0.3},
                       reduction="none")
    assert loss.tensor_keys.action == ["cont", "disc"]
    assert loss.tensor_keys.sample_log_prob == ["cont_log_prob", "disc_log_prob"]
    td = batch(kind="composite")
    out = loss(td)
    obs = td["observation"]
    loc, scale, logits = loss.actor_network.module[0].module(obs)
    normal, cat = D.Normal(loc, scale), D.Categorical(logits=logits)
    lp = normal.log_prob(td["cont"]).sum(-1) + cat.log_prob(td["disc"])
    old = td["cont_log_prob"].sum(-1) + td["disc_log_prob"]
    adv, target = advantage_and_target(lambda x: critic_value(loss, x), td)
    ratio, a = (lp - old).exp(), adv.squeeze(-1)
    torch.testing.assert_close(out["loss_objective"], -torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a))
    h_cont, h_disc = normal.entropy().sum(-1), cat.entropy()
    torch.testing.assert_close(out["loss_entropy"], -(0.02 * h_cont + 0.3 * h_disc))
    torch.testing.assert_close(out["entropy"], (h_cont + h_disc).mean())
    torch.testing.assert_close(out["composite_entropy", "cont_entropy"], h_cont.mean())
    torch.testing.assert_close(out["composite_entropy", "disc_entropy"], h_disc.mean())
    sum(v.mean() for k, v in out.items() if k.startswith("loss")).backward()
    assert all(p.grad is not None for p in loss.actor_network.parameters())


def test_per_head_coefficient_missing_head():
    loss = ClipPPOLoss(composite_actor(), critic_net(), entropy_coeff={"cont": 0.02})
    with pytest.raises(KeyError, match=r"no coefficient for action head\(s\) \['disc'\]"):
        loss(batch(kind="composite"))


def test_separate_losses_keeps_critic_gradient_off_the_trunk():
    torch.manual_seed(0)
    common = TensorDictModule(torch.nn.Linear(N_OBS, 8), ["observation"], ["hidden"])
    policy = ProbabilisticActor(TensorDictModule(torch.nn.Linear(8, N_CAT), ["hidden"], ["logits"]), ["logits"],
                                distribution_class=torch.distributions.Categorical, return_log_prob=True)
    value = ValueOperator(torch.nn.Linear(8, 1), ["hidden"])
    avo = ActorValueOperator(common, policy, value)
    for separate in (False, True):
        loss = ClipPPOLoss(avo.get_policy_operator(), avo.get_value_operator(), separate_losses=separate,
                           entropy_bonus=False)
        td = batch(kind="categorical")
        td["action"] = td["action"].argmax(-1)
        td["advantage"] = torch.zeros(8, 1)  # no policy gradient: only the critic could reach the trunk
        td["value_target"] = torch.randn(8, 1)
        for p in loss.parameters():
            p.grad = None
        out = loss(td)
        (out["loss_objective"] + out["loss_critic"]).backward()
        trunk = common.module.weight.grad
        assert value.module.weight.grad is not None
        if separate:
            assert trunk is None or torch.count_nonzero(trunk) == 0
        else:
            assert torch.count_nonzero(trunk) > 0


def test_klpen_beta_adapts_and_resets():
    loss = TestKLPENContract().make_loss()
    td = batch(kind="categorical")
    td["logits"] = td["logits"] * 8  # far from the current policy: KL >> dtarg
    out = loss(td)
    _, kl = kl_reference(loss, td, 0.7)
    torch.testing.assert_close(out["kl"], kl.reshape(out["kl"].shape))  # per element, [8, 1] as TorchRL
    assert float(loss.beta) == pytest.approx(1.4)
    loss.reset()
    assert float(loss.beta) == pytest.approx(0.7)
    close = td.clone()
    close["logits"] = loss.actor_network.module[0].module(close["observation"]).detach()
    loss(close)
    assert float(loss.beta) == pytest.approx(0.35)


def test_klpen_needs_distribution_parameters():
    loss = TestKLPENContract().make_loss()
    td = batch(kind="categorical").exclude("logits")
    with pytest.raises(KeyError, match="parameters of the collecting policy.*'logits'"):
        loss(td)
    with pytest.raises(AttributeError):  # TorchRL's type there
        loss(td)


def test_klpen_exact_kl_for_tanh_normal():
    """Same squashing on both sides: KL(TanhNormal || TanhNormal) is the KL of the underlying normals."""
    torch.manual_seed(0)
    loss = KLPENPPOLoss(tanh_actor(), critic_net(), reduction="none", entropy_bonus=False)
    td = batch()
    out = loss(td)
    loc, scale = actor_params(loss, td["observation"])
    kl = D.kl_divergence(D.Normal(td["loc"], td["scale"]), D.Normal(loc, scale)).sum(-1)
    torch.testing.assert_close(out["kl"], kl.unsqueeze(-1))


class StudentTAction(D.Independent):
    """No closed-form KL: KLPEN falls back on a Monte-Carlo estimate."""

    def __init__(self, loc, scale):
        super().__init__(D.StudentT(3.0, loc, scale), 1)


def test_klpen_monte_carlo_kl():
    torch.manual_seed(0)
    net = TensorDictModule(torch.nn.Sequential(MLP(in_features=N_OBS, out_features=4, num_cells=[8]),
                                               NormalParamExtractor()), ["observation"], ["loc", "scale"])
    actor = ProbabilisticActor(net, ["loc", "scale"], distribution_class=StudentTAction, return_log_prob=True)
    loss = KLPENPPOLoss(actor, critic_net(), samples_mc_kl=3, reduction="none", entropy_bonus=False)
    td = batch()
    torch.manual_seed(5)
    out = loss(td)
    loc, scale = net.module(td["observation"])
    prev = StudentTAction(td["loc"], td["scale"])
    torch.manual_seed(5)
    x = prev.sample((3,))
    kl = (prev.log_prob(x) - StudentTAction(loc, scale).log_prob(x)).mean(0)
    torch.testing.assert_close(out["kl"], kl.unsqueeze(-1))


def test_shape_mismatch_names_every_tensor():
    loss = TestClipPPOContract().make_loss()
    td = batch()
    td["advantage"] = torch.zeros(8, 3)
    td["value_target"] = torch.zeros(8, 1)
    with pytest.raises(RuntimeError, match=r"advantage \(8, 3\), log_prob \(8,\)"):
        loss(td)
    td = batch()
    td["action_log_prob"] = torch.zeros(8, 2)
    with pytest.raises(RuntimeError, match=r"sample_log_prob \(8, 2\), log_prob \(8,\)"):
        loss(td)
    td = batch()
    td["advantage"] = torch.zeros(8, 1)
    td["value_target"] = torch.zeros(8)
    with pytest.raises(RuntimeError, match=r"state_value \(8, 1\), value_target \(8,\)"):
        loss(td)


def test_missing_log_prob_names_key_and_table():
    loss = TestClipPPOContract().make_loss()
    td = batch().exclude("action_log_prob")
    with pytest.raises(KeyError, match=r"'action_log_prob' \(loss.tensor_keys.sample_log_prob\).*key table"):
        loss(td)


def test_missing_value_target_explains_remedy():
    loss = TestClipPPOContract().make_loss()
    td = batch()
    td["advantage"] = torch.zeros(8, 1)
    with pytest.raises(KeyError, match="'value_target'.*Run a value estimator"):
        loss(td)


def test_without_critic_and_without_entropy():
    torch.manual_seed(0)
    loss = ClipPPOLoss(tanh_actor(), entropy_bonus=False)
    td = batch()
    td["advantage"] = torch.randn(8, 1)
    out = loss(td)
    assert sorted(k for k in out.keys() if k.startswith("loss")) == ["loss_objective"]
    # TorchRL lists loss_critic even without a critic
    assert loss.out_keys == ["loss_objective", "clip_fraction", "loss_critic", "ESS", "kl_approx", "max_ratio",
                             "mean_ratio"]


def test_stored_action_with_grad_is_rejected():
    loss = TestClipPPOContract().make_loss()
    td = batch()
    td["action"] = td["action"].requires_grad_()
    with pytest.raises(RuntimeError, match="requires grad"):
        loss(td)


def test_value_estimators_against_functional():
    """TD(0) inside the loss gives r + gamma (1 - terminated) V(s') as value target."""
    loss = TestClipPPOContract().make_loss(reduction="none")
    loss.make_value_estimator(ValueEstimators.TD0, gamma=0.5)
    td = batch()
    torch.manual_seed(0)
    out = loss(td)
    with torch.no_grad():
        target = td["next", "reward"] + 0.5 * (~td["next", "terminated"]).float() * critic_value(
            loss, td["next", "observation"])
    value = critic_value(loss, td["observation"])
    torch.testing.assert_close(out["loss_critic"], F.smooth_l1_loss(value, target, reduction="none").squeeze(-1))


def test_vtrace_estimator_uses_the_actor():
    loss = TestClipPPOContract().make_loss()
    loss.make_value_estimator(ValueEstimators.VTrace, gamma=0.9)
    assert loss.value_estimator.actor_network is loss.actor_network
    out = loss(batch((2, 4)))
    assert torch.isfinite(out["loss_objective"])


def test_delay_actor_uses_target_log_prob_and_updates():
    torch.manual_seed(0)
    loss = ClipPPOLoss(tanh_actor(), critic_net(), delay_actor=True, entropy_bonus=False, reduction="none")
    updater = SoftUpdate(loss, tau=0.5)
    td = batch()
    td["advantage"], td["value_target"] = torch.randn(8, 1), torch.randn(8, 1)
    out = loss(td)
    torch.testing.assert_close(out["kl_approx"], torch.tensor(0.0), atol=1e-6, rtol=0)  # target == current
    with torch.no_grad():
        for p in loss.actor_network.parameters():
            p.add_(0.1)
    out = loss(td)
    target_net = loss._functionals["actor_network"].target_module
    with torch.no_grad():
        tl, ts = target_net.module[0].module(td["observation"])
        old = tanh_normal_log_prob(tl, ts, td["action"])
        loc, scale = actor_params(loss, td["observation"])
        lw = tanh_normal_log_prob(loc, scale, td["action"]) - old
    torch.testing.assert_close(out["kl_approx"], (-lw).mean())
    updater.step()
    w = target_net.module[0].module[0][0].weight
    torch.testing.assert_close(w, loss.actor_network.module[0].module[0][0].weight.detach() - 0.05)


def test_max_importance_ratio_caps_the_weight():
    loss = TestClipPPOContract().make_loss(reduction="none", max_importance_ratio=1.05, entropy_bonus=False)
    loss_plain = PPOLoss(tanh_actor(), critic_net(), max_importance_ratio=1.05, reduction="none")
    loss_plain.load_state_dict(loss.state_dict(), strict=False)
    td = batch()
    td["advantage"], td["value_target"] = -torch.ones(8, 1), torch.zeros(8, 1)
    td["action_log_prob"] = td["action_log_prob"] - 5.0  # ratios ~ e^5
    out = loss_plain(td)
    torch.testing.assert_close(out["loss_objective"], torch.full((8,), 1.05))


def test_advantage_norm_divides_by_scale():
    class Scale:
        def __init__(self):
            self.seen = []

        def update(self, x):
            self.seen.append(x.clone())

        def scale(self):
            return torch.tensor(4.0)

    loss_norm = TestClipPPOContract().make_loss(reduction="none", advantage_norm=Scale())
    loss = TestClipPPOContract().make_loss(reduction="none")
    td = batch()
    td["advantage"], td["value_target"] = torch.randn(8, 1), torch.randn(8, 1)
    half = td.clone()
    half["advantage"] = td["advantage"] / 4
    torch.manual_seed(0)
    a = loss_norm(td)
    torch.manual_seed(0)
    b = loss(half)
    torch.testing.assert_close(a["loss_objective"], b["loss_objective"])
    assert torch.equal(loss_norm.advantage_norm.seen[0], td["advantage"])


def test_normalize_advantage_exclude_dims():
    loss = TestClipPPOContract().make_loss(reduction="none", normalize_advantage=True,
                                           normalize_advantage_exclude_dims=(0,))
    td = batch((2, 6))
    adv = torch.randn(2, 6, 1) * torch.tensor([1.0, 10.0]).view(2, 1, 1)
    td["advantage"], td["value_target"] = adv, torch.zeros(2, 6, 1)
    torch.manual_seed(0)
    out = loss(td)
    normed = (adv - adv.mean((1, 2), keepdim=True)) / adv.std((1, 2), keepdim=True)
    torch.manual_seed(0)
    ref = ppo_reference(loss, td, adv=normed, target=td["value_target"])
    torch.testing.assert_close(out["loss_objective"], ref["loss_objective"])


def test_deprecated_keywords():
    with pytest.warns(DeprecationWarning) as record:
        loss = ClipPPOLoss(tanh_actor(), critic_net(), entropy_coef=0.3, critic_coef=0.7)
    messages = " ".join(str(w.message) for w in record)
    assert "'entropy_coef' is deprecated" in messages and "'critic_coef' is deprecated" in messages
    assert float(loss.entropy_coeff) == pytest.approx(0.3)
    assert float(loss.critic_coeff) == pytest.approx(0.7)
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        ClipPPOLoss(tanh_actor(), critic_net(), not_an_option=1)
    with pytest.warns(DeprecationWarning):
        loss = PPOLoss(actor=tanh_actor(), critic=critic_net(), advantage_key="adv")
    assert loss.tensor_keys.advantage == "adv"


def test_loss_mask_reduces_over_valid_elements():
    loss = TestClipPPOContract().make_loss()
    loss_none = TestClipPPOContract().make_loss(reduction="none")
    loss.loss_mask_key = "mask"
    td = batch()
    td["mask"] = torch.arange(8) % 2 == 0
    torch.manual_seed(0)
    out = loss(td)
    torch.manual_seed(0)
    per = loss_none(td)
    for name in ("loss_objective", "loss_critic", "loss_entropy"):
        torch.testing.assert_close(out[name], per[name][td["mask"]].mean())


def test_critic_writing_another_key():
    torch.manual_seed(0)
    critic = ValueOperator(MLP(in_features=N_OBS, out_features=1, num_cells=[4]), ["observation"], ["v"])
    loss = ClipPPOLoss(tanh_actor(), critic)
    td = batch()
    td["advantage"], td["value_target"] = torch.zeros(8, 1), torch.zeros(8, 1)
    with pytest.raises(KeyError, match=r"writes \['v'\], not 'state_value'.*set_keys\(value="):
        loss(td)
    loss.set_keys(value="v")
    assert torch.isfinite(loss(td)["loss_critic"])


def test_gae_reference_matches_library():
    """Sanity check of the test's own reference against the library GAE (vectorised)."""
    from torchrl.objectives.value.functional import vec_generalized_advantage_estimate

    td = batch((2, 7))
    v, nv = torch.randn(2, 7, 1), torch.randn(2, 7, 1)
    r, d, t = td["next", "reward"], td["next", "done"], td["next", "terminated"]
    adv, target = gae(v, nv, r, d, t)
    a2, t2 = vec_generalized_advantage_estimate(GAMMA, LMBDA, v, nv, r, d, t, time_dim=1)
    torch.testing.assert_close(adv, a2)
    torch.testing.assert_close(target, t2)
    assert TensorDict is not None and N_CAT == 4


def test_multi_agent_gae_estimator():
    """``ValueEstimators.MAGAE`` builds a MultiAgentGAE with TorchRL's defaults (gamma 0.99, lambda 0.95)."""
    from torchrl.objectives.value import MultiAgentGAE

    loss = ClipPPOLoss(tanh_actor(), critic_net())
    loss.make_value_estimator(ValueEstimators.MAGAE)
    est = loss.value_estimator
    assert type(est) is MultiAgentGAE and loss.value_type is ValueEstimators.MAGAE
    assert est.gamma.item() == pytest.approx(0.99) and est.lmbda.item() == pytest.approx(0.95) and est.agent_dim == -2
    loss.make_value_estimator(ValueEstimators.MAGAE, gamma=0.5, lmbda=0.7)
    assert loss.value_estimator.gamma.item() == 0.5 and loss.value_estimator.lmbda.item() == pytest.approx(0.7)
    out = loss(batch((2, 4)))
    assert torch.isfinite(out["loss_objective"])
