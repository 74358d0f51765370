import doctest
import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms._squeeze import SqueezeTransform, UnsqueezeTransform
from torchrl.envs.transforms import _squeeze as squeeze_module

from test.envs.transforms._envs_batch_a import PosVelEnv
from test.envs.transforms.contract import TransformContract


class TestUnsqueeze(TransformContract):
    def replay_buffer_data(self):
        # stored actions are in the transformed (outer) layout, which the inverse squeezes back on writes
        env = TransformedEnv(self.make_env(), self.make_transform())
        data = env.rollout(self.steps, break_when_any_done=False)
        flat = data.get("next").copy()
        flat.set("action", data.get("action"))
        return flat

    def make_transform(self):
        return UnsqueezeTransform(-2, in_keys=["observation", "reward"], in_keys_inv=["action"])

    def test_shapes_and_specs(self):
        env = TransformedEnv(PendulumEnv(seed=0, batch_size=[2]), self.make_transform())
        assert env.observation_spec["observation"].shape == (2, 1, 3)
        assert env.full_reward_spec["reward"].shape == (2, 1, 1)
        assert env.full_action_spec["action"].shape == (2, 1, 1)
        data = env.rollout(3)
        assert data["next", "observation"].shape == (2, 3, 1, 3)
        assert data["action"].shape == (2, 3, 1, 1)
        assert env.transform.dim == -2 and env.transform.unsqueeze_dim == -2

    def test_inverse_round_trip(self):
        t = UnsqueezeTransform(-1, in_keys=["o"], in_keys_inv=["a"])
        assert t(TensorDict(o=torch.zeros(3)))["o"].shape == (3, 1)
        assert t.inv(TensorDict(a=torch.zeros(2, 1)))["a"].shape == (2,)
        # as torch.squeeze (and TorchRL): a dim that is not of size one is left as it is
        assert t.inv(TensorDict(a=torch.zeros(2, 2)))["a"].shape == (2, 2)
        assert t.inv(TensorDict(a=torch.zeros(4, 3), batch_size=[4]))["a"].shape == (4, 3)

    def test_positive_dim_counts_after_env_batch(self):
        env = TransformedEnv(PendulumEnv(seed=0, batch_size=[2]), UnsqueezeTransform(0, allow_positive_dim=True, in_keys=["observation"]))
        assert env.observation_spec["observation"].shape == (2, 1, 3)
        assert env.reset()["observation"].shape == (2, 1, 3)
        check_env_specs(env, seed=0)

    def test_deprecated_name(self):
        with pytest.warns(DeprecationWarning, match="unsqueeze_dim"):
            t = UnsqueezeTransform(unsqueeze_dim=-1, in_keys=["o"])
        assert t.dim == -1

    def test_errors(self):
        # TorchRL's exception types: RuntimeError for a non-negative dim, IndexError out of range,
        # RuntimeError when the data's batch dims would change, ValueError when a spec's would.
        with pytest.raises(RuntimeError, match="allow_positive_dim"):
            UnsqueezeTransform(1, in_keys=["o"])
        with pytest.raises(RuntimeError, match="allow_positive_dim"):
            UnsqueezeTransform(0, in_keys=["o"])
        with pytest.raises(ValueError, match="dim must be an int"):
            UnsqueezeTransform(in_keys=["o"])
        with pytest.raises(ValueError, match="would change the 1 batch dims"):  # (when the transform is attached)
            TransformedEnv(PendulumEnv(batch_size=[2]), UnsqueezeTransform(-3, in_keys=["observation"]))
        td = TensorDict({"x": torch.zeros(4, 3, 1)}, [4])
        with pytest.raises(IndexError, match=r"dim -6 is out of range for an entry of shape \(4, 3, 1\)"):
            UnsqueezeTransform(-6, in_keys=["x"])(td.clone())
        with pytest.raises(RuntimeError, match="would change the tensordict's 1 batch dims"):
            UnsqueezeTransform(-4, in_keys=["x"])(td.clone())
        with pytest.raises(IndexError, match="out of range for a spec"):
            UnsqueezeTransform(-3, in_keys=["x"]).transform_observation_spec(Composite(x=Unbounded((4,)), shape=(4,)))

    def test_positive_dim_without_env_is_absolute(self):
        t = UnsqueezeTransform(1, in_keys=["x"], allow_positive_dim=True)
        assert t(TensorDict({"x": torch.zeros(4, 3)}, [4]))["x"].shape == (4, 1, 3)
        spec = t.transform_observation_spec(Composite(x=Unbounded((4, 3)), shape=(4,)))
        assert spec["x"].shape == (4, 1, 3)


