import doctest
from types import SimpleNamespace

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import _action_scaling as as_module
from torchrl.envs.transforms._action_scaling import ActionScaling

from test.envs.transforms.contract import TransformContract


class TestActionScaling(TransformContract):
    def make_transform(self):
        return ActionScaling(loc=0.0, scale=2.0)

    def test_known_answers(self):
        # same values as TorchRL 0.14.1
        t = ActionScaling(loc=1.0, scale=2.0)
        assert t.inv(TensorDict(action=torch.tensor([0.5, -1.0])))["action"].tolist() == [2.0, -1.0]
        assert t(TensorDict(action=torch.tensor([2.0, -1.0])))["action"].tolist() == [0.5, -1.0]
        t = ActionScaling(loc=1.0, scale=2.0, standard_normal=False)
        assert t.inv(TensorDict(action=torch.tensor([0.5, -1.0])))["action"].tolist() == [1.0, -5.0]
        assert t(TensorDict(action=torch.tensor([-1.0, 3.0])))["action"].tolist() == [0.0, 1.0]

    def test_round_trip(self):
        t = ActionScaling(loc=torch.tensor([1.0, -2.0]), scale=torch.tensor([0.5, 3.0]))
        a = torch.randn(4, 2)
        torch.testing.assert_close(t.normalize(t.denormalize(a)), a)

    def test_derived_from_spec(self):
        env = TransformedEnv(PendulumEnv(seed=0), ActionScaling())
        spec = env.action_spec
        assert isinstance(spec, Bounded) and spec.low.tolist() == [-1.0] and spec.high.tolist() == [1.0]
        assert env.transform.loc.tolist() == [0.0] and env.transform.scale.tolist() == [2.0]
        check_env_specs(env)
        td = env.reset().set("action", torch.tensor([0.5]))
        assert env.transform.inv(td)["action"].tolist() == [1.0]
        env = TransformedEnv(PendulumEnv(seed=0), ActionScaling(standard_normal=False))
        assert env.action_spec.low.tolist() == [0.0] and env.action_spec.high.tolist() == [1.0]

    def test_explicit_values_map_spec(self):
        t = ActionScaling(loc=0.0, scale=4.0)
        env = TransformedEnv(PendulumEnv(), t)
        assert env.action_spec.low.tolist() == [-0.5] and env.action_spec.high.tolist() == [0.5]
        spec = t.transform_action_spec(Unbounded(shape=(2,)))
        assert isinstance(spec, Unbounded) and spec.shape == (2,)

    def test_from_stats(self):
        t = ActionScaling.from_stats(low=torch.tensor([-2.0]), high=torch.tensor([4.0]))
        assert t.loc.tolist() == [1.0] and t.scale.tolist() == [3.0]
        t = ActionScaling.from_stats(mean=torch.tensor([1.0, 2.0]), std=torch.tensor([2.0, 0.0]))
        assert t.loc.tolist() == [1.0, 2.0] and t.scale.tolist() == [2.0, pytest.approx(1e-6)]
        assert t(TensorDict(action=torch.tensor([3.0, 2.0])))["action"].tolist() == [1.0, 0.0]
        with pytest.raises(ValueError, match="exactly one of"):
            ActionScaling.from_stats()
        with pytest.raises(ValueError, match="exactly one of"):
            ActionScaling.from_stats(mean=torch.zeros(1), std=torch.ones(1), low=torch.zeros(1), high=torch.ones(1))

    def test_from_metadata(self):
        meta = SimpleNamespace(action_mean=torch.tensor([1.0]), action_std=torch.tensor([2.0]), action_low=None,
                               action_high=None, action_key="act")
        t = ActionScaling.from_metadata(meta)
        assert t.in_keys_inv == ["act"] and t.loc.tolist() == [1.0] and t.scale.tolist() == [2.0]

    def test_forward_only(self):
        t = ActionScaling(in_keys_inv=[], loc=1.0, scale=2.0)
        assert t.in_keys == ["action"] and t.in_keys_inv == []
        td = TensorDict(action=torch.tensor([3.0]))
        assert t.inv(td)["action"].tolist() == [3.0]
        assert t(td)["action"].tolist() == [1.0]

    def test_errors(self):
        with pytest.raises(ValueError, match="both be provided"):
            ActionScaling(loc=1.0)
        with pytest.raises(ValueError, match="several keys"):
            ActionScaling(in_keys_inv=["a", "b"], loc=0.0, scale=1.0)
        with pytest.raises(RuntimeError, match="has not been initialized"):
            ActionScaling().inv(TensorDict(action=torch.tensor([0.5])))
        with pytest.raises(RuntimeError, match="bounded"):
            ActionScaling().transform_action_spec(Unbounded(shape=(1,)))

    def test_repr(self):
        assert repr(ActionScaling(loc=1.0, scale=2.0)) == (
            "ActionScaling(loc=1.0, scale=2.0, standard_normal=True, in_keys_inv=['action'])"
        )

    def test_doctest(self):
        assert doctest.testmod(as_module, raise_on_error=True).attempted > 0
