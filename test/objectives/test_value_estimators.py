"""Estimator classes against the functional forms of ``torchrl.objectives.value.functional``."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, ProbabilisticTensorDictModule, ProbabilisticTensorDictSequential
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl.objectives.value import (
    GAE,
    MultiAgentGAE,
    TD0Estimate,
    TD0Estimator,
    TD1Estimate,
    TD1Estimator,
    TDLambdaEstimate,
    TDLambdaEstimator,
    ValueEstimatorBase,
    VTrace,
    functional as F_,
)

N_OBS = 3


class Counting(nn.Module):
    """A linear critic that counts its calls and the rows it saw."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(N_OBS, 1)
        self.calls, self.rows = 0, 0

    def forward(self, obs):
        self.calls += 1
        self.rows += obs.shape[:-1].numel()
        return self.lin(obs)


def critic():
    torch.manual_seed(0)
    return TensorDictModule(Counting(), ["observation"], ["state_value"])


def rollout(B=3, T=6, seed=0, p_done=0.25):
    """Time-contiguous data: ``next obs[t] == obs[t+1]`` except where an episode ended at ``t``."""
    g = torch.Generator().manual_seed(seed)
    terminated = torch.rand(B, T, 1, generator=g) < p_done / 2
    done = terminated | (torch.rand(B, T, 1, generator=g) < p_done / 2)
    obs = torch.randn(B, T + 1, N_OBS, generator=g)
    next_obs = obs[:, 1:].clone()
    final = torch.randn(B, T, N_OBS, generator=g)
    next_obs[done.squeeze(-1)] = final[done.squeeze(-1)]
    return TensorDict(
        {
            "observation": obs[:, :T],
            "next": {"observation": next_obs, "reward": torch.randn(B, T, 1, generator=g), "done": done,
                     "terminated": terminated},
        },
        [B, T],
    )


def values(net, td):
    with torch.no_grad():
        return net.module(td["observation"]), net.module(td["next", "observation"])


def signals(td):
    return td["next", "reward"], td["next", "done"], td["next", "terminated"]


# ------------------------------------------------------------------------------------- known answers
@pytest.mark.parametrize("vectorized", [True, False])
def test_gae_matches_functional(vectorized):
    net = critic()
    td = rollout()
    v, nv = values(net, td)
    adv, target = F_.generalized_advantage_estimate(0.9, 0.8, v, nv, *signals(td), time_dim=1)
    out = GAE(gamma=0.9, lmbda=0.8, value_network=net, vectorized=vectorized)(td)
    torch.testing.assert_close(out["advantage"], adv)
    torch.testing.assert_close(out["value_target"], target)
    torch.testing.assert_close(out["state_value"], v)
    torch.testing.assert_close(out["next", "state_value"], nv)


def test_td0_matches_functional():
    net = critic()
    td = rollout()
    v, nv = values(net, td)
    target = F_.td0_return_estimate(0.9, nv, td["next", "reward"], td["next", "terminated"])
    out = TD0Estimator(gamma=0.9, value_network=net)(td)
    torch.testing.assert_close(out["value_target"], target)
    torch.testing.assert_close(out["advantage"], target - v)



def test_td0_follows_gamma_changes():
    # the estimator keeps gamma on the host between calls; edits and replacements must take effect
    net = critic()
    td = rollout()
    _, nv = values(net, td)
    est = TD0Estimator(gamma=0.9, value_network=net)

    def expected(gamma):
        return F_.td0_return_estimate(gamma, nv, td["next", "reward"], td["next", "terminated"])

    torch.testing.assert_close(est(td.clone())["value_target"], expected(0.9))
    est.gamma.fill_(0.5)  # in place
    torch.testing.assert_close(est(td.clone())["value_target"], expected(0.5))
    est.gamma = torch.tensor(0.25)  # a new buffer
    torch.testing.assert_close(est(td.clone())["value_target"], expected(0.25))
    est.gamma = torch.full((1,), 0.75)  # not a host scalar any more: the tensor path
    torch.testing.assert_close(est(td.clone())["value_target"], expected(0.75))

def test_td1_matches_functional():
    net = critic()
    td = rollout()
    v, nv = values(net, td)
    target = F_.vec_td1_return_estimate(0.9, nv, *signals(td), time_dim=1)
    out = TD1Estimator(gamma=0.9, value_network=net)(td)
    torch.testing.assert_close(out["value_target"], target)
    torch.testing.assert_close(out["advantage"], target - v)


