import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms import _mean_action_selector as mas_module
from torchrl.envs.transforms._mean_action_selector import MeanActionSelector

from test.envs.transforms.contract import TransformContract


class TestMeanActionSelector(TransformContract):
    def make_transform(self):
        return MeanActionSelector()

    def test_forward_belief(self):
        t = MeanActionSelector()
        obs = torch.arange(6.0).reshape(2, 3)
        out = t(TensorDict(observation=obs, batch_size=[2]))
        assert torch.equal(out["observation", "mean"], obs)
        assert out["observation", "var"].shape == (2, 3, 3) and not out["observation", "var"].any()

    def test_inverse_mean(self):
        t = MeanActionSelector()
        td = TensorDict(action=TensorDict(mean=torch.tensor([0.5]), var=torch.ones(1, 1)))
        assert t.inv(td)["action"].tolist() == [0.5]
        assert t.inv(TensorDict(action=torch.tensor([0.2])))["action"].tolist() == [pytest.approx(0.2)]

    def test_env(self):
        env = TransformedEnv(PendulumEnv(seed=0, batch_size=(2,)), MeanActionSelector())
        spec = env.observation_spec["observation"]
        assert isinstance(spec, Composite) and spec.shape == (2,)
        assert isinstance(spec["mean"], Bounded) and spec["mean"].shape == (2, 3)
        assert isinstance(spec["var"], Unbounded) and spec["var"].shape == (2, 3, 3)
        assert env.action_spec.shape == (2, 1)
        td = env.reset()
        # our EnvBase.step checks the action's shape against the (flat) action spec before the inverse
        # runs, so the policy's sub-tensordict carries the action's full shape as its batch size
        td["action"] = TensorDict(mean=torch.full((2, 1), 0.5), batch_size=[2, 1])
        out = env.step(td)
        assert out["next", "observation", "mean"].shape == (2, 3)
        ref = PendulumEnv(seed=0, batch_size=(2,))
        ref_out = ref.step(ref.reset().set("action", torch.full((2, 1), 0.5)))
        torch.testing.assert_close(out["next", "observation", "mean"], ref_out["next", "observation"])

    def test_keys_and_repr(self):
        t = MeanActionSelector("obs", "act")
        assert t.in_keys == ["obs"] and t.out_keys == [("obs", "mean"), ("obs", "var")]
        assert t.in_keys_inv == ["act"] and t.out_keys_inv == [("act", "mean")]
        assert repr(MeanActionSelector()) == "MeanActionSelector(keys=['observation'])"

    def test_errors(self):
        with pytest.raises(KeyError, match="not in the observation spec"):
            MeanActionSelector("pixels").transform_observation_spec(Composite(observation=Unbounded(shape=(3,))))
        with pytest.raises(KeyError, match="no 'mean' entry"):
            MeanActionSelector().inv(TensorDict(action=TensorDict(loc=torch.zeros(1))))

    def test_doctest(self):
        assert doctest.testmod(mas_module, raise_on_error=True).attempted > 0
