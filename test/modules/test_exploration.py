"""Tests of the exploration modules: epsilon-greedy (annealing, masks), additive Gaussian and
Ornstein-Uhlenbeck noise (state carried in the data, reset on ``is_init``), the exploration-type switch,
the deprecated wrappers and ``set_exploration_modules_spec_from_env``."""
from __future__ import annotations

import math
import warnings

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

import torchrl._utils._deprecation as _deprecation
from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.data.tensor_specs import Bounded, Categorical, Composite, MultiOneHot, OneHot, Unbounded
from torchrl.envs import InitTracker, PendulumEnv, StepCounter, TransformedEnv
from torchrl.modules.tensordict_module import (
    Actor,
    AdditiveGaussianModule,
    AdditiveGaussianWrapper,
    EGreedyModule,
    EGreedyWrapper,
    OrnsteinUhlenbeckProcessModule,
    OrnsteinUhlenbeckProcessWrapper,
    QValueActor,
    set_exploration_modules_spec_from_env,
)


@pytest.fixture(autouse=True)
def _fresh_warnings():
    _deprecation._WARNED.clear()
    yield


def _actions(n=1000):
    return TensorDict(action=torch.zeros(n, dtype=torch.long), batch_size=[n])


class TestEGreedy:
    def test_annealing(self):
        module = EGreedyModule(Categorical(4), eps_init=1.0, eps_end=0.1, annealing_num_steps=10)
        module.step(5)
        assert math.isclose(float(module.eps), 0.55, rel_tol=1e-6)
        module.step(100)
        assert math.isclose(float(module.eps), 0.1, rel_tol=1e-6)
        assert {"eps", "eps_init", "eps_end"} <= set(module.state_dict())

    def test_eps_one_and_zero(self):
        torch.manual_seed(0)
        explore = EGreedyModule(Categorical(4), eps_init=1.0)
        out = explore(_actions())["action"]
        counts = torch.bincount(out, minlength=4)
        assert bool((counts > 150).all())  # ~uniform over 4 actions
        never = EGreedyModule(Categorical(4), eps_init=0.0, eps_end=0.0)
        assert bool((never(_actions())["action"] == 0).all())

    def test_fraction_replaced(self):
        torch.manual_seed(0)
        explore = EGreedyModule(Categorical(2), eps_init=0.5, eps_end=0.5)
        changed = (explore(_actions(20000))["action"] != 0).float().mean().item()
        assert abs(changed - 0.25) < 0.02  # replaced half the time, by a new action half of those

    def test_exploration_type_switch(self):
        explore = EGreedyModule(Categorical(4), eps_init=1.0)
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            assert bool((explore(_actions())["action"] == 0).all())
        with set_exploration_type(ExplorationType.RANDOM):
            assert bool((explore(_actions())["action"] != 0).any())

    @pytest.mark.parametrize("spec", [Categorical(4), OneHot(4), MultiOneHot([2, 2])])
    def test_mask(self, spec):
        explore = EGreedyModule(spec, eps_init=1.0, action_mask_key="mask")
        n = 200
        if isinstance(spec, MultiOneHot):
            mask = torch.tensor([False, True, True, False]).expand(n, 4)
            action = torch.zeros(n, 4, dtype=torch.bool)
        elif isinstance(spec, OneHot):
            mask = torch.tensor([False, False, True, True]).expand(n, 4)
            action = torch.zeros(n, 4, dtype=torch.bool)
        else:
            mask = torch.tensor([False, False, True, True]).expand(n, 4)
            action = torch.zeros(n, dtype=torch.long)
        out = explore(TensorDict(action=action, mask=mask, batch_size=[n]))["action"]
        if isinstance(spec, Categorical):
            assert set(out.tolist()) <= {2, 3}
        else:
            assert not bool((out.bool() & ~mask).any()) and bool((out.sum(-1) > 0).all())

    def test_one_hot_batched_spec_and_dtype(self):
        explore = EGreedyModule(OneHot(3, shape=(5, 3), dtype=torch.long), eps_init=1.0)
        out = explore(TensorDict(action=torch.zeros(5, 3, dtype=torch.long), batch_size=[5]))["action"]
        assert out.dtype == torch.long and bool((out.sum(-1) == 1).all())

    def test_composite_spec_and_nested_key(self):
        spec = Composite(agents=Composite(action=Categorical(3, shape=(2,)), shape=(2,)))
        explore = EGreedyModule(spec, eps_init=1.0, action_key=("agents", "action"))
        assert explore.spec.n == 3
        td = TensorDict(agents=TensorDict(action=torch.zeros(2, dtype=torch.long), batch_size=[2]))
        assert explore(td)["agents", "action"].shape == (2,)

    def test_missing_spec_or_action(self):
        explore = EGreedyModule(None, eps_init=1.0)
        with pytest.raises(RuntimeError, match="set_exploration_modules_spec_from_env"):
            explore(_actions(3))
        with pytest.raises(KeyError, match="place this module after the policy"):
            EGreedyModule(Categorical(2))(TensorDict(obs=torch.zeros(3)))
        with pytest.raises(ValueError, match="annealing_num_steps"):
            EGreedyModule(Categorical(2), annealing_num_steps=0)

    def test_after_q_value_actor(self):
        actor = QValueActor(nn.Linear(4, 3), spec=OneHot(3))
        policy = TensorDictSequential(actor, EGreedyModule(OneHot(3), eps_init=1.0))
        out = policy(TensorDict(observation=torch.randn(50, 4), batch_size=[50]))["action"]
        assert bool((out.sum(-1) == 1).all()) and out.dtype == torch.long  # the Q-value actor's int64, as TorchRL


