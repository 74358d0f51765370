import doctest
import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Unbounded
from torchrl.envs import Compose, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms._observation_norm import ObservationNorm
from torchrl.envs.transforms import _observation_norm as observation_norm_module

from test.envs.transforms._envs_batch_a import PosVelEnv
from test.envs.transforms.contract import TransformContract


class TestObservationNorm(TransformContract):
    def make_transform(self):
        return ObservationNorm(loc=torch.tensor([0.1, -0.2, 0.5]), scale=torch.tensor([0.5, 0.5, 4.0]), in_keys=["observation"], standard_normal=True)

    def test_affine_known_answers(self):
        obs = torch.tensor([1.0, 2.0])
        t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["obs"])
        assert t(TensorDict(obs=obs.clone()))["obs"].tolist() == [3.0, 5.0]
        t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["obs"], standard_normal=True)
        assert t(TensorDict(obs=obs.clone()))["obs"].tolist() == [0.0, 0.5]
        t = ObservationNorm(loc=torch.tensor([1.0, 0.0]), scale=torch.tensor([1.0, 4.0]), in_keys=["obs"], out_keys=["n"], standard_normal=True)
        td = t(TensorDict(obs=obs.clone()))
        assert td["n"].tolist() == [0.0, 0.5] and td["obs"].tolist() == [1.0, 2.0]

    def test_only_loc_or_scale(self):
        assert ObservationNorm(scale=3.0, in_keys=["o"])(TensorDict(o=torch.ones(1)))["o"].item() == 3.0
        assert ObservationNorm(loc=3.0, in_keys=["o"])(TensorDict(o=torch.ones(1)))["o"].item() == 4.0

    def test_standalone_on_stored_batch(self):
        t = ObservationNorm(loc=2.0, scale=0.5, in_keys=["obs"], standard_normal=True)
        td = TensorDict(obs=torch.full((5, 4, 3), 3.0), batch_size=[5, 4])
        assert t(td)["obs"].unique().tolist() == [2.0]

    def test_float64_observations_keep_dtype(self):
        t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["o"], standard_normal=True)
        out = t(TensorDict(o=torch.tensor([5.0], dtype=torch.float64)))["o"]
        assert out.dtype == torch.float64 and out.item() == 2.0

    def test_bounds_mapped(self):
        env = TransformedEnv(PendulumEnv(), ObservationNorm(loc=0.0, scale=torch.tensor([1.0, 1.0, 8.0]), in_keys=["observation"], standard_normal=True))
        spec = env.observation_spec["observation"]
        assert isinstance(spec, Bounded)
        assert spec.low.tolist() == [-1.0, -1.0, -1.0] and spec.high.tolist() == [1.0, 1.0, 1.0]
        env = TransformedEnv(PendulumEnv(), ObservationNorm(loc=1.0, scale=-2.0, in_keys=["observation"]))
        spec = env.observation_spec["observation"]
        assert spec.low.tolist() == [-1.0, -1.0, -15.0] and spec.high.tolist() == [3.0, 3.0, 17.0]

    def test_in_keys_are_required(self):
        # as TorchRL: leaving in_keys out raises RuntimeError
        with pytest.raises(RuntimeError, match="in_keys must be given"):
            ObservationNorm(loc=1.0, scale=2.0)
        with pytest.raises(RuntimeError, match="in_keys must be given"):
            ObservationNorm(loc=1.0, scale=2.0, in_keys_inv=["action"])

    def test_missing_key_raises_on_data(self):
        # an absent in_key fails when the transform is attached to an env (TorchRL: at the first step), naming it;
        # on data, the call raises KeyError on it
        with pytest.raises(KeyError, match=r"ObservationNorm: in_key .pixels. is not produced by the env PendulumEnv"):
            TransformedEnv(PendulumEnv(), ObservationNorm(loc=1.0, scale=2.0, in_keys=["pixels"]))
        with pytest.raises(KeyError, match=r"pixels.* not found"):
            ObservationNorm(loc=1.0, scale=2.0, in_keys=["pixels"])(TensorDict(observation=torch.zeros(3)))

    def test_nested_key(self):
        env = TransformedEnv(PosVelEnv(batch_size=(2,)), ObservationNorm(loc=0.5, scale=0.5, in_keys=[("agent", "speed")], standard_normal=True))
        check_env_specs(env, seed=0)
        spec = env.observation_spec["agent", "speed"]
        assert spec.low.unique().tolist() == [-1.0] and spec.high.unique().tolist() == [1.0]