@pytest.mark.parametrize("vectorized", [True, False])
def test_td_lambda_matches_functional(vectorized):
    net = critic()
    td = rollout()
    v, nv = values(net, td)
    target = F_.td_lambda_return_estimate(0.9, 0.7, nv, *signals(td), time_dim=1)
    est = TDLambdaEstimator(gamma=0.9, lmbda=0.7, value_network=net, vectorized=vectorized)
    assert est.vectorized is vectorized
    out = est(td)
    torch.testing.assert_close(out["value_target"], target)
    torch.testing.assert_close(est.value_estimate(td.exclude("advantage", "value_target")), target)


def _actor():
    torch.manual_seed(1)
    return ProbabilisticTensorDictSequential(
        TensorDictModule(nn.Sequential(nn.Linear(N_OBS, 2), NormalParamExtractor()), ["observation"],
                         ["loc", "scale"]),
        ProbabilisticTensorDictModule(in_keys=["loc", "scale"], out_keys=["action"],
                                      distribution_class=torch.distributions.Normal),
    )


def test_vtrace_matches_functional():
    net, actor = critic(), _actor()
    td = rollout()
    td["action"] = torch.randn(3, 6, 1)
    td["action_log_prob"] = torch.randn(3, 6, 1) * 0.1
    v, nv = values(net, td)
    with torch.no_grad():
        log_pi = actor.get_dist(td.copy()).log_prob(td["action"])
    adv, target = F_.vtrace_advantage_estimate(
        0.9, log_pi, td["action_log_prob"], v, nv, *signals(td), rho_thresh=0.8, c_thresh=0.9, time_dim=1
    )
    out = VTrace(gamma=0.9, actor_network=actor, value_network=net, rho_thresh=0.8, c_thresh=0.9)(td)
    torch.testing.assert_close(out["advantage"], adv)
    torch.testing.assert_close(out["value_target"], target)
    assert ("action_log_prob" in VTrace(gamma=0.9, actor_network=actor, value_network=net).in_keys)


def test_vtrace_on_policy_is_td1():
    net, actor = critic(), _actor()
    td = rollout()
    td["action"] = torch.randn(3, 6, 1)
    with torch.no_grad():
        td["action_log_prob"] = actor.get_dist(td.copy()).log_prob(td["action"])
    vt = VTrace(gamma=0.9, actor_network=actor, value_network=net)(td.clone())
    td1 = TD1Estimator(gamma=0.9, value_network=net)(td.clone())
    torch.testing.assert_close(vt["value_target"], td1["value_target"])


def test_vtrace_requires_an_actor():
    with pytest.raises(ValueError, match="actor_network is required"):
        VTrace(gamma=0.9, actor_network=None, value_network=critic())


# -------------------------------------------------------------------------------------------- options
def test_average_gae_standardises_after_the_target():
    net = critic()
    td = rollout()
    plain = GAE(gamma=0.9, lmbda=0.8, value_network=net)(td.clone())
    avg = GAE(gamma=0.9, lmbda=0.8, value_network=net, average_gae=True)(td.clone())
    a = plain["advantage"]
    torch.testing.assert_close(avg["advantage"], (a - a.mean()) / a.std())
    torch.testing.assert_close(avg["value_target"], plain["value_target"])


def test_average_gae_within_groups():
    net = critic()
    td = rollout(B=4)
    td["task"] = torch.tensor([0, 1, 0, 1]).unsqueeze(-1).expand(4, 6)
    out = GAE(gamma=0.9, lmbda=0.8, value_network=net, average_gae=True, group_key="task")(td.clone())
    plain = GAE(gamma=0.9, lmbda=0.8, value_network=net)(td.clone())["advantage"]
    for task in (0, 1):
        rows = plain[task::2]
        torch.testing.assert_close(out["advantage"][task::2], (rows - rows.mean()) / rows.std())


