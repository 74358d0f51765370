"""Tests of torchrl.objectives.value.functional against hand-computed answers and plain reverse-time loops.

The reference loops below are written from the formulas (one explicit step at a time), independently of the
implementation's recurrence coefficients.
"""
from __future__ import annotations

import doctest
import inspect
import re

import pytest
import torch
from hypothesis import given, settings, strategies as st

from test.api._reference import load
from torchrl._utils import _deprecation
from torchrl.objectives.value import _functional_scan, functional as F

# ----------------------------------------------------------------------------------------- references


def _t0(x, time_dim):
    return x.movedim(time_dim, 0)


def _coef_t0(c, shape, time_dim):
    c = torch.as_tensor(c, dtype=torch.float64)
    return torch.broadcast_to(c, shape).movedim(time_dim, 0)


def ref_gae(gamma, lmbda, v, nv, r, done, term, time_dim):
    g, lm = _coef_t0(gamma, r.shape, time_dim), _coef_t0(lmbda, r.shape, time_dim)
    v, nv, r, done, term = (_t0(x, time_dim) for x in (v, nv, r, done, term))
    adv = torch.zeros_like(r)
    nxt = torch.zeros_like(r[0])
    for t in reversed(range(r.shape[0])):
        delta = r[t] + g[t] * nv[t] * (~term[t]) - v[t]
        nxt = delta + g[t] * lm[t] * (~done[t]) * nxt
        adv[t] = nxt
    return adv.movedim(0, time_dim), (adv + v).movedim(0, time_dim)


def _lambda_return_from(t0, gt, lt, nv, r, done, term):
    """G_{t0} with the discount ``gt(s)`` and lambda ``lt(s)`` at step s (the start's values: rolling_gamma=False)."""
    T = r.shape[0]
    G = None
    for s in reversed(range(t0, T)):
        g, lm = gt(s), lt(s)
        if G is None:
            bracket = nv[s]
        else:
            bracket = torch.where(done[s], nv[s], (1 - lm) * nv[s] + lm * G)
        G = r[s] + g * (~term[s]) * bracket
    return G


def ref_td_lambda(gamma, lmbda, nv, r, done, term, time_dim, rolling=True):
    g, lm = _coef_t0(gamma, r.shape, time_dim), _coef_t0(lmbda, r.shape, time_dim)
    nv, r, done, term = (_t0(x, time_dim) for x in (nv, r, done, term))
    T = r.shape[0]
    out = torch.zeros_like(r)
    if rolling:
        G = None
        for t in reversed(range(T)):
            bracket = nv[t] if G is None else torch.where(done[t], nv[t], (1 - lm[t]) * nv[t] + lm[t] * G)
            G = r[t] + g[t] * (~term[t]) * bracket
            out[t] = G
    else:
        for t in range(T):
            out[t] = _lambda_return_from(t, lambda s, t=t: g[t], lambda s, t=t: lm[t], nv, r, done, term)
    return out.movedim(0, time_dim)


def ref_vtrace(gamma, lp, lmu, v, nv, r, done, term, rho_t, c_t, time_dim):
    g = _coef_t0(gamma, r.shape, time_dim)
    lp, lmu, v, nv, r, done, term = (_t0(x, time_dim) for x in (lp, lmu, v, nv, r, done, term))
    rho = torch.exp(lp - lmu)
    rb, cb = rho.clamp(max=rho_t), rho.clamp(max=c_t)
    T = r.shape[0]
    vs, adv = torch.zeros_like(r), torch.zeros_like(r)
    for t in reversed(range(T)):
        delta = rb[t] * (r[t] + g[t] * (~term[t]) * nv[t] - v[t])
        if t == T - 1:
            vs[t] = v[t] + delta
            nxt = nv[t]
        else:
            vs[t] = v[t] + delta + torch.where(done[t], 0.0, g[t] * cb[t] * (vs[t + 1] - v[t + 1]))
            nxt = torch.where(done[t], nv[t], vs[t + 1])
        adv[t] = rb[t] * (r[t] + g[t] * (~term[t]) * nxt - v[t])
    return adv.movedim(0, time_dim), vs.movedim(0, time_dim)


def ref_reward2go(r, done, gamma, time_dim):
    g = _coef_t0(gamma, r.shape, time_dim)
    r, done = _t0(r, time_dim), _t0(done, time_dim)
    out, nxt = torch.zeros_like(r), torch.zeros_like(r[0])
    for t in reversed(range(r.shape[0])):
        nxt = r[t] + g[t] * (~done[t]) * nxt
        out[t] = nxt
    return out.movedim(0, time_dim)


