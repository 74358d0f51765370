import doctest

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl.data.tensor_specs import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.common import EnvBase
from torchrl.envs.transforms import LineariseRewards as Exported
from torchrl.envs.transforms import _linearise_rewards as linearise_module
from torchrl.envs.transforms._linearise_rewards import LineariseRewards

from test.envs.transforms.contract import TransformContract


class MultiObjectiveEnv(EnvBase):
    """Three objectives in [-1, 1]: the reward is ``2 * observation - 1``, the observation uniform in [0, 1)."""

    def __init__(self, batch_size=(), seed: int = 0) -> None:
        super().__init__(batch_size=batch_size)
        b = self.batch_size
        self.observation_spec = Composite(observation=Unbounded((*b, 3)), shape=b)
        self.action_spec = Bounded(-1.0, 1.0, (*b, 1))
        self.reward_spec = Bounded(-1.0, 1.0, (*b, 3))
        self._generator = torch.Generator()
        self._set_seed(seed)

    def _set_seed(self, seed):
        self._generator.manual_seed(0 if seed is None else int(seed))

    def _obs(self) -> torch.Tensor:
        return torch.rand((*self.batch_size, 3), generator=self._generator)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        done = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return TensorDict(observation=self._obs(), done=done, terminated=done.clone(), batch_size=self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs = self._obs()
        done = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return TensorDict(
            observation=obs, reward=obs * 2 - 1, done=done, terminated=done.clone(), batch_size=self.batch_size
        )


class TestLineariseRewards(TransformContract):
    def make_env(self, batch_size=()):
        return MultiObjectiveEnv(batch_size=batch_size)

    def make_transform(self):
        return LineariseRewards(in_keys=["reward"], weights=[1.0, -1.0, 2.0])

    def test_exported(self):
        assert Exported is LineariseRewards

    def test_known_answers(self):
        r = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]])
        out = LineariseRewards(in_keys=["reward"], weights=[1.0, -1.0, 2.0])(TensorDict(reward=r.clone(), batch_size=[2]))
        assert out["reward"].tolist() == [[5.0], [2.0]]
        out = LineariseRewards(in_keys=["reward"])(TensorDict(reward=r.clone(), batch_size=[2]))
        assert out["reward"].tolist() == [[6.0], [1.0]]
        ints = TensorDict(reward=torch.tensor([[1, 2, 3]]), batch_size=[1])
        out = LineariseRewards(in_keys=["reward"], weights=[1.0, -1.0, 2.0])(ints)["reward"]
        assert out.dtype == torch.float32 and out.tolist() == [[5.0]]  # as TorchRL: type promotion
        f64 = TensorDict(reward=torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64), batch_size=[1])
        out = LineariseRewards(in_keys=["reward"], weights=[1.0, -1.0, 2.0])(f64)["reward"]
        assert out.dtype == torch.float64 and out.tolist() == [[5.0]]

    def test_weights_buffer(self):
        t = LineariseRewards(in_keys=["reward"], weights=[1.0, -1.0])
        assert list(t.state_dict()) == ["weights"] and t.weights.tolist() == [1.0, -1.0]
        assert list(LineariseRewards(in_keys=["reward"]).state_dict()) == [] and LineariseRewards(["r"]).weights is None
        assert LineariseRewards(in_keys=["reward"], weights=torch.tensor([1, 2])).weights.dtype == torch.int64

    def test_specs(self):
        t = LineariseRewards(in_keys=["reward"], weights=[1.0, -1.0, 2.0])
        low, high = torch.tensor([0.0, -1.0, 1.0]), torch.tensor([1.0, 2.0, 3.0])
        spec = t.transform_reward_spec(Composite(reward=Bounded(low, high, (3,))))["reward"]
        # lower: 1*0 + (-1)*2 + 2*1 = 0; upper: 1*1 + (-1)*(-1) + 2*3 = 8 (TorchRL gives the same)
        assert isinstance(spec, Bounded) and spec.shape == (1,) and spec.low.tolist() == [0.0] and spec.high.tolist() == [8.0]
        spec = LineariseRewards(in_keys=["reward"]).transform_reward_spec(Composite(reward=Bounded(-1.0, 1.0, (2, 3))))
        assert spec["reward"].shape == (2, 1) and spec["reward"].high.flatten().tolist() == [3.0, 3.0]
        leaf = t.transform_reward_spec(Unbounded((4, 3), dtype=torch.float64))
        assert isinstance(leaf, Unbounded) and leaf.shape == (4, 1) and leaf.dtype == torch.float64
        spec = LineariseRewards(in_keys=["reward"], out_keys=["lin"]).transform_reward_spec(Composite(reward=Unbounded((3,))))
        assert spec["reward"].shape == (3,) and spec["lin"].shape == (1,)

    def test_env(self):
        base = MultiObjectiveEnv()
        raw = base.rollout(4)["next", "reward"]
        env = TransformedEnv(MultiObjectiveEnv(), LineariseRewards(in_keys=["reward"], out_keys=["lin"], weights=[1.0, -1.0, 2.0]))
        data = env.rollout(4)
        torch.testing.assert_close(data["next", "lin"], raw[:, :1] - raw[:, 1:2] + 2 * raw[:, 2:])
        torch.testing.assert_close(data["next", "reward"], raw)
        assert env.full_reward_spec["lin"].low.tolist() == [-4.0] and env.full_reward_spec["lin"].high.tolist() == [4.0]
        check_env_specs(env, seed=0)
        pendulum = TransformedEnv(PendulumEnv(seed=0), LineariseRewards(in_keys=["reward"], weights=[0.5]))
        check_env_specs(pendulum, seed=0)

    def test_errors(self):
        with pytest.raises(ValueError, match="one-dimensional.*2 dimensions"):
            LineariseRewards(in_keys=["reward"], weights=[[1.0, 2.0]])
        t = LineariseRewards(in_keys=["reward"], weights=[1.0, 2.0])
        with pytest.raises(ValueError, match="rewards and weights should match.*3 objectives.*weights has 2"):
            t(TensorDict(reward=torch.ones(3)))
        with pytest.raises(ValueError, match="rewards and weights should match"):
            t.transform_reward_spec(Composite(reward=Unbounded((3,))))
        with pytest.raises(NotImplementedError, match="discrete"):
            t.transform_reward_spec(Composite(reward=Categorical(5, (2,))))
        with pytest.raises(NotImplementedError, match="discrete"):
            t.transform_reward_spec(Composite(reward=Bounded(0, 5, (2,), dtype=torch.int64)))
        with pytest.raises(KeyError, match="bonus.* is not a reward"):
            TransformedEnv(MultiObjectiveEnv(), LineariseRewards(in_keys=["bonus"])).full_reward_spec
        with pytest.raises(ValueError, match="differ in length"):
            LineariseRewards(in_keys=["reward"], out_keys=["a", "b"])
        with pytest.raises(TypeError):
            LineariseRewards(["reward"], None, [1.0])  # weights is keyword-only


def test_doctests():
    result = doctest.testmod(linearise_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
