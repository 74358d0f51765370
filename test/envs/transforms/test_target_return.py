import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import TargetReturn as Exported
from torchrl.envs.transforms import _target_return as target_return_module
from torchrl.envs.transforms._target_return import TargetReturn

from test.envs.transforms.contract import TransformContract


class TestTargetReturn(TransformContract):
    env_only = True

    def make_transform(self):
        return TargetReturn(10.0)

    def test_exported(self):
        assert Exported is TargetReturn

    def test_reduce(self):
        env = TransformedEnv(PendulumEnv(seed=0), TargetReturn(10.0))
        data = env.rollout(4)
        reward = data["next", "reward"]
        assert data["target_return"][0].tolist() == [10.0]
        torch.testing.assert_close(data["next", "target_return"], 10.0 - reward.cumsum(0))
        torch.testing.assert_close(data["target_return"][1:], data["next", "target_return"][:-1])  # carried over
        assert data["next", "target_return"].dtype == torch.float32 and data["next", "target_return"].shape == (4, 1)

    def test_constant(self):
        env = TransformedEnv(PendulumEnv(seed=0), TargetReturn(3.0, mode="constant", out_keys=["tr"]))
        data = env.rollout(4)
        assert (data["tr"] == 3.0).all() and (data["next", "tr"] == 3.0).all()
        assert "target_return" not in data.keys()

    def test_known_answer_steps(self):
        env = TransformedEnv(PendulumEnv(seed=0), TargetReturn(5.0))
        td = env.reset()
        assert td["target_return"].tolist() == [5.0]
        td["target_return"] = torch.tensor([2.0])  # the step reads the previous target from its input
        td["action"] = torch.zeros(1)
        out = env.step(td)
        torch.testing.assert_close(out["next", "target_return"], 2.0 - out["next", "reward"])

    def test_reset_restarts_only_reset_envs(self):
        env = TransformedEnv(PendulumEnv(batch_size=(2,), seed=0), TargetReturn(10.0))
        td = env.reset()
        td["action"] = torch.ones(2, 1)
        _, td = env.step_and_maybe_reset(td)
        before = td["target_return"].clone()
        assert (before != 10.0).all()
        td["_reset"] = torch.tensor([[True], [False]])
        out = env.reset(td)
        assert out["target_return"][0].tolist() == [10.0]
        torch.testing.assert_close(out["target_return"][1], before[1])
        assert env.transform.reset_key == "_reset"

    def test_specs(self):
        env = TransformedEnv(PendulumEnv(), TargetReturn(1.0))
        obs, state = env.observation_spec["target_return"], env.full_state_spec["target_return"]
        assert isinstance(obs, Unbounded) and obs.shape == (1,) and obs.dtype == torch.float32
        assert isinstance(state, Unbounded) and state.shape == (1,)
        check_env_specs(env, seed=0)

    def test_keys(self):
        t = TargetReturn(1.0)
        assert t.in_keys == ["reward"] and t.out_keys == ["target_return"]  # outside an env
        t = TargetReturn(1.0, in_keys=[("agents", "reward")])
        assert t.out_keys == [("agents", "target_return")]
        t = TargetReturn(1.0, reset_key=("agents", "_reset"))
        assert t.reset_key == ("agents", "_reset")
        assert t.target_return == 1.0 and t.mode == "reduce" and list(t.state_dict()) == []

    def test_errors(self):
        with pytest.raises(ValueError, match="mode can only be 'reduce' or 'constant', got 'sum'"):
            TargetReturn(1.0, mode="sum")
        with pytest.raises(ValueError, match="differ in length"):
            TargetReturn(1.0, in_keys=["reward"], out_keys=["a", "b"])
        with pytest.raises(ValueError, match="bonus.* not reward entries"):
            TransformedEnv(PendulumEnv(), TargetReturn(1.0, in_keys=["bonus"])).observation_spec
        with pytest.raises(NotImplementedError, match="cannot be applied to stored data"):
            TargetReturn(1.0)(TensorDict(reward=torch.ones(1)))


def test_doctests():
    result = doctest.testmod(target_return_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