# ------------------------------------------------------------------------------------------------ data

LAYOUTS = [((4, 7, 1), -2), ((7, 3, 2), 0), ((2, 3, 7), -1), ((7,), 0), ((2, 7, 2, 1), 1)]


def make_data(shape, seed=0, p_term=0.15, p_trunc=0.15, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    v, nv, r = (torch.randn(shape, generator=gen, dtype=dtype) for _ in range(3))
    term = torch.rand(shape, generator=gen) < p_term
    trunc = torch.rand(shape, generator=gen) < p_trunc
    lp, lmu = (0.5 * torch.randn(shape, generator=gen, dtype=dtype) for _ in range(2))
    return dict(v=v, nv=nv, r=r, term=term, done=term | trunc, lp=lp, lmu=lmu)


def make_coef(kind, value, shape, time_dim, seed):
    """A scalar, a 0-dim tensor, a per-step tensor (time only) or a full per-element tensor."""
    gen = torch.Generator().manual_seed(seed)
    if kind == "float":
        return value
    if kind == "0d":
        return torch.tensor(value, dtype=torch.float64)
    if kind == "per_step":
        sizes = [1] * len(shape)
        sizes[time_dim] = shape[time_dim]
        return value - 0.2 * torch.rand(sizes, generator=gen, dtype=torch.float64)
    return value - 0.2 * torch.rand(shape, generator=gen, dtype=torch.float64)


COEF_KINDS = ["float", "0d", "per_step", "full"]

# ------------------------------------------------------------------------------------- known answers
# T = 3 with gamma = lambda = 0.5: step 0 ordinary, step 1 truncated (done, not terminated: bootstraps from
# its own next value 10), step 2 a one-step episode that terminates (its next value 7 must be ignored).
V = torch.tensor([[1.0], [2.0], [3.0]])
NV = torch.tensor([[2.0], [10.0], [7.0]])
R = torch.ones(3, 1)
DONE = torch.tensor([[False], [True], [True]])
TERM = torch.tensor([[False], [False], [True]])


@pytest.mark.parametrize("fn", [F.generalized_advantage_estimate, F.vec_generalized_advantage_estimate])
def test_gae_known_answer(fn):
    # delta = [1 + .5*2 - 1, 1 + .5*10 - 2, 1 - 3] = [1, 4, -2]; A2 = -2; A1 = 4 (no carry over done);
    # A0 = 1 + .25 * 4 = 2.
    adv, target = fn(0.5, 0.5, V, NV, R, DONE, TERM)
    torch.testing.assert_close(adv, torch.tensor([[2.0], [4.0], [-2.0]]))
    torch.testing.assert_close(target, torch.tensor([[3.0], [6.0], [1.0]]))


@pytest.mark.parametrize("fn", [F.td_lambda_return_estimate, F.vec_td_lambda_return_estimate])
def test_td_lambda_known_answer(fn):
    # G2 = 1 (terminated); G1 = 1 + .5*10 = 6 (truncated); G0 = 1 + .5 * (.5*2 + .5*6) = 3.
    torch.testing.assert_close(fn(0.5, 0.5, NV, R, DONE, TERM), torch.tensor([[3.0], [6.0], [1.0]]))


@pytest.mark.parametrize("fn", [F.td_lambda_advantage_estimate, F.vec_td_lambda_advantage_estimate])
def test_td_lambda_advantage_known_answer(fn):
    torch.testing.assert_close(fn(0.5, 0.5, V, NV, R, DONE, TERM), torch.tensor([[2.0], [4.0], [-2.0]]))


@pytest.mark.parametrize("fn", [F.td1_return_estimate, F.vec_td1_return_estimate])
def test_td1_known_answer(fn):
    # G2 = 1; G1 = 6; G0 = 1 + .5 * 6 = 4.
    torch.testing.assert_close(fn(0.5, NV, R, DONE, TERM), torch.tensor([[4.0], [6.0], [1.0]]))


@pytest.mark.parametrize("fn", [F.td1_advantage_estimate, F.vec_td1_advantage_estimate])
def test_td1_advantage_known_answer(fn):
    torch.testing.assert_close(fn(0.5, V, NV, R, DONE, TERM), torch.tensor([[3.0], [4.0], [-2.0]]))


def test_td0_known_answer():
    torch.testing.assert_close(F.td0_return_estimate(0.5, NV, R, TERM), torch.tensor([[2.0], [6.0], [1.0]]))
    torch.testing.assert_close(
        F.td0_advantage_estimate(0.5, V, NV, R, DONE, TERM), torch.tensor([[1.0], [4.0], [-2.0]])
    )


@pytest.mark.parametrize(
    "fn", [F.td_lambda_return_estimate, F.vec_td_lambda_return_estimate]
)
def test_last_step_bootstraps(fn):
    # No flags: the last step of the batch bootstraps from its next value like a truncation.
    # G1 = .5 * 8 = 4; G0 = .5 * (.5 * 4 + .5 * 4) = 2.
    nv, r, done = torch.tensor([[4.0], [8.0]]), torch.zeros(2, 1), torch.zeros(2, 1, dtype=torch.bool)
    torch.testing.assert_close(fn(0.5, 0.5, nv, r, done), torch.tensor([[2.0], [4.0]]))


@pytest.mark.parametrize("fn", [F.generalized_advantage_estimate, F.vec_generalized_advantage_estimate])
def test_terminated_defaults_to_done(fn):
    # Without `terminated`, the truncated step 1 is treated as terminal: delta1 = 1 - 2 = -1.
    adv, _ = fn(0.5, 0.5, V, NV, R, DONE)
    torch.testing.assert_close(adv, torch.tensor([[0.75], [-1.0], [-2.0]]))


def test_terminated_without_done_still_cuts_the_trajectory():
    done = torch.zeros(3, 1, dtype=torch.bool)
    term = torch.tensor([[False], [True], [False]])
    for fn in (F.generalized_advantage_estimate, F.vec_generalized_advantage_estimate):
        adv, _ = fn(0.5, 0.5, V, NV, R, done, term)
        # delta = [1, -1, 1 + 3.5 - 3 = 1.5]; A1 = -1 (no carry from step 2); A0 = 1 - .25 = .75.
        torch.testing.assert_close(adv, torch.tensor([[0.75], [-1.0], [1.5]]))


def test_reward2go_documented_example():
    reward = torch.ones(1, 10)
    done = torch.zeros(1, 10, dtype=torch.bool)
    done[:, [3, 7]] = True
    out = F.reward2go(reward, done, 0.99, time_dim=-1)
    expected = torch.tensor([[3.9404, 2.9701, 1.99, 1.0, 3.9404, 2.9701, 1.99, 1.0, 1.99, 1.0]])
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=0)


