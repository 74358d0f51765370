import doctest
import math

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import Compose, EnvBase, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _auto_reset as auto_reset
from torchrl.envs.transforms._auto_reset import AutoResetEnv, AutoResetTransform

from test.envs.transforms.contract import TransformContract


class SelfResettingEnv(EnvBase):
    """Sub-env ``i`` ends after ``lengths[i]`` steps and restarts by itself in the same step.

    Observations: ``count`` (float, steps since the episode start), ``episode`` (int64, episodes started so
    far) and ``even`` (bool, count is even). The step that ends an episode returns the next episode's
    first observation (count 0), as auto-resetting simulators do. ``resets`` counts calls to ``_reset``.
    """

    def __init__(self, lengths=(3,), batch_size=None):
        super().__init__(batch_size=batch_size if batch_size is not None else (len(lengths),))
        shape = self.batch_size
        self.lengths = torch.tensor(lengths).expand(shape) if shape else torch.tensor(lengths[0])
        self.observation_spec = Composite(
            count=Unbounded((*shape, 1)),
            episode=Unbounded((*shape, 1), dtype=torch.int64),
            even=Categorical(2, (*shape, 1), dtype=torch.bool),
            shape=shape,
        )
        self.action_spec = Unbounded((*shape, 1))
        self.reward_spec = Unbounded((*shape, 1))
        self.count = torch.zeros(shape, dtype=torch.int64)
        self.episode = torch.zeros(shape, dtype=torch.int64)
        self.resets = 0

    def _obs(self):
        return {
            "count": self.count.unsqueeze(-1).float(),
            "episode": self.episode.unsqueeze(-1).clone(),
            "even": (self.count % 2 == 0).unsqueeze(-1),
        }

    def _reset(self, td=None, **kwargs):
        self.resets += 1
        mask = td.get("_reset", None) if td is not None else None
        mask = torch.ones_like(self.count, dtype=torch.bool) if mask is None else mask.reshape(self.count.shape)
        self.count[mask] = 0
        self.episode[mask] += 1
        return TensorDict(self._obs(), batch_size=self.batch_size)

    def _step(self, td):
        self.count += 1
        done = self.count >= self.lengths
        self.count[done] = 0
        self.episode[done] += 1
        out = self._obs()
        out["reward"] = torch.ones(*self.batch_size, 1)
        out["done"] = done.unsqueeze(-1)
        return TensorDict(out, batch_size=self.batch_size)

    def _set_seed(self, seed):
        pass