class TestObservationNormInverse(TransformContract):
    def make_transform(self):
        return ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"], in_keys_inv=["action"], standard_normal=True)

    def test_action_spec_is_normalized(self):
        env = TransformedEnv(PendulumEnv(), self.make_transform())
        spec = env.full_action_spec["action"]
        assert spec.low.tolist() == [-1.5] and spec.high.tolist() == [0.5]

    def test_env_receives_denormalized_action(self):
        base = PendulumEnv(seed=1)
        env = TransformedEnv(PendulumEnv(seed=1), ObservationNorm(loc=1.0, scale=2.0, in_keys_inv=["action"], in_keys=["observation"], standard_normal=True))
        td_b, td_t = base.reset(), env.reset()
        td_b["action"] = torch.tensor([2.0])
        td_t["action"] = torch.tensor([0.5])  # (2 - 1) / 2
        torch.testing.assert_close(env.step(td_t)["next", "th"], base.step(td_b)["next", "th"])
        assert td_t["action"].item() == 0.5  # the caller's data is not modified

    def test_inverse_formulas(self):
        t = ObservationNorm(loc=1.0, scale=2.0, in_keys_inv=["a"], in_keys=["o"])
        assert t.inv(TensorDict(a=torch.tensor([5.0])))["a"].item() == 2.0
        t = ObservationNorm(loc=1.0, scale=2.0, in_keys_inv=["a"], in_keys=["o"], standard_normal=True)
        assert t.inv(TensorDict(a=torch.tensor([5.0])))["a"].item() == 11.0


class TestObservationNormLazy:
    def _env(self, transform, seed=0):
        base = PendulumEnv(seed=seed)
        return base, TransformedEnv(base, transform)

    def test_init_stats_matches_rollout_statistics(self):
        t = ObservationNorm(in_keys=["observation"], standard_normal=True)
        base, env = self._env(t)
        assert not t.initialized
        with pytest.raises(RuntimeError, match="loc/scale have not been initialized"):  # as TorchRL
            env.observation_spec
        torch.manual_seed(0)
        base.set_seed(0)
        t.init_stats(num_iter=12)
        torch.manual_seed(0)
        base.set_seed(0)
        data = base.rollout(12)["observation"]
        torch.testing.assert_close(t.loc, data.mean(0))
        torch.testing.assert_close(t.scale, data.std(0))
        assert t.initialized
        assert isinstance(env.observation_spec["observation"], Bounded)  # specs recomputed
        check_env_specs(env, seed=0)

    def test_init_stats_non_standard_normal_gives_same_output(self):
        t1 = ObservationNorm(in_keys=["observation"], standard_normal=True)
        t2 = ObservationNorm(in_keys=["observation"])
        outs = []
        for t in (t1, t2):
            base, env = self._env(t)
            torch.manual_seed(0)
            base.set_seed(0)
            t.init_stats(num_iter=10)
            outs.append(t(TensorDict(observation=torch.tensor([0.5, -0.5, 2.0])))["observation"])
        torch.testing.assert_close(outs[0], outs[1])

    def test_init_stats_repeats_rollouts_and_keeps_dims(self):
        t = ObservationNorm(in_keys=["observation"], standard_normal=True)
        env = TransformedEnv(PendulumEnv(seed=0, batch_size=[2]), Compose(StepCounter(max_steps=3), t))
        t.init_stats(num_iter=7, reduce_dim=(0, 1), cat_dim=1, keep_dims=(0,))
        assert t.loc.shape == (1, 3) and t.scale.shape == (1, 3)

    def test_errors(self):
        with pytest.raises(RuntimeError, match="needs a parent env"):
            ObservationNorm(in_keys=["observation"]).init_stats(5)
        with pytest.raises(RuntimeError, match="not initialized"):
            ObservationNorm(in_keys=["o"])(TensorDict(o=torch.zeros(1)))
        t = ObservationNorm(in_keys=["observation"])
        self._env(t)
        with pytest.raises(ValueError, match="cat_dim"):
            t.init_stats(5, reduce_dim=0, cat_dim=1)
        with pytest.raises(ValueError, match="keep_dims"):
            t.init_stats(5, reduce_dim=0, keep_dims=(1,))
        t.init_stats(5)
        with pytest.raises(RuntimeError, match="already initialized"):
            t.init_stats(5)
        t = ObservationNorm(in_keys=["observation", "th"])
        self._env(t)
        with pytest.raises(ValueError, match="pass key="):
            t.init_stats(5)
        t.init_stats(5, key="th")
        assert t.loc.shape == ()

    def test_state_dict_round_trip_into_lazy(self):
        t = ObservationNorm(loc=torch.tensor([1.0, 2.0, 3.0]), scale=torch.tensor([2.0, 2.0, 2.0]), in_keys=["observation"])
        lazy = ObservationNorm(in_keys=["observation"])
        env = TransformedEnv(PendulumEnv(), lazy)
        lazy.load_state_dict(t.state_dict())
        assert lazy.initialized and lazy.loc.tolist() == [1.0, 2.0, 3.0]
        assert isinstance(env.observation_spec["observation"], Bounded)


def test_doctests():
    result = doctest.testmod(observation_norm_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_unbounded_spec_bounds_follow_the_affine_map():
    # as TorchRL: an Unbounded spec's nominal bounds (float32 extremes) go through the map, overflowing to inf
    env = TransformedEnv(PendulumEnv(), ObservationNorm(loc=1.0, scale=2.0, in_keys=["th"]))
    spec = env.observation_spec["th"]
    assert isinstance(spec, Unbounded) and spec.space.low.item() == float("-inf") and spec.space.high.item() == float("inf")
    env = TransformedEnv(PendulumEnv(), ObservationNorm(loc=1.0, scale=2.0, in_keys=["th"], standard_normal=True))
    high = env.observation_spec["th"].space.high.item()
    assert high == pytest.approx(torch.finfo(torch.float32).max / 2, rel=1e-6)