def test_vtrace_on_policy_is_td1_and_gae1():
    d = make_data((3, 9, 1), seed=4)
    logp = torch.zeros_like(d["r"])
    adv, vs = F.vtrace_advantage_estimate(0.9, logp, logp, d["v"], d["nv"], d["r"], d["done"], d["term"])
    _, gae_target = F.vec_generalized_advantage_estimate(0.9, 1.0, d["v"], d["nv"], d["r"], d["done"], d["term"])
    torch.testing.assert_close(vs, gae_target)


def test_vtrace_known_answer():
    # T = 2, gamma = .5, rho = [2, .5] -> rho_bar = c_bar = [1, .5]; no flags.
    v, nv, r = torch.tensor([[1.0], [2.0]]), torch.tensor([[2.0], [6.0]]), torch.tensor([[1.0], [0.0]])
    lp = torch.log(torch.tensor([[2.0], [0.5]]))
    done = torch.zeros(2, 1, dtype=torch.bool)
    adv, vs = F.vtrace_advantage_estimate(0.5, lp, torch.zeros(2, 1), v, nv, r, done)
    # delta1 = .5 * (0 + 3 - 2) = .5 -> vs1 = 2 + .5 = 2.5
    # delta0 = 1 * (1 + .5 * 2 - 1) = 1 -> vs0 = 1 + 1 + gamma * c_bar0 * (vs1 - V1) = 2 + .5 * 1 * .5 = 2.25
    torch.testing.assert_close(vs, torch.tensor([[2.25], [2.5]]))
    # adv0 = 1 * (1 + .5 * vs1 - 1) = 1.25; adv1 = .5 * (0 + .5 * 6 - 2) = .5
    torch.testing.assert_close(adv, torch.tensor([[1.25], [0.5]]))


# -------------------------------------------------------------------------------- rolling_gamma docs
G4 = torch.tensor([[0.5], [0.8], [0.9], [0.7]])
V4 = torch.tensor([[1.0], [2.0], [3.0], [4.0]])
END4 = torch.tensor([[False], [False], [False], [True]])


