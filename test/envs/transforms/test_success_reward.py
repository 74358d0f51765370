import doctest

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl.data.tensor_specs import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.common import EnvBase
from torchrl.envs.transforms import SuccessReward as Exported
from torchrl.envs.transforms import _success_reward as success_module
from torchrl.envs.transforms._success_reward import SuccessReward

from test.envs.transforms.contract import TransformContract


class SuccessEnv(EnvBase):
    """Reports ``success`` on every second step (in its observation or done spec) and a constant 0.25 reward."""

    def __init__(self, batch_size=(), where: str = "observation", reward_dtype=torch.float32, declare=True) -> None:
        super().__init__(batch_size=batch_size)
        b = self.batch_size
        flag = Categorical(2, (*b, 1), dtype=torch.bool)
        obs = {"observation": Unbounded((*b, 2))}
        done = {"done": flag.clone(), "terminated": flag.clone()}
        if declare:
            (obs if where == "observation" else done)["success"] = flag.clone()
        self.observation_spec = Composite(obs, shape=b)
        self.action_spec = Bounded(-1.0, 1.0, (*b, 1))
        self.reward_spec = Unbounded((*b, 1), dtype=reward_dtype)
        self.done_spec = Composite(done, shape=b)
        self.count = 0

    def _set_seed(self, seed):
        pass

    def _out(self, success: bool) -> TensorDictBase:
        b = self.batch_size
        false = torch.zeros((*b, 1), dtype=torch.bool)
        return TensorDict(
            observation=torch.zeros((*b, 2)),
            done=false,
            terminated=false.clone(),
            success=torch.full((*b, 1), success),
            batch_size=b,
        )

    def _reset(self, tensordict, **kwargs) -> TensorDictBase:
        self.count = 0
        return self._out(False)

    def _step(self, tensordict) -> TensorDictBase:
        self.count += 1
        out = self._out(self.count % 2 == 0)
        out["reward"] = torch.full((*self.batch_size, 1), 0.25, dtype=self.reward_spec.dtype)
        return out


class TestSuccessReward(TransformContract):
    def make_env(self, batch_size=()):
        return SuccessEnv(batch_size=batch_size)

    def make_transform(self):
        return SuccessReward(scale=2.0)

    def test_exported(self):
        assert Exported is SuccessReward

    def test_defaults(self):
        t = SuccessReward()
        assert t.in_keys == ["success"] and t.out_keys == ["reward"] and t.scale == 1.0
        assert list(t.state_dict()) == []

    def test_known_answers(self):
        for success in (torch.tensor([[True], [False]]), torch.tensor([[1.0], [0.0]]), torch.tensor([[1], [0]])):
            out = SuccessReward(scale=2.5, reward_key="r2")(TensorDict(success=success, batch_size=[2]))["r2"]
            assert out.dtype == torch.float32 and out.tolist() == [[2.5], [0.0]]
        out = SuccessReward(scale=-2.0)(TensorDict(success=torch.tensor([[True], [False]]), batch_size=[2]))["reward"]
        assert out.tolist() == [[-2.0], [0.0]] and not torch.signbit(out[1]).any()  # a plain 0, not -0

    def test_env(self):
        env = TransformedEnv(SuccessEnv(), SuccessReward(scale=-2.0))
        data = env.rollout(4)
        assert data["next", "reward"].squeeze(-1).tolist() == [0.0, -2.0, 0.0, -2.0]  # overwrites the env's 0.25
        assert "reward" not in data.keys()  # never written at reset
        spec = env.full_reward_spec["reward"]
        assert isinstance(spec, Bounded) and spec.low.tolist() == [-2.0] and spec.high.tolist() == [0.0]

    def test_spec_follows_success_entry(self):
        env = TransformedEnv(SuccessEnv(where="done"), SuccessReward(scale=3.0, reward_key="bonus"))
        assert env.full_reward_spec["reward"].dtype == torch.float32 and isinstance(env.full_reward_spec["reward"], Unbounded)
        bonus = env.full_reward_spec["bonus"]
        assert bonus.shape == (1,) and bonus.low.tolist() == [0.0] and bonus.high.tolist() == [3.0]
        check_env_specs(env, seed=0)
        data = env.rollout(2)
        assert data["next", "bonus"].squeeze(-1).tolist() == [0.0, 3.0]
        # as TorchRL: the written reward is in the default float dtype whatever the env's reward dtype
        env = TransformedEnv(SuccessEnv(reward_dtype=torch.float64), SuccessReward())
        assert env.full_reward_spec["reward"].dtype == torch.float32
        assert env.rollout(2)["next", "reward"].dtype == torch.float32
        # an undeclared success entry: the reward keeps the existing reward's shape
        env = TransformedEnv(SuccessEnv(batch_size=(3,), declare=False), SuccessReward())
        assert env.full_reward_spec["reward"].shape == (3, 1)

    def test_spec_helpers(self):
        spec = SuccessReward(scale=2.0).transform_reward_spec(Composite(reward=Unbounded((3,))))["reward"]
        assert isinstance(spec, Bounded) and spec.shape == (3,) and spec.high.tolist() == [2.0] * 3
        leaf = SuccessReward(scale=-1.0).transform_reward_spec(Unbounded((1,)))
        assert leaf.low.tolist() == [-1.0] and leaf.high.tolist() == [0.0]

    def test_errors(self):
        with pytest.raises(RuntimeError, match="cannot infer the reward's shape.*'flag'.*'bonus'"):
            TransformedEnv(PendulumEnv(), SuccessReward("flag", "bonus")).full_reward_spec
        with pytest.raises(KeyError, match="success.* not found"):
            SuccessReward()(TensorDict(reward=torch.ones(1)))
        with pytest.raises(TypeError):
            SuccessReward("success", "reward", 2.0)  # scale is keyword-only


def test_doctests():
    result = doctest.testmod(success_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
