import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _rename_transform as rename_transform
from torchrl.envs.transforms._rename_transform import RenameTransform

from test.envs.transforms.contract import TransformContract


class NestedEnv(EnvBase):
    """A nested observation; reward equals the action; records the keys each step receives."""

    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(
            nested=Composite(a=Unbounded((*shape, 1)), shape=shape), obs=Unbounded((*shape, 2)), shape=shape
        )
        self.action_spec = Unbounded((*shape, 1))
        self.reward_spec = Unbounded((*shape, 1))
        self.seen: list[set] = []

    def _reset(self, td=None, **kwargs):
        shape = self.batch_size
        return TensorDict(
            nested=TensorDict(a=torch.zeros(*shape, 1), batch_size=shape), obs=torch.zeros(*shape, 2), batch_size=shape
        )

    def _step(self, td):
        self.seen.append(set(td.keys(True, True)))
        shape = self.batch_size
        return TensorDict(
            nested=TensorDict(a=td["action"] + 1, batch_size=shape),
            obs=torch.ones(*shape, 2),
            reward=td["action"].clone(),
            done=torch.zeros(*shape, 1, dtype=torch.bool),
            batch_size=shape,
        )

    def _set_seed(self, seed):
        pass


class TestRenameTransform(TransformContract):
    def make_transform(self):
        return RenameTransform(["observation", "th"], ["obs", "theta"])

    def test_values_and_specs(self):
        env = TransformedEnv(PendulumEnv(seed=0), RenameTransform(["observation"], ["obs"]))
        ref = PendulumEnv(seed=0)
        assert "obs" in env.observation_spec.keys() and "observation" not in env.observation_spec.keys()
        actions = [torch.full((1,), -0.5)] * 3
        data, expected = env.rollout(3, actions=actions), ref.rollout(3, actions=actions)
        torch.testing.assert_close(data["obs"], expected["observation"])
        torch.testing.assert_close(data["next", "obs"], expected["next", "observation"])

    def test_renamed_state_is_renamed_back_for_the_base_env(self):
        env = TransformedEnv(PendulumEnv(seed=0), RenameTransform(["th"], ["theta"]))
        assert "theta" in env.state_spec.keys() and "th" not in env.state_spec.keys()
        ref = PendulumEnv(seed=0)
        actions = [torch.full((1,), 0.7)] * 4
        data, expected = env.rollout(4, actions=actions), ref.rollout(4, actions=actions)
        torch.testing.assert_close(data["next", "theta"], expected["next", "th"])

    def test_partial_reset_keeps_renamed_state(self):
        env = TransformedEnv(PendulumEnv(batch_size=[3], seed=0), RenameTransform(["th"], ["theta"]))
        td = env.rand_step(env.reset())
        td = env.step_mdp(td)
        before = td["theta"].clone()
        td["_reset"] = torch.tensor([[True], [False], [False]])
        out = env.reset(td)
        torch.testing.assert_close(out["theta"][1:], before[1:])
        assert out["theta"][0] != before[0]

    def test_create_copy_keeps_the_original(self):
        env = TransformedEnv(PendulumEnv(seed=0), RenameTransform(["reward"], ["stuff"], create_copy=True))
        check_env_specs(env, seed=0)
        assert set(env.full_reward_spec.keys()) == {"reward", "stuff"}
        data = env.rollout(3)
        torch.testing.assert_close(data["next", "stuff"], data["next", "reward"])

    def test_explicit_inverse_renames_the_action(self):
        base = NestedEnv()
        env = TransformedEnv(base, RenameTransform([], [], in_keys_inv=["action"], out_keys_inv=["torque"]))
        assert set(env.full_action_spec.keys()) == {"torque"}
        check_env_specs(env)
        td = env.reset()
        td["torque"] = torch.full((1,), 2.0)
        td = env.step(td)
        assert "action" in base.seen[-1] and "torque" not in base.seen[-1]
        assert td["next", "reward"].item() == 2.0
        assert "torque" in td.keys()

    def test_nested_rename(self):
        base = NestedEnv(batch_size=(2,))
        env = TransformedEnv(base, RenameTransform([("nested", "a")], [("other", "x")]))
        check_env_specs(env)
        assert set(env.observation_spec.keys(True, True)) == {"obs", ("other", "x")}
        td = env.reset()
        td["action"] = torch.full((2, 1), 3.0)
        td = env.step(td)
        assert td["next", "other", "x"].tolist() == [[4.0], [4.0]]
        assert ("nested", "a") not in td["next"].keys(True, True)

    def test_length_mismatch(self):
        with pytest.raises(ValueError, match="in_keys .* and out_keys .* must have the same length"):
            RenameTransform(["a", "b"], ["c"])
        with pytest.raises(ValueError, match="in_keys_inv .* and out_keys_inv .* must have the same length"):
            RenameTransform([], [], in_keys_inv=["a"], out_keys_inv=["b", "c"])

    def test_unknown_key(self):
        with pytest.raises(KeyError, match=r"RenameTransform: keys .*nope.* are not produced by the env"):  # (when the transform is attached)
            TransformedEnv(PendulumEnv(), RenameTransform(["nope"], ["x"]))
        with pytest.raises(KeyError, match="input key .*nope.* is not an input of the env"):  # (when the transform is attached)
            TransformedEnv(PendulumEnv(), RenameTransform([], [], in_keys_inv=["nope"], out_keys_inv=["x"]))

    def test_missing_key_in_step_raises(self):
        t = RenameTransform(["a"], ["b"])
        with pytest.raises(KeyError, match="RenameTransform: key 'a' not found"):
            t(TensorDict(c=torch.zeros(1)))

    def test_forward_standalone(self):
        t = RenameTransform(["a", ("n", "b")], ["x", "y"])
        td = TensorDict(a=torch.zeros(1), n=TensorDict(b=torch.ones(1)))
        out = t(td)
        assert set(out.keys(True, True)) == {"x", "y"}
        assert out["y"].item() == 1.0


def test_doctests():
    result = doctest.testmod(rename_transform, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
