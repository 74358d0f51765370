import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Binary, Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import BinarizeReward as Exported
from torchrl.envs.transforms import _binarize_reward as binarize_module
from torchrl.envs.transforms._binarize_reward import BinarizeReward

from test.envs.transforms.contract import TransformContract


class TestBinarizeReward(TransformContract):
    def make_transform(self):
        return BinarizeReward()

    def test_exported(self):
        assert Exported is BinarizeReward

    def test_known_answers(self):
        td = TensorDict(reward=torch.tensor([[2.0], [0.0], [-1.0], [1e-6]]), batch_size=[4])
        out = BinarizeReward()(td)["reward"]
        assert out.dtype == torch.int8
        assert out.squeeze(-1).tolist() == [1, 0, 0, 1]
        td = TensorDict(reward=torch.tensor([[3], [-3]]), batch_size=[2])  # integer rewards too
        assert BinarizeReward()(td)["reward"].squeeze(-1).tolist() == [1, 0]

    def test_out_keys_and_nested(self):
        td = TensorDict(agents=TensorDict(reward=torch.tensor([[0.5], [-0.5]]), batch_size=[2]), batch_size=[2])
        out = BinarizeReward(in_keys=[("agents", "reward")], out_keys=["bin"])(td)
        assert out["bin"].squeeze(-1).tolist() == [1, 0]
        assert out["agents", "reward"].dtype == torch.float32

    def test_spec(self):
        spec = BinarizeReward().transform_reward_spec(Composite(reward=Unbounded((1,))))["reward"]
        assert isinstance(spec, Binary) and spec.dtype == torch.int8 and spec.shape == (1,)
        leaf = BinarizeReward().transform_reward_spec(Unbounded((4, 1)))
        assert isinstance(leaf, Binary) and leaf.shape == (4, 1)

    def test_env(self):
        torch.manual_seed(0)
        raw = PendulumEnv(seed=0).rollout(4)["next", "reward"]
        env = TransformedEnv(PendulumEnv(seed=0), BinarizeReward(out_keys=["bin"]))
        torch.manual_seed(0)
        data = env.rollout(4)
        assert data["next", "bin"].dtype == torch.int8
        assert torch.equal(data["next", "bin"], (raw > 0).to(torch.int8))
        torch.testing.assert_close(data["next", "reward"], raw)
        assert isinstance(env.full_reward_spec["bin"], Binary)
        check_env_specs(env, seed=0)

    def test_errors(self):
        with pytest.raises(RuntimeError, match=r"last dimension must be 1.*\(2,\)"):
            BinarizeReward()(TensorDict(reward=torch.tensor([2.0, 0.0])))
        with pytest.raises(KeyError, match="bonus.* is not a reward"):
            TransformedEnv(PendulumEnv(), BinarizeReward(in_keys=["bonus"])).full_reward_spec
        with pytest.raises(KeyError, match="reward.* not found"):
            BinarizeReward()(TensorDict(observation=torch.zeros(1)))
        with pytest.raises(ValueError, match="differ in length"):
            BinarizeReward(in_keys=["a", "b"], out_keys=["c"])

    def test_matches_reference_values(self):
        # TorchRL 0.14.1 gives int8 [[1], [0], [0]] for [[2.], [-1.], [0.]]
        td = TensorDict(reward=torch.tensor([[2.0], [-1.0], [0.0]]), batch_size=[3])
        assert torch.equal(BinarizeReward()(td)["reward"], torch.tensor([[1], [0], [0]], dtype=torch.int8))


def test_doctests():
    result = doctest.testmod(binarize_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
