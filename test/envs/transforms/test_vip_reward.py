import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import VIPRewardTransform, VIPTransform
from torchrl.envs.transforms import _vip_reward as module

from test.envs.transforms._pixel_env import PixelEnv
from test.envs.transforms.contract import TransformContract
from test.envs.transforms.test_backbones import vip_checkpoint, weights_dir
from test.envs.transforms.test_vip import SIZE, expected_vip


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class GoalPixelEnv(PixelEnv):
    """``PixelEnv`` that also shows its (fixed) goal image as the observation ``"goal_image"``."""

    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)
        self.observation_spec["goal_image"] = self.observation_spec["pixels"].clone()
        self.goal = torch.randint(0, 256, self.observation_spec["pixels"].shape, dtype=torch.uint8,
                                  generator=torch.Generator().manual_seed(7))

    def _td(self, extra=None):
        td = super()._td(extra)
        td["goal_image"] = self.goal
        return td


def make_reward(**kwargs):
    vip_checkpoint()
    return VIPRewardTransform("resnet50", size=SIZE, download_path=weights_dir(), **kwargs)


class TestVIPRewardTransform(TransformContract):
    steps = 2

    def make_env(self, batch_size=()):
        return GoalPixelEnv(batch_size=batch_size)

    def make_transform(self):
        return make_reward()

    @pytest.mark.slow  # ParallelEnv ships the 100 MB ResNet-50 state dict to and from each worker
    def test_contract_state_survives_worker_restart(self):
        super().test_contract_state_survives_worker_restart()

    def test_to_records_device_and_dtype(self):
        t = make_reward()
        t.to(torch.float64)
        assert t.dtype is torch.float64 and t[-1].net.fc.weight.dtype is torch.float64

    def test_reward_is_progress_towards_the_goal(self):
        env = TransformedEnv(GoalPixelEnv(batch_size=(2,)), make_reward(tensor_pixels_keys=["raw"]))
        assert env.observation_spec["goal_embedding"].shape == (2, 1024)
        assert env.reward_spec.shape == (2, 1)
        data = env.rollout(2, break_when_any_done=False)
        goal = expected_vip(env.base_env.goal)
        torch.testing.assert_close(data["goal_embedding"], goal.unsqueeze(1).expand(2, 2, 1024), rtol=1e-4, atol=1e-4)
        before = expected_vip(data["raw"])
        after = expected_vip(data["next", "raw"])
        reward = (before - goal.unsqueeze(1)).norm(dim=-1) - (after - goal.unsqueeze(1)).norm(dim=-1)
        torch.testing.assert_close(data["next", "reward"], reward.unsqueeze(-1), rtol=1e-3, atol=1e-3)

    def test_goal_image_given_at_reset(self):
        env = TransformedEnv(PixelEnv(), make_reward())
        goal_image = torch.randint(0, 256, (8, 6, 3), dtype=torch.uint8)
        td = env.reset(TensorDict(goal_image=goal_image))
        torch.testing.assert_close(td["goal_embedding"], expected_vip(goal_image), rtol=1e-4, atol=1e-4)
        out = env.step(td.set("action", torch.zeros(1)))
        # the goal is carried, and the reward is the decrease of the distance to it
        torch.testing.assert_close(out["next", "goal_embedding"], td["goal_embedding"])
        dist = lambda e: (e - td["goal_embedding"]).norm()  # noqa: E731
        expected = dist(td["vip_vec"]) - dist(out["next", "vip_vec"])
        torch.testing.assert_close(out["next", "reward"], expected.reshape(1), rtol=1e-4, atol=1e-4)

    def test_reaching_the_goal_from_the_goal_gives_zero(self):
        t = make_reward()
        img = torch.randint(0, 256, (8, 6, 3), dtype=torch.uint8)
        reset = t._reset(TensorDict(goal_image=img), TensorDict(pixels=img, reward=torch.ones(1)))
        torch.testing.assert_close(reset["goal_embedding"], reset["vip_vec"])
        nxt = t._step(reset, TensorDict(pixels=img, reward=torch.ones(1)))
        assert nxt["reward"].tolist() == [0.0]

    def test_missing_goal(self):
        env = TransformedEnv(PixelEnv(), make_reward())
        with pytest.raises(KeyError, match="reset needs a 'goal_image' entry"):
            env.reset()

    def test_is_a_vip_transform_and_forward_embeds(self):
        t = make_reward()
        assert isinstance(t, VIPTransform)
        out = t(TensorDict(pixels=torch.randint(0, 256, (3, 8, 6, 3), dtype=torch.uint8), batch_size=[3]))
        assert out["vip_vec"].shape == (3, 1024) and "reward" not in out.keys()


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