class TestAdditiveGaussian:
    def test_noise_scale_and_annealing(self):
        torch.manual_seed(0)
        noise = AdditiveGaussianModule(Unbounded(1), sigma_init=2.0, sigma_end=1.0, annealing_num_steps=4, mean=0.5,
                                       std=1.0)
        out = noise(TensorDict(action=torch.zeros(20000, 1), batch_size=[20000]))["action"]
        assert abs(out.mean().item() - 1.0) < 0.05 and abs(out.std().item() - 2.0) < 0.05
        noise.step(2)
        assert math.isclose(float(noise.sigma), 1.5, rel_tol=1e-6)
        noise.step(10)
        assert math.isclose(float(noise.sigma), 1.0, rel_tol=1e-6)

    @pytest.mark.parametrize("safe", [True, False])
    def test_projection_onto_the_spec(self, safe):
        # as TorchRL (and its docs): the explored action is projected onto the spec whatever ``safe``
        noise = AdditiveGaussianModule(Bounded(-1.0, 1.0, (2,)), sigma_init=100.0, safe=safe)
        out = noise(TensorDict(action=torch.zeros(100, 2), batch_size=[100]))["action"]
        assert bool((out.abs() <= 1).all()) and bool((out.abs() == 1).any())

    def test_spec_may_come_later_but_must_be_set_before_exploring(self):
        # as TorchRL: built without a spec (set later from the env), it refuses to add noise until then
        noise = AdditiveGaussianModule(safe=True)
        with pytest.raises(RuntimeError, match="spec has not been set"):
            noise(TensorDict(action=torch.zeros(3)))
        noise.spec = Composite(action=Bounded(-1.0, 1.0, (3,)))
        assert isinstance(noise.spec, Bounded)
        assert bool((noise(TensorDict(action=torch.zeros(3)))["action"].abs() <= 1).all())

    def test_composite_specs_of_envs(self):
        # each module finds its action leaf in the full action spec of plain, transformed and batched envs
        from torchrl.envs import SerialEnv, TransformedEnv

        for env in (PendulumEnv(), TransformedEnv(PendulumEnv(), StepCounter()), SerialEnv(2, PendulumEnv)):
            for module in (AdditiveGaussianModule(env.full_action_spec), OrnsteinUhlenbeckProcessModule(env.full_action_spec)):
                assert module.spec is env.full_action_spec["action"] or module.spec == env.full_action_spec["action"]
                td = env.reset().set("action", env.full_action_spec["action"].zero())
                assert module(td)["action"].shape == env.full_action_spec["action"].shape
            env.close()

    def test_deterministic_is_noop(self):
        noise = AdditiveGaussianModule(sigma_init=1.0)
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            assert noise(TensorDict(action=torch.zeros(3)))["action"].tolist() == [0.0, 0.0, 0.0]


def _ou(**kwargs):
    return OrnsteinUhlenbeckProcessModule(Bounded(-10.0, 10.0, (2,)), **kwargs)


