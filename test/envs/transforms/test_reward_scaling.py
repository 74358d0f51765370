import doctest
import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms._reward_scaling import RewardScaling
from torchrl.envs.transforms import _reward_scaling as reward_scaling_module

from test.envs.transforms.contract import TransformContract


class TestRewardScaling(TransformContract):
    def make_transform(self):
        return RewardScaling(loc=1.0, scale=0.5)

    def test_known_answers(self):
        r = torch.tensor([[2.0], [-4.0]])
        t = RewardScaling(loc=1.0, scale=0.5)
        assert t(TensorDict(reward=r.clone(), batch_size=[2]))["reward"].squeeze(-1).tolist() == [2.0, -1.0]
        t = RewardScaling(loc=1.0, scale=0.5, standard_normal=True)
        assert t(TensorDict(reward=r.clone(), batch_size=[2]))["reward"].squeeze(-1).tolist() == [2.0, -10.0]

    def test_nested_reward_key(self):
        td = TensorDict(agents=TensorDict(reward=torch.ones(2, 1), batch_size=[2]), batch_size=[2])
        assert RewardScaling(1.0, 3.0, in_keys=[("agents", "reward")])(td)["agents", "reward"].squeeze(-1).tolist() == [4.0, 4.0]

    def test_env_rewards_scaled(self):
        base = PendulumEnv(seed=0)
        env = TransformedEnv(PendulumEnv(seed=0), RewardScaling(loc=-1.0, scale=2.0, out_keys=["scaled"]))
        torch.manual_seed(0)
        raw = base.rollout(4)["next", "reward"]
        torch.manual_seed(0)
        data = env.rollout(4)
        torch.testing.assert_close(data["next", "scaled"], raw * 2 - 1)
        torch.testing.assert_close(data["next", "reward"], raw)
        assert set(env.full_reward_spec.keys()) == {"reward", "scaled"}
        check_env_specs(env, seed=0)

    def test_bounded_spec_mapped(self):
        spec = Composite(reward=Bounded(-1.0, 3.0, shape=(1,)))
        out = RewardScaling(loc=1.0, scale=-2.0).transform_reward_spec(spec)["reward"]
        assert out.low.tolist() == [-5.0] and out.high.tolist() == [3.0]
        spec = Composite(reward=Unbounded(shape=(1,)))
        assert isinstance(RewardScaling(loc=1.0, scale=2.0).transform_reward_spec(spec)["reward"], Unbounded)

    def test_tensor_loc_scale_in_state_dict(self):
        t = RewardScaling(loc=torch.tensor([0.0, 1.0]), scale=torch.tensor([1.0, 10.0]), in_keys=["r"])
        assert t(TensorDict(r=torch.ones(2)))["r"].tolist() == [1.0, 11.0]
        assert list(t.state_dict()) == ["standard_normal", "loc", "scale"]  # as TorchRL
        assert t.standard_normal.dtype == torch.bool and not t.standard_normal

    def test_errors(self):
        with pytest.raises(ValueError, match="non-zero"):
            RewardScaling(loc=0.0, scale=0.0, standard_normal=True)
        with pytest.raises(KeyError, match="bonus.* is not a reward"):  # (when the transform is attached)
            TransformedEnv(PendulumEnv(), RewardScaling(loc=0.0, scale=1.0, in_keys=["bonus"]))
        with pytest.raises(KeyError, match="reward.* not found"):
            RewardScaling(0.0, 1.0)(TensorDict(observation=torch.zeros(1)))


def test_doctests():
    result = doctest.testmod(reward_scaling_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