@pytest.mark.parametrize("vec", [False, True])
@pytest.mark.parametrize("rolling", [True, False, None])
def test_rolling_gamma_documented_formula(vec, rolling):
    g1, g2, g3 = G4[0, 0].item(), G4[1, 0].item(), G4[2, 0].item()
    v1, v2, v3, v4 = V4.squeeze(-1).tolist()
    if rolling is False:
        expected = [v1 + g1 * v2 + g1**2 * v3 + g1**3 * v4, v2 + g2 * v3 + g2**2 * v4, v3 + g3 * v4, v4]
    else:
        expected = [v1 + g1 * v2 + g1 * g2 * v3 + g1 * g2 * g3 * v4, v2 + g2 * v3 + g2 * g3 * v4, v3 + g3 * v4, v4]
    expected = torch.tensor(expected).unsqueeze(-1)
    td1 = F.vec_td1_return_estimate if vec else F.td1_return_estimate
    tdl = F.vec_td_lambda_return_estimate if vec else F.td_lambda_return_estimate
    torch.testing.assert_close(td1(G4, torch.zeros(4, 1), V4, END4, rolling_gamma=rolling), expected)
    torch.testing.assert_close(tdl(G4, 1.0, torch.zeros(4, 1), V4, END4, rolling_gamma=rolling), expected)


def test_rolling_gamma_false_ties_lambda_to_the_start_step():
    # T=3 episode: G_2 = r_2 (terminated); with rolling_gamma=False the start step's gamma AND lambda are used
    # for the whole future: G_1 = -0.5 + 0.8 * (0.5 * -0.3 + 0.5 * 0.25) = -0.52 (start 0's coefficients),
    # G_0 = 1 + 0.8 * (0.5 * 0.1 + 0.5 * G_1) = 0.832 (TorchRL 0.14.1 gives the same).
    nv, r = torch.tensor([[0.1], [-0.3], [0.8]]), torch.tensor([[1.0], [-0.5], [0.25]])
    done = torch.tensor([[False], [False], [True]])
    gamma, lmbda = torch.tensor([[0.8], [0.9], [0.95]]), torch.tensor([[0.5], [0.7], [0.9]])
    for fn in (F.td_lambda_return_estimate, F.vec_td_lambda_return_estimate):
        out = fn(gamma, lmbda, nv, r, done, done, rolling_gamma=False)
        assert out[0, 0].item() == pytest.approx(0.832, abs=1e-6)
        assert out[1, 0].item() == pytest.approx(-0.5 + 0.9 * (0.3 * -0.3 + 0.7 * 0.25), abs=1e-6)
    # a scalar gamma with a per-step lambda: lambda is tied to the start step too
    out = F.td_lambda_return_estimate(0.8, lmbda, nv, r, done, done, rolling_gamma=False)
    assert out[0, 0].item() == pytest.approx(0.832, abs=1e-6)


@pytest.mark.parametrize("gamma", [0.9, torch.tensor(0.9)])
def test_rolling_gamma_false_needs_a_per_step_coefficient_in_the_loops(gamma):
    nv, r, done = torch.ones(3, 1), torch.ones(3, 1), torch.zeros(3, 1, dtype=torch.bool)
    with pytest.raises(RuntimeError, match="rolling_gamma=False is expected only with time-sensitive gamma"):
        F.td_lambda_return_estimate(gamma, 0.9, nv, r, done, rolling_gamma=False)
    with pytest.raises(RuntimeError, match=r"got gamma=.* and lmbda=1.0"):
        F.td1_return_estimate(gamma, nv, r, done, rolling_gamma=False)
    # the vectorised versions take it (a constant discount: the same as rolling_gamma=True)
    torch.testing.assert_close(F.vec_td1_return_estimate(gamma, nv, r, done, rolling_gamma=False),
                               F.vec_td1_return_estimate(gamma, nv, r, done))


# ------------------------------------------------------------------------------ against the loops


@pytest.mark.parametrize("shape,time_dim", LAYOUTS)
@pytest.mark.parametrize("kind", COEF_KINDS)
@pytest.mark.parametrize("fn", [F.generalized_advantage_estimate, F.vec_generalized_advantage_estimate])
def test_gae_matches_reference(fn, shape, time_dim, kind):
    d = make_data(shape, seed=1)
    gamma = make_coef(kind, 0.95, shape, time_dim, seed=2)
    lmbda = make_coef(kind, 0.9, shape, time_dim, seed=3)
    adv, target = fn(gamma, lmbda, d["v"], d["nv"], d["r"], d["done"], d["term"], time_dim=time_dim)
    ref_adv, ref_target = ref_gae(gamma, lmbda, d["v"], d["nv"], d["r"], d["done"], d["term"], time_dim)
    assert adv.shape == shape and target.shape == shape
    torch.testing.assert_close(adv, ref_adv)
    torch.testing.assert_close(target, ref_target)