class TestAutoResetTransform(TransformContract):
    full_transitions = True

    def make_env(self, batch_size=()):
        return SelfResettingEnv(lengths=(3,), batch_size=batch_size)

    def make_transform(self):
        return AutoResetTransform()

    def wrap(self, env, transform):
        return AutoResetEnv(env, transform)

    def test_contract_in_compose(self):  # the AutoResetTransform must come first
        check_env_specs(AutoResetEnv(self.make_env(), Compose(self.make_transform(), StepCounter())), seed=0)

    def test_plain_transformed_env_is_refused(self):
        # as TorchRL: the transform stores observations for the resets only an AutoResetEnv routes to it
        env = TransformedEnv(self.make_env(), AutoResetTransform())
        with pytest.raises(RuntimeError, match="AutoResetTransform must be used inside an AutoResetEnv"):
            env.rollout(4, break_when_any_done=False)

    def test_auto_reset_option_builds_an_auto_reset_env(self):
        env = SelfResettingEnv(auto_reset=True)
        assert type(env) is AutoResetEnv
        assert isinstance(env.transform, AutoResetTransform) and env.transform.replace
        env = SelfResettingEnv(auto_reset=True, auto_reset_replace=False)
        assert not env.transform.replace

    def test_episodes_are_kept_apart(self):
        check_env_specs(SelfResettingEnv(lengths=(3,), batch_size=(), auto_reset=True))
        env = SelfResettingEnv(lengths=(3,), batch_size=(), auto_reset=True)
        data = env.rollout(7, break_when_any_done=False)
        count = data["next", "count"].squeeze(-1).tolist()
        assert count[:2] == [1.0, 2.0] and math.isnan(count[2]) and count[3:5] == [1.0, 2.0] and math.isnan(count[5])
        assert data["count"].squeeze(-1).tolist() == [0.0, 1.0, 2.0, 0.0, 1.0, 2.0, 0.0]
        assert data["next", "done"].squeeze(-1).tolist() == [False, False, True, False, False, True, False]
        # The fill values of the other dtypes, and the stored first observations handed out at reset.
        assert data["next", "episode"].squeeze(-1).tolist() == [1, 1, -1, 2, 2, -1, 3]
        assert data["next", "even"].squeeze(-1).tolist() == [False, True, False, False, True, False, False]
        assert data["episode"].squeeze(-1).tolist() == [1, 1, 1, 2, 2, 2, 3]
        assert data["even"].squeeze(-1).tolist() == [True, False, True, True, False, True, True]
        assert env.base_env.resets == 1  # only the first reset reaches the base env

    def test_partial_resets_in_a_batch(self):
        env = SelfResettingEnv(lengths=(2, 3), auto_reset=True)
        data = env.rollout(6, break_when_any_done=False)
        assert data["count"].squeeze(-1).tolist() == [[0, 1, 0, 1, 0, 1], [0, 1, 2, 0, 1, 2]]
        assert data["episode"].squeeze(-1).tolist() == [[1, 1, 2, 2, 3, 3], [1, 1, 1, 2, 2, 2]]
        assert torch.isnan(data["next", "count"][0, 1::2]).all()
        assert not torch.isnan(data["next", "count"][0, 0::2]).any()
        assert env.base_env.resets == 1

    def test_reset_after_a_finished_rollout_uses_the_stored_observation(self):
        env = SelfResettingEnv(lengths=(2,), batch_size=(), auto_reset=True)
        first = env.rollout(5)
        assert first.shape == (2,)
        second = env.rollout(5)
        assert second["episode"].squeeze(-1).tolist() == [2, 2]
        assert second["count"].squeeze(-1).tolist() == [0.0, 1.0]
        assert env.base_env.resets == 1

    def test_reset_of_a_sub_env_that_did_not_restart_calls_the_base_env(self):
        env = SelfResettingEnv(lengths=(2, 5), auto_reset=True)
        env.rollout(2)  # sub-env 0 restarted by itself, sub-env 1 did not
        td = env.reset()
        assert env.base_env.resets == 2
        assert td["count"].squeeze(-1).tolist() == [0.0, 0.0]

    def test_replace_false_keeps_the_next_episode_observation(self):
        env = SelfResettingEnv(lengths=(2,), batch_size=(), auto_reset=True, auto_reset_replace=False)
        data = env.rollout(4, break_when_any_done=False)
        assert data["next", "count"].squeeze(-1).tolist() == [1.0, 0.0, 1.0, 0.0]
        assert data["count"].squeeze(-1).tolist() == [0.0, 1.0, 0.0, 1.0]

    def test_custom_fill_values(self):
        base = SelfResettingEnv(lengths=(1,), batch_size=())
        env = AutoResetEnv(base, AutoResetTransform(fill_float=-5.0, fill_int=7, fill_bool=True))
        td = env.rand_step(env.reset())
        assert td["next", "count"].item() == -5.0
        assert td["next", "episode"].item() == 7
        assert td["next", "even"].item() is True

    def test_later_transforms_see_the_reset(self):
        env = SelfResettingEnv(lengths=(2,), batch_size=(), auto_reset=True).append_transform(StepCounter())
        data = env.rollout(4, break_when_any_done=False)
        assert data["step_count"].squeeze(-1).tolist() == [0, 1, 0, 1]

    def test_insert_transform(self):
        env = SelfResettingEnv(lengths=(2,), batch_size=(), auto_reset=True)
        env.insert_transform(1, StepCounter())
        assert isinstance(env.transform[0], AutoResetTransform)
        with pytest.raises(RuntimeError, match="before the AutoResetTransform"):
            env.insert_transform(0, StepCounter())
        with pytest.raises(RuntimeError, match="before the AutoResetTransform"):
            env.insert_transform(-2, StepCounter())

    def test_auto_reset_env_needs_the_transform_first(self):
        with pytest.raises(ValueError, match="the first transform must be an AutoResetTransform"):
            AutoResetEnv(PendulumEnv(), StepCounter())

    def test_forward_fills_stored_data(self):
        td = TensorDict(
            next=TensorDict(obs=torch.ones(3, 2), n=torch.ones(3, dtype=torch.int64), done=torch.tensor([[False], [True], [False]]), batch_size=[3]),
            batch_size=[3],
        )
        AutoResetTransform(fill_float=0.5)(td)
        assert td["next", "obs"].tolist() == [[1.0, 1.0], [0.5, 0.5], [1.0, 1.0]]
        assert td["next", "n"].tolist() == [1, -1, 1]

    def test_bad_fill_value(self):
        with pytest.raises(ValueError, match="fill_float='zero' is not a number"):
            AutoResetTransform(fill_float="zero")


def test_doctests():
    result = doctest.testmod(auto_reset, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
