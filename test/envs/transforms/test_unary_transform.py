import doctest

import pytest
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

from torchrl.data import Bounded, Composite, NonTensor, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import UnaryTransform
from torchrl.envs.transforms import _unary_transform as module

from test.envs.transforms.contract import TransformContract


def stack_int(x):
    return torch.stack([x, x + 1], -1).round().long()


class TestUnaryTransform(TransformContract):
    def make_transform(self):
        return UnaryTransform(in_keys=["th"], out_keys=["th_int"], fn=stack_int)

    def test_keys(self):
        t = UnaryTransform(in_keys=["a"], out_keys=["b"], fn=torch.neg)
        assert t.in_keys == ["a"] and t.out_keys == ["b"] and t.in_keys_inv == [] and t.out_keys_inv == []
        assert t(TensorDict(a=torch.ones(2)))["b"].tolist() == [-1.0, -1.0]

    def test_spec_from_fn(self):
        env = TransformedEnv(PendulumEnv(batch_size=[2], seed=0), self.make_transform())
        spec = env.observation_spec["th_int"]
        assert isinstance(spec, Unbounded) and spec.shape == (2, 2) and spec.dtype == torch.int64
        data = env.rollout(3)
        th = data["next", "th"]
        assert data["next", "th_int"].tolist() == stack_int(th).tolist()

    def test_reward_dtype_change(self):
        env = TransformedEnv(PendulumEnv(seed=0), UnaryTransform(["reward"], ["r64"], fn=lambda x: x.double()))
        assert env.full_reward_spec["r64"].dtype == torch.float64 and env.full_reward_spec["r64"].shape == (1,)
        check_env_specs(env, seed=0)

    def test_inverse(self):
        base = PendulumEnv(seed=0)
        t = UnaryTransform(
            in_keys=["th"], out_keys=["th3"], in_keys_inv=["action"], out_keys_inv=["action_half"],
            fn=lambda x: x * 3, inv_fn=lambda x: x * 2,
        )
        env = TransformedEnv(base, t)
        # as TorchRL, the outside entry is added next to the base env's
        assert set(env.full_action_spec.keys()) == {"action", "action_half"}
        td = env.reset()
        td["action_half"] = torch.tensor([0.5])
        td["action"] = torch.tensor([0.0])
        inv = t.inv(td)
        assert inv["action"].tolist() == [1.0]
        assert td["action"].tolist() == [0.0]  # inv works on a copy
        out = env.step(td)
        torch.testing.assert_close(out["next", "th3"], out["next", "th"] * 3)

    def test_non_tensor(self):
        td = TensorDict(s=NonTensorStack("ab", "cde"), batch_size=[2])
        t = UnaryTransform(["s"], ["n"], fn=lambda s: torch.tensor([len(x) for x in s]))
        assert t(td)["n"].tolist() == [2, 3]
        seen = []
        raw = UnaryTransform(["s"], ["n"], fn=lambda s: seen.append(type(s)) or torch.zeros(()), use_raw_nontensor=True)
        raw(TensorDict(s=NonTensorData("ab")))
        UnaryTransform(["s"], ["n"], fn=lambda s: seen.append(type(s)) or torch.zeros(()))(TensorDict(s=NonTensorData("ab")))
        assert seen == [NonTensorData, str]  # as TorchRL

    def test_spec_helpers(self):
        t = UnaryTransform(["a"], ["b"], fn=lambda x: x.sum(-1, keepdim=True).int())
        spec = Composite(a=Bounded(0.0, 1.0, (3, 4)))
        out = t.transform_observation_spec(spec, spec.zero())
        assert out["b"].shape == (3, 1) and out["b"].dtype == torch.int32
        t = UnaryTransform(["a"], ["b"], fn=lambda x: "text")
        out = t.transform_observation_spec(Composite(a=Unbounded((2,))), Composite(a=Unbounded((2,))).zero())
        assert isinstance(out["b"], NonTensor)

    def test_errors(self):
        with pytest.raises(ValueError, match="differ in length"):
            UnaryTransform(["a", "b"], ["c"], fn=torch.neg)
        t = UnaryTransform(["a"], ["a"], ["x"], ["y"], fn=torch.neg)  # accepted, as TorchRL; fails when used
        with pytest.raises(RuntimeError, match="inv_fn is None"):
            t.inv(TensorDict(y=torch.zeros(1)))
        with pytest.raises(TypeError):
            UnaryTransform(["a"], ["b"], None, None, torch.neg)  # fn is keyword-only


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