TD_LAMBDA = [
    (F.td_lambda_return_estimate, False), (F.vec_td_lambda_return_estimate, False),
    (F.td_lambda_advantage_estimate, True), (F.vec_td_lambda_advantage_estimate, True),
]
TD1 = [
    (F.td1_return_estimate, False), (F.vec_td1_return_estimate, False),
    (F.td1_advantage_estimate, True), (F.vec_td1_advantage_estimate, True),
]


@pytest.mark.parametrize("shape,time_dim", LAYOUTS)
@pytest.mark.parametrize("kind", COEF_KINDS)
@pytest.mark.parametrize("rolling", [True, False])
@pytest.mark.parametrize("fn,advantage", TD_LAMBDA)
def test_td_lambda_matches_reference(fn, advantage, shape, time_dim, kind, rolling):
    d = make_data(shape, seed=5)
    gamma = make_coef(kind, 0.95, shape, time_dim, seed=6)
    lmbda = make_coef(kind, 0.9, shape, time_dim, seed=7)
    args = (d["v"],) if advantage else ()
    if not rolling and kind in ("float", "0d") and not fn.__name__.startswith("vec_"):
        with pytest.raises(RuntimeError, match="rolling_gamma=False is expected only with time-sensitive gamma"):
            fn(gamma, lmbda, *args, d["nv"], d["r"], d["done"], d["term"], rolling, time_dim=time_dim)
        return
    out = fn(gamma, lmbda, *args, d["nv"], d["r"], d["done"], d["term"], rolling, time_dim=time_dim)
    ref = ref_td_lambda(gamma, lmbda, d["nv"], d["r"], d["done"], d["term"], time_dim, rolling=rolling)
    torch.testing.assert_close(out, ref - d["v"] if advantage else ref)


@pytest.mark.parametrize("shape,time_dim", LAYOUTS)
@pytest.mark.parametrize("kind", COEF_KINDS)
@pytest.mark.parametrize("rolling", [True, False])
@pytest.mark.parametrize("fn,advantage", TD1)
def test_td1_matches_reference(fn, advantage, shape, time_dim, kind, rolling):
    d = make_data(shape, seed=8)
    gamma = make_coef(kind, 0.95, shape, time_dim, seed=9)
    args = (d["v"],) if advantage else ()
    if not rolling and kind in ("float", "0d") and not fn.__name__.startswith("vec_"):
        with pytest.raises(RuntimeError, match="rolling_gamma=False is expected only with time-sensitive gamma"):
            fn(gamma, *args, d["nv"], d["r"], d["done"], d["term"], rolling, time_dim=time_dim)
        return
    out = fn(gamma, *args, d["nv"], d["r"], d["done"], d["term"], rolling, time_dim=time_dim)
    ref = ref_td_lambda(gamma, 1.0, d["nv"], d["r"], d["done"], d["term"], time_dim, rolling=rolling)
    torch.testing.assert_close(out, ref - d["v"] if advantage else ref)


@pytest.mark.parametrize("shape,time_dim", LAYOUTS)
@pytest.mark.parametrize("kind", COEF_KINDS)
def test_td0_matches_formula(shape, time_dim, kind):
    d = make_data(shape, seed=10)
    gamma = make_coef(kind, 0.95, shape, time_dim, seed=11)
    expected = d["r"] + torch.as_tensor(gamma) * d["nv"] * (~d["term"])
    torch.testing.assert_close(F.td0_return_estimate(gamma, d["nv"], d["r"], d["term"]), expected)
    torch.testing.assert_close(
        F.td0_advantage_estimate(gamma, d["v"], d["nv"], d["r"], d["done"], d["term"]), expected - d["v"]
    )


@pytest.mark.parametrize("shape,time_dim", LAYOUTS)
@pytest.mark.parametrize("kind", COEF_KINDS)
@pytest.mark.parametrize("thresh", [(1.0, 1.0), (2.0, 0.8)])
def test_vtrace_matches_reference(shape, time_dim, kind, thresh):
    d = make_data(shape, seed=12)
    gamma = make_coef(kind, 0.95, shape, time_dim, seed=13)
    adv, vs = F.vtrace_advantage_estimate(
        gamma, d["lp"], d["lmu"], d["v"], d["nv"], d["r"], d["done"], d["term"], *thresh, time_dim=time_dim
    )
    ref_adv, ref_vs = ref_vtrace(
        gamma, d["lp"], d["lmu"], d["v"], d["nv"], d["r"], d["done"], d["term"], *thresh, time_dim
    )
    torch.testing.assert_close(vs, ref_vs)
    torch.testing.assert_close(adv, ref_adv)