def test_skip_existing_reuses_values():
    net = critic()
    td = rollout()
    td["state_value"] = torch.zeros(3, 6, 1)
    td["next", "state_value"] = torch.ones(3, 6, 1)
    reused = GAE(gamma=0.9, lmbda=0.8, value_network=net, skip_existing=True)(td.clone())
    adv, _ = F_.generalized_advantage_estimate(
        0.9, 0.8, torch.zeros(3, 6, 1), torch.ones(3, 6, 1), *signals(td), time_dim=1
    )
    torch.testing.assert_close(reused["advantage"], adv)
    recomputed = GAE(gamma=0.9, lmbda=0.8, value_network=net)(td.clone())
    assert not torch.equal(recomputed["state_value"], torch.zeros(3, 6, 1))


@pytest.mark.parametrize("key", [("next", "reward"), ("next", "done")])
def test_missing_signal_is_key_and_attribute_error(key):
    td = rollout()
    del td[key]
    est = GAE(gamma=0.9, lmbda=0.8, value_network=critic())
    # TorchRL raises AttributeError there: ours is both, and names the key
    with pytest.raises(AttributeError, match=rf"GAE: key \('next', '{key[1]}'\) not found"):
        est(td.clone())
    with pytest.raises(KeyError):
        est(td.clone())


def test_no_value_network_reads_values():
    td = rollout()
    td["state_value"] = torch.zeros(3, 6, 1)
    est = GAE(gamma=0.9, lmbda=0.8, value_network=None)
    # TorchRL raises ValueError here; ours is also a KeyError naming the key
    with pytest.raises(ValueError, match=r"entry \('next', 'state_value'\) is missing and there is no value network"):
        est(td.clone())
    with pytest.raises(KeyError):
        est(td.clone())
    assert est.in_keys == []  # as TorchRL: no value network, no declared inputs
    td["next", "state_value"] = torch.ones(3, 6, 1)
    assert est(td)["advantage"].shape == (3, 6, 1)


@pytest.mark.parametrize("differentiable", [True, False])
def test_differentiable(differentiable):
    net = critic()
    out = GAE(gamma=0.9, lmbda=0.8, value_network=net, differentiable=differentiable)(rollout())
    assert out["value_target"].requires_grad is differentiable
    if differentiable:
        out["advantage"].sum().backward()
        assert net.module.lin.weight.grad is not None


@pytest.mark.parametrize("cls,kw", [(GAE, {"lmbda": 0.8}), (TD0Estimator, {}), (TD1Estimator, {}),
                                    (TDLambdaEstimator, {"lmbda": 0.8})])
def test_shifted_runs_the_network_once_and_agrees(cls, kw):
    td = rollout(seed=3)
    assert ((td["next", "done"] & ~td["next", "terminated"])[:, :-1]).any()  # internal truncations
    ref = cls(gamma=0.9, value_network=critic(), **kw)(td.clone())
    net = critic()
    out = cls(gamma=0.9, value_network=net, shifted=True, **kw)(td.clone())
    for key in ("advantage", "value_target", "state_value", ("next", "state_value")):
        torch.testing.assert_close(out[key], ref[key], msg=str(key))
    ends = int((td["next", "done"] | td["next", "terminated"])[:, :-1].sum())
    assert net.module.calls == 1
    assert net.module.rows == 3 * 6 + 3 + ends


@pytest.mark.parametrize("opts,calls", [({"value_chunk_size": 2}, 4), ({"num_chunks": 3}, 6), ({"num_chunk": 3}, 6)])
def test_chunked_forwards(opts, calls):
    td = rollout()
    ref = GAE(gamma=0.9, lmbda=0.8, value_network=critic())(td.clone())
    net = critic()
    out = GAE(gamma=0.9, lmbda=0.8, value_network=net, **opts)(td.clone())
    torch.testing.assert_close(out["advantage"], ref["advantage"])
    assert net.module.calls == calls  # current and next, each in chunks along dim 0 (3 rows)


def test_chunk_argument_errors():
    with pytest.raises(ValueError, match="not both"):
        GAE(gamma=0.9, lmbda=0.9, value_network=None, value_chunk_size=2, num_chunks=2)
    with pytest.raises(ValueError, match=r"num_chunk \(2\) and num_chunks \(3\) differ"):
        GAE(gamma=0.9, lmbda=0.9, value_network=None, num_chunk=2, num_chunks=3)
    with pytest.raises(ValueError, match="shifted_budget must be a positive int"):
        GAE(gamma=0.9, lmbda=0.9, value_network=None, shifted_budget=0)


