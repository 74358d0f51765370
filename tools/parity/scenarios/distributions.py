"""Distributions of torchrl.modules: log-probabilities, modes, means, entropies, shapes and errors on fixed
parameters; draws are compared by structure (and by the properties they must have)."""
import torch

import parity
from torchrl.modules import (
    Delta,
    IndependentNormal,
    MaskedCategorical,
    MaskedOneHotCategorical,
    NormalParamExtractor,
    OneHotCategorical,
    OneHotOrdinal,
    Ordinal,
    ReparamGradientStrategy,
    TanhDelta,
    TanhNormal,
    TruncatedNormal,
)
from torchrl.modules.distributions import has_analytic_entropy, has_analytic_kl

LOC = torch.tensor([[-0.5, 0.0, 0.3], [1.2, -2.0, 0.05]])
SCALE = torch.tensor([[0.5, 1.0, 2.0], [0.1, 0.3, 0.8]])
LOGITS = torch.tensor([[0.1, -1.0, 2.0, 0.5], [0.0, 0.3, -0.2, 1.5]])
MASK = torch.tensor([[True, False, True, True], [False, True, True, False]])


def _stats(dist, x):
    return {"log_prob": parity.attempt(lambda: dist.log_prob(x)), "batch_shape": dist.batch_shape,
            "event_shape": dist.event_shape}


# ---------------------------------------------------------------------------------------------- TanhNormal
def scenario_tanh_normal_values():
    out = {}
    x = torch.tensor([[0.1, -0.5, 0.9], [0.99, -0.2, 0.0]])
    for name, kw in (("default", {}), ("bounds", dict(low=-2.0, high=3.0)), ("upscale", dict(upscale=2.0, tanh_loc=True)),
                     ("tensor_bounds", dict(low=torch.tensor([-1.0, -2.0, 0.0]), high=torch.tensor([1.0, 1.0, 2.0]))),
                     ("event_dims", dict(event_dims=2))):
        d = TanhNormal(LOC, SCALE, **kw)
        xx = x if name != "bounds" else x * 2.0 + 0.5
        if name == "tensor_bounds":
            xx = torch.tensor([[0.1, -0.5, 0.9], [0.5, 0.5, 1.5]])
        out[name] = [_stats(d, xx), d.deterministic_sample, parity.attempt(lambda: d.mode),
                     parity.attempt(lambda: d.mean), parity.structure(d.rsample()), parity.structure(d.sample((5,)))]
    return out


def scenario_tanh_normal_sample_in_bounds():
    d = TanhNormal(LOC, SCALE, low=-0.5, high=0.25)
    s = d.sample((200,))
    return [bool((s >= -0.5).all() and (s <= 0.25).all()), d.has_rsample, list(s.shape),
            parity.structure(d.log_prob(s))]


def scenario_tanh_normal_entropy_and_edges():
    d = TanhNormal(LOC, SCALE)
    edge = torch.tensor([[1.0, -1.0, 0.0], [0.999999, -0.999999, 0.5]])
    return [parity.attempt(lambda: d.entropy()), d.log_prob(edge), has_analytic_entropy(d),
            parity.attempt(lambda: TanhNormal(LOC, SCALE, low=1.0, high=-1.0))]