@pytest.mark.parametrize("shape,time_dim", LAYOUTS)
@pytest.mark.parametrize("kind", COEF_KINDS)
def test_reward2go_matches_reference(shape, time_dim, kind):
    d = make_data(shape, seed=14)
    gamma = make_coef(kind, 0.95, shape, time_dim, seed=15)
    out = F.reward2go(d["r"], d["done"], gamma, time_dim=time_dim)
    torch.testing.assert_close(out, ref_reward2go(d["r"], d["done"], gamma, time_dim))


# ------------------------------------------------------------------- vec == loop, long horizons, grads

PAIRS = [
    (F.generalized_advantage_estimate, F.vec_generalized_advantage_estimate, "gae"),
    (F.td_lambda_advantage_estimate, F.vec_td_lambda_advantage_estimate, "lambda_adv"),
    (F.td_lambda_return_estimate, F.vec_td_lambda_return_estimate, "lambda_ret"),
    (F.td1_advantage_estimate, F.vec_td1_advantage_estimate, "td1_adv"),
    (F.td1_return_estimate, F.vec_td1_return_estimate, "td1_ret"),
]


def _call(fn, name, gamma, lmbda, d, **kw):
    if name == "gae":
        return fn(gamma, lmbda, d["v"], d["nv"], d["r"], d["done"], d["term"], **kw)[0]
    head = (gamma, lmbda) if name.startswith("lambda") else (gamma,)
    value = (d["v"],) if name.endswith("adv") else ()
    return fn(*head, *value, d["nv"], d["r"], d["done"], d["term"], **kw)


@pytest.mark.parametrize("loop,vec,name", PAIRS)
@pytest.mark.parametrize("gl", [(0.999, 0.999), (0.5, 0.5), (1.0, 1.0)])
def test_vec_equals_loop_long_horizon(loop, vec, name, gl):
    # [16 envs x 1000 steps], rare flags: long trajectories whose discount products underflow float32
    # (0.25 ** 1000), or never decay at all (gamma = lambda = 1). The float32 scan is compared with the
    # float64 loop, to a tolerance scaled to the size of the sums (float32 accumulation, as in a float32 loop).
    d = make_data((16, 1000, 1), seed=16, p_term=0.001, p_trunc=0.001, dtype=torch.float32)
    d64 = {k: (x.double() if x.is_floating_point() else x) for k, x in d.items()}
    out = _call(vec, name, *gl, d)
    ref = _call(loop, name, *gl, d64)
    assert out.dtype == torch.float32 and torch.isfinite(out).all()
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=2e-5 * ref.abs().max().item())


@pytest.mark.parametrize("loop,vec,name", PAIRS)
def test_vec_equals_loop_tensor_coefficients(loop, vec, name):
    shape = (3, 257, 2)
    d = make_data(shape, seed=17, p_term=0.02, p_trunc=0.02)
    gamma = make_coef("full", 1.0, shape, -2, seed=18)
    lmbda = make_coef("per_step", 0.97, shape, -2, seed=19)
    torch.testing.assert_close(_call(vec, name, gamma, lmbda, d), _call(loop, name, gamma, lmbda, d))


def test_fixed_gamma_blocks(monkeypatch):
    # Force one start step per block of the rolling_gamma=False matrix, and check against the loop.
    monkeypatch.setattr(_functional_scan, "_BLOCK_BUDGET", 1)
    shape = (2, 40, 1)
    d = make_data(shape, seed=20)
    gamma = make_coef("full", 0.99, shape, -2, seed=21)
    vec = F.vec_td_lambda_return_estimate(gamma, 0.9, d["nv"], d["r"], d["done"], d["term"], False)
    loop = F.td_lambda_return_estimate(gamma, 0.9, d["nv"], d["r"], d["done"], d["term"], False)
    torch.testing.assert_close(vec, loop)
    ref = ref_td_lambda(gamma, 0.9, d["nv"], d["r"], d["done"], d["term"], -2, rolling=False)
    torch.testing.assert_close(vec, ref)