def test_time_dim_first_and_named():
    net = critic()
    td = rollout()
    ref = GAE(gamma=0.9, lmbda=0.8, value_network=net)(td.clone())
    tdt = td.clone().transpose(0, 1).contiguous()
    out = GAE(gamma=0.9, lmbda=0.8, value_network=net, time_dim=0)(tdt.clone())
    torch.testing.assert_close(out["advantage"].transpose(0, 1), ref["advantage"])
    tdt.names = ["time", None]
    out = GAE(gamma=0.9, lmbda=0.8, value_network=net)(tdt)
    torch.testing.assert_close(out["advantage"].transpose(0, 1), ref["advantage"])
    with pytest.raises(ValueError, match="time_dim=5 is out of range"):
        GAE(gamma=0.9, lmbda=0.8, value_network=net, time_dim=5)(td)


def test_params_and_target_params_vmapped_or_not():
    net = critic()
    td = rollout()
    params = TensorDict.from_module(net)
    target = params.detach().clone().apply(lambda x: x + 0.5)
    outs = []
    for deactivate in (False, True):
        est = GAE(gamma=0.9, lmbda=0.8, value_network=net, deactivate_vmap=deactivate)
        outs.append(est(td.clone(), params=params, target_params=target))
    with torch.no_grad(), target.to_module(net):
        nv = net.module(td["next", "observation"])
    v = values(net, td)[0]
    adv, _ = F_.generalized_advantage_estimate(0.9, 0.8, v, nv, *signals(td), time_dim=1)
    for out in outs:
        torch.testing.assert_close(out["advantage"], adv)


def test_average_rewards_written_back():
    td = rollout()
    reward = td["next", "reward"].clone()
    TD0Estimator(gamma=0.9, value_network=critic(), average_rewards=True)(td)
    torch.testing.assert_close(td["next", "reward"], (reward - reward.mean()) / reward.std())


def test_auto_reset_env_does_not_bootstrap_done_steps():
    td = rollout()
    td["next", "terminated"] = torch.zeros_like(td["next", "done"])
    out = GAE(gamma=0.9, lmbda=0.8, value_network=critic(), auto_reset_env=True)(td.clone())
    v, nv = values(critic(), td)
    adv, _ = F_.generalized_advantage_estimate(0.9, 0.8, v, nv, td["next", "reward"], td["next", "done"],
                                               td["next", "done"], time_dim=1)
    torch.testing.assert_close(out["advantage"], adv)


def test_set_keys_and_deprecated_key_arguments():
    td = rollout()
    td.rename_key_(("next", "reward"), ("next", "r"))
    est = GAE(gamma=0.9, lmbda=0.8, value_network=critic())
    est.set_keys(reward="r", advantage="adv")
    assert est.reward_key == "r" and est.advantage_key == "adv"
    assert "adv" in est(td).keys()
    with pytest.raises(KeyError, match="'rewards' is not a key of this estimator"):
        est.set_keys(rewards="r")
    with pytest.raises(ValueError, match="the key for 'reward' cannot be None"):
        est.set_keys(reward=None)
    with pytest.warns(DeprecationWarning, match="deprecated"):
        old = GAE(gamma=0.9, lmbda=0.8, value_network=critic(), advantage_key="adv2")
    assert old.advantage_key == "adv2"


def test_mismatched_shapes_name_every_tensor():
    td = rollout()
    td["next", "reward"] = torch.zeros(3, 6, 2)
    with pytest.raises(
        RuntimeError,
        match=r"shapes differ: 'state_value' \(3, 6, 1\), \('next', 'state_value'\) \(3, 6, 1\), "
        r"\('next', 'reward'\) \(3, 6, 2\), \('next', 'done'\) \(3, 6, 1\), \('next', 'terminated'\) \(3, 6, 1\)",
    ):
        GAE(gamma=0.9, lmbda=0.8, value_network=critic())(td)


def test_reward_without_trailing_dim_is_accepted():
    td = rollout()
    ref = GAE(gamma=0.9, lmbda=0.8, value_network=critic())(td.clone())["advantage"]
    td["next", "reward"] = td["next", "reward"].squeeze(-1)
    td["next", "done"] = td["next", "done"].squeeze(-1)
    del td["next", "terminated"]
    td2 = rollout()
    ref_no_term = GAE(gamma=0.9, lmbda=0.8, value_network=critic())(td2.exclude(("next", "terminated")))
    torch.testing.assert_close(GAE(gamma=0.9, lmbda=0.8, value_network=critic())(td)["advantage"],
                               ref_no_term["advantage"])
    assert ref.shape == (3, 6, 1)


