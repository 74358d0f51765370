"""``PendulumEnv``: gymnasium Pendulum-v1 dynamics, differentiability, both batching styles, the seed example."""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded
from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv, check_env_specs


def _gym_pendulum(th: float, thdot: float):
    env = gym.make("Pendulum-v1")
    env.reset(seed=0)
    env.unwrapped.state = np.array([th, thdot], dtype=np.float64)
    return env


class TestSpecs:
    def test_keys_and_bounds(self):
        env = PendulumEnv()
        assert set(env.observation_keys) >= {"th", "thdot", "observation"}
        assert ("params", "g") in env.observation_keys
        obs = env.observation_spec["observation"]
        assert obs.shape == (3,)
        assert obs.space.low.tolist() == [-1.0, -1.0, -8.0] and obs.space.high.tolist() == [1.0, 1.0, 8.0]
        assert isinstance(env.action_spec, Bounded) and env.action_spec.shape == (1,)
        assert env.action_spec.space.low.item() == -2.0 and env.action_spec.space.high.item() == 2.0
        assert env.reward_spec.shape == (1,)

    @pytest.mark.parametrize("batch_size", [[], [3]])
    def test_check_env_specs(self, batch_size):
        check_env_specs(PendulumEnv(batch_size=batch_size, seed=0))

    def test_observation_is_cos_sin_thdot(self):
        td = PendulumEnv(seed=0).reset()
        th, thdot = td["th"], td["thdot"]
        torch.testing.assert_close(td["observation"], torch.stack([th.cos(), th.sin(), thdot]))

    def test_initial_state_distribution(self):
        td = PendulumEnv(batch_size=[2000], seed=0).reset()
        th, thdot = td["th"], td["thdot"]
        assert th.min() >= -math.pi and th.max() < math.pi
        assert thdot.min() >= -1 and thdot.max() < 1
        assert th.min() < -3 and th.max() > 3 and thdot.abs().max() > 0.99

    def test_never_done_by_itself(self):
        data = PendulumEnv(seed=0).rollout(300)
        assert data.shape == (300,)
        assert not data["next", "done"].any() and not data["next", "terminated"].any()


class TestGymnasiumEquivalence:
    def test_each_step_matches_from_the_same_state(self):
        torch.manual_seed(0)
        env = PendulumEnv(seed=0)
        td = env.reset()
        for _ in range(60):
            gym_env = _gym_pendulum(td["th"].item(), td["thdot"].item())
            action = torch.rand(1) * 6 - 3  # also outside [-2, 2]: both clip the torque
            td["action"] = action
            td = env.step(td)
            obs, reward, terminated, truncated, _ = gym_env.step(action.numpy())
            np.testing.assert_allclose(td["next", "observation"].numpy(), obs, atol=1e-5)
            assert td["next", "reward"].item() == pytest.approx(reward, abs=1e-4)
            assert not terminated and td["next", "terminated"].item() is False
            td = env.step_mdp(td)

    def test_a_long_trajectory_stays_close(self):
        torch.manual_seed(1)
        env = PendulumEnv(seed=1)
        td = env.reset()
        gym_env = _gym_pendulum(td["th"].item(), td["thdot"].item())
        rewards, gym_rewards = [], []
        for _ in range(100):
            action = torch.rand(1) * 4 - 2
            td["action"] = action
            td = env.step(td)
            obs, reward, *_ = gym_env.step(action.numpy())
            np.testing.assert_allclose(td["next", "observation"].numpy(), obs, atol=1e-3)
            rewards.append(td["next", "reward"].item())
            gym_rewards.append(reward)
            td = env.step_mdp(td)
        np.testing.assert_allclose(rewards, gym_rewards, atol=1e-3)

    def test_known_step(self):
        # hanging down at rest, full torque: thdot' = (3g/2l sin(pi) + 3/(m l^2) * 2) * dt = 0.3
        env = PendulumEnv()
        td = env.reset()
        td["th"] = torch.tensor(math.pi)
        td["thdot"] = torch.tensor(0.0)
        td["action"] = torch.tensor([2.0])
        nxt = env.step(td)["next"]
        assert nxt["thdot"].item() == pytest.approx(0.3, abs=1e-5)
        assert nxt["th"].item() == pytest.approx(math.pi + 0.3 * 0.05, abs=1e-5)
        assert nxt["reward"].item() == pytest.approx(-(math.pi**2 + 0.001 * 4), abs=1e-4)

    def test_speed_is_clipped(self):
        env = PendulumEnv()
        td = env.reset()
        td["th"] = torch.tensor(math.pi / 2)
        td["thdot"] = torch.tensor(7.9)
        td["action"] = torch.tensor([2.0])
        assert env.step(td)["next", "thdot"].item() == pytest.approx(8.0)