@pytest.mark.parametrize("loop,vec,name", PAIRS)
def test_vec_and_loop_gradients_agree(loop, vec, name):
    shape = (2, 33, 1)
    d = make_data(shape, seed=22)
    grads = []
    for fn in (loop, vec):
        leaves = {k: d[k].clone().requires_grad_() for k in ("v", "nv", "r")}
        gamma = torch.full(shape, 0.9, dtype=torch.float64, requires_grad=True)
        out = _call(fn, name, gamma, 0.8, {**d, **leaves})
        (out * torch.linspace(-1, 1, out.numel(), dtype=out.dtype).view(shape)).sum().backward()
        grads.append([leaves[k].grad for k in ("v", "nv", "r")] + [gamma.grad])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)
    assert grads[0][2].abs().sum() > 0


@settings(max_examples=30, deadline=None)
@given(
    T=st.integers(1, 40),
    batch=st.integers(1, 3),
    gamma=st.floats(0.0, 1.0),
    lmbda=st.floats(0.0, 1.0),
    p=st.floats(0.0, 0.5),
    seed=st.integers(0, 2**16),
)
def test_property_vec_equals_reference(T, batch, gamma, lmbda, p, seed):
    d = make_data((batch, T, 1), seed=seed, p_term=p, p_trunc=p)
    adv, _ = F.vec_generalized_advantage_estimate(gamma, lmbda, d["v"], d["nv"], d["r"], d["done"], d["term"])
    ref_adv, _ = ref_gae(gamma, lmbda, d["v"], d["nv"], d["r"], d["done"], d["term"], -2)
    torch.testing.assert_close(adv, ref_adv)
    ret = F.vec_td_lambda_return_estimate(gamma, lmbda, d["nv"], d["r"], d["done"], d["term"])
    torch.testing.assert_close(ret, ref_td_lambda(gamma, lmbda, d["nv"], d["r"], d["done"], d["term"], -2))


def test_nonfinite_terminal_value_is_ignored():
    nv = NV.clone()
    nv[2] = float("nan")
    for fn in (F.generalized_advantage_estimate, F.vec_generalized_advantage_estimate):
        adv, _ = fn(0.5, 0.5, V, nv, R, DONE, TERM)
        torch.testing.assert_close(adv, torch.tensor([[2.0], [4.0], [-2.0]]))


def test_float32_outputs_and_integer_flags():
    d = make_data((2, 5, 1), seed=23, dtype=torch.float32)
    adv, target = F.vec_generalized_advantage_estimate(
        torch.tensor(0.9, dtype=torch.float64), 0.95, d["v"], d["nv"], d["r"], d["done"].long(), d["term"].long()
    )
    assert adv.dtype == torch.float32 and target.dtype == torch.float32
    ref, _ = ref_gae(0.9, 0.95, d["v"], d["nv"], d["r"], d["done"], d["term"], -2)
    torch.testing.assert_close(adv, ref.float())


# ---------------------------------------------------------------------------------------------- errors


def test_shape_error_names_every_tensor():
    msg = (
        "generalized_advantage_estimate: shapes differ: state_value (3, 1), next_state_value (3, 1), "
        "reward (4, 1), done (3, 1), terminated (3, 1)."
    )
    b = torch.zeros(3, 1, dtype=torch.bool)
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        F.generalized_advantage_estimate(0.9, 0.95, torch.zeros(3, 1), torch.zeros(3, 1), torch.zeros(4, 1), b, b)


ALL_CALLS = {
    "generalized_advantage_estimate": lambda v, r, b: F.generalized_advantage_estimate(0.9, 0.9, v, v, r, b, b),
    "vec_generalized_advantage_estimate": lambda v, r, b: F.vec_generalized_advantage_estimate(
        0.9, 0.9, v, v, r, b, b
    ),
    "td0_return_estimate": lambda v, r, b: F.td0_return_estimate(0.9, v, r, b),
    "td0_advantage_estimate": lambda v, r, b: F.td0_advantage_estimate(0.9, v, v, r, b, b),
    "td1_return_estimate": lambda v, r, b: F.td1_return_estimate(0.9, v, r, b, b),
    "vec_td1_return_estimate": lambda v, r, b: F.vec_td1_return_estimate(0.9, v, r, b, b),
    "td1_advantage_estimate": lambda v, r, b: F.td1_advantage_estimate(0.9, v, v, r, b, b),
    "vec_td1_advantage_estimate": lambda v, r, b: F.vec_td1_advantage_estimate(0.9, v, v, r, b, b),
    "td_lambda_return_estimate": lambda v, r, b: F.td_lambda_return_estimate(0.9, 0.9, v, r, b, b),
    "vec_td_lambda_return_estimate": lambda v, r, b: F.vec_td_lambda_return_estimate(0.9, 0.9, v, r, b, b),
    "td_lambda_advantage_estimate": lambda v, r, b: F.td_lambda_advantage_estimate(0.9, 0.9, v, v, r, b, b),
    "vec_td_lambda_advantage_estimate": lambda v, r, b: F.vec_td_lambda_advantage_estimate(
        0.9, 0.9, v, v, r, b, b
    ),
    "vtrace_advantage_estimate": lambda v, r, b: F.vtrace_advantage_estimate(0.9, v, v, v, v, r, b, b),
    "reward2go": lambda v, r, b: F.reward2go(r, b, 0.9),
}