# --------------------------------------------------------------------------------------------- TruncatedNormal
def scenario_truncated_normal_values():
    x = torch.tensor([[0.1, -0.5, 0.9], [0.99, -0.2, 0.0]])
    out = {}
    for name, kw in (("default", {}), ("bounds", dict(low=-2.0, high=3.0)), ("tanh_loc", dict(tanh_loc=True, upscale=2.0))):
        d = TruncatedNormal(LOC, SCALE, **kw)
        out[name] = [_stats(d, x), d.mode, d.mean, d.deterministic_sample, parity.attempt(lambda: d.entropy()),
                     parity.structure(d.rsample()), d.log_prob(torch.tensor([[5.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))]
    return out


def scenario_truncated_normal_sample_in_bounds():
    d = TruncatedNormal(LOC, SCALE, low=-0.5, high=0.25)
    s = d.sample((200,))
    return [bool((s >= -0.5).all() and (s <= 0.25).all()), d.has_rsample]


# --------------------------------------------------------------------------------------------- IndependentNormal
def scenario_independent_normal():
    out = {}
    for name, kw in (("default", {}), ("no_tanh_loc", dict(tanh_loc=False, upscale=3.0)),
                     ("event_dim", dict(event_dim=2))):
        d = IndependentNormal(LOC, SCALE, **kw)
        out[name] = [_stats(d, LOC * 0.5), d.mean, d.mode, d.entropy(), d.deterministic_sample,
                     parity.structure(d.rsample())]
    return out


def scenario_independent_normal_tanh_loc():
    d = IndependentNormal(LOC * 3, SCALE, tanh_loc=True, upscale=3.0)
    return [d.mean, d.log_prob(LOC)]


# ---------------------------------------------------------------------------------------------- Delta
def scenario_delta():
    d = Delta(LOC)
    return [d.log_prob(LOC), d.log_prob(LOC + 1e-3), d.log_prob(LOC + 1e-8), d.sample(), d.rsample((2,)), d.mode,
            d.mean, d.deterministic_sample, d.batch_shape, d.event_shape, parity.attempt(lambda: d.entropy()),
            Delta(LOC, event_shape=(3,)).batch_shape, Delta(LOC, atol=1e-2).log_prob(LOC + 5e-3)]


def scenario_tanh_delta():
    out = {}
    for name, kw in (("default", {}), ("bounds", dict(low=-2.0, high=3.0)),
                     ("tensor", dict(low=torch.tensor([-1.0, -2.0, 0.0]), high=torch.tensor([1.0, 1.0, 2.0])))):
        d = TanhDelta(LOC, **kw)
        mode = d.mode
        out[name] = [mode, d.deterministic_sample, d.sample(), d.rsample(), d.log_prob(mode), d.batch_shape,
                     d.event_shape, parity.attempt(lambda: d.entropy())]
    out["bad"] = parity.attempt(lambda: TanhDelta(LOC, low=1.0, high=0.0))
    return out


def scenario_tanh_delta_mean():
    return parity.attempt(lambda: TanhDelta(LOC, low=-2.0, high=3.0).mean)


# ------------------------------------------------------------------------------------- NormalParamExtractor
def scenario_normal_param_extractor():
    x = torch.tensor([[-3.0, 0.0, 2.0, -1.0, 0.5, 4.0]])
    out = {}
    for mapping in ("biased_softplus_1.0", "biased_softplus_0.5", "exp", "softplus", "relu", "none", "expln",
                    "biased_softplus_1.0_1e-2"):
        out[mapping] = parity.attempt(lambda m=mapping: NormalParamExtractor(scale_mapping=m)(x))
    out["lb"] = NormalParamExtractor(scale_lb=0.5)(x)
    out["odd"] = parity.attempt(lambda: NormalParamExtractor()(torch.zeros(1, 5)))
    out["bad"] = parity.attempt(lambda: NormalParamExtractor(scale_mapping="cube")(x))
    return out


# ----------------------------------------------------------------------------------------- categoricals
def scenario_one_hot_categorical():
    d = OneHotCategorical(logits=LOGITS)
    x = torch.nn.functional.one_hot(torch.tensor([2, 0]), 4)
    return [d.log_prob(x), d.mode, d.deterministic_sample, d.entropy(), d.probs, parity.structure(d.sample()),
            parity.structure(d.rsample()), d.grad_method, OneHotCategorical(probs=LOGITS.softmax(-1)).logits,
            parity.structure(d.sample((3,))), d.batch_shape, d.event_shape]


def scenario_one_hot_categorical_rsample_gradients():
    out = {}
    for method in (ReparamGradientStrategy.PassThrough, ReparamGradientStrategy.RelaxedOneHot):
        logits = LOGITS.clone().requires_grad_()
        d = OneHotCategorical(logits=logits, grad_method=method)
        s = d.rsample()
        out[method.name] = [s.requires_grad, parity.structure(s), bool(((s.detach().sum(-1) - 1).abs() < 1e-5).all())]
    return out


def scenario_masked_categorical():
    d = MaskedCategorical(logits=LOGITS, mask=MASK)
    return [d.log_prob(torch.tensor([2, 1])), d.log_prob(torch.tensor([1, 0])), d.probs, d.mode,
            d.deterministic_sample, parity.attempt(lambda: d.entropy()), d.logits, d.batch_shape,
            bool(MASK.gather(-1, d.sample((50,)).T).all())]


def scenario_masked_categorical_indices_and_padding():
    d = MaskedCategorical(logits=LOGITS, indices=torch.tensor([[0, 2], [1, 3]]))
    padded = MaskedCategorical(logits=LOGITS, indices=torch.tensor([[0, 2, -1], [1, 3, 0]]), padding_value=-1)
    out = {"log_prob": d.log_prob(torch.tensor([2, 3])), "padded": padded.log_prob(torch.tensor([2, 3]))}
    for pv in (-100, 0, 3):  # -100: cross-entropy's ignored target; 0 and 3: valid actions
        p = MaskedCategorical(logits=LOGITS, mask=MASK, padding_value=pv)
        out[str(pv)] = [p.log_prob(torch.tensor([pv, 1])), p.padding_value]
    out["errors"] = [parity.attempt(lambda: MaskedCategorical(logits=LOGITS)),
                     parity.attempt(lambda: MaskedCategorical(logits=LOGITS, mask=MASK, indices=torch.tensor([[0], [1]]))),
                     MaskedCategorical(probs=LOGITS.softmax(-1), mask=MASK).probs]
    return out


def scenario_masked_categorical_padding_outside_actions():
    # an action equal to an out-of-range padding value
    p = MaskedCategorical(logits=LOGITS, mask=MASK, padding_value=-1)
    return parity.attempt(lambda: p.log_prob(torch.tensor([-1, 1])))


def scenario_masked_categorical_probs_with_indices():
    return MaskedCategorical(logits=LOGITS, indices=torch.tensor([[0, 2], [1, 3]])).probs


def scenario_masked_one_hot_categorical():
    d = MaskedOneHotCategorical(logits=LOGITS, mask=MASK)
    x = torch.nn.functional.one_hot(torch.tensor([3, 2]), 4)
    s = d.sample((50,))
    return [d.log_prob(x), d.mode, d.deterministic_sample, parity.attempt(lambda: d.entropy()), d.probs,
            bool((s * ~MASK).sum() == 0), parity.structure(d.rsample()), d.batch_shape, d.event_shape]


def scenario_ordinal():
    scores = torch.tensor([[0.1, 0.9, 0.2, 0.6], [0.9, 0.2, 0.4, 0.1]])
    d = Ordinal(scores)
    oh = OneHotOrdinal(scores)
    x = torch.tensor([1, 3])
    return [d.logits, d.log_prob(x), d.mode, d.probs, oh.logits, oh.log_prob(torch.nn.functional.one_hot(x, 4)),
            oh.mode, parity.structure(d.sample()), parity.structure(oh.sample())]


def scenario_analytic_helpers():
    n = torch.distributions.Normal(LOC, SCALE)
    return [has_analytic_entropy(n), has_analytic_entropy(TanhNormal(LOC, SCALE)), has_analytic_kl(n, n),
            has_analytic_kl(TanhNormal(LOC, SCALE), TanhNormal(LOC, SCALE)),
            has_analytic_entropy(OneHotCategorical(logits=LOGITS)), has_analytic_entropy(Delta(LOC))]