class TestDifferentiable:
    def test_reward_gradient_with_respect_to_action(self):
        env = PendulumEnv(seed=0)
        td = env.reset()
        action = torch.tensor([0.5], requires_grad=True)
        td["action"] = action
        env.step(td)["next", "reward"].sum().backward()
        # reward = -(... + 0.001 u^2) and the current state does not depend on u
        assert action.grad.item() == pytest.approx(-0.001, abs=1e-7)

    def test_gradient_flows_through_the_dynamics(self):
        env = PendulumEnv(seed=0)
        start = env.reset()

        def two_step_reward(u0: torch.Tensor) -> torch.Tensor:
            td = start.clone()
            td["action"] = u0
            td = env.step_mdp(env.step(td))
            td["action"] = torch.zeros(1)
            return env.step(td)["next", "reward"].sum()

        u0 = torch.tensor([0.3], dtype=torch.float32, requires_grad=True)
        two_step_reward(u0).backward()
        eps = 1e-2
        numeric = (two_step_reward(torch.tensor([0.3 + eps])) - two_step_reward(torch.tensor([0.3 - eps]))) / (2 * eps)
        assert u0.grad.abs().item() > 1e-3
        assert u0.grad.item() == pytest.approx(numeric.item(), rel=2e-2, abs=1e-4)

    def test_gradient_with_respect_to_params(self):
        # two passes over the very same parameter tensors: products of parameters that require grad belong
        # to one graph and must not be kept for the next pass
        env = PendulumEnv(seed=0)
        params = env.gen_params()
        g = torch.tensor(10.0, requires_grad=True)
        params["params", "g"] = g
        start = env.reset(params)
        grads = []
        for _ in range(2):
            td = start.copy()  # shallow: the same parameter tensors at each pass
            td["action"] = torch.zeros(1)
            td = env.step_mdp(env.step(td))
            td["action"] = torch.zeros(1)
            env.step(td)["next", "reward"].sum().backward()
            grads.append(g.grad.clone())
            g.grad = None
        assert grads[0].abs().item() > 0
        torch.testing.assert_close(grads[0], grads[1])


class TestBatching:
    def test_batch_size_constructor(self):
        env = PendulumEnv(batch_size=[4], seed=0)
        data = env.rollout(5)
        assert data.shape == (4, 5)
        assert data["next", "observation"].shape == (4, 5, 3)
        assert data["params", "g"].shape == (4, 5)

    def test_gen_params_pattern(self):
        env = PendulumEnv(seed=0)
        td = env.reset(env.gen_params(batch_size=[10]))
        assert td.batch_size == (10,) and td["th"].shape == (10,)
        data = env.rollout(3, tensordict=td, auto_reset=False)
        assert data.shape == (10, 3)
        assert len(set(td["th"].tolist())) == 10

    def test_batched_step_equals_single_steps(self):
        torch.manual_seed(0)
        env = PendulumEnv(seed=0)
        batch = env.reset(env.gen_params(batch_size=[5]))
        batch["action"] = torch.rand(5, 1) * 4 - 2
        out = env.step(batch.clone())["next"]
        for i in range(5):
            single = env.step(batch[i].clone())["next"]
            torch.testing.assert_close(out[i]["observation"], single["observation"])
            torch.testing.assert_close(out[i]["reward"], single["reward"])

    def test_params_change_the_dynamics(self):
        env = PendulumEnv()
        td = env.reset(env.gen_params(g=0.0))
        td["th"] = torch.tensor(1.0)
        td["thdot"] = torch.tensor(0.5)
        td["action"] = torch.zeros(1)
        assert env.step(td)["next", "thdot"].item() == pytest.approx(0.5)

    def test_partial_reset_of_a_batch(self):
        env = PendulumEnv(batch_size=[3], seed=0)
        td = env.rand_step(env.reset())
        td = env.step_mdp(td)
        before = td["th"].clone()
        td["_reset"] = torch.tensor([[False], [True], [False]])
        after = env.reset(td)["th"]
        assert after[0] == before[0] and after[2] == before[2] and after[1] != before[1]

    @pytest.mark.parametrize("flag", [True, False])
    def test_one_element_reset_mask(self, flag):
        env = PendulumEnv(seed=0)
        td = env.step_mdp(env.rand_step(env.reset()))
        td["_reset"] = torch.tensor([flag])
        th = td["th"]
        out = env.reset(td)
        assert (out["th"] is th) is not flag  # an unmasked state is kept as it is
        assert out["th"].shape == td["th"].shape and out["observation"].shape == (3,)
        torch.testing.assert_close(out["observation"], torch.stack([out["th"].cos(), out["th"].sin(), out["thdot"]]))


