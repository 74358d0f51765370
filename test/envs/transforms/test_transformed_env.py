"""TransformedEnv's API, as TorchRL 0.14.1: transform setter, append/insert, reset key checks, spec errors."""
import pytest
import torch

from torchrl.data import Unbounded
from torchrl.envs import Compose, DoubleToFloat, InitTracker, PendulumEnv, RewardSum, StepCounter, Transform, TransformedEnv


class Double(Transform):
    def _apply_transform(self, x):
        return x * 2


class DoubleDeclared(Double):
    def transform_observation_spec(self, observation_spec):
        observation_spec["obs2"] = Unbounded((3,))
        return observation_spec


def test_transform_setter():
    env = TransformedEnv(PendulumEnv(), StepCounter())
    env.transform = Compose(RewardSum())
    assert [type(t).__name__ for t in env.transform] == ["RewardSum"]
    assert "episode_reward" in env.observation_spec.keys() and "step_count" not in env.observation_spec.keys()
    env.transform = InitTracker()
    assert isinstance(env.transform, InitTracker) and env.transform.parent is not None


def test_append_and_insert():
    env = TransformedEnv(PendulumEnv(), StepCounter())
    assert env.append_transform(RewardSum()) is env
    env.insert_transform(0, InitTracker())
    assert [type(t).__name__ for t in env.transform] == ["InitTracker", "StepCounter", "RewardSum"]
    with pytest.raises(ValueError, match="index 10 out of range"):
        env.insert_transform(10, RewardSum())
    with pytest.raises(ValueError, match="TransformedEnv.insert_transform: expected a Transform or a callable"):
        env.insert_transform(0, 3)
    with pytest.raises(ValueError, match="TransformedEnv.append_transform: expected a Transform or a callable"):
        env.append_transform(3)


def test_undeclared_out_keys_raise_on_reset():
    # as TorchRL: a transform keeping Transform's _reset must declare its out_keys in the specs
    env = TransformedEnv(PendulumEnv(), Double(in_keys=["observation"], out_keys=["obs2"]))
    with pytest.raises(KeyError, match="Double: out_keys obs2 are not declared by the transformed specs"):
        env.reset()
    env = TransformedEnv(PendulumEnv(), DoubleDeclared(in_keys=["observation"], out_keys=["obs2"]))
    td = env.reset()
    torch.testing.assert_close(td["obs2"], td["observation"] * 2)
    # callables are not checked (as in TorchRL)
    env = TransformedEnv(PendulumEnv(), Compose(lambda td: td.set("extra", torch.ones(1))))
    assert "extra" in env.reset().keys()


def test_spec_errors_do_not_fall_through_to_the_base_env():
    # a transform's spec error surfaces (TorchRL: AttributeError from the spec property), instead of the
    # base env's spec of that name being returned
    # (raised when the transform is attached, with its own message, not "no attribute 'input_spec'")
    with pytest.raises(AttributeError, match="casts from dtype_in=torch.float64"):
        TransformedEnv(PendulumEnv(), DoubleToFloat(in_keys_inv=["action"]))  # the action is float32
    with pytest.raises(TypeError, match="casts from dtype_in=torch.float64"):
        TransformedEnv(PendulumEnv(), DoubleToFloat(in_keys_inv=["action"]))
    env = TransformedEnv(PendulumEnv(), DoubleToFloat())
    with pytest.raises(AttributeError, match="no attribute 'not_an_attribute'"):
        env.not_an_attribute
