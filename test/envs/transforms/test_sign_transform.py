import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import SignTransform as Exported
from torchrl.envs.transforms import _sign_transform as sign_module
from torchrl.envs.transforms._sign_transform import SignTransform

from test.envs.transforms.contract import TransformContract


class TestSignTransform(TransformContract):
    def make_transform(self):
        return SignTransform(in_keys=["observation", "reward"])

    def test_exported(self):
        assert Exported is SignTransform

    def test_defaults(self):
        t = SignTransform()
        assert t.in_keys == t.out_keys == t.in_keys_inv == t.out_keys_inv == []

    def test_known_answers_keep_dtype(self):
        td = TensorDict(obs=torch.tensor([-2.0, 0.0, 3.0]), reward=torch.tensor([1, -3, 0]))
        out = SignTransform(in_keys=["obs", "reward"])(td)
        assert out["obs"].tolist() == [-1.0, 0.0, 1.0] and out["obs"].dtype == torch.float32
        assert out["reward"].tolist() == [1, -1, 0] and out["reward"].dtype == torch.int64

    def test_out_keys(self):
        td = TensorDict(obs=torch.tensor([-0.5, 0.5]))
        out = SignTransform(in_keys=["obs"], out_keys=["sgn"])(td)
        assert out["sgn"].tolist() == [-1.0, 1.0] and out["obs"].tolist() == [-0.5, 0.5]

    def test_specs(self):
        spec = SignTransform(in_keys=["th"]).transform_observation_spec(Composite(th=Bounded(0.0, 3.0, (2,))))["th"]
        assert isinstance(spec, Bounded) and spec.low.tolist() == [-1.0, -1.0] and spec.high.tolist() == [1.0, 1.0]
        spec = SignTransform(in_keys=["th"]).transform_observation_spec(Composite(th=Categorical(5, (2,))))["th"]
        assert isinstance(spec, Bounded) and spec.dtype == torch.int64 and spec.high.tolist() == [1, 1]
        spec = SignTransform(in_keys=["r"]).transform_reward_spec(Unbounded((1,), dtype=torch.float64))
        assert spec.dtype == torch.float64 and spec.low.tolist() == [-1.0]

    def test_env_outputs(self):
        torch.manual_seed(0)
        raw = PendulumEnv(seed=0).rollout(4)
        env = TransformedEnv(PendulumEnv(seed=0), SignTransform(in_keys=["observation", "reward"]))
        torch.manual_seed(0)
        data = env.rollout(4)
        torch.testing.assert_close(data["next", "reward"], raw["next", "reward"].sign())
        torch.testing.assert_close(data["observation"], raw["observation"].sign())  # reset output too
        torch.testing.assert_close(data["next", "observation"], raw["next", "observation"].sign())
        assert env.full_reward_spec["reward"].high.tolist() == [1.0]
        assert env.observation_spec["observation"].low.tolist() == [-1.0, -1.0, -1.0]

    def test_inverse(self):
        t = SignTransform(in_keys_inv=["action"], out_keys_inv=["a2"])
        td = TensorDict(a2=torch.tensor([-3.0, 0.0, 2.0]))
        out = t.inv(td)
        assert out["action"].tolist() == [-1.0, 0.0, 1.0] and "action" not in td.keys()
        env = TransformedEnv(PendulumEnv(seed=0), SignTransform(in_keys_inv=["action"]))
        base = PendulumEnv(seed=0)
        assert env.action_spec.high.tolist() == [2.0]  # input specs are left as declared
        td = env.reset().set("action", torch.tensor([0.3]))
        td_base = base.reset().set("action", torch.tensor([1.0]))
        torch.testing.assert_close(env.step(td)["next", "observation"], base.step(td_base)["next", "observation"])
        assert td["action"].tolist() == pytest.approx([0.3])  # the outside's action is kept
        renamed = TransformedEnv(PendulumEnv(seed=0), SignTransform(in_keys_inv=["action"], out_keys_inv=["a2"]))
        assert list(renamed.full_action_spec.keys()) == ["a2"]
        check_env_specs(renamed, seed=0)

    def test_errors(self):
        with pytest.raises(KeyError, match="bonus.* neither observations nor rewards"):
            TransformedEnv(PendulumEnv(), SignTransform(in_keys=["bonus"])).observation_spec
        with pytest.raises(KeyError, match="torque.* not in the env's action"):
            TransformedEnv(PendulumEnv(), SignTransform(in_keys_inv=["torque"])).action_spec
        with pytest.raises(KeyError, match="obs.* not found"):
            SignTransform(in_keys=["obs"])(TensorDict(reward=torch.zeros(1)))
        with pytest.raises(ValueError, match="differ in length"):
            SignTransform(in_keys_inv=["a", "b"], out_keys_inv=["c"])


def test_doctests():
    result = doctest.testmod(sign_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
