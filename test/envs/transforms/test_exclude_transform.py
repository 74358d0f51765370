import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Composite, Unbounded
from torchrl.envs import EnvBase, PendulumEnv, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _exclude_transform as exclude_transform
from torchrl.envs.transforms._exclude_transform import ExcludeTransform

from test.envs.transforms.contract import TransformContract


class NestedEnv(EnvBase):
    """Observations at the root and under ``"nested"``; records the keys each step/reset receives."""

    _batch_locked = True

    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(
            obs=Unbounded((*shape, 2)),
            nested=Composite(a=Unbounded((*shape, 1)), b=Unbounded((*shape, 3)), shape=shape),
            shape=shape,
        )
        self.action_spec = Unbounded((*shape, 1))
        self.reward_spec = Unbounded((*shape, 1))
        self.seen_step: list[set] = []
        self.seen_reset: list[set] = []

    def _obs(self, value):
        shape = self.batch_size
        return {
            "obs": torch.full((*shape, 2), value),
            "nested": TensorDict(a=torch.full((*shape, 1), value), b=torch.full((*shape, 3), value), batch_size=shape),
        }

    def _reset(self, td=None, **kwargs):
        self.seen_reset.append(set(td.keys(True, True)) if td is not None else set())
        return TensorDict(self._obs(0.0), batch_size=self.batch_size)

    def _step(self, td):
        self.seen_step.append(set(td.keys(True, True)))
        out = self._obs(1.0)
        out["reward"] = td["action"].clone()
        out["done"] = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return TensorDict(out, batch_size=self.batch_size)

    def _set_seed(self, seed):
        pass


class TestExcludeTransform(TransformContract):
    def make_transform(self):
        return ExcludeTransform("observation")

    def test_removes_from_data_and_specs(self):
        env = TransformedEnv(PendulumEnv(seed=0), ExcludeTransform("observation"))
        assert "observation" not in env.observation_spec.keys()
        assert set(env.observation_spec.keys()) == {"th", "thdot", "params"}
        reset = env.reset()
        assert "observation" not in reset.keys()
        data = env.rollout(3)
        assert "observation" not in data.keys() and "observation" not in data["next"].keys()
        assert data["next", "th"].shape == (3,)

    def test_missing_key_raises(self):
        # as TorchRL: excluding an entry the env does not produce is a KeyError when the specs are built
        with pytest.raises(KeyError, match=r"key .not_there. not found in the environment outputs"):  # (when the transform is attached)
            TransformedEnv(PendulumEnv(seed=0), ExcludeTransform("not_there", "observation"))

    def test_nested_keys(self):
        env = TransformedEnv(NestedEnv(batch_size=(2,)), ExcludeTransform(("nested", "a")))
        check_env_specs(env)
        assert set(env.observation_spec.keys(True, True)) == {"obs", ("nested", "b")}
        data = env.rollout(2)
        assert ("nested", "a") not in data["next"].keys(True, True)
        assert data["next", "nested", "b"].shape == (2, 2, 3)

    def test_done_key_can_be_excluded(self):
        env = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=3))
        env.append_transform(ExcludeTransform("truncated"))
        assert set(env.full_done_spec.keys()) == {"done", "terminated"}
        data = env.rollout(10)
        assert data.shape == (3,)
        assert "truncated" not in data["next"].keys()
        assert data["next", "done"].squeeze(-1).tolist() == [False, False, True]

    def test_inverse_hides_keys_from_base_env(self):
        base = NestedEnv()
        env = TransformedEnv(base, ExcludeTransform("policy_state", ("nested", "b"), inverse=True))
        # Output side unchanged.
        assert set(env.observation_spec.keys(True, True)) == {"obs", ("nested", "a"), ("nested", "b")}
        td = env.reset(TensorDict(policy_state=torch.ones(3)))
        assert "policy_state" not in base.seen_reset[-1]
        td["policy_state"] = torch.ones(3)
        td["action"] = torch.ones(1)
        td = env.step(td)
        assert "policy_state" not in base.seen_step[-1]
        assert ("nested", "b") not in base.seen_step[-1]
        assert ("nested", "a") in base.seen_step[-1]
        # The caller's data is not modified and the outputs still carry the key.
        assert "policy_state" in td.keys()
        assert ("nested", "b") in td["next"].keys(True, True)

    def test_forward_standalone(self):
        t = ExcludeTransform("a", ("b", "c"))
        td = TensorDict(a=torch.zeros(2), b=TensorDict(c=torch.zeros(2), d=torch.ones(2), batch_size=[2]), batch_size=[2])
        out = t(td)
        assert set(out.keys(True, True)) == {("b", "d")}
        assert set(td.keys(True, True)) == {"a", ("b", "c"), ("b", "d")}
        inverse = ExcludeTransform("a", inverse=True)
        assert set(inverse(td).keys()) == {"a", "b"}
        assert set(inverse.inv(td).keys()) == {"b"}
        assert "a" in td.keys()

    def test_list_is_not_a_key(self):
        # as TorchRL (RuntimeError): keys are separate arguments, a tuple is one nested key
        assert ExcludeTransform("a", ("b", "c")).excluded_keys == ["a", ("b", "c")]
        with pytest.raises(RuntimeError, match=r"got the list \['a', \('b', 'c'\)\] as a key"):
            ExcludeTransform(["a", ("b", "c")])

    def test_rejects_bad_keys(self):
        with pytest.raises(TypeError, match="keys must be strings or tuples of strings"):
            ExcludeTransform("a", 3)


def test_doctests():
    result = doctest.testmod(exclude_transform, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted and not result.failed
