"""Tests of ``torchrl.modules.distributions``: log-probabilities against ``torch.distributions`` references,
bounds, gradients at the bounds, masks, and the contract with tensordict's ``ProbabilisticTensorDictModule``."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
from hypothesis import given, settings, strategies as st
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    set_interaction_type,
    TensorDictModule,
)
from tensordict.nn.distributions import NormalParamExtractor as TDExtractor
from torch import distributions as D, nn

import torchrl._utils._deprecation as _deprecation
from torchrl.modules.distributions import (
    Delta,
    distributions_maps,
    has_analytic_entropy,
    has_analytic_kl,
    IndependentNormal,
    MaskedCategorical,
    MaskedOneHotCategorical,
    NormalParamExtractor,
    NormalParamWrapper,
    OneHotCategorical,
    OneHotOrdinal,
    Ordinal,
    ReparamGradientStrategy,
    TanhDelta,
    TanhNormal,
    TruncatedNormal,
)


def _reference_tanh_normal(loc, scale, low, high, event_dims):
    base = D.Normal(loc, scale)
    if event_dims:
        base = D.Independent(base, event_dims)
    if isinstance(low, torch.Tensor):  # a 0-d tensor scale would make torch undercount the event's log-det
        low, high = low.expand_as(loc), high.expand_as(loc)
    affine = D.AffineTransform((high + low) / 2, (high - low) / 2, event_dim=event_dims)
    return D.TransformedDistribution(base, [D.TanhTransform(), affine])


# ---------------------------------------------------------------------------------------------- TanhNormal
class TestTanhNormal:
    @pytest.mark.parametrize("event_dims", [0, 1, 2])
    @pytest.mark.parametrize("bounds", [(-1.0, 1.0), (-2.0, 3.0), "tensor"])
    def test_log_prob_matches_transformed_distribution(self, event_dims, bounds):
        torch.manual_seed(0)
        loc = torch.randn(5, 3, 2, dtype=torch.float64)
        scale = torch.rand(5, 3, 2, dtype=torch.float64) + 0.2
        if bounds == "tensor":
            low, high = torch.tensor([-1.0, 0.0], dtype=torch.float64), torch.tensor([2.0, 0.5], dtype=torch.float64)
        else:
            low, high = bounds
        dist = TanhNormal(loc, scale, low=low, high=high, event_dims=event_dims)
        ref = _reference_tanh_normal(loc, scale, low, high, event_dims)
        value = ref.sample((4,))
        torch.testing.assert_close(dist.log_prob(value), ref.log_prob(value))
        assert dist.batch_shape == ref.batch_shape and dist.event_shape == ref.event_shape

    @settings(max_examples=25, deadline=None)
    @given(
        low=st.floats(-5.0, 4.0),
        width=st.floats(0.01, 10.0),
        loc=st.floats(-6.0, 6.0),
        scale=st.floats(0.05, 4.0),
        q=st.floats(0.001, 0.999),
    )
    def test_log_prob_property(self, low, width, loc, scale, q):
        high = low + width
        loc_t, scale_t = torch.tensor([loc], dtype=torch.float64), torch.tensor([scale], dtype=torch.float64)
        value = torch.tensor([low + q * width], dtype=torch.float64)
        ours = TanhNormal(loc_t, scale_t, low=low, high=high).log_prob(value)
        ref = _reference_tanh_normal(loc_t, scale_t, low, high, 1).log_prob(value)
        torch.testing.assert_close(ours, ref, rtol=1e-6, atol=1e-6)

    def test_default_event_dims_sums_last_dim(self):
        dist = TanhNormal(torch.zeros(4, 2), torch.ones(4, 2))
        assert dist.event_dims == 1
        assert dist.log_prob(dist.rsample()).shape == (4,)
        scalar = TanhNormal(torch.tensor(0.0), torch.tensor(1.0))
        assert scalar.event_dims == 0 and scalar.log_prob(torch.tensor(0.5)).shape == ()

    def test_event_dims_too_large(self):
        with pytest.raises(ValueError, match="event_dims=3 exceeds"):
            TanhNormal(torch.zeros(4, 2), torch.ones(4, 2), event_dims=3)

    @pytest.mark.parametrize("low,high", [(1.0, 1.0), (2.0, -2.0)])
    def test_bad_bounds(self, low, high):
        with pytest.raises(ValueError, match="low must be strictly smaller than high"):
            TanhNormal(torch.zeros(2), torch.ones(2), low=low, high=high)
        with pytest.raises(RuntimeError):  # TorchRL's type for TanhNormal
            TanhNormal(torch.zeros(2), torch.ones(2), low=low, high=high)

    def test_bad_tensor_bounds(self):
        with pytest.raises(ValueError, match="everywhere"):
            TanhNormal(torch.zeros(2), torch.ones(2), low=torch.tensor([0.0, 1.0]), high=torch.tensor([1.0, 1.0]))

    @pytest.mark.parametrize("loc_value", [-100.0, 0.0, 100.0])
    def test_samples_strictly_within_bounds(self, loc_value):
        dist = TanhNormal(torch.full((1000, 2), loc_value), torch.full((1000, 2), 3.0), low=-2.0, high=5.0)
        sample = dist.sample()
        assert ((sample > -2.0) & (sample < 5.0)).all()
        assert torch.isfinite(dist.log_prob(sample.clone())).all()

    def test_log_prob_and_grad_finite_at_bounds(self):
        loc = torch.zeros(3, 2, requires_grad=True)
        scale = torch.ones(3, 2, requires_grad=True)
        dist = TanhNormal(loc, scale, low=-2.0, high=3.0)
        value = torch.tensor([[-2.0, 3.0], [3.0, 3.0], [-2.0, -2.0]])
        lp = dist.log_prob(value)
        assert torch.isfinite(lp).all()
        lp.sum().backward()
        assert torch.isfinite(loc.grad).all() and torch.isfinite(scale.grad).all()

    def test_rsample_gradients_finite_when_saturated(self):
        loc = torch.full((4, 2), 50.0, requires_grad=True)
        scale = torch.ones(4, 2, requires_grad=True)
        action, lp = TanhNormal(loc, scale).rsample_and_log_prob()
        (action.sum() + lp.sum()).backward()
        assert torch.isfinite(loc.grad).all() and torch.isfinite(scale.grad).all()

    def test_rsample_and_log_prob_scores_the_draw(self):
        torch.manual_seed(1)
        loc, scale = torch.randn(6, 3, dtype=torch.float64), torch.rand(6, 3, dtype=torch.float64) + 0.5
        dist = TanhNormal(loc, scale, low=-3.0, high=1.0)
        torch.manual_seed(2)
        sample, lp = dist.rsample_and_log_prob((2,))
        assert sample.shape == (2, 6, 3) and lp.shape == (2, 6)
        ref = _reference_tanh_normal(loc, scale, -3.0, 1.0, 1)
        torch.testing.assert_close(lp, ref.log_prob(sample))
        # same random stream as rsample
        torch.manual_seed(2)
        torch.testing.assert_close(dist.rsample((2,)), sample)

    def test_log_prob_of_own_saturated_sample_uses_pre_tanh_value(self):
        loc, scale = torch.full((2, 1), 30.0), torch.ones(2, 1)
        dist = TanhNormal(loc, scale)
        torch.manual_seed(0)
        sample, lp = dist.rsample_and_log_prob()
        torch.manual_seed(0)
        sample2 = dist.rsample()
        torch.testing.assert_close(dist.log_prob(sample2), lp)
        # a copy of the saturated sample goes through the clamped atanh: finite, but a different value
        assert torch.isfinite(dist.log_prob(sample2.clone())).all()

    def test_sample_modified_in_place_is_rescored(self):
        dist = TanhNormal(torch.zeros(3, 2), torch.ones(3, 2))
        sample = dist.rsample()
        sample.mul_(0.0)
        torch.testing.assert_close(dist.log_prob(sample), dist.log_prob(torch.zeros(3, 2)))

    def test_scale_as_number_and_callable(self):
        loc = torch.zeros(3, 2)
        a = TanhNormal(loc, 0.5)
        b = TanhNormal(loc, lambda x: torch.full_like(x, 0.5))
        c = TanhNormal(loc, torch.full((3, 2), 0.5))
        value = torch.full((3, 2), 0.3)
        torch.testing.assert_close(a.log_prob(value), c.log_prob(value))
        torch.testing.assert_close(b.log_prob(value), c.log_prob(value))

    def test_tanh_loc(self):
        dist = TanhNormal(torch.tensor([100.0]), torch.tensor([1.0]), upscale=2.0, tanh_loc=True)
        torch.testing.assert_close(dist.loc, torch.tensor([2.0 * math.tanh(50.0)]))

    def test_deterministic_sample_and_mode(self):
        loc = torch.tensor([[0.3, -1.2, 2.0]], dtype=torch.float64)
        scale = torch.tensor([[0.2, 1.5, 0.9]], dtype=torch.float64)
        dist = TanhNormal(loc, scale, low=-2.0, high=2.0)
        torch.testing.assert_close(dist.deterministic_sample, 2.0 * loc.tanh())
        # the mode maximises the density: no point of a dense grid (in pre-tanh space) scores higher
        u_grid = torch.linspace(-8, 8, 20001, dtype=torch.float64).unsqueeze(-1).expand(-1, 3)
        elementwise = TanhNormal(loc, scale, low=-2.0, high=2.0, event_dims=0)
        mode = dist.get_mode()
        best = elementwise.log_prob(2.0 * u_grid.tanh()).max(0).values
        assert (elementwise.log_prob(mode)[0] >= best - 1e-6).all()
        # and its pre-tanh value is a stationary point: u = loc + 2 scale^2 tanh(u)
        u = (mode / 2.0).atanh()
        torch.testing.assert_close(u, loc + 2 * scale**2 * u.tanh(), atol=1e-6, rtol=1e-6)
        # ``.mode`` raises, as TorchRL's does (no closed form): get_mode() or deterministic_sample instead
        with pytest.raises(RuntimeError, match="TanhNormal has no analytical mode"):
            dist.mode

    def test_mean_and_entropy_have_no_closed_form(self):
        dist = TanhNormal(torch.zeros(2), torch.ones(2))
        with pytest.raises(NotImplementedError, match="no closed-form mean"):
            dist.mean
        with pytest.raises(NotImplementedError, match="no closed-form entropy"):
            dist.entropy()
        assert not has_analytic_entropy(dist)

    def test_properties_and_lazy_torch_objects(self):
        loc, scale = torch.randn(3, 2), torch.rand(3, 2) + 0.1
        dist = TanhNormal(loc, scale, low=-2.0, high=4.0)
        assert dist.min == -2.0 and dist.max == 4.0 and dist.low == -2.0 and dist.high == 4.0
        assert dist.support.check(torch.tensor(3.9)) and not dist.support.check(torch.tensor(4.1))
        assert isinstance(dist, D.TransformedDistribution)
        # as in TorchRL: base_dist is the Independent normal, root_dist the plain Normal inside it
        assert isinstance(dist.base_dist, D.Independent) and isinstance(dist.root_dist, D.Normal)
        assert torch.equal(dist.root_dist.mean, loc) and dist.device == loc.device
        assert isinstance(dist.low, torch.Tensor) and dist.low.shape == () and dist.high.item() == 4.0
        assert dist.non_trivial_max.item() is True and dist.non_trivial_min.item() is True
        other = TanhNormal(loc, scale, low=-1.0, high=2.0)
        assert other.non_trivial_max.item() is True and other.non_trivial_min.item() is False
        u = torch.randn(3, 2)
        y = u
        for t in dist.transforms:
            y = t(y)
        torch.testing.assert_close(y, 3.0 * u.tanh() + 1.0)
        # TransformedDistribution methods work through the lazily built base and transforms
        elementwise = TanhNormal(loc, scale, low=-2.0, high=4.0, event_dims=0)
        value = torch.full((3, 2), 2.0)
        torch.testing.assert_close(elementwise.cdf(value), D.Normal(loc, scale).cdf(torch.full((3, 2), 1.0 / 3).atanh()))

    def test_update_and_expand(self):
        dist = TanhNormal(torch.zeros(2), torch.ones(2))
        dist.update(torch.ones(5, 2), torch.ones(5, 2))
        assert dist.batch_shape == (5,)
        expanded = TanhNormal(torch.zeros(1, 2), torch.ones(1, 2)).expand((4,))
        assert expanded.batch_shape == (4,) and expanded.sample().shape == (4, 2)

    def test_tensor_bounds_recomputed_after_in_place_change(self):
        high = torch.tensor([1.0, 1.0])
        low = torch.tensor([-1.0, -1.0])
        a = TanhNormal(torch.zeros(2), torch.ones(2), low=low, high=high)
        assert a.sample().abs().max() < 1.0
        high.mul_(10.0)
        b = TanhNormal(torch.full((2,), 5.0), torch.full((2,), 0.01), low=low, high=high)
        assert (b.sample() > 1.0).all()

    def test_with_probabilistic_module(self):
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, 4), NormalParamExtractor())
        backbone = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
        policy = ProbabilisticTensorDictSequential(
            backbone,
            ProbabilisticTensorDictModule(
                in_keys=["loc", "scale"],
                out_keys=["action"],
                distribution_class=TanhNormal,
                distribution_kwargs={"low": -1.0, "high": 1.0},
                return_log_prob=True,
            ),
        )
        td = TensorDict(observation=torch.randn(4, 3), batch_size=[4])
        with set_interaction_type("mode"), pytest.raises(RuntimeError, match="no analytical mode"):
            policy(td.clone())  # TanhNormal has no closed-form mode (TorchRL raises too)
        for kind in ("random", "deterministic", "mean"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no "falling back" warning from tensordict
                with set_interaction_type(kind):
                    out = policy(td.clone())
            assert out["action"].shape == (4, 2), kind
            assert out["action_log_prob"].shape == (4,), kind
            assert (out["action"].abs() < 1).all(), kind
        with set_interaction_type(InteractionType.DETERMINISTIC):
            out = policy(td.clone())
        torch.testing.assert_close(out["action"], out["loc"].tanh())
        with set_interaction_type(InteractionType.RANDOM):
            out = policy(td.clone())
        dist = policy.get_dist(out)
        torch.testing.assert_close(dist.log_prob(out["action"]), out["action_log_prob"], rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------- other continuous
class TestIndependentNormal:
    def test_log_prob_and_mode(self):
        loc, scale = torch.randn(4, 3), torch.rand(4, 3) + 0.1
        dist = IndependentNormal(loc, scale)
        value = torch.randn(4, 3)
        torch.testing.assert_close(dist.log_prob(value), D.Independent(D.Normal(loc, scale), 1).log_prob(value))
        assert torch.equal(dist.mode, loc) and torch.equal(dist.deterministic_sample, loc)

    def test_tanh_loc_scale_number_and_update(self):
        dist = IndependentNormal(torch.tensor([[20.0, -20.0]]), 2.0, upscale=3.0, tanh_loc=True)
        torch.testing.assert_close(dist.mode, torch.tensor([[3 * math.tanh(20 / 3), -3 * math.tanh(20 / 3)]]))
        assert torch.equal(dist.base_dist.scale, torch.full((1, 2), 2.0))
        dist.update(torch.zeros(5, 2), torch.ones(5, 2))
        assert dist.batch_shape == (5,) and dist.event_shape == (2,)


class TestTruncatedNormal:
    def test_samples_in_bounds_and_log_prob(self):
        torch.manual_seed(0)
        loc = torch.tensor([[0.0, 2.0]], dtype=torch.float64).expand(2000, 2)
        scale = torch.tensor([[1.0, 0.5]], dtype=torch.float64).expand(2000, 2)
        dist = TruncatedNormal(loc, scale, low=-0.5, high=1.0)
        sample = dist.sample()
        assert ((sample >= -0.5) & (sample <= 1.0)).all()
        value = torch.tensor([[0.2, 0.9]], dtype=torch.float64)
        normal = D.Normal(loc[:1], scale[:1])
        z = normal.cdf(torch.tensor(1.0, dtype=torch.float64)) - normal.cdf(torch.tensor(-0.5, dtype=torch.float64))
        expected = (normal.log_prob(value) - z.log()).sum(-1)
        lp = TruncatedNormal(loc[:1], scale[:1], low=-0.5, high=1.0).log_prob(value)
        torch.testing.assert_close(lp, expected, rtol=1e-4, atol=1e-4)  # tensordict clamps its CDF terms

    def test_outside_support_is_minus_inf(self):
        dist = TruncatedNormal(torch.zeros(1, 2), torch.ones(1, 2))
        assert dist.log_prob(torch.tensor([[0.0, 1.5]])).item() == -math.inf

    def test_mode_and_deterministic_sample(self):
        dist = TruncatedNormal(torch.tensor([[-3.0, 0.2, 3.0]]), torch.ones(1, 3))
        torch.testing.assert_close(dist.mode, torch.tensor([[-1.0, 0.2, 1.0]]))
        torch.testing.assert_close(dist.deterministic_sample, dist.mean)
        assert dist.min == -1.0 and dist.max == 1.0

    def test_bad_bounds(self):
        with pytest.raises(ValueError, match="low must be smaller than high"):
            TruncatedNormal(torch.zeros(2), torch.ones(2), low=1.0, high=0.0)


class TestDelta:
    def test_log_prob_sample_expand(self):
        param = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        dist = Delta(param)
        assert dist.batch_shape == (2,) and dist.event_shape == (2,)
        lp = dist.log_prob(torch.tensor([[1.0, 2.0], [3.0, 5.0]]))
        assert lp.tolist() == [math.inf, -math.inf]
        assert dist.sample((3,)).shape == (3, 2, 2) and not dist.sample().requires_grad
        assert dist.rsample().requires_grad
        assert torch.equal(dist.mode, param) and torch.equal(dist.mean, param)
        expanded = Delta(torch.tensor([[1.0, 2.0]])).expand((5,))
        assert expanded.batch_shape == (5,) and expanded.sample().shape == (5, 2)
        dist.update(torch.zeros(2, 2))
        assert torch.equal(dist.deterministic_sample, torch.zeros(2, 2))


class TestTanhDelta:
    def test_value_bounds_and_log_prob(self):
        param = torch.tensor([[-1.0, 100.0, -100.0]])
        dist = TanhDelta(param, low=-2.0, high=4.0)
        value = dist.sample()
        # as TorchRL's: the parameter is moved by the middle of the bounds (1.0) before the tanh
        torch.testing.assert_close(value, torch.tensor([[1.0, 4.0, -2.0]]))
        assert dist.low == -2.0 and dist.high == 4.0 and not dist.has_rsample
        assert dist.arg_constraints == {"loc": D.constraints.real}
        assert ((value > -2.0) & (value < 4.0)).all()  # safe: strictly inside
        assert dist.log_prob(value).tolist() == [math.inf]
        assert dist.log_prob(value + 0.1).tolist() == [-math.inf]
        assert torch.equal(dist.mode, value) and torch.equal(dist.deterministic_sample, value)
        assert dist.min == -2.0 and dist.max == 4.0
        assert dist.rsample((3,)).shape == (3, 1, 3)

    def test_gradient_flows(self):
        param = torch.zeros(2, 3, requires_grad=True)
        TanhDelta(param).rsample().sum().backward()
        torch.testing.assert_close(param.grad, torch.ones(2, 3))

    def test_event_dims_too_large(self):
        with pytest.raises(ValueError, match="event_dims=2 exceeds"):
            TanhDelta(torch.zeros(3), event_dims=2)


# ---------------------------------------------------------------------------------------------- discrete
class TestOneHotCategorical:
    def test_log_prob_matches_torch(self):
        logits = torch.randn(5, 4)
        dist = OneHotCategorical(logits=logits)
        ref = D.OneHotCategorical(logits=logits)
        sample = dist.sample((3,))
        assert sample.shape == (3, 5, 4) and sample.dtype == torch.long and (sample.sum(-1) == 1).all()
        torch.testing.assert_close(dist.log_prob(sample), ref.log_prob(sample.float()))
        torch.testing.assert_close(dist.entropy(), ref.entropy())
        assert torch.equal(dist.mode, torch.nn.functional.one_hot(logits.argmax(-1), 4))
        assert torch.equal(dist.deterministic_sample, dist.mode)

    @pytest.mark.parametrize("grad_method", list(ReparamGradientStrategy))
    def test_rsample_is_one_hot_with_gradient(self, grad_method):
        logits = torch.randn(6, 3, requires_grad=True)
        sample = OneHotCategorical(logits=logits, grad_method=grad_method).rsample((2,))
        assert sample.shape == (2, 6, 3)
        torch.testing.assert_close(sample.detach().sum(-1), torch.ones(2, 6))
        torch.testing.assert_close(sample.detach(), sample.detach().round())  # one-hot up to rounding
        (sample * torch.arange(3.0)).sum().backward()
        assert logits.grad.abs().sum() > 0

    def test_bad_grad_method(self):
        with pytest.raises(ValueError, match="grad_method must be a ReparamGradientStrategy"):
            OneHotCategorical(logits=torch.zeros(3), grad_method="straight")


class TestMaskedCategorical:
    def test_never_samples_masked_actions(self):
        torch.manual_seed(0)
        logits = torch.zeros(8, 5)
        logits[:, 1] = 10.0  # the masked action is by far the most likely one
        mask = torch.ones(8, 5, dtype=torch.bool)
        mask[:, 1] = False
        mask[3, :4] = False
        dist = MaskedCategorical(logits=logits, mask=mask)
        sample = dist.sample((500,))
        assert not (sample == 1).any()
        assert (sample[:, 3] == 4).all()
        assert not mask.gather(-1, sample.transpose(0, 1)).logical_not().any()

    def test_log_prob_renormalised_over_allowed(self):
        logits = torch.randn(3, 4)
        mask = torch.tensor([[True, False, True, True], [True, True, True, True], [False, False, True, False]])
        dist = MaskedCategorical(logits=logits, mask=mask)
        value = torch.tensor([2, 1, 2])
        expected = torch.stack(
            [logits[i, value[i]] - logits[i][mask[i]].logsumexp(-1) for i in range(3)]
        )
        torch.testing.assert_close(dist.log_prob(value), expected)
        assert dist.log_prob(torch.tensor([1, 0, 0])).isneginf().tolist() == [True, False, True]
        # the gather path (value with a sample dimension) agrees with the cross-entropy path
        torch.testing.assert_close(dist.log_prob(value.expand(2, 3)), expected.expand(2, 3))
        no_ce = MaskedCategorical(logits=logits, mask=mask, use_cross_entropy=False)
        torch.testing.assert_close(no_ce.log_prob(value), expected)

    def test_probs_entropy_mode(self):
        probs = torch.tensor([0.1, 0.5, 0.2, 0.2])
        mask = torch.tensor([True, False, True, True])
        dist = MaskedCategorical(probs=probs, mask=mask)
        ref = D.Categorical(probs=torch.tensor([0.2, 0.0, 0.4, 0.4]))
        torch.testing.assert_close(dist.probs, ref.probs)
        torch.testing.assert_close(dist.entropy(), D.Categorical(probs=torch.tensor([0.2, 0.4, 0.4])).entropy())
        assert dist.mode.item() in (2, 3) and dist.deterministic_sample.item() == dist.mode.item()
        assert torch.isfinite(MaskedCategorical(logits=torch.randn(4), mask=mask).entropy())

    def test_indices_with_padding(self):
        logits = torch.zeros(2, 5)
        indices = torch.tensor([[0, 3, -1], [1, 2, 4]])
        dist = MaskedCategorical(logits=logits, indices=indices, padding_value=-1)
        expected_mask = torch.tensor([[True, False, False, True, False], [False, True, True, False, True]])
        assert torch.equal(dist.mask, expected_mask)
        assert dist.padding_value == -1 and dist.padding_side == "left"
        lp = dist.log_prob(torch.tensor([-1, 2]))
        torch.testing.assert_close(lp, torch.tensor([0.0, -math.log(3)]))

    def test_padding_value_that_is_a_valid_action_is_scored(self):
        # as TorchRL: padding_value=0 pads the mask; the action 0 keeps its log-probability
        logits = torch.tensor([[0.1, -1.0, 2.0, 0.5]])
        dist = MaskedCategorical(logits=logits, mask=torch.tensor([[True, False, True, True]]), padding_value=0)
        ref = torch.log_softmax(torch.tensor([0.1, 2.0, 0.5]), -1)[0]
        torch.testing.assert_close(dist.log_prob(torch.tensor([0])), ref.reshape(1))

    def test_neg_inf_value(self):
        dist = MaskedCategorical(logits=torch.zeros(3), mask=torch.tensor([True, False, True]), neg_inf=-1e6)
        assert dist.log_prob(torch.tensor(1)).item() < -1e5

    @pytest.mark.parametrize(
        "kwargs,match",
        [
            ({"logits": torch.zeros(3)}, "exactly one of mask or indices"),
            ({"logits": torch.zeros(3), "mask": torch.ones(3, dtype=torch.bool), "indices": torch.tensor([0])},
             "exactly one of mask or indices"),
            ({"mask": torch.ones(3, dtype=torch.bool)}, "exactly one of logits or probs"),
            ({"logits": torch.zeros(3), "mask": torch.ones(3, dtype=torch.bool), "padding_side": "up"},
             "padding_side must be"),
        ],
    )
    def test_errors(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            MaskedCategorical(**kwargs)


class TestMaskedOneHotCategorical:
    def test_samples_and_log_prob(self):
        torch.manual_seed(0)
        logits = torch.randn(4, 3, requires_grad=True)
        mask = torch.tensor([[True, False, True]] * 4)
        dist = MaskedOneHotCategorical(logits=logits, mask=mask)
        sample = dist.sample((200,))
        assert sample.shape == (200, 4, 3) and (sample[..., 1] == 0).all() and (sample.sum(-1) == 1).all()
        ref = MaskedCategorical(logits=logits, mask=mask)
        torch.testing.assert_close(dist.log_prob(sample), ref.log_prob(sample.argmax(-1)))
        rsample = dist.rsample()
        assert (rsample.detach()[..., 1] == 0).all()
        rsample.sum().backward()
        assert torch.equal(dist.mode, torch.nn.functional.one_hot(ref.mode, 3))


class TestOrdinal:
    def test_logits_known_answer(self):
        scores = torch.tensor([0.5, -1.0, 2.0])
        s = scores.sigmoid()
        weights = torch.stack(
            [s[0] * (1 - s[1]) * (1 - s[2]), s[0] * s[1] * (1 - s[2]), s[0] * s[1] * s[2]]
        )
        dist = Ordinal(scores=scores)
        torch.testing.assert_close(dist.probs, weights / weights.sum())
        assert Ordinal(scores=torch.tensor([10.0, 10.0, -10.0, -10.0])).mode.item() == 1

    def test_one_hot_ordinal(self):
        dist = OneHotOrdinal(scores=torch.tensor([[10.0, 10.0, -10.0, -10.0]]))
        assert dist.mode.tolist() == [[0, 1, 0, 0]]
        sample = dist.sample((10,))
        assert sample.shape == (10, 1, 4)
        torch.testing.assert_close(dist.log_prob(sample), Ordinal(torch.tensor([[10.0, 10.0, -10.0, -10.0]])).log_prob(sample.argmax(-1)))


# ---------------------------------------------------------------------------------------------- misc
def test_normal_param_extractor_is_tensordicts():
    assert NormalParamExtractor is TDExtractor
    loc, scale = NormalParamExtractor()(torch.zeros(3, 4))
    torch.testing.assert_close(scale, torch.ones(3, 2))


def test_normal_param_wrapper_deprecated():
    with pytest.warns(DeprecationWarning, match="NormalParamWrapper is deprecated"):
        _deprecation._WARNED.discard("NormalParamWrapper is deprecated; use nn.Sequential(module, NormalParamExtractor()) instead.")
        module = NormalParamWrapper(nn.Linear(3, 4))
    loc, scale = module(torch.randn(2, 3))
    assert loc.shape == (2, 2) and (scale > 0).all()


def test_analytic_helpers_and_map():
    assert has_analytic_entropy(D.Normal(0.0, 1.0))
    assert has_analytic_kl(D.Normal(0.0, 1.0), D.Normal(1.0, 2.0))
    p, q = TanhNormal(torch.zeros(1), torch.ones(1)), TanhNormal(torch.ones(1), torch.ones(1))
    # the KL divergence is invariant under the shared bijection: that of the normals
    assert has_analytic_kl(p, q)
    torch.testing.assert_close(D.kl_divergence(p, q), torch.tensor([0.5]).sum(-1))
    assert not has_analytic_kl(p, D.Normal(0.0, 1.0))
    assert distributions_maps["<class 'torchrl.modules.distributions.continuous.delta'>"] is Delta
    assert TanhNormal in distributions_maps.values() and MaskedCategorical in distributions_maps.values()


class TestTorchRLAttributes:
    """Attributes and values observed on TorchRL 0.14.1's instances."""

    def test_truncated_normal(self):
        loc, scale = torch.zeros(3, 2), torch.ones(3, 2)
        dist = TruncatedNormal(loc, scale, low=-1.0, high=2.0)
        assert dist.device == torch.device("cpu")
        assert torch.equal(dist.loc, loc) and torch.equal(dist.scale, scale)
        for name, value in (("low", -1.0), ("high", 2.0), ("upscale", 5.0)):
            attr = getattr(dist, name)
            assert isinstance(attr, torch.Tensor) and attr.shape == () and attr.dtype == torch.float32
            assert attr.item() == value
        assert dist.non_trivial_max is True and dist.non_trivial_min is False
        assert set(dist.arg_constraints) == {"loc", "scale"}
        squashed = TruncatedNormal(loc + 0.3, scale, low=-1.0, high=2.0, tanh_loc=True, upscale=2.0)
        torch.testing.assert_close(squashed.loc[0], torch.full((2,), 0.2978), atol=1e-4, rtol=0)

    def test_tanh_normal_tanh_loc_is_moved_to_the_middle_of_the_bounds(self):
        loc, scale = torch.tensor([-0.5, 0.0, 0.3, 2.0]), torch.tensor([0.5, 1.0, 2.0, 0.1])
        dist = TanhNormal(loc, scale, low=0.0, high=4.0, tanh_loc=True)
        # TorchRL 0.14.1's values
        torch.testing.assert_close(dist.root_dist.loc, torch.tensor([1.50166, 2.0, 2.29964, 3.89974]), atol=1e-4, rtol=0)
        torch.testing.assert_close(
            dist.deterministic_sample, torch.tensor([3.81090, 3.92806, 3.96016, 3.99836]), atol=1e-4, rtol=0
        )
        plain = TanhNormal(loc, scale, low=-1.0, high=2.0)
        torch.testing.assert_close(plain.root_dist.loc, loc)
        torch.testing.assert_close(plain.deterministic_sample, torch.tensor([-0.19318, 0.5, 0.93697, 1.94604]),
                                   atol=1e-4, rtol=0)
        assert repr(plain) == "TanhNormal(loc: torch.Size([4]), scale: torch.Size([4]))"

    def test_one_hot_categoricals(self):
        logits = torch.randn(3, 4, requires_grad=True)
        mask = torch.tensor([[True, False, True, True]] * 3)
        for dist in (OneHotCategorical(logits=logits), MaskedOneHotCategorical(logits=logits, mask=mask),
                     OneHotOrdinal(logits)):
            assert dist.has_rsample is False and dist.grad_method is ReparamGradientStrategy.PassThrough
            assert dist.num_samples == 4
            assert not dist.sample().requires_grad and dist.rsample().requires_grad  # rsample still works
        masked = MaskedCategorical(logits=logits, mask=mask)
        assert masked.padding_value == 0 and masked.num_samples == 4
        torch.testing.assert_close(
            masked.log_prob(torch.tensor([0, 2, 3])),
            torch.log_softmax(logits.masked_fill(~mask, float("-inf")), -1)[[0, 1, 2], [0, 2, 3]],
        )


def test_distributions_maps_keys_use_torchrl_module_paths():
    # TorchRL keys the map by str(cls).lower(), with its classes in torchrl.modules.distributions.continuous
    assert "<class 'torchrl.modules.distributions.continuous.tanhnormal'>" in distributions_maps
    assert "<class 'torchrl.modules.distributions.continuous.truncatednormal'>" in distributions_maps
    assert TanhNormal.__module__ == TruncatedNormal.__module__ == "torchrl.modules.distributions.continuous"
