import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Composite, Unbounded
from torchrl.envs import Compose, EnvBase, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _frame_skip_transform as frame_skip_transform
from torchrl.envs.transforms._frame_skip_transform import FrameSkipTransform
from torchrl.envs.transforms._rename_transform import RenameTransform

from test.envs.transforms.contract import TransformContract


class LineEnv(EnvBase):
    """Stateless: ``pos += action``; reward ``pos``; done once ``pos >= end`` (per sub-env)."""

    _batch_locked = False

    def __init__(self, end=100.0, batch_size=()):
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.end = end
        self.observation_spec = Composite(pos=Unbounded((*shape, 1)), shape=shape)
        self.state_spec = Composite(pos=Unbounded((*shape, 1)), shape=shape)
        self.action_spec = Unbounded((*shape, 1))
        self.reward_spec = Unbounded((*shape, 1))
        self.steps = 0

    def _reset(self, td=None, **kwargs):
        return TensorDict(pos=torch.zeros(*self.batch_size, 1), batch_size=self.batch_size)

    def _step(self, td):
        self.steps += 1
        pos = td["pos"] + td["action"]
        return TensorDict(pos=pos, reward=pos.clone(), done=pos >= self.end, batch_size=td.batch_size)

    def _set_seed(self, seed):
        pass


class TestFrameSkipTransform(TransformContract):
    env_only = True

    def make_env(self, batch_size=()):
        # Not Pendulum: its "th" leaves the [-pi, pi] bound of its spec after a few (here repeated) steps.
        return LineEnv(batch_size=batch_size)

    def make_transform(self):
        return FrameSkipTransform(frame_skip=2)

    def test_rewards_are_summed_over_frames(self):
        env = TransformedEnv(LineEnv(), FrameSkipTransform(frame_skip=3))
        check_env_specs(env)
        env.base_env.steps = 0
        td = env.reset()
        td["action"] = torch.ones(1)
        td = env.step(td)
        # positions 1, 2, 3 -> rewards 1 + 2 + 3
        assert td["next", "pos"].item() == 3.0
        assert td["next", "reward"].item() == 6.0
        assert env.base_env.steps == 3

    def test_matches_repeated_pendulum_steps(self):
        env = TransformedEnv(PendulumEnv(seed=0), FrameSkipTransform(frame_skip=3))
        ref = PendulumEnv(seed=0)
        td, td_ref = env.reset(), ref.reset()
        action = torch.full((1,), 0.5)
        td["action"] = action
        total = 0.0
        for _ in range(3):
            td_ref["action"] = action
            td_ref = ref.step(td_ref)
            total = total + td_ref["next", "reward"]
            td_ref = ref.step_mdp(td_ref)
        td = env.step(td)
        torch.testing.assert_close(td["next", "reward"], total)
        torch.testing.assert_close(td["next", "th"], td_ref["th"])

    def test_stops_early_on_done(self):
        env = TransformedEnv(LineEnv(end=2.0), FrameSkipTransform(frame_skip=5))
        td = env.reset()
        td["action"] = torch.ones(1)
        td = env.step(td)
        assert env.base_env.steps == 2
        assert td["next", "done"].item()
        assert td["next", "reward"].item() == 3.0  # 1 + 2, nothing after the episode's end

    def test_stops_when_any_sub_env_is_done(self):
        env = TransformedEnv(LineEnv(end=2.0, batch_size=(2,)), FrameSkipTransform(frame_skip=4))
        td = env.reset()
        td["action"] = torch.tensor([[1.0], [0.5]])
        td = env.step(td)
        assert td["next", "pos"].squeeze(-1).tolist() == [2.0, 1.0]
        assert td["next", "done"].squeeze(-1).tolist() == [True, False]
        assert td["next", "reward"].squeeze(-1).tolist() == [3.0, 1.5]

    def test_transforms_before_see_every_frame(self):
        env = TransformedEnv(PendulumEnv(seed=0), Compose(StepCounter(), FrameSkipTransform(frame_skip=3)))
        assert env.rollout(3)["next", "step_count"].squeeze(-1).tolist() == [3, 6, 9]
        env = TransformedEnv(PendulumEnv(seed=0), Compose(FrameSkipTransform(frame_skip=3), StepCounter()))
        assert env.rollout(3)["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]

    def test_later_inverse_transforms_are_applied_to_repeated_actions(self):
        env = TransformedEnv(
            LineEnv(),
            Compose(FrameSkipTransform(frame_skip=2), RenameTransform([], [], in_keys_inv=["action"], out_keys_inv=["move"])),
        )
        td = env.reset()
        td["move"] = torch.full((1,), 2.0)
        td = env.step(td)
        assert td["next", "pos"].item() == 4.0

    def test_frame_skip_one_is_identity(self):
        env = TransformedEnv(LineEnv(), FrameSkipTransform())
        td = env.reset()
        td["action"] = torch.ones(1)
        env.step(td)
        assert env.base_env.steps == 1

    def test_errors(self):
        with pytest.raises(ValueError, match="frame_skip must be an integer >= 1, got 0"):
            FrameSkipTransform(0)
        with pytest.raises(RuntimeError, match="cannot be applied to stored data"):
            FrameSkipTransform(2)(TensorDict())


def test_doctests():
    result = doctest.testmod(frame_skip_transform, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
