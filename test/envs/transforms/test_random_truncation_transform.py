"""RandomTruncationTransform: random horizons after a StepCounter; numbers from TorchRL 0.14.1."""
import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import Compose, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import RandomTruncationTransform as Exported
from torchrl.envs.transforms import _random_truncation_transform as module
from torchrl.envs.transforms._random_truncation_transform import RandomTruncationTransform
from torchrl.testing.mocking_classes import CountingEnv

from test.envs.transforms.contract import TransformContract


def _env(batch=4, **kwargs):
    kwargs.setdefault("min_horizon", 3)
    kwargs.setdefault("max_horizon", 6)
    return TransformedEnv(CountingEnv(batch_size=(batch,), max_steps=1000),
                          Compose(StepCounter(), RandomTruncationTransform(**kwargs)))


class TestRandomTruncationTransform(TransformContract):
    env_only = True

    def make_transform(self):
        return RandomTruncationTransform(2, 4, prob=0.5)

    def wrap(self, env, transform):  # the transform reads a StepCounter placed before it
        if isinstance(transform, Compose) and any(isinstance(t, StepCounter) for t in transform):
            return TransformedEnv(env, transform)
        return TransformedEnv(env, Compose(StepCounter(), transform))

    def test_exported(self):
        assert Exported is RandomTruncationTransform

    def test_initial_spread_then_max_horizon(self):
        env = _env()
        torch.manual_seed(0)
        data = env.rollout(14, break_when_any_done=False)
        # the same pattern as TorchRL 0.14.1: first horizons [3, 4, 6, 1], then max_horizon=6
        assert data["next", "truncated"].squeeze(-1).int().tolist() == [
            [0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0],
            [0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
            [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0],
            [1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0],
        ]
        assert data["next", "step_count"][0].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5]
        assert (data["next", "done"] == data["next", "truncated"]).all()
        assert not data["next", "terminated"].any()

    def test_random_horizons_stay_in_range(self):
        env = _env(batch=16, prob=1.0)
        torch.manual_seed(0)
        data = env.rollout(40, break_when_any_done=False)
        count, truncated = data["next", "step_count"], data["next", "truncated"]
        lengths = count[truncated].tolist()
        assert lengths and max(lengths) <= 6
        # after each sub-env's first truncation (the initial spread, 1..6), every episode lasts 3..6 steps
        first = truncated.squeeze(-1).int().argmax(1)
        later = [int(count[i, t]) for i, t in truncated.squeeze(-1).nonzero().tolist() if t > first[i]]
        assert later and min(later) >= 3 and max(later) <= 6 and len(set(later)) > 1

    def test_first_episode_prob(self):
        env = _env(batch=32, prob=0.0, first_episode_prob=1.0, min_horizon=2, max_horizon=2)
        torch.manual_seed(0)
        data = env.rollout(8, break_when_any_done=False)
        # spread (1 or 2), then one episode of 2 (first_episode_prob), then max_horizon=2 anyway
        assert (data["next", "step_count"] <= 2).all()

    def test_partial_reset_keeps_other_horizons(self):
        env = _env(batch=2)
        torch.manual_seed(0)
        env.reset()
        t = env.transform[1]
        before = t._horizons["step_count"].clone()
        td = TensorDict(_reset=torch.tensor([[True], [False]]), batch_size=[2])
        env.reset(td)
        assert t._horizons["step_count"][1] == before[1]
        assert t._episodes["step_count"].squeeze(-1).tolist() == [2, 1]

    def test_adds_a_truncated_spec(self):
        env = TransformedEnv(PendulumEnv(), Compose(StepCounter(), RandomTruncationTransform(2, 3)))
        assert "truncated" in env.full_done_spec.keys()
        assert env.full_done_spec["truncated"].dtype == torch.bool
        check_env_specs(env, seed=0)
        data = env.rollout(10, break_when_any_done=False)
        assert (data["next", "step_count"] <= 3).all()

    def test_attributes(self):
        t = RandomTruncationTransform(3, 6)
        assert (t.min_horizon, t.max_horizon, t.prob, t.first_episode_prob) == (3, 6, 0.0, 0.0)
        assert (t.step_count_key, t.truncated_key, t.done_key) == ("step_count", "truncated", "done")
        assert t.in_keys == [] and t.out_keys == [] and list(t.state_dict()) == []
        assert RandomTruncationTransform(3, 6, prob=0.1).first_episode_prob == 0.1

    def test_needs_a_step_counter_before_it(self):
        with pytest.raises(RuntimeError, match="requires a StepCounter earlier in the transform chain"):
            TransformedEnv(PendulumEnv(), RandomTruncationTransform(3, 6))
        with pytest.raises(RuntimeError, match="requires a StepCounter earlier"):
            TransformedEnv(PendulumEnv(), Compose(RandomTruncationTransform(3, 6), StepCounter()))
        env = TransformedEnv(PendulumEnv(), Compose(StepCounter(step_count_key="sc"),
                                                    RandomTruncationTransform(1, 1, step_count_key="sc")))
        data = env.rollout(3, break_when_any_done=False)
        assert data["next", "truncated"].all()  # every horizon is 1

    def test_errors(self):
        with pytest.raises(ValueError, match="min_horizon must be >= 1, got 0"):
            RandomTruncationTransform(0, 5)
        with pytest.raises(ValueError, match=r"min_horizon \(5\) must be <= max_horizon \(3\)"):
            RandomTruncationTransform(5, 3)
        with pytest.raises(ValueError, match=r"prob must be in \[0, 1\], got 1.5"):
            RandomTruncationTransform(3, 6, 1.5)
        with pytest.raises(ValueError, match=r"first_episode_prob must be in \[0, 1\], got -0.1"):
            RandomTruncationTransform(3, 6, 0.5, -0.1)
        with pytest.raises(ValueError, match="max_horizon must be an int"):
            RandomTruncationTransform(3, 6.5)
        with pytest.raises(NotImplementedError, match="cannot be applied to stored data"):
            RandomTruncationTransform(3, 6)(TensorDict(step_count=torch.ones(2, 1), batch_size=[2]))

    def test_docstring_examples(self):
        assert doctest.testmod(module, raise_on_error=True).attempted > 0
