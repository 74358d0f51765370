"""gSDE (``torchrl.modules.models.exploration.gSDEModule`` / ``LazygSDEModule``): state-dependent noise
through an exploration matrix drawn at each reset (values checked against TorchRL 0.14.1)."""
from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import distributions as D, nn
from torch.nn import functional as F

from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms import gSDENoise
from torchrl.envs.utils import ExplorationType, set_exploration_type
from torchrl.modules.models.exploration import gSDEModule, LazygSDEModule

RANDOM = ExplorationType.RANDOM


def _noise(sigma, eps, state):
    return torch.einsum("...as,...s->...a", sigma * eps, state)


class TestgSDEModule:
    def test_parameters_and_defaults(self):
        m = gSDEModule(action_dim=2, state_dim=3)
        assert [n for n, _ in m.named_parameters()] == ["log_sigma"]
        assert torch.equal(m.log_sigma, torch.zeros(2, 3))
        # default sigma_init: inv_softplus(sqrt((1 - scale_min) / state_dim)) (TorchRL: -0.2534 for 3 dims)
        assert m.sigma_init.item() == pytest.approx(math.log(math.expm1(math.sqrt(0.99 / 3))), abs=1e-5)
        assert m.sigma_init.item() == pytest.approx(-0.25339, abs=1e-4)
        torch.testing.assert_close(m.sigma, torch.full((2, 3), math.log(2.0)))
        fixed = gSDEModule(2, 3, learn_sigma=False)
        assert list(fixed.parameters()) == [] and sorted(fixed.state_dict()) == ["_sigma", "sigma_init"]
        torch.testing.assert_close(fixed.sigma, torch.full((2, 3), math.sqrt(0.99 / 3)))
        assert gSDEModule(2, 3, learn_sigma=False, sigma_init=0.7).sigma[0, 0].item() == pytest.approx(0.7)

    def test_noise_is_linear_in_the_state(self):
        torch.manual_seed(0)
        m = gSDEModule(2, 3)
        mu, state, eps = torch.randn(4, 2), torch.randn(4, 3), torch.randn(4, 2, 3)
        with set_exploration_type(RANDOM):
            loc, scale, action, eps_out = m(mu, state, eps)
            _, _, action2, _ = m(mu, 2 * state, eps)
        assert loc is mu and eps_out is eps
        torch.testing.assert_close(action, mu + _noise(m.sigma, eps, state))
        torch.testing.assert_close(action2 - mu, 2 * (action - mu))  # same matrix: noise(2s) = 2 noise(s)
        torch.testing.assert_close(scale, (state.pow(2) @ m.sigma.pow(2).T).sqrt())

    def test_matrix_drawn_at_reset_zeros_only(self):
        m = gSDEModule(2, 3)
        mu, state = torch.zeros(4, 2), torch.randn(4, 3)
        with set_exploration_type(RANDOM):
            torch.manual_seed(3)
            _, _, action, eps = m(mu, state, torch.zeros(4, 1))  # gSDENoise's reset value: draw a matrix
            torch.manual_seed(3)
            assert torch.equal(eps, torch.randn(4, 2, 3))
            _, _, again, same = m(mu, state, eps)  # carried matrix: same noise for the same state
            assert same is eps and torch.equal(again, action)
            _, _, zero_noise, kept = m(mu, state, torch.zeros(4, 2, 3))  # a full-shape zero matrix is kept
            assert torch.equal(zero_noise, mu) and not kept.any()
            with pytest.raises(RuntimeError):  # a [*B, 1] noise that is not all zeros is not a reset
                m(mu, state, torch.tensor([[0.0], [1.0], [0.0], [1.0]]))

    def test_exploration_modes_and_transform(self):
        m = gSDEModule(2, 3, transform=D.AffineTransform(1.0, 2.0))
        mu, state, eps = torch.ones(4, 2), torch.randn(4, 3), torch.ones(4, 2, 3)
        for mode in (ExplorationType.DETERMINISTIC, ExplorationType.MODE, ExplorationType.MEAN):
            with set_exploration_type(mode):
                loc, _, action, _ = m(mu, state, eps)
            torch.testing.assert_close(action, 1.0 + 2.0 * mu)
            assert torch.equal(loc, mu)
        with set_exploration_type(RANDOM):
            _, _, action, _ = m(mu, state, eps)
        torch.testing.assert_close(action, 1.0 + 2.0 * (mu + _noise(m.sigma, eps, state)))
        with pytest.raises(RuntimeError, match="gSDE behavior for exploration mode None is not defined"):
            m(mu, state, eps)

    def test_batch_mismatch_and_clamps(self):
        m = gSDEModule(2, 3)
        state = torch.randn(2, 5, 3)
        with set_exploration_type(RANDOM):
            assert [o.shape for o in m(torch.zeros(2, 5, 2), state, torch.zeros(2, 5, 1))] == [
                (2, 5, 2), (2, 5, 2), (2, 5, 2), (2, 5, 2, 3)]
            with pytest.raises(RuntimeError, match="noise and state are expected to have matching batch size"):
                m(torch.zeros(2, 5, 2), state, torch.zeros(5, 1))
            with torch.no_grad():
                m.log_sigma.fill_(20.0)
            _, scale, action, _ = m(torch.zeros(2, 5, 2), state, torch.ones(2, 5, 2, 3))
        assert torch.equal(m.sigma, torch.full((2, 3), 20.0))  # the property is only bounded below ...
        torch.testing.assert_close(scale[..., 0], 10.0 * state.norm(dim=-1))  # ... the noise by scale_max too
        torch.testing.assert_close(action[..., 0], 10.0 * state.sum(-1))
        with torch.no_grad():
            m.log_sigma.fill_(-20.0)
        torch.testing.assert_close(m.sigma, torch.full((2, 3), 0.01))

    def test_gradients(self):
        m = gSDEModule(2, 3)
        mu = torch.zeros(4, 2, requires_grad=True)
        with set_exploration_type(RANDOM):
            _, _, action, _ = m(mu, torch.randn(4, 3), torch.randn(4, 2, 3))
        action.sum().backward()
        assert torch.equal(mu.grad, torch.ones(4, 2)) and m.log_sigma.grad.abs().sum() > 0