class TestSqueeze(TransformContract):
    def make_transform(self):
        return SqueezeTransform(-1, in_keys=["reward"], in_keys_inv=["action"])

    def test_shapes_and_specs(self):
        env = TransformedEnv(PendulumEnv(seed=0, batch_size=[2]), self.make_transform())
        assert env.full_reward_spec["reward"].shape == (2,)
        assert env.full_action_spec["action"].shape == (2,)
        data = env.rollout(3)
        assert data["next", "reward"].shape == (2, 3) and data["action"].shape == (2, 3)
        assert env.transform.squeeze_dim == -1

    def test_round_trip_with_unsqueeze(self):
        x = torch.randn(4, 1, 3)
        td = SqueezeTransform(-2, in_keys=["x"], out_keys=["y"])(TensorDict(x=x))
        td = UnsqueezeTransform(-2, in_keys=["y"], out_keys=["z"])(td)
        assert td["y"].shape == (4, 3)
        torch.testing.assert_close(td["z"], x)

    def test_non_singleton_dim_is_left_unchanged(self):
        # TorchRL (torch.squeeze semantics): squeezing a dim that is not of size one is a no-op
        env = TransformedEnv(PendulumEnv(), SqueezeTransform(-1, in_keys=["observation"]))
        assert env.observation_spec["observation"].shape == (3,)
        assert env.rollout(2)["observation"].shape == (2, 3)
        td = TensorDict({"x": torch.zeros(4, 3, 1), "y": torch.zeros(4, 1, 3)}, [4])
        out = SqueezeTransform(-1, in_keys=["x", "y"])(td)
        assert out["x"].shape == (4, 3) and out["y"].shape == (4, 1, 3)
        spec = SqueezeTransform(-2, in_keys=["x", "y"]).transform_observation_spec(
            Composite(x=Unbounded((4, 3, 1)), y=Unbounded((4, 1, 3)), shape=(4,))
        )
        assert spec["x"].shape == (4, 3, 1) and spec["y"].shape == (4, 3)

    def test_errors(self):
        with pytest.raises(RuntimeError, match="allow_positive_dim"):
            SqueezeTransform(0, in_keys=["o"])
        with pytest.raises(IndexError, match=r"dim -3 is out of range for an entry of shape \(4, 1\)"):
            SqueezeTransform(-3, in_keys=["x"])(TensorDict({"x": torch.zeros(4, 1)}, [4]))
        with pytest.raises(RuntimeError, match="would change the tensordict's 1 batch dims"):
            SqueezeTransform(-1, in_keys=["x"])(TensorDict({"x": torch.zeros(1)}, [1]))
        with pytest.raises(ValueError, match="would change the 1 batch dims of the Composite"):
            SqueezeTransform(-1, in_keys=["x"]).transform_observation_spec(Composite(x=Unbounded((1,)), shape=(1,)))
        with pytest.raises(TypeError, match="only positional"):
            SqueezeTransform(-1, ["o"])


class TestUnsqueezeNested(TransformContract):
    def make_env(self, batch_size=()):
        return PosVelEnv(batch_size=batch_size, seed=0)

    def make_transform(self):
        return UnsqueezeTransform(-1, in_keys=[("agent", "speed")])

    def test_nested_shape(self):
        env = TransformedEnv(self.make_env((2,)), self.make_transform())
        assert env.observation_spec["agent", "speed"].shape == (2, 1, 1)
        assert env.rollout(2)["next", "agent", "speed"].shape == (2, 2, 1, 1)


def test_doctests():
    result = doctest.testmod(squeeze_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_missing_dim_is_a_type_error():
    with pytest.raises(TypeError, match="dim must be an int, got None"):  # TorchRL's type (also a ValueError)
        UnsqueezeTransform(in_keys=["a"])
