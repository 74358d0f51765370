"""Action checks of ``env.step`` in check mode / with ``run_type_checks`` (``torchrl/envs/_spec_checks.py``)."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from torchrl import check_mode, set_check_mode
from torchrl.data import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import (
    check_env_specs,
    EnvBase,
    GymEnv,
    ParallelEnv,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    TransformedEnv,
)
from torchrl.testing import NestedCountingEnv

BAD_ACTIONS = [
    (torch.tensor([3.5]), r"is out of bounds \[-2.0, 2.0\]: got max 3.5\.$"),
    (torch.tensor([-2.5]), r"is out of bounds \[-2.0, 2.0\]: got min -2.5\.$"),
    (torch.tensor([float("nan")]), r"contains NaN \(1 of 1 values\)\.$"),
    (torch.tensor([float("inf")]), r"contains inf \(1 of 1 values\)\.$"),
    (torch.tensor([1]), r"has dtype torch.int64, expected torch.float32\.$"),
]


class Toy(EnvBase):
    """One observation entry; the action spec is whatever the test passes."""

    def __init__(self, action_spec, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(obs=Unbounded((1,)))
        self.action_spec = action_spec

    def _reset(self, tensordict, **kwargs):
        return TensorDict(obs=torch.zeros(1))

    def _step(self, tensordict):
        return TensorDict(obs=torch.zeros(1), reward=torch.zeros(1), done=torch.zeros(1, dtype=torch.bool))

    def _set_seed(self, seed):
        pass


def _step_with(env, action):
    td = env.reset()
    td["action"] = action
    return env.step(td)


class TestPendulum:
    @pytest.mark.parametrize("action,message", BAD_ACTIONS)
    def test_check_mode_rejects(self, action, message):
        env = PendulumEnv(seed=0)
        with set_check_mode(True):
            with pytest.raises(ValueError, match=r"^PendulumEnv.step: action 'action' " + message):
                _step_with(env, action)

    @pytest.mark.parametrize("action,message", BAD_ACTIONS)
    def test_run_type_checks_rejects_whatever_the_switch_says(self, action, message):
        env = PendulumEnv(seed=0, run_type_checks=True)
        with set_check_mode(False):
            with pytest.raises(ValueError, match=r"^PendulumEnv.step: action 'action' " + message):
                _step_with(env, action)

    def test_off_by_default_out_of_bounds_torque_is_clipped(self):
        # TorchRL's default: no value check; the pendulum clips the torque to [-2, 2]
        env = PendulumEnv(seed=0)
        assert not check_mode()
        start = env.reset()
        high = env.step(start.clone().set("action", torch.tensor([3.5])))
        clipped = env.step(start.clone().set("action", torch.tensor([2.0])))
        torch.testing.assert_close(high["next", "observation"], clipped["next", "observation"])
        assert torch.isnan(env.step(start.clone().set("action", torch.tensor([float("nan")])))["next", "reward"]).all()

    def test_valid_actions_pass_and_rejected_step_writes_nothing(self):
        env = PendulumEnv(seed=0)
        with set_check_mode(True):
            td = env.rand_action(env.reset())
            assert env.step(td)["next", "reward"].shape == (1,)
            td = env.reset()
            td["action"] = torch.tensor([9.0])
            with pytest.raises(ValueError):
                env.step(td)
            assert "next" not in td.keys()

    def test_batch_of_states_on_an_unbatched_env(self):
        env = PendulumEnv(seed=0)
        td = env.rand_action(env.reset(env.gen_params(batch_size=[4])))
        td["action"][2] = float("nan")
        with set_check_mode(True), pytest.raises(ValueError, match=r"contains NaN \(1 of 4 values\)"):
            env.step(td)


class TestSpecKinds:
    def test_per_element_bounds(self):
        env = Toy(Bounded(torch.tensor([-1.0, -2.0]), torch.tensor([1.0, 2.0]), (2,)))
        with set_check_mode(True), pytest.raises(
            ValueError,
            match=r"Toy.step: action 'action' is out of its per-element bounds \(max 1.5\). Value 1.5 at index \(0,\) "
                  r"is outside \[-1.0, 1.0\]",
        ):
            _step_with(env, torch.tensor([1.5, 1.5]))
        with set_check_mode(True):
            assert _step_with(env, torch.tensor([0.5, 1.5]))["next", "reward"].shape == (1,)

    def test_unbounded_action_rejects_inf_only_in_check_mode(self):
        env = Toy(Unbounded((1,)))
        assert _step_with(env, torch.tensor([float("inf")]))["next", "reward"].shape == (1,)
        with set_check_mode(True), pytest.raises(ValueError, match=r"action 'action' contains inf"):
            _step_with(env, torch.tensor([float("-inf")]))

    def test_categorical_range_and_mask(self):
        spec = Categorical(3, shape=(), dtype=torch.int64)
        spec.update_mask(torch.tensor([True, False, True]))
        env = Toy(spec)
        with set_check_mode(True):
            with pytest.raises(ValueError, match=r"action 'action' is out of range: expected integers in \[0, 2\] "
                                                 r"\(Categorical\(n=3\)\): got min 3, max 3"):
                _step_with(env, torch.tensor(3))
            with pytest.raises(ValueError, match=r"action 'action' is a masked-out choice: the spec's mask does not "
                                                 r"allow value 1 at index \(\)"):
                _step_with(env, torch.tensor(1))
            assert _step_with(env, torch.tensor(2))["next", "reward"].shape == (1,)

    def test_nested_action_key_is_named_in_full(self):
        env = NestedCountingEnv(nested_dim=3)
        td = env.rand_action(env.reset())
        td["data", "action"] = torch.full((3, 1), 2, dtype=torch.int8)
        with set_check_mode(True), pytest.raises(
            ValueError, match=r"NestedCountingEnv.step: action \('data', 'action'\) is not binary \(0 or 1\). "
                              r"Value 2 at index \(0, 0\) is neither 0 nor 1"
        ):
            env.step(td)


class TestWrappers:
    def test_transformed_env_checks_once_at_the_outer_level(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter(5))
        with set_check_mode(True), pytest.raises(ValueError, match=r"^TransformedEnv.step: action 'action' is out of "
                                                                   r"bounds \[-2.0, 2.0\]: got max 3.5"):
            _step_with(env, torch.tensor([3.5]))
        assert env.rollout(3).shape == (3,)

    def test_serial_env_checks_the_batch(self):
        env = SerialEnv(2, PendulumEnv)
        try:
            td = env.rand_action(env.reset())
            td["action"][1] = float("nan")
            with set_check_mode(True), pytest.raises(ValueError, match=r"^SerialEnv.step: action 'action' contains "
                                                                       r"NaN \(1 of 2 values\)"):
                env.step(td)
        finally:
            env.close()

    def test_parallel_env_checks_in_the_main_process(self):
        env = ParallelEnv(2, PendulumEnv)
        try:
            td = env.rand_action(env.reset())
            td["action"] = torch.full((2, 1), -7.0)
            with set_check_mode(True):
                with pytest.raises(ValueError, match=r"^ParallelEnv.step: action 'action' is out of bounds \[-2.0, "
                                                     r"2.0\]: got min -7.0"):
                    env.step(td)
                # the workers never saw the bad action: the env keeps stepping
                assert env.step(env.rand_action(env.reset()))["next", "reward"].shape == (2, 1)
        finally:
            env.close()

    def test_gym_env_step_and_rollout(self):
        env = GymEnv("Pendulum-v1")
        with set_check_mode(True):
            with pytest.raises(ValueError, match=r"^GymEnv.step: action 'action' is out of bounds \[-2.0, 2.0\]: got "
                                                 r"max 3.5"):
                _step_with(env, torch.tensor([3.5]))
            policy = TensorDictModule(lambda obs: torch.full((*obs.shape[:-1], 1), 5.0), ["observation"], ["action"])
            # a rollout takes the per-step path in check mode, so the policy's actions are checked too
            with pytest.raises(ValueError, match=r"action 'action' is out of bounds \[-2.0, 2.0\]: got max 5.0"):
                env.rollout(3, policy)
            assert env.rollout(3).shape == (3,)
        assert env.rollout(3, policy).shape == (3,)  # off: the gym env clips the torque itself

    def test_gym_env_discrete_actions(self):
        onehot = GymEnv("CartPole-v1")
        index = GymEnv("CartPole-v1", categorical_action_encoding=True)
        with set_check_mode(True):
            with pytest.raises(ValueError, match=r"action 'action' is not a valid one-hot vector \(OneHot\(n=2\)\)"):
                _step_with(onehot, torch.tensor([1, 1]))
            with pytest.raises(ValueError, match=r"has dtype torch.float32, expected torch.int64"):
                _step_with(onehot, torch.tensor([0.0, 1.0]))
            with pytest.raises(ValueError, match=r"expected integers in \[0, 1\] \(Categorical\(n=2\)\): got min 2"):
                _step_with(index, torch.tensor(2))
            assert _step_with(index, torch.tensor(1))["next", "reward"].shape == (1,)


class TestCheckEnvSpecs:
    def test_runs_with_the_action_checks_on(self):
        class BadRandom(Toy):
            def rand_action(self, tensordict=None):
                tensordict.set("action", torch.tensor([5.0]))
                return tensordict

        env = BadRandom(Bounded(-1.0, 1.0, (1,)))
        with pytest.raises(ValueError, match=r"BadRandom.step: action 'action' is out of bounds \[-1.0, 1.0\]: got "
                                             r"max 5.0"):
            check_env_specs(env)
        assert not check_mode()  # restored afterwards
        check_env_specs(PendulumEnv(seed=0))
