"""Value estimators: the functional value math and the estimator classes on fixed rewards, dones and values."""
import torch
from tensordict import TensorDict, unravel_key
from tensordict.nn import TensorDictModule

import parity
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules import NormalParamExtractor, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives.value import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator, VTrace
from torchrl.objectives.value import functional as F

T = 6


def _col(values, batch=()):
    return torch.tensor(values, dtype=torch.float32).reshape(*batch, -1, 1)


REWARD = _col([1.0, -0.5, 0.25, 2.0, 0.0, 1.5])
VALUE = _col([0.5, 0.1, -0.3, 0.8, 1.2, -0.7])
NEXT_VALUE = _col([0.1, -0.3, 0.8, 1.2, -0.7, 0.9])
DONE = torch.tensor([False, False, True, False, False, True]).reshape(T, 1)
TERMINATED = torch.tensor([False, False, True, False, False, False]).reshape(T, 1)


def _fill(module):
    """Deterministic weights that depend only on each parameter's shape."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.linspace(-0.6, 0.7, p.numel()).reshape(p.shape))
    return module


def _value_net(in_key="observation", out_key=None):
    kwargs = {} if out_key is None else {"out_keys": [out_key]}
    return ValueOperator(_fill(torch.nn.Linear(3, 1)), in_keys=[in_key], **kwargs)


def _obs(*shape):
    n = 1
    for s in shape:
        n *= s
    return torch.sin(torch.arange(n, dtype=torch.float32) * 0.7).reshape(shape)


def _rollout(batch=(), nested=False):
    """A trajectory batch [*batch, T] with observations, rewards and done flags."""
    bs = (*batch, T)
    done = DONE.expand(*bs, 1).clone()
    terminated = TERMINATED.expand(*bs, 1).clone()
    reward = REWARD.expand(*bs, 1).clone()
    if batch:
        reward = reward * torch.arange(1, batch[0] + 1, dtype=torch.float32).reshape(-1, *([1] * len(bs)))
    td = TensorDict(
        {
            "observation": _obs(*bs, 3),
            "next": {"observation": _obs(*bs, 3) + 0.5, "reward": reward, "done": done, "terminated": terminated},
        },
        batch_size=bs,
    )
    if nested:
        td = TensorDict(
            {
                ("agents", "observation"): td["observation"],
                ("next", "agents", "observation"): td["next", "observation"],
                ("next", "agents", "reward"): td["next", "reward"],
                ("next", "agents", "done"): td["next", "done"],
                ("next", "agents", "terminated"): td["next", "terminated"],
            },
            batch_size=bs,
        )
    return td


def _estimates(td):
    keys = [k for k in ("advantage", "value_target", "state_value") if k in td.keys()]
    return {k: td[k] for k in keys}


# ---------------------------------------------------------------- functional


def scenario_functional_gae():
    adv, target = F.generalized_advantage_estimate(0.9, 0.8, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED)
    vadv, vtarget = F.vec_generalized_advantage_estimate(0.9, 0.8, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED)
    return [adv, target, vadv, vtarget]


def scenario_functional_gae_without_terminated():
    return [F.generalized_advantage_estimate(0.95, 0.5, VALUE, NEXT_VALUE, REWARD, DONE),
            F.vec_generalized_advantage_estimate(0.95, 0.5, VALUE, NEXT_VALUE, REWARD, DONE)]


def scenario_functional_gae_batched_time_dim():
    # [batch, T, 1] with the default time_dim=-2, then [T, batch, 1] with time_dim=0
    v, nv, r = VALUE.expand(2, T, 1) * 1.0, NEXT_VALUE.expand(2, T, 1) * 1.0, REWARD.expand(2, T, 1) * 1.0
    d, t = DONE.expand(2, T, 1), TERMINATED.expand(2, T, 1)
    r = r * torch.tensor([1.0, -2.0]).reshape(2, 1, 1)
    out = list(F.generalized_advantage_estimate(0.9, 0.7, v, nv, r, d, t))
    out += list(F.vec_generalized_advantage_estimate(0.9, 0.7, v, nv, r, d, t))
    tr = lambda x: x.transpose(0, 1).contiguous()  # noqa: E731
    out += list(F.generalized_advantage_estimate(0.9, 0.7, tr(v), tr(nv), tr(r), tr(d), tr(t), time_dim=0))
    out += list(F.vec_generalized_advantage_estimate(0.9, 0.7, tr(v), tr(nv), tr(r), tr(d), tr(t), time_dim=0))
    return out


def scenario_functional_gae_tensor_gamma():
    gamma = torch.linspace(0.8, 0.99, T).reshape(T, 1)
    lmbda = torch.full((T, 1), 0.9)
    return list(F.vec_generalized_advantage_estimate(gamma, lmbda, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED))


def scenario_functional_gae_shape_mismatch():
    return parity.attempt(lambda: F.generalized_advantage_estimate(0.9, 0.8, VALUE[:-1], NEXT_VALUE, REWARD, DONE))


def scenario_functional_td0():
    return [
        F.td0_return_estimate(0.9, NEXT_VALUE, REWARD, TERMINATED),
        F.td0_return_estimate(0.9, NEXT_VALUE, REWARD, done=DONE),
        F.td0_advantage_estimate(0.9, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED),
        F.td0_advantage_estimate(0.9, VALUE, NEXT_VALUE, REWARD, DONE),
    ]


def scenario_functional_td1():
    out = [
        F.td1_return_estimate(0.9, NEXT_VALUE, REWARD, DONE, TERMINATED),
        F.td1_return_estimate(0.9, NEXT_VALUE, REWARD, DONE),
        F.td1_advantage_estimate(0.9, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED),
        F.vec_td1_return_estimate(0.9, NEXT_VALUE, REWARD, DONE, TERMINATED),
        F.vec_td1_advantage_estimate(0.9, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED),
    ]
    return out


def scenario_functional_td1_tensor_gamma_rolling():
    gamma = torch.linspace(0.8, 0.99, T).reshape(T, 1)
    return {str(rolling): F.td1_return_estimate(gamma, NEXT_VALUE, REWARD, DONE, TERMINATED, rolling_gamma=rolling)
            for rolling in (True, False)}


def scenario_functional_td_lambda():
    return [
        F.td_lambda_return_estimate(0.9, 0.7, NEXT_VALUE, REWARD, DONE, TERMINATED),
        F.td_lambda_return_estimate(0.9, 0.7, NEXT_VALUE, REWARD, DONE),
        F.td_lambda_advantage_estimate(0.9, 0.7, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED),
        F.vec_td_lambda_return_estimate(0.9, 0.7, NEXT_VALUE, REWARD, DONE, TERMINATED),
        F.vec_td_lambda_advantage_estimate(0.9, 0.7, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED),
    ]


def scenario_functional_td_lambda_tensor_params():
    # loops: rolling_gamma=False ties both gamma and lambda to the step a return starts from
    gamma = torch.linspace(0.8, 0.99, T).reshape(T, 1)
    lmbda = torch.linspace(0.5, 0.9, T).reshape(T, 1)
    out = {}
    for rolling in (True, False):
        out[str(rolling)] = [
            F.td_lambda_return_estimate(gamma, lmbda, NEXT_VALUE, REWARD, DONE, TERMINATED, rolling_gamma=rolling),
            F.td_lambda_return_estimate(gamma, 0.7, NEXT_VALUE, REWARD, DONE, TERMINATED, rolling_gamma=rolling),
            F.td_lambda_return_estimate(0.9, lmbda, NEXT_VALUE, REWARD, DONE, TERMINATED, rolling_gamma=rolling),
            F.td_lambda_advantage_estimate(gamma, lmbda, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED,
                                           rolling_gamma=rolling),
        ]
    return out


def scenario_functional_vec_td_lambda_tensor_gamma():
    gamma = torch.linspace(0.8, 0.99, T).reshape(T, 1)
    return [F.vec_td_lambda_return_estimate(gamma, 0.7, NEXT_VALUE, REWARD, DONE, TERMINATED),
            F.vec_td_lambda_advantage_estimate(gamma, 0.7, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED),
            F.vec_td1_return_estimate(gamma, NEXT_VALUE, REWARD, DONE, TERMINATED)]


def scenario_functional_vec_td_lambda_tensor_lmbda():
    gamma = torch.linspace(0.8, 0.99, T).reshape(T, 1)
    lmbda = torch.linspace(0.5, 0.9, T).reshape(T, 1)
    return [parity.attempt(lambda: F.vec_td_lambda_return_estimate(gamma, lmbda, NEXT_VALUE, REWARD, DONE,
                                                                   TERMINATED)),
            parity.attempt(lambda: F.vec_td_lambda_return_estimate(0.9, lmbda, NEXT_VALUE, REWARD, DONE,
                                                                   TERMINATED))]


def scenario_functional_vec_rolling_false_tensor_gamma():
    gamma = torch.linspace(0.8, 0.99, T).reshape(T, 1)
    return [parity.attempt(lambda: F.vec_td_lambda_return_estimate(gamma, 0.7, NEXT_VALUE, REWARD, DONE,
                                                                   TERMINATED, rolling_gamma=False)),
            parity.attempt(lambda: F.vec_td1_return_estimate(gamma, NEXT_VALUE, REWARD, DONE, TERMINATED,
                                                             rolling_gamma=False))]


def scenario_functional_rolling_false_scalar_gamma():
    # the loops refuse rolling_gamma=False without per-step coefficients; the vectorised versions accept it
    g0 = torch.tensor(0.9)
    return [
        parity.attempt(lambda: F.td_lambda_return_estimate(0.9, 0.7, NEXT_VALUE, REWARD, DONE, TERMINATED,
                                                           rolling_gamma=False)),
        parity.attempt(lambda: F.td1_return_estimate(g0, NEXT_VALUE, REWARD, DONE, TERMINATED, rolling_gamma=False)),
        F.vec_td_lambda_return_estimate(0.9, 0.7, NEXT_VALUE, REWARD, DONE, TERMINATED, rolling_gamma=False),
        F.vec_td1_return_estimate(g0, NEXT_VALUE, REWARD, DONE, TERMINATED, rolling_gamma=False),
    ]


def scenario_functional_td_lambda_batched():
    v = NEXT_VALUE.expand(3, T, 1) * torch.tensor([1.0, 0.5, -1.0]).reshape(3, 1, 1)
    r, d, t = REWARD.expand(3, T, 1), DONE.expand(3, T, 1), TERMINATED.expand(3, T, 1)
    return [F.td_lambda_return_estimate(0.99, 0.95, v, r, d, t), F.vec_td_lambda_return_estimate(0.99, 0.95, v, r, d, t),
            F.td1_return_estimate(0.99, v, r, d, t), F.vec_td1_return_estimate(0.99, v, r, d, t)]


def scenario_functional_vtrace():
    log_pi = torch.linspace(-1.0, -0.2, T).reshape(T, 1)
    log_mu = torch.linspace(-0.5, -0.9, T).reshape(T, 1)
    out = list(F.vtrace_advantage_estimate(0.9, log_pi, log_mu, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED))
    out += list(F.vtrace_advantage_estimate(0.9, log_pi, log_mu, VALUE, NEXT_VALUE, REWARD, DONE, TERMINATED,
                                            rho_thresh=0.8, c_thresh=0.5))
    return out


def scenario_functional_vtrace_batched():
    log_pi = torch.linspace(-1.0, -0.2, 2 * T).reshape(2, T, 1)
    log_mu = torch.linspace(-0.5, -0.9, 2 * T).reshape(2, T, 1)
    e = lambda x: x.expand(2, T, 1)  # noqa: E731
    return list(F.vtrace_advantage_estimate(0.95, log_pi, log_mu, e(VALUE), e(NEXT_VALUE), e(REWARD), e(DONE),
                                            e(TERMINATED)))


# ---------------------------------------------------------------- estimator classes


def scenario_gae_basic():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())
    td = gae(_rollout())
    return [td, gae.in_keys, gae.out_keys]


def scenario_gae_batched():
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=_value_net())
    return _estimates(gae(_rollout(batch=(2,))))


def scenario_gae_average():
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=_value_net(), average_gae=True)
    return _estimates(gae(_rollout(batch=(2,))))


def scenario_gae_shifted():
    out = {}
    for shifted in (False, True):
        gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(), shifted=shifted)
        out[str(shifted)] = _estimates(gae(_rollout(batch=(2,))))
    return out


def scenario_gae_deactivate_vmap():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(), deactivate_vmap=True)
    return _estimates(gae(_rollout(batch=(2,))))


def scenario_gae_not_vectorized():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(), vectorized=False)
    return [gae.vectorized, _estimates(gae(_rollout(batch=(2,))))]


def scenario_gae_time_dim():
    td = _rollout(batch=(2,)).transpose(0, 1)
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(), time_dim=0)
    out = _estimates(gae(td.clone()))
    gae2 = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())
    return [out, _estimates(gae2(td.clone(), time_dim=0))]


def scenario_gae_without_value_network():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=None)
    td = _rollout()
    td["state_value"] = VALUE.clone()
    td["next", "state_value"] = NEXT_VALUE.clone()
    return [_estimates(gae(td)), gae.in_keys]


def scenario_gae_without_value_network_missing_values():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=None)
    return parity.attempt(lambda: gae(_rollout()))


def scenario_gae_nested_keys():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(("agents", "observation"), ("agents", "state_value")))
    gae.set_keys(reward=("agents", "reward"), done=("agents", "done"), terminated=("agents", "terminated"),
                 value=("agents", "state_value"), advantage=("agents", "advantage"),
                 value_target=("agents", "value_target"))
    td = gae(_rollout(nested=True))
    # TorchRL lists ("next", ("agents", "done")) where we list ("next", "agents", "done"): the same key
    return [td["agents", "advantage"], td["agents", "value_target"], [unravel_key(k) for k in gae.in_keys],
            gae.out_keys]


def scenario_gae_set_keys_unknown():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())
    return parity.attempt(lambda: gae.set_keys(foo="bar"))


def scenario_gae_tensor_keys():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())
    tk = gae.tensor_keys
    names = ["advantage", "value_target", "value", "reward", "done", "terminated"]
    return {n: getattr(tk, n) for n in names}


def scenario_gae_key_properties():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())
    return [gae.advantage_key, gae.value_target_key, gae.value_key, gae.reward_key, gae.done_key,
            gae.terminated_key]


def scenario_gae_skip_existing():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(), skip_existing=True)
    td = _rollout()
    td["state_value"] = torch.full((T, 1), 3.0)
    td["next", "state_value"] = torch.full((T, 1), 2.0)
    return _estimates(gae(td))


def scenario_gae_skip_existing_current_value_only():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(), skip_existing=True)
    td = _rollout()
    td["state_value"] = torch.full((T, 1), 3.0)
    return parity.attempt(lambda: _estimates(gae(td)))


def scenario_estimators_missing_signals():
    out = {}
    for name, make in (("gae", lambda: GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())),
                       ("td1", lambda: TD1Estimator(gamma=0.9, value_network=_value_net())),
                       ("tdl", lambda: TDLambdaEstimator(gamma=0.9, lmbda=0.8, value_network=_value_net()))):
        for key in (("next", "reward"), ("next", "done")):
            td = _rollout()
            del td[key]
            out[f"{name}-{key[1]}"] = parity.attempt(lambda e=make(), t=td: e(t))
    td = _rollout()
    del td["next", "terminated"]  # terminated defaults to done
    out["gae-terminated"] = _estimates(GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())(td))
    return out


def scenario_gae_missing_observation():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())
    td = _rollout()
    del td["next", "observation"]
    return parity.attempt(lambda: gae(td))


def scenario_td0_without_value_network_missing_values():
    est = TD0Estimator(gamma=0.9, value_network=None)
    td = _rollout()
    td["next", "state_value"] = NEXT_VALUE.clone()
    return [parity.attempt(lambda: est(td)), est.in_keys]


def scenario_estimators_without_batch_dims():
    td = _rollout()[0]
    return [parity.attempt(lambda: GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())(td.clone())),
            parity.attempt(lambda: TD0Estimator(gamma=0.9, value_network=_value_net())(td.clone()))]


def scenario_estimators_set_keys_none():
    return [parity.attempt(lambda: GAE(gamma=0.9, lmbda=0.8, value_network=_value_net()).set_keys(value=None)),
            parity.attempt(lambda: TD0Estimator(gamma=0.9, value_network=_value_net()).set_keys(foo="x"))]


def scenario_gae_tensor_gamma():
    gae = GAE(gamma=torch.tensor(0.9), lmbda=torch.tensor(0.8), value_network=_value_net())
    return _estimates(gae(_rollout()))


def scenario_gae_differentiable():
    out = {}
    for diff in (False, True):
        gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net(), differentiable=diff)
        td = gae(_rollout())
        out[str(diff)] = [td["advantage"].requires_grad, td["value_target"].requires_grad,
                          td["state_value"].requires_grad]
    return out


def scenario_gae_value_estimate():
    gae = GAE(gamma=0.9, lmbda=0.8, value_network=_value_net())
    td = _rollout()
    td["state_value"] = VALUE.clone()
    td["next", "state_value"] = NEXT_VALUE.clone()
    return gae.value_estimate(td)


def scenario_td0_basic():
    est = TD0Estimator(gamma=0.9, value_network=_value_net())
    td = est(_rollout(batch=(2,)))
    return [_estimates(td), est.in_keys, est.out_keys]


def scenario_td0_shifted_average():
    out = {}
    for shifted in (False, True):
        for avg in (False, True):
            est = TD0Estimator(gamma=0.9, value_network=_value_net(), shifted=shifted, average_rewards=avg)
            out[f"{shifted}-{avg}"] = _estimates(est(_rollout(batch=(2,))))
    return out


def scenario_td1_basic():
    est = TD1Estimator(gamma=0.9, value_network=_value_net())
    td = est(_rollout(batch=(2,)))
    return [_estimates(td), est.in_keys, est.out_keys]


def scenario_td1_options():
    out = {}
    for kwargs in ({"shifted": True}, {"average_rewards": True}, {"deactivate_vmap": True}):
        est = TD1Estimator(gamma=0.95, value_network=_value_net(), **kwargs)
        out[next(iter(kwargs))] = _estimates(est(_rollout(batch=(2,))))
    return out


def scenario_td_lambda_basic():
    est = TDLambdaEstimator(gamma=0.9, lmbda=0.7, value_network=_value_net())
    td = est(_rollout(batch=(2,)))
    return [_estimates(td), est.in_keys, est.out_keys, est.vectorized]


def scenario_td_lambda_options():
    out = {}
    for kwargs in ({"shifted": True}, {"average_rewards": True}, {"vectorized": False}, {"deactivate_vmap": True}):
        est = TDLambdaEstimator(gamma=0.95, lmbda=0.9, value_network=_value_net(), **kwargs)
        out[next(iter(kwargs))] = _estimates(est(_rollout(batch=(2,))))
    return out


def scenario_td_lambda_nested_keys():
    est = TDLambdaEstimator(gamma=0.9, lmbda=0.7,
                            value_network=_value_net(("agents", "observation"), ("agents", "state_value")))
    est.set_keys(reward=("agents", "reward"), done=("agents", "done"), terminated=("agents", "terminated"),
                 value=("agents", "state_value"))
    td = est(_rollout(nested=True))
    return [td["advantage"], td["value_target"]]


def _actor():
    net = torch.nn.Sequential(_fill(torch.nn.Linear(3, 2)), NormalParamExtractor())
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(module, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                              return_log_prob=True)


def _vtrace_batch(actor, taken=False):
    td = _rollout(batch=(2,))
    if taken:  # actions that are not the actor's deterministic ones
        td["action"] = torch.tanh(_obs(2, T, 1))
    else:
        with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
            td["action"] = actor(td.clone())["action"]
    td["action_log_prob"] = torch.linspace(-1.0, 0.0, 2 * T).reshape(2, T, 1)
    return td


def scenario_vtrace_basic():
    actor = _actor()
    est = VTrace(gamma=0.9, value_network=_value_net(), actor_network=actor)
    out = est(_vtrace_batch(actor))
    return [_estimates(out), est.out_keys]


def scenario_vtrace_thresholds():
    actor = _actor()
    out = {}
    for rho, c in ((0.5, 0.7), (2.0, 0.3)):
        est = VTrace(gamma=0.9, value_network=_value_net(), actor_network=actor, rho_thresh=rho, c_thresh=c)
        out[f"{rho}-{c}"] = _estimates(est(_vtrace_batch(actor)))
    return out


def scenario_vtrace_taken_actions():
    # the importance ratio of the actions taken (not of the actor's own deterministic action)
    actor = _actor()
    est = VTrace(gamma=0.9, value_network=_value_net(), actor_network=actor)
    return [_estimates(est(_vtrace_batch(actor, taken=True))), [unravel_key(k) for k in est.in_keys]]


def scenario_vtrace_missing_log_prob():
    actor = _actor()
    est = VTrace(gamma=0.9, value_network=_value_net(), actor_network=actor)
    td = _vtrace_batch(actor)
    del td["action_log_prob"]
    return parity.attempt(lambda: est(td))


def scenario_estimator_requires_value_network_kwarg():
    return [parity.attempt(lambda: TD0Estimator(gamma=0.9)), parity.attempt(lambda: GAE(gamma=0.9, lmbda=0.9))]