@pytest.mark.parametrize("name", sorted(ALL_CALLS))
def test_every_function_reports_mismatched_shapes(name):
    v, r, b = torch.zeros(3, 1), torch.zeros(4, 1), torch.zeros(3, 1, dtype=torch.bool)
    with pytest.raises(RuntimeError, match=re.escape(f"{name}: shapes differ: ") + r".*reward \(4, 1\)"):
        ALL_CALLS[name](v, r, b)


def test_gamma_not_broadcastable():
    b = torch.zeros(3, 1, dtype=torch.bool)
    v = torch.zeros(3, 1)
    msg = "vec_td_lambda_return_estimate: gamma of shape (5,) cannot be broadcast to the data shape (3, 1)"
    with pytest.raises(RuntimeError, match=re.escape(msg)):
        F.vec_td_lambda_return_estimate(torch.ones(5), 0.9, v, v, b)
    with pytest.raises(RuntimeError, match=re.escape("vec_generalized_advantage_estimate: lmbda of shape (2, 3, 1)")):
        F.vec_generalized_advantage_estimate(0.9, torch.ones(2, 3, 1), v, v, v, b)


def test_time_dim_out_of_range():
    b = torch.zeros(5, dtype=torch.bool)
    v = torch.zeros(5)
    with pytest.raises(IndexError, match=re.escape("time_dim=-2 is out of range for tensors of shape (5,)")):
        F.vec_generalized_advantage_estimate(0.9, 0.9, v, v, v, b)
    with pytest.raises(IndexError, match="td1_return_estimate: time_dim=3"):
        F.td1_return_estimate(0.9, v, v, b, time_dim=3)


def test_non_tensor_input():
    b = torch.zeros(3, 1, dtype=torch.bool)
    with pytest.raises(TypeError, match="td1_return_estimate: reward must be a torch.Tensor, got list"):
        F.td1_return_estimate(0.9, torch.zeros(3, 1), [0.0, 0.0, 0.0], b)


def test_td0_terminated_required_and_done_deprecated(monkeypatch):
    nv, r = torch.ones(2, 1), torch.ones(2, 1)
    with pytest.raises(TypeError, match="td0_return_estimate: pass the boolean `terminated` tensor"):
        F.td0_return_estimate(0.5, nv, r)
    monkeypatch.setattr(_deprecation, "_WARNED", set())
    with pytest.warns(DeprecationWarning, match="the keyword 'done' is deprecated; pass 'terminated'"):
        out = F.td0_return_estimate(0.5, nv, r, done=torch.tensor([[False], [True]]))
    torch.testing.assert_close(out, torch.tensor([[1.5], [1.0]]))


# ------------------------------------------------------------------------------------- API and docs


def _params(sig):
    kinds = {inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos", inspect.Parameter.KEYWORD_ONLY: "kw"}
    return [(p.name, kinds[p.kind], p.default is not inspect.Parameter.empty) for p in sig.parameters.values()]


def test_signatures_match_torchrl():
    ref = load("torchrl.objectives.value.functional")
    assert len(ref) == 13
    for name, entry in ref.items():
        ours = _params(inspect.signature(getattr(F, name)))
        assert ours == [(p.name, p.kind, p.has_default) for p in entry.params], name
    assert _params(inspect.signature(F.reward2go)) == [
        ("reward", "pos", False), ("done", "pos", False), ("gamma", "pos", False), ("time_dim", "kw", True)
    ]
    sig = inspect.signature(F.vtrace_advantage_estimate)
    assert (sig.parameters["rho_thresh"].default, sig.parameters["c_thresh"].default) == (1.0, 1.0)
    assert all(inspect.signature(getattr(F, n)).parameters["time_dim"].default == -2 for n in ref if "td0" not in n)
    assert set(F.__all__) == set(ref) | {"reward2go"}


def test_docstring_examples_run():
    result = doctest.testmod(F, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 14 and result.failed == 0