class TestOrnsteinUhlenbeck:
    def test_state_in_data(self):
        ou = _ou()
        td = TensorDict(action=torch.zeros(3, 2), is_init=torch.ones(3, 1, dtype=torch.bool), batch_size=[3])
        td = ou(td)
        assert td["_ou_steps"].tolist() == [1, 1, 1] and td["_ou_prev_noise"].shape == (3, 2)
        assert td["_ou_steps"].shape == (3,)  # one count per env, as TorchRL
        assert ou.in_keys == ["action"]  # is_init is read when present, not listed (as TorchRL)
        td["is_init"] = torch.tensor([[True], [False], [False]])
        td["action"] = torch.zeros(3, 2)
        td = ou(td)
        assert td["_ou_steps"].squeeze(-1).tolist() == [1, 2, 2]

    def test_known_update_without_randomness(self):
        ou = _ou(theta=0.5, mu=1.0, sigma=0.0, dt=0.1, eps_init=1.0)
        td = TensorDict(action=torch.zeros(2), is_init=torch.ones(1, dtype=torch.bool))
        td = ou(td)  # noise = 0 + 0.5 * (1 - 0) * 0.1
        torch.testing.assert_close(td["action"], torch.full((2,), 0.05))
        td["is_init"] = torch.zeros(1, dtype=torch.bool)
        td["action"] = torch.zeros(2)
        td = ou(td)  # noise = 0.05 + 0.5 * 0.95 * 0.1
        torch.testing.assert_close(td["action"], torch.full((2,), 0.05 + 0.0475))

    def test_sigma_annealing(self):
        ou = _ou(sigma=1.0, sigma_min=0.5, n_steps_annealing=10)
        sigma = ou._current_sigma(torch.tensor([0, 5, 100]))
        assert sigma.tolist() == [1.0, 0.75, 0.5]

    def test_missing_is_init_warns(self):
        ou = _ou()
        td = ou(TensorDict(action=torch.zeros(2)))
        td["action"] = torch.zeros(2)
        with pytest.warns(UserWarning, match="InitTracker"):
            ou(td)

    def test_resets_at_episode_starts_in_env(self):
        env = TransformedEnv(PendulumEnv(), StepCounter(max_steps=3))
        env.append_transform(InitTracker())
        actor = Actor(TensorDictModule(lambda o: o[..., :1] * 0, in_keys=["observation"], out_keys=["action"]))
        policy = TensorDictSequential(actor, OrnsteinUhlenbeckProcessModule(env.action_spec))
        rollout = env.rollout(7, policy, break_when_any_done=False)
        assert rollout["_ou_steps"].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1]
        assert rollout["is_init"].squeeze(-1).tolist() == [True, False, False, True, False, False, True]

    def test_deterministic_is_noop(self):
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            td = _ou()(TensorDict(action=torch.zeros(2)))
        assert "_ou_prev_noise" not in td and td["action"].tolist() == [0.0, 0.0]


class TestWrappers:
    def test_egreedy_wrapper(self):
        actor = QValueActor(nn.Linear(4, 3), spec=OneHot(3))
        with pytest.warns(DeprecationWarning, match="EGreedyModule"):
            explore = EGreedyWrapper(actor, eps_init=1.0, eps_end=0.0, annealing_num_steps=4)
        assert explore.exploration_module.spec == OneHot(3)
        explore.step(2)
        assert math.isclose(float(explore.eps), 0.5)
        out = explore(TensorDict(observation=torch.randn(20, 4), batch_size=[20]))
        assert bool((out["action"].sum(-1) == 1).all())

    def test_gaussian_and_ou_wrappers(self):
        actor = Actor(nn.Linear(3, 2), spec=Bounded(-1.0, 1.0, (2,)))
        with pytest.warns(DeprecationWarning, match="AdditiveGaussianModule"):
            gaussian = AdditiveGaussianWrapper(actor, sigma_init=50.0)
        assert bool((gaussian(TensorDict(observation=torch.randn(3)))["action"].abs() <= 1).all())
        with pytest.warns(DeprecationWarning, match="OrnsteinUhlenbeckProcessModule"):
            ou = OrnsteinUhlenbeckProcessWrapper(actor)
        assert "_ou_prev_noise" in ou(TensorDict(observation=torch.randn(3)))

    def test_warns_once(self):
        actor = Actor(nn.Linear(3, 2))
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            AdditiveGaussianWrapper(actor, safe=False)
            AdditiveGaussianWrapper(actor, safe=False)
        assert sum(issubclass(w.category, DeprecationWarning) for w in record) == 1


def test_set_exploration_modules_spec_from_env():
    env = PendulumEnv()
    missing = AdditiveGaussianModule()
    given = EGreedyModule(Categorical(2))
    policy = TensorDictSequential(
        TensorDictModule(lambda o: o[..., :1], in_keys=["observation"], out_keys=["action"]), missing
    )
    set_exploration_modules_spec_from_env(policy, env)
    set_exploration_modules_spec_from_env(TensorDictSequential(given), env)
    assert missing.spec == env.action_spec
    assert isinstance(given.spec, Categorical)


def test_env_policy_option_sets_exploration_spec_and_init_tracker():
    noise = OrnsteinUhlenbeckProcessModule(None)
    actor = Actor(TensorDictModule(lambda o: o[..., :1] * 0, in_keys=["observation"], out_keys=["action"]))
    policy = TensorDictSequential(actor, noise)
    env = PendulumEnv(policy=policy)
    assert noise.spec is not None and noise.spec.shape == (1,)
    assert "is_init" in env.observation_spec.keys()
    assert env.rollout(3, policy)["_ou_steps"].squeeze(-1).tolist() == [1, 2, 3]
