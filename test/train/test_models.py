"""``make_actor_critic`` and ``ACTIVATIONS``: the networks PPO and A2C share."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from torchrl.train import ACTIVATIONS, make_actor_critic, make_env


def test_continuous_actor_is_bounded_tanh_gaussian_with_log_prob():
    env = make_env("PendulumEnv", seed=0, max_episode_steps=10)
    actor, critic = make_actor_critic(env, hidden_sizes=[8, 8], activation="relu")
    td = critic(actor(env.reset()))
    high = float(env.action_spec.space.high.max())
    assert td["action"].shape == (1,) and td["action"].abs().max() <= high
    assert td["action_log_prob"].shape == () and td["state_value"].shape == (1,)
    assert any(isinstance(m, nn.ReLU) for m in actor.modules())


def test_discrete_actor_samples_one_hot_actions():
    pytest.importorskip("gymnasium")
    env = make_env("CartPole-v1", seed=0)
    actor, _ = make_actor_critic(env, hidden_sizes=[8])
    action = actor(env.reset())["action"]
    assert action.shape == (2,) and action.sum() == 1 and action.dtype in (torch.int64, torch.bool, torch.long)


def test_unknown_activation_is_named():
    env = make_env("PendulumEnv", max_episode_steps=10)
    with pytest.raises(ValueError, match=r"unknown activation 'gelu'; choose one of \['elu', 'relu', 'silu', 'tanh'\]"):
        make_actor_critic(env, hidden_sizes=[4], activation="gelu")


def test_activation_names():
    assert ACTIVATIONS["tanh"] is nn.Tanh and set(ACTIVATIONS) == {"relu", "tanh", "elu", "silu"}
