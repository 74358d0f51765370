import doctest

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from test.envs.transforms.contract import TransformContract
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import RNDTransform, RunningMeanStd
from torchrl.envs.transforms import _rnd_transform as rnd_module


def _nets(n_in=3, n_out=8, seed=0):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return nn.Linear(n_in, n_out), nn.Linear(n_in, n_out)


def _fixed_nets():
    target, predictor = nn.Linear(2, 3), nn.Linear(2, 3)
    with torch.no_grad():
        target.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
        target.bias.zero_()
        predictor.weight.zero_()
        predictor.bias.zero_()
    return target, predictor


def _rewards(t, xs):
    out = []
    for x in xs:
        td = t._step(TensorDict(batch_size=[1]), TensorDict(obs=torch.tensor([x]), batch_size=[1]))
        out.append(td["intrinsic_reward"].item())
    return out


XS = [[1.0, 2.0], [3.0, -1.0], [0.0, 0.5]]


class TestRNDTransform(TransformContract):
    def make_transform(self):
        return RNDTransform(*_nets())

    # -- known answers ----------------------------------------------------------------------------------
    def test_raw_prediction_error(self):
        # target(x) = (x0, x1, x0 + x1), predictor = 0: reward = (x0^2 + x1^2 + (x0 + x1)^2) / 3
        t = RNDTransform(*_fixed_nets(), in_keys=["obs"], normalize_obs=False, normalize_reward=False)
        assert _rewards(t, XS) == pytest.approx([14 / 3, 14 / 3, 0.5 / 3])
        assert t.obs_rms is None and t.reward_rms is None

    def test_normalized_observations(self):
        # the statistics include the current observation; after [1, 2] and [3, -1] the second one
        # standardizes to [1, -1]: target [1, -1, 0], reward 2 / 3 (TorchRL 0.14.1: 1e-4, 0.6667, 0.7618)
        t = RNDTransform(*_fixed_nets(), in_keys=["obs"], normalize_reward=False)
        assert _rewards(t, XS) == pytest.approx([1e-4, 2 / 3, 0.7618], abs=2e-4)
        assert isinstance(t.obs_rms, RunningMeanStd) and t.obs_rms.mean.shape == (2,)
        torch.testing.assert_close(t.obs_rms.mean, torch.tensor(XS).mean(0), atol=1e-3, rtol=0)

    def test_normalized_and_clipped_rewards(self):
        # divided by the running std of the raw rewards (14/3, 14/3, 1/6), clipped at 5
        t = RNDTransform(*_fixed_nets(), in_keys=["obs"], normalize_obs=False)
        rewards = _rewards(t, XS)
        raw = torch.tensor([14 / 3, 14 / 3, 0.5 / 3])
        assert rewards[:2] == [5.0, 5.0]  # a tiny variance: clipped
        assert rewards[2] == pytest.approx(raw[2].item() / raw.var(unbiased=False).sqrt().item(), rel=1e-3)
        t = RNDTransform(*_fixed_nets(), in_keys=["obs"], normalize_obs=False, reward_clip=100.0)
        # one sample merged into the prior (mean 0, var 1, count 1e-4): var = (1e-4 + r^2 * 1e-4 / n) / n, n = 1.0001
        r, n = 14 / 3, 1.0001
        assert _rewards(t, XS)[0] == pytest.approx(r / ((1e-4 + r * r * 1e-4 / n) / n) ** 0.5, rel=1e-4)
        # both normalizations: TorchRL 0.14.1's numbers on the same input
        t = RNDTransform(*_fixed_nets(), in_keys=["obs"])
        assert _rewards(t, XS) == pytest.approx([0.0129, 1.9999, 2.2478], abs=1e-3)

    def test_observation_clip(self):
        t = RNDTransform(*_fixed_nets(), in_keys=["obs"], normalize_reward=False, obs_clip=0.5)
        _rewards(t, XS[:1])
        # [3, -1] standardizes to [1, -1], clipped to [0.5, -0.5]: target [0.5, -0.5, 0], reward 1/6
        assert _rewards(t, XS[1:2]) == pytest.approx([1 / 6], abs=1e-4)

    # -- the RND mechanics ------------------------------------------------------------------------------------
    def test_target_frozen_predictor_trainable(self):
        target, predictor = _nets()
        t = RNDTransform(target, predictor)
        assert not any(p.requires_grad for p in t.target_network.parameters())
        assert all(p.requires_grad for p in t.predictor_network.parameters())
        before = [p.clone() for p in target.parameters()]
        env = TransformedEnv(PendulumEnv(seed=0), t)
        env.rollout(5)
        for p, b in zip(target.parameters(), before):
            assert torch.equal(p, b)

    def test_reward_shrinks_when_predictor_trained(self):
        target, predictor = _nets(n_in=3, n_out=4, seed=1)
        t = RNDTransform(target, predictor, normalize_obs=False, normalize_reward=False)
        obs = torch.randn(16, 3, generator=torch.Generator().manual_seed(0))
        before = t(TensorDict(observation=obs, batch_size=[16]))["intrinsic_reward"]
        optim = torch.optim.Adam(predictor.parameters(), lr=0.05)
        for _ in range(200):
            loss = (predictor(obs) - target(obs)).pow(2).mean()
            optim.zero_grad()
            loss.backward()
            optim.step()
        after = t(TensorDict(observation=obs, batch_size=[16]))["intrinsic_reward"]
        assert after.shape == (16, 1)
        assert after.mean() < 0.01 * before.mean()
        # an observation far from the training data keeps a large bonus
        novel = t(TensorDict(observation=torch.full((1, 3), 10.0), batch_size=[1]))["intrinsic_reward"]
        assert novel.item() > 10 * after.mean().item()

    def test_no_gradient_through_reward(self):
        t = RNDTransform(*_nets())
        td = t(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))
        assert not td["intrinsic_reward"].requires_grad

    def test_specs_and_env(self):
        env = TransformedEnv(PendulumEnv(seed=0), RNDTransform(*_nets(), out_keys=["bonus"]))
        spec = env.full_reward_spec["bonus"]
        assert spec.shape == (1,) and spec.dtype == torch.float32
        assert set(env.full_reward_spec.keys()) == {"reward", "bonus"}
        check_env_specs(env, seed=0)
        data = env.rollout(4)
        assert data["next", "bonus"].shape == (4, 1) and "bonus" not in data  # no bonus at reset
        env = TransformedEnv(PendulumEnv(batch_size=(2,), seed=0), RNDTransform(*_nets()))
        assert env.full_reward_spec["intrinsic_reward"].shape == (2, 1)
        assert env.rollout(3)["next", "intrinsic_reward"].shape == (2, 3, 1)

    def test_state_dict_creates_statistics(self):
        t = RNDTransform(*_nets())
        t(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))
        state = t.state_dict()
        assert {"_obs_rms.mean", "_obs_rms.var", "_obs_rms.count", "_reward_rms.mean"} <= set(state)  # as TorchRL
        fresh = RNDTransform(*_nets(seed=3))
        assert fresh.obs_rms is None
        fresh.load_state_dict(state)
        torch.testing.assert_close(fresh.obs_rms.mean, t.obs_rms.mean)
        obs = torch.randn(2, 3)
        torch.testing.assert_close(
            fresh(TensorDict(observation=obs.clone(), batch_size=[2]))["intrinsic_reward"],
            t(TensorDict(observation=obs.clone(), batch_size=[2]))["intrinsic_reward"],
        )

    def test_errors(self):
        with pytest.raises(TypeError, match="target_network must be an nn.Module"):
            RNDTransform(lambda x: x, nn.Linear(2, 2))
        with pytest.raises(ValueError, match="obs_clip must be positive"):
            RNDTransform(*_nets(), obs_clip=0.0)
        with pytest.raises(KeyError, match="pixels.* is not an observation"):
            TransformedEnv(PendulumEnv(), RNDTransform(*_nets(), in_keys=["pixels"])).observation_spec
        with pytest.raises(KeyError, match="observation.* not found"):
            RNDTransform(*_nets())(TensorDict(other=torch.zeros(3)))


def test_doctests():
    result = doctest.testmod(rnd_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
