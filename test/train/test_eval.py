"""``evaluate``: deterministic episode returns, batched or repeated rollouts."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from torchrl.data import Bounded
from torchrl.modules import AdditiveGaussianModule
from torchrl.train import evaluate, make_env
from torchrl.train._eval import _first_episode_returns


def _zero_policy():
    return TensorDictModule(lambda obs: torch.zeros(*obs.shape[:-1], 1), ["observation"], ["action"])


def test_first_episode_returns_known_answer():
    reward = torch.tensor([[1.0, 2.0, 3.0, 4.0], [10.0, 20.0, 30.0, 40.0]]).unsqueeze(-1)
    done = torch.tensor([[False, True, False, True], [False, False, False, False]]).unsqueeze(-1)
    rollout = TensorDict({"next": {"reward": reward, "done": done}}, [2, 4])
    assert _first_episode_returns(rollout).tolist() == [3.0, 100.0]  # env 0 stops at its first done


def test_batched_env_matches_manual_rollout():
    env = make_env("PendulumEnv", seed=3, max_episode_steps=20, batch_size=4)
    twin = make_env("PendulumEnv", seed=3, max_episode_steps=20, batch_size=4)
    returns = evaluate(env, _zero_policy(), episodes=4, max_steps=50)
    manual = twin.rollout(20, _zero_policy())["next", "reward"].sum((1, 2))
    torch.testing.assert_close(returns, manual)


def test_repeats_rollouts_until_enough_episodes():
    env = make_env("PendulumEnv", seed=0, max_episode_steps=5)  # one env: one episode per rollout
    returns = evaluate(env, _zero_policy(), episodes=3, max_steps=10)
    assert returns.shape == (3,) and returns.dtype == torch.float32
    assert len(set(returns.tolist())) == 3  # three different initial states
    assert evaluate(make_env("PendulumEnv", seed=0, max_episode_steps=5, batch_size=4), _zero_policy(),
                    episodes=6, max_steps=10).shape == (6,)


def test_exploration_noise_is_off():
    spec = Bounded(-2.0, 2.0, (1,))
    noisy = TensorDictSequential(_zero_policy(), AdditiveGaussianModule(spec, sigma_init=1.0, sigma_end=1.0, safe=True))
    a = evaluate(make_env("PendulumEnv", seed=9, max_episode_steps=10, batch_size=2), noisy, episodes=2, max_steps=10)
    b = evaluate(make_env("PendulumEnv", seed=9, max_episode_steps=10, batch_size=2), _zero_policy(), episodes=2,
                 max_steps=10)
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("kwargs", [{"episodes": 0}, {"max_steps": -1}])
def test_rejects_non_positive_counts(kwargs):
    with pytest.raises(ValueError, match="evaluate: episodes and max_steps must be positive"):
        evaluate(make_env("PendulumEnv", max_episode_steps=5), _zero_policy(), **kwargs)