class TestStepCaches:
    """The step reuses ``sin(th)`` from the previous step and keeps its constants between steps: neither may
    go stale when the state or the parameters change in between."""

    @staticmethod
    def _fresh_step(td):
        return PendulumEnv(seed=0).step(td.clone())["next"]  # a new env: no memo, no cached constants

    def test_state_edited_in_place_between_steps(self):
        env = PendulumEnv(seed=0)
        td = env.reset()
        td["action"] = torch.tensor([0.5])
        td = env.step_mdp(env.step(td))
        td["th"].add_(1.0)  # same tensor, new version: the memoised sin(th) no longer applies
        td["action"] = torch.tensor([0.5])
        expected = self._fresh_step(td)
        torch.testing.assert_close(env.step(td)["next", "thdot"], expected["thdot"], rtol=0, atol=0)

    def test_state_replaced_between_steps(self):
        env = PendulumEnv(seed=0)
        td = env.step_mdp(env.step(env.reset().set("action", torch.tensor([0.5]))))
        td["th"] = td["th"] + 1.0
        td["action"] = torch.tensor([0.5])
        torch.testing.assert_close(env.step(td)["next", "thdot"], self._fresh_step(td)["thdot"], rtol=0, atol=0)

    def test_memoised_rollout_equals_step_by_step_fresh_envs(self):
        torch.manual_seed(0)
        env = PendulumEnv(seed=0)
        data = env.rollout(20)
        for t in range(20):
            step = data[t].exclude("next")
            torch.testing.assert_close(data[t]["next", "thdot"], self._fresh_step(step)["thdot"], rtol=0, atol=0)

    def test_parameter_edited_in_place(self):
        env = PendulumEnv(seed=0)
        td = env.reset()
        td["th"], td["thdot"], td["action"] = torch.tensor(1.0), torch.tensor(0.0), torch.zeros(1)
        with_gravity = env.step(td.clone())["next", "thdot"]
        td["params", "g"].zero_()
        assert with_gravity.item() > 0.1 and env.step(td.clone())["next", "thdot"].item() == 0.0

    def test_float64_state(self):
        env = PendulumEnv(seed=0)
        td = env.reset()
        td64 = td.apply(lambda t: t.double() if t.is_floating_point() else t)
        td["action"], td64["action"] = torch.tensor([1.0]), torch.tensor([1.0], dtype=torch.float64)
        out64 = env.step(td64)["next"]
        assert out64["thdot"].dtype == torch.float64 and out64["reward"].dtype == torch.float64
        torch.testing.assert_close(out64["thdot"].float(), env.step(td)["next", "thdot"])


class TestSeeding:
    def test_same_seed_same_episode(self):
        def run(seed):
            env = PendulumEnv(seed=seed)
            torch.manual_seed(seed)
            return env.rollout(10)

        a, b, c = run(0), run(0), run(1)
        assert torch.equal(a["next", "observation"], b["next", "observation"])
        assert not torch.equal(a["observation"][0], c["observation"][0])


def test_seed_example_runs_as_written():
    # First example of the user documentation (shared/seeds/000), unchanged.
    import torch
    from tensordict.nn import TensorDictModule
    from torch import nn

    from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv

    # A PyTorch-native environment with an ordinary transform stack.
    env = TransformedEnv(PendulumEnv(), StepCounter(max_steps=200))
    # Policies are regular nn.Modules wrapped with explicit TensorDict keys.
    policy = TensorDictModule(
        nn.Sequential(
            nn.LazyLinear(64),
            nn.Tanh(),
            nn.Linear(64, 1),
            nn.Tanh(),
        ),
        in_keys=["observation"],
        out_keys=["action"],
    )
    rollout = env.rollout(max_steps=32, policy=policy)
    assert rollout.batch_size == torch.Size([32])
    assert rollout["next", "reward"].shape[:1] == torch.Size([32])


def test_step_counter_truncates_at_200():
    env = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=200))
    data = env.rollout(500)
    assert data.shape == (200,)
    assert data["next", "truncated"].squeeze(-1).nonzero().view(-1).tolist() == [199]
    assert data["next", "done"][-1].item() is True
    assert data["next", "terminated"][-1].item() is False
    assert isinstance(data, TensorDict)


def test_per_pendulum_parameters_follow_their_own_dynamics():
    import torch

    from torchrl.envs import PendulumEnv

    env = PendulumEnv(seed=0)
    params = env.gen_params(batch_size=[2])
    params["params", "g"] = torch.tensor([10.0, 0.0])  # second pendulum without gravity
    td = env.reset(params)
    td["th"] = torch.tensor([1.0, 1.0])
    td["thdot"] = torch.zeros(2)
    td["action"] = torch.zeros(2, 1)
    out = env.step(td)["next"]
    dt = 0.05
    expected_thdot = torch.tensor([3 * 10.0 / 2 * torch.sin(torch.tensor(1.0)) * dt, 0.0])
    torch.testing.assert_close(out["thdot"], expected_thdot)
    torch.testing.assert_close(out["th"], torch.tensor([1.0, 1.0]) + expected_thdot * dt)


def test_gradients_flow_through_tensor_parameters():
    import torch

    from torchrl.envs import PendulumEnv

    env = PendulumEnv(seed=0)
    params = env.gen_params(batch_size=[3])
    g = params["params", "g"].clone().requires_grad_(True)
    params["params", "g"] = g
    td = env.reset(params)
    td["action"] = torch.zeros(3, 1)
    first = env.step(td)["next", "reward"]
    nxt = env.step(env.step_mdp(env.step(td)).set("action", torch.zeros(3, 1)))["next", "reward"]
    nxt.sum().backward()
    assert g.grad is not None and torch.isfinite(g.grad).all() and g.grad.abs().sum() > 0
    assert first.shape == (3, 1) and not first.requires_grad  # the first reward depends on the state only
