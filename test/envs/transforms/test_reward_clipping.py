import doctest
import math

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Composite
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms._reward_clipping import RewardClipping
from torchrl.envs.transforms import _reward_clipping as reward_clipping_module

from test.envs.transforms.contract import TransformContract


class TestRewardClipping(TransformContract):
    def make_transform(self):
        return RewardClipping(clamp_min=-1.0, clamp_max=0.5)

    def test_known_answers(self):
        r = TensorDict(reward=torch.tensor([-5.0, 0.25, 3.0]))
        assert RewardClipping(-1.0, 0.5)(r.clone())["reward"].tolist() == [-1.0, 0.25, 0.5]
        assert RewardClipping(clamp_min=0.0)(r.clone())["reward"].tolist() == [0.0, 0.25, 3.0]
        assert RewardClipping(clamp_max=0.0)(r.clone())["reward"].tolist() == [-5.0, 0.0, 0.0]
        t = RewardClipping(torch.tensor(-1.0), 2.0)  # tensor and number mixed
        assert t(r.clone())["reward"].tolist() == [-1.0, 0.25, 2.0]

    def test_nested_reward_key(self):
        td = TensorDict(agents=TensorDict(reward=torch.tensor([[-3.0], [3.0]]), batch_size=[2]), batch_size=[2])
        out = RewardClipping(-1.0, 1.0, in_keys=[("agents", "reward")])(td)
        assert out["agents", "reward"].squeeze(-1).tolist() == [-1.0, 1.0]

    def test_spec_bounds(self):
        env = TransformedEnv(PendulumEnv(seed=0), self.make_transform())
        spec = env.full_reward_spec["reward"]
        assert isinstance(spec, Bounded)
        assert spec.low.tolist() == [-1.0] and spec.high.tolist() == [0.5]
        data = env.rollout(20)
        assert data["next", "reward"].min() >= -1.0

    def test_one_sided_spec(self):
        spec = Composite(reward=Bounded(-2.0, 2.0, shape=(1,)))
        out = RewardClipping(clamp_max=1.0).transform_reward_spec(spec.clone())["reward"]
        assert out.low.tolist() == [-2.0] and out.high.tolist() == [1.0]
        env = TransformedEnv(PendulumEnv(), RewardClipping(clamp_min=-1.0))
        spec = env.full_reward_spec["reward"]
        assert spec.low.tolist() == [-1.0] and spec.high.item() >= torch.finfo(torch.float32).max

    def test_errors(self):
        with pytest.raises(ValueError, match="got neither"):
            RewardClipping()
        with pytest.raises(ValueError, match="must be below"):
            RewardClipping(1.0, 0.0)


class TestRewardClippingOneSided(TransformContract):
    def make_transform(self):
        return RewardClipping(clamp_max=-0.5)


def test_doctests():
    result = doctest.testmod(reward_clipping_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_bounds_are_tensor_buffers_and_neither_bound_is_an_error():
    t = RewardClipping(-1.0, 1.0)
    assert list(t.state_dict()) == ["clamp_min", "clamp_max"]  # as TorchRL
    assert t.clamp_min.dtype == torch.float32 and t.clamp_min.item() == -1.0
    assert RewardClipping(clamp_max=1.0).clamp_min is None
    # TorchRL raises RuntimeError here: ours is a ValueError that is also a RuntimeError
    with pytest.raises(RuntimeError, match="got neither"):
        RewardClipping()