def test_batch_needs_a_time_dimension():
    td = rollout()[0, 0]
    with pytest.raises(RuntimeError, match="at least one batch dimension"):
        GAE(gamma=0.9, lmbda=0.8, value_network=critic())(td)


# ------------------------------------------------------------------------------------------ multi-agent
def test_multi_agent_gae_broadcasts_shared_signals():
    td = rollout()
    n_agents = 2
    v = torch.randn(3, 6, n_agents, 1)
    nv = torch.randn(3, 6, n_agents, 1)
    td["state_value"], td["next", "state_value"] = v, nv
    out = MultiAgentGAE(gamma=0.9, lmbda=0.8, value_network=None)(td.clone())
    assert out["advantage"].shape == (3, 6, n_agents, 1)
    for agent in range(n_agents):
        adv, _ = F_.generalized_advantage_estimate(0.9, 0.8, v[:, :, agent], nv[:, :, agent], *signals(td), time_dim=1)
        torch.testing.assert_close(out["advantage"][:, :, agent], adv)
    per_agent = td.clone()
    per_agent["next", "reward"] = td["next", "reward"].unsqueeze(-2).expand(3, 6, n_agents, 1).clone()
    same = MultiAgentGAE(gamma=0.9, lmbda=0.8, value_network=None)(per_agent)
    torch.testing.assert_close(same["advantage"], out["advantage"])


# ------------------------------------------------------------------------------------- API surface
@pytest.mark.parametrize("alias,target", [(TD0Estimate, TD0Estimator), (TD1Estimate, TD1Estimator),
                                          (TDLambdaEstimate, TDLambdaEstimator)])
def test_deprecated_aliases(alias, target):
    kw = {"lmbda": 0.9} if target is TDLambdaEstimator else {}
    with pytest.warns(DeprecationWarning, match=f"{alias.__name__} is deprecated; use {target.__name__}"):
        est = alias(gamma=0.9, value_network=None, **kw)
    assert isinstance(est, target) and isinstance(est, ValueEstimatorBase)


def test_keys_and_properties():
    net = critic()
    est = GAE(gamma=0.9, lmbda=0.8, value_network=net)
    # TorchRL's order: the network's inputs, the next signals, the network's inputs at "next"
    assert est.in_keys == ["observation", ("next", "reward"), ("next", "done"), ("next", "terminated"),
                           ("next", "observation")]
    assert est.out_keys == ["advantage", "value_target"]
    assert est.value_key == "state_value" and est.sample_log_prob_key == "action_log_prob"
    assert not est.is_stateless and not est.is_functional
    assert est.vmap_randomness == "error"
    est.set_vmap_randomness("different")
    assert est.vmap_randomness == "different"
    with pytest.raises(ValueError, match="vmap randomness"):
        est.set_vmap_randomness("sometimes")
    assert torch.is_tensor(est.gamma) and est.gamma.item() == pytest.approx(0.9)


def test_dispatch_keyword_call():
    net = critic()
    td = rollout()
    est = TD0Estimator(gamma=0.9, value_network=net)
    adv, target = est(
        observation=td["observation"], next_observation=td["next", "observation"],
        next_reward=td["next", "reward"], next_done=td["next", "done"], next_terminated=td["next", "terminated"],
    )
    ref = est(td.clone())
    torch.testing.assert_close(adv, ref["advantage"])
    torch.testing.assert_close(target, ref["value_target"])


def test_seed_004_gae_with_value_operator():
    """``GAE(value_network=critic, average_gae=True, gamma=0.99, lmbda=0.95)`` as in the README seed."""
    from torchrl.modules.tensordict_module import ValueOperator

    critic_ = ValueOperator(nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1)), in_keys=["observation"])
    adv_fn = GAE(value_network=critic_, average_gae=True, gamma=0.99, lmbda=0.95)
    data = rollout(B=1, T=20)
    adv_fn(data)
    assert data["advantage"].shape == (1, 20, 1)
    assert abs(data["advantage"].mean().item()) < 1e-5
    assert not data["value_target"].requires_grad
