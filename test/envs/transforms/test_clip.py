import doctest
import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Composite
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms._clip import ClipTransform
from torchrl.envs.transforms import _clip as clip_module

from test.envs.transforms._envs_batch_a import PosVelEnv
from test.envs.transforms.contract import TransformContract


class TestClipTransform(TransformContract):
    def make_transform(self):
        return ClipTransform(in_keys=["observation", "reward"], low=-0.5, high=0.5)

    def test_values_and_specs(self):
        env = TransformedEnv(PendulumEnv(seed=0), self.make_transform())
        data = env.rollout(10)
        assert data["next", "observation"].abs().max() <= 0.5
        assert data["next", "reward"].abs().max() <= 0.5
        obs = env.observation_spec["observation"]
        assert obs.low.tolist() == [-0.5] * 3 and obs.high.tolist() == [0.5] * 3
        reward = env.full_reward_spec["reward"]
        assert isinstance(reward, Bounded) and reward.high.tolist() == [0.5]

    def test_one_sided_intersects_existing_bounds(self):
        env = TransformedEnv(PendulumEnv(), ClipTransform(in_keys=["observation"], low=0.0))
        spec = env.observation_spec["observation"]
        assert spec.low.tolist() == [0.0, 0.0, 0.0] and spec.high.tolist() == [1.0, 1.0, 8.0]
        t = ClipTransform(in_keys=["o"], high=1.0)
        assert t(TensorDict(o=torch.tensor([-3.0, 2.0])))["o"].tolist() == [-3.0, 1.0]

    def test_range_above_spec_collapses_bounds(self):
        spec = ClipTransform(in_keys=["o"], low=2.0).transform_observation_spec(Composite(o=Bounded(-1.0, 1.0, shape=(2,))))["o"]
        assert spec.low.tolist() == [2.0, 2.0] and spec.high.tolist() == [2.0, 2.0]
        assert spec.is_in(ClipTransform(in_keys=["o"], low=2.0)(TensorDict(o=torch.tensor([0.0, 1.0])))["o"])

    def test_out_keys(self):
        t = ClipTransform(in_keys=["o"], out_keys=["c"], low=0.0, high=1.0)
        td = t(TensorDict(o=torch.tensor([-1.0, 0.5, 2.0])))
        assert td["c"].tolist() == [0.0, 0.5, 1.0] and td["o"].tolist() == [-1.0, 0.5, 2.0]

    def test_errors(self):
        with pytest.raises(ValueError, match="got neither"):
            ClipTransform(in_keys=["o"])
        with pytest.raises(ValueError, match="must be below"):
            ClipTransform(in_keys=["o"], low=1.0, high=1.0)
        with pytest.raises(KeyError, match="neither observations nor rewards"):
            TransformedEnv(PendulumEnv(), ClipTransform(in_keys=["velocity"], low=0.0))


class TestClipTransformInverse(TransformContract):
    def make_transform(self):
        return ClipTransform(in_keys_inv=["action"], low=-1.0, high=1.5)

    def test_actions_clipped_before_env(self):
        t = self.make_transform()
        env = TransformedEnv(PendulumEnv(), t)
        spec = env.full_action_spec["action"]  # as TorchRL: the env's own action spec, not the clipped range
        assert spec.low.tolist() == [-2.0] and spec.high.tolist() == [2.0]
        td = TensorDict(action=torch.tensor([3.0]))
        assert t.inv(td)["action"].item() == 1.5 and td["action"].item() == 3.0


class TestClipNested(TransformContract):
    def make_env(self, batch_size=()):
        return PosVelEnv(batch_size=batch_size, seed=0)

    def make_transform(self):
        return ClipTransform(in_keys=[("agent", "speed")], high=0.25)

    def test_nested_spec(self):
        env = TransformedEnv(self.make_env((2,)), self.make_transform())
        spec = env.observation_spec["agent", "speed"]
        assert spec.low.unique().tolist() == [0.0] and spec.high.unique().tolist() == [0.25]
        check_env_specs(env, seed=0)


def test_doctests():
    result = doctest.testmod(clip_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_bounds_are_tensor_buffers_and_neither_bound_is_a_type_error():
    t = ClipTransform(in_keys=["observation"], low=0.0, high=1.0)
    assert list(t.state_dict()) == ["low", "high"]  # as TorchRL
    assert t.low.dtype == torch.float32 and t.high.item() == 1.0
    with pytest.raises(TypeError, match="got neither"):  # TorchRL's type (also a ValueError)
        ClipTransform(in_keys=["observation"])


def test_inverse_with_renamed_keys_reads_the_outside_name_and_writes_the_env_one():
    # as TorchRL 0.14.1: the inverse reads out_keys_inv (what the outside wrote) and writes in_keys_inv
    import torch
    from tensordict import TensorDict

    from torchrl.envs.transforms import ClipTransform, ObservationNorm, UnsqueezeTransform

    clipped = ClipTransform(in_keys_inv=["action"], out_keys_inv=["a2"], low=-1.0, high=1.0).inv(
        TensorDict({"a2": torch.tensor([3.0, -0.5])}, []))
    assert clipped["action"].tolist() == [1.0, -0.5]
    squeezed = UnsqueezeTransform(-1, in_keys_inv=["action"], out_keys_inv=["a2"]).inv(
        TensorDict({"a2": torch.tensor([[3.0], [-0.5]])}, []))
    assert squeezed["action"].tolist() == [3.0, -0.5]
    norm = ObservationNorm(loc=torch.tensor(1.0), scale=torch.tensor(2.0), in_keys=["observation"],
                           in_keys_inv=["action"], out_keys_inv=["a2"], standard_normal=True)
    assert norm.inv(TensorDict({"a2": torch.tensor([[3.0], [-0.5]])}, []))["action"].flatten().tolist() == [7.0, 0.0]
