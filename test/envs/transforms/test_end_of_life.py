import doctest
import types

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from test.envs.transforms.contract import TransformContract
from torchrl.envs import ParallelEnv, SerialEnv, TransformedEnv
from torchrl.envs.transforms import EndOfLifeTransform
from torchrl.envs.transforms import _end_of_life as module
from torchrl.modules import QValueActor
from torchrl.objectives import DQNLoss
from torchrl.objectives.value import TD0Estimator
from torchrl.testing import CountingEnv


class LivesEnv(CountingEnv):
    """A CountingEnv with 3 lives: one is lost every second counted step (``lives = 3 - count // 2``)."""

    def lives(self):
        return 3 - self.count.squeeze(-1).long() // 2


class AleLivesEnv(CountingEnv):
    """Exposes its lives like gym's Atari envs: ``env.unwrapped.ale.lives()``."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.unwrapped = types.SimpleNamespace(ale=types.SimpleNamespace(lives=lambda: 5 - int(self.count.sum())))


def ones(td):
    return td.set("action", torch.ones(td.shape + (1,), dtype=torch.int8))


class TestEndOfLifeTransform(TransformContract):
    env_only = True

    def make_env(self, batch_size=()):
        return LivesEnv(max_steps=5, batch_size=batch_size)

    def make_transform(self):
        return EndOfLifeTransform(eol_attribute="lives")

    def test_known_answer(self):
        # counts 1..6 after each step: lives 3,2,2,1,1,0 (TorchRL 0.14.1 gives the same on this env)
        env = TransformedEnv(self.make_env(), self.make_transform())
        data = env.rollout(10, ones)
        assert data["lives"].tolist() == [3, 3, 2, 2, 1, 1]
        assert data["next", "lives"].tolist() == [3, 2, 2, 1, 1, 0]
        assert data["next", "end-of-life"].squeeze(-1).tolist() == [False, True, False, True, False, True]
        # the last one is also the env's done; the flag never resets the env
        assert data["next", "done"].squeeze(-1).tolist() == [False] * 5 + [True]
        # the root carries the previous step's flag (False after the reset)
        assert data["end-of-life"].squeeze(-1).tolist() == [False, False, True, False, True, False]

    def test_specs(self):
        env = TransformedEnv(self.make_env(batch_size=(2,)), self.make_transform())
        spec = env.observation_spec
        assert spec["end-of-life"].shape == (2, 1) and spec["end-of-life"].dtype == torch.bool
        assert spec["lives"].shape == (2,) and spec["lives"].dtype == torch.int64
        assert "end-of-life" not in env.full_done_spec.keys(True, True)

    def test_batched_lives_per_row(self):
        env = TransformedEnv(self.make_env(batch_size=(2,)), self.make_transform())
        data = env.rollout(3, lambda td: td.set("action", torch.tensor([[1], [0]], dtype=torch.int8)))
        assert data["next", "lives"].tolist() == [[3, 2, 2], [3, 3, 3]]
        assert data["next", "end-of-life"].squeeze(-1).tolist() == [[False, True, False], [False, False, False]]

    def test_done_is_ored_without_life_loss(self):
        env = TransformedEnv(CountingEnv(max_steps=1), EndOfLifeTransform(eol_attribute="max_steps"))
        data = env.rollout(5, ones)  # constant "lives" (the int max_steps), done after 2 steps
        assert data["next", "lives"].tolist() == [1, 1]
        assert data["next", "end-of-life"].squeeze(-1).tolist() == [False, True]

    def test_default_attribute_path(self):
        env = TransformedEnv(AleLivesEnv(max_steps=10), EndOfLifeTransform())
        data = env.rollout(3, ones)
        assert data["next", "lives"].tolist() == [4, 3, 2]
        assert data["next", "end-of-life"].all()

    def test_serial_env_lists(self):
        env = TransformedEnv(SerialEnv(2, lambda: LivesEnv(max_steps=5)), self.make_transform())
        data = env.rollout(2, ones)
        assert data["next", "lives"].tolist() == [[3, 2], [3, 2]]
        env.close(raise_if_closed=False)

    def test_parallel_env_reads_workers(self):
        env = TransformedEnv(ParallelEnv(2, lambda: LivesEnv(max_steps=5), mp_start_method="fork"), self.make_transform())
        try:
            data = env.rollout(3, ones)
            assert data["next", "lives"].tolist() == [[3, 2, 2], [3, 2, 2]]
            assert data["next", "end-of-life"].squeeze(-1).tolist() == [[False, True, False]] * 2
        finally:
            env.close(raise_if_closed=False)

    def test_custom_keys(self):
        t = EndOfLifeTransform(eol_key=("eol", "flag"), lives_key="n_lives", eol_attribute="lives")
        env = TransformedEnv(self.make_env(), t)
        data = env.rollout(2, ones)
        assert data["next", "eol", "flag"].squeeze(-1).tolist() == [False, True]
        assert data["next", "n_lives"].tolist() == [3, 2]

    def test_bad_done_key(self):
        # raised when the transform is appended (the env's specs are computed then)
        with pytest.raises(KeyError, match="done_key 'finished' is not a done entry"):
            env = TransformedEnv(self.make_env(), EndOfLifeTransform(done_key="finished", eol_attribute="lives"))
            _ = env.observation_spec

    def test_missing_attribute(self):
        env = TransformedEnv(self.make_env(), EndOfLifeTransform())
        with pytest.raises(AttributeError, match="'unwrapped.ale.lives'.*has no attribute 'unwrapped'"):
            env.reset()

    def test_bad_attribute_type(self):
        with pytest.raises(TypeError, match="dotted attribute path"):
            EndOfLifeTransform(eol_attribute=3)

    def test_no_parent(self):
        with pytest.raises(RuntimeError, match="cannot be applied to stored data"):
            EndOfLifeTransform()(TensorDict(done=torch.zeros(1, dtype=torch.bool)))

    def test_register_keys_loss(self):
        actor = QValueActor(nn.Linear(1, 2), in_keys=["observation"], action_space="categorical")
        loss = DQNLoss(actor, action_space="categorical")
        EndOfLifeTransform().register_keys(loss)
        assert loss.tensor_keys.done == "end-of-life" and loss.tensor_keys.terminated == "end-of-life"
        loss.make_value_estimator()
        assert loss.value_estimator.tensor_keys.done == "end-of-life"
        assert loss.value_estimator.tensor_keys.terminated == "end-of-life"

    def test_register_keys_value_estimator_stops_bootstrap(self):
        # a lost life ends the bootstrap even though the env's done is False (same numbers as TorchRL 0.14.1)
        est = TD0Estimator(gamma=0.5, value_network=None)
        EndOfLifeTransform().register_keys(est)
        td = TensorDict({
            ("next", "reward"): torch.ones(3, 1),
            ("next", "done"): torch.zeros(3, 1, dtype=torch.bool),
            ("next", "terminated"): torch.zeros(3, 1, dtype=torch.bool),
            ("next", "end-of-life"): torch.tensor([[False], [True], [False]]),
            ("next", "state_value"): torch.full((3, 1), 4.0),
            "state_value": torch.zeros(3, 1),
        }, [3])
        assert est.value_estimate(td).squeeze(-1).tolist() == [3.0, 1.0, 3.0]

    def test_register_keys_bad_object(self):
        with pytest.raises(TypeError, match="LossModule or a value estimator"):
            EndOfLifeTransform().register_keys(object())


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