class TestLazygSDEModule:
    def test_initialised_from_first_call(self):
        lazy = LazygSDEModule()
        assert sorted(lazy.state_dict()) == ["log_sigma", "sigma_init"]
        state = torch.randn(2, 5, 3)
        with set_exploration_type(RANDOM):
            outs = lazy(torch.zeros(2, 5, 2), state, torch.zeros(2, 5, 1))
        assert type(lazy) is gSDEModule and lazy.log_sigma.shape == (2, 3) and lazy.sigma_init.shape == (3,)
        assert (lazy.action_dim, lazy.state_dim) == (2, 3) and outs[3].shape == (2, 5, 2, 3)
        # sigma starts so that the noise has about unit scale: softplus(init)^2 * S * mean(s^2) = 1
        torch.testing.assert_close(F.softplus(lazy.sigma_init).pow(2) * 3 * state.pow(2).mean((0, 1)), torch.ones(3))
        assert torch.equal(lazy.log_sigma, lazy.sigma_init.expand(2, 3))

    def test_fixed_sigma_and_scale(self):
        lazy = LazygSDEModule(sigma_init=0.3, learn_sigma=False)
        state = torch.randn(4, 3)
        with set_exploration_type(RANDOM):
            lazy(torch.zeros(4, 2), state, torch.zeros(4, 1))
        assert list(lazy.parameters()) == []
        torch.testing.assert_close(lazy.sigma_init.pow(2) * 3 * state.pow(2).mean(0), torch.full((3,), 0.09))


def test_policy_with_gsde_noise_in_an_env():
    """The TorchRL recipe: a mean network, then gSDE, with gSDENoise resetting the matrix per episode."""
    torch.manual_seed(0)
    env = TransformedEnv(PendulumEnv(), gSDENoise())
    obs_dim = env.observation_spec["observation"].shape[-1]
    assert torch.equal(env.reset()["_eps_gSDE"], torch.zeros(1))  # reset: zeros, the module draws a matrix
    mean = TensorDictModule(nn.Linear(obs_dim, 1), in_keys=["observation"], out_keys=["mu"])
    noise = TensorDictModule(gSDEModule(1, obs_dim), in_keys=["mu", "observation", "_eps_gSDE"],
                             out_keys=["loc", "scale", "action", "_eps_gSDE"])
    policy = lambda td: noise(mean(td))  # noqa: E731
    with set_exploration_type(RANDOM):
        data = env.rollout(4, policy)
    assert data["_eps_gSDE"].shape == data["next", "_eps_gSDE"].shape == (4, 1, obs_dim)
    first = data["next", "_eps_gSDE"][0]
    assert first.any() and all(torch.equal(data["next", "_eps_gSDE"][t], first) for t in range(4))  # one per episode
    sigma = noise.module.sigma.detach()
    torch.testing.assert_close(data["action"] - data["mu"], _noise(sigma, first, data["observation"]))


def test_new_matrix_at_each_reset():
    env = TransformedEnv(PendulumEnv(), gSDENoise())
    mean = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["mu"])
    noise = TensorDictModule(gSDEModule(1, 3), in_keys=["mu", "observation", "_eps_gSDE"],
                             out_keys=["loc", "scale", "action", "_eps_gSDE"])
    with set_exploration_type(RANDOM):
        first = env.rollout(2, lambda td: noise(mean(td)))["next", "_eps_gSDE"][0]
        second = env.rollout(2, lambda td: noise(mean(td)))["next", "_eps_gSDE"][0]
    assert not torch.equal(first, second)


def test_docstring_examples():
    import doctest

    from torchrl.modules.models import _gsde as gsde

    result = doctest.testmod(gsde, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
