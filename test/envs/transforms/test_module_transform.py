import doctest

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from test.envs.transforms.contract import TransformContract
from torchrl.data import (
    Bounded,
    Composite,
    LazyTensorStorage,
    TensorDictReplayBuffer,
    Unbounded,
)
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import ModuleTransform
from torchrl.envs.transforms import _module_transform as module


def linear():
    """Linear(3, 2) with weight [[0, 1, 2], [3, 4, 5]] and bias [1, -1]."""
    lin = nn.Linear(3, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.arange(6.0).view(2, 3))
        lin.bias.copy_(torch.tensor([1.0, -1.0]))
    return lin


def obs_module():
    return TensorDictModule(linear(), in_keys=["observation"], out_keys=["hidden"])


class TestModuleTransform(TransformContract):
    def make_transform(self):
        return ModuleTransform(module=obs_module())

    def test_contract_clone(self):
        # as TorchRL: a clone is detached from its env but shares the wrapped module (and its weights)
        super().test_contract_clone()
        t = self.make_transform()
        copy = t.clone()
        assert copy.module is t.module and copy.container is None

    def test_keys(self):
        t = self.make_transform()
        assert t.in_keys == ["observation"] and t.out_keys == ["hidden"]
        assert t.in_keys_inv == [] and t.out_keys_inv == []
        ti = ModuleTransform(module=obs_module(), inverse=True)
        assert ti.in_keys == [] and ti.out_keys == []
        assert ti.in_keys_inv == ["hidden"] and ti.out_keys_inv == ["observation"]

    def test_known_answer(self):
        # [1, 2, 3] -> [0+2+6+1, 3+8+15-1] = [9, 25] (TorchRL gives the same with this module)
        t = self.make_transform()
        td = TensorDict(observation=torch.tensor([1.0, 2.0, 3.0]))
        out = t(td)
        assert out is td and out["hidden"].tolist() == [9.0, 25.0] and out["hidden"].requires_grad
        out = ModuleTransform(module=obs_module(), no_grad=True)(TensorDict(observation=torch.tensor([1.0, 2.0, 3.0])))
        assert out["hidden"].tolist() == [9.0, 25.0] and not out["hidden"].requires_grad
        batch = TensorDict(observation=torch.eye(3), batch_size=[3])
        assert t(batch)["hidden"].tolist() == [[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]

    def test_env_values_and_inferred_spec(self):
        env = TransformedEnv(PendulumEnv(seed=0), self.make_transform())
        spec = env.observation_spec["hidden"]
        assert isinstance(spec, Unbounded) and spec.shape == (2,) and spec.dtype == torch.float32
        check_env_specs(env, seed=0)
        data = env.rollout(3)
        lin = linear()
        with torch.no_grad():
            torch.testing.assert_close(data["hidden"], lin(data["observation"]))  # resets too
            torch.testing.assert_close(data["next", "hidden"], lin(data["next", "observation"]))
        batched = TransformedEnv(PendulumEnv(batch_size=(4,), seed=0), self.make_transform())
        assert batched.observation_spec["hidden"].shape == (4, 2)

    def test_inferred_spec_dtype_and_in_place(self):
        to_int = TensorDictModule(lambda obs: (obs > 0).long(), in_keys=["observation"], out_keys=["observation"])
        env = TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=to_int))
        spec = env.observation_spec["observation"]
        assert spec.dtype == torch.int64 and spec.shape == (3,)
        check_env_specs(env, seed=0)
        # a module reading the reward: inferred from the reward spec, run on steps only
        from_reward = TensorDictModule(lambda r: r * 10, in_keys=["reward"], out_keys=["reward10"])
        env = TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=from_reward))
        assert env.observation_spec["reward10"].shape == (1,)
        check_env_specs(env, seed=0)
        data = env.rollout(2)
        assert data["reward10"][0].tolist() == [0.0]  # not computable at reset: zeros, as the spec says
        assert data["reward10"][1] == data["next", "reward10"][0]  # then carried over like any observation
        torch.testing.assert_close(data["next", "reward10"], data["next", "reward"] * 10)

    def test_spec_transforms(self):
        new = Composite(observation=Unbounded((3,)), hidden=Bounded(-100, 100, (2,)))
        env = TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=obs_module(), observation_spec_transform=new))
        assert isinstance(env.observation_spec["hidden"], Bounded) and "th" not in env.observation_spec.keys()  # noqa: SIM118 - TensorDict.__contains__ refuses keys

        def edit(spec):
            spec["hidden"] = Unbounded((2,), dtype=torch.float64)
            return spec

        env = TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=obs_module(), observation_spec_transform=edit))
        assert env.observation_spec["hidden"].dtype == torch.float64 and "th" in env.observation_spec.keys()  # noqa: SIM118 - TensorDict.__contains__ refuses keys

        def reward_edit(spec):
            spec["reward"] = Unbounded((1,), dtype=torch.float64)
            return spec

        env = TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=obs_module(), reward_spec_transform=reward_edit))
        assert env.reward_spec.dtype == torch.float64

    def test_inverse(self):
        scale = TensorDictModule(lambda a: a * 2, in_keys=["action_raw"], out_keys=["action"])
        t = ModuleTransform(module=scale, inverse=True)
        td = TensorDict(action_raw=torch.tensor([0.5]))
        assert t(td) is td and "action" not in td.keys()  # forward: nothing  # noqa: SIM118 - TensorDict.__contains__ refuses keys
        out = t.inv(td)
        assert out["action"].tolist() == [1.0] and "action" not in td.keys()  # inv works on a copy  # noqa: SIM118 - TensorDict.__contains__ refuses keys

        def expose_raw(spec):
            spec["action_raw"] = Bounded(-1.0, 1.0, (1,))
            del spec["action"]
            return spec

        env = TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=scale, inverse=True, action_spec_transform=expose_raw))
        assert list(env.full_action_spec.keys()) == ["action_raw"]
        td = env.reset().set("action_raw", torch.tensor([0.25]))
        out = env.step(td)
        assert out["action_raw"].tolist() == [0.25]
        with pytest.raises(KeyError, match=r"reads \['action_raw'\], not found"):
            t.inv(TensorDict(action=torch.zeros(1)))

    def test_module_kinds(self):
        t = ModuleTransform(module_factory=obs_module)
        assert isinstance(t.module, TensorDictModule) and t.in_keys == ["observation"]

        def add_one(td):
            return td.set("x", td["observation"] + 1)

        t = ModuleTransform(module=add_one)
        assert t.in_keys == [] and t(TensorDict(observation=torch.zeros(2)))["x"].tolist() == [1.0, 1.0]

        class Plain(nn.Module):
            def forward(self, td):
                td["y"] = td["observation"].sum()

        t = ModuleTransform(module=Plain())
        assert t(TensorDict(observation=torch.ones(3)))["y"].item() == 3.0  # None returned: the data itself

    def test_parameters_and_to(self):
        t = self.make_transform()
        assert list(t.state_dict()) == ["module.module.weight", "module.module.bias"]
        t.to(torch.float64)
        assert t.module.module.weight.dtype == torch.float64 and t.device is None
        t.to("cpu")
        assert t.device == torch.device("cpu")
        t = ModuleTransform(module=obs_module(), device="cpu")
        assert t.device == torch.device("cpu")
        out = t(TensorDict(observation=torch.tensor([1.0, 2.0, 3.0])))
        assert out["hidden"].tolist() == [9.0, 25.0]

    @pytest.mark.skipif(not torch.cuda.is_available(), reason="moving data between devices needs a CUDA device")
    def test_device_moves_data_and_back(self):
        t = ModuleTransform(module=obs_module(), device="cuda")
        assert t.module.module.weight.device.type == "cuda"
        td = TensorDict(observation=torch.tensor([1.0, 2.0, 3.0]), device="cpu")
        out = t(td)
        assert out is td and out["hidden"].device.type == "cpu" and out["hidden"].tolist() == [9.0, 25.0]
        env = TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=obs_module(), device="cuda", no_grad=True))
        check_env_specs(env, seed=0)
        assert env.rollout(2)["next", "hidden"].device.type == "cpu"

    def test_replay_buffer(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        rb.append_transform(ModuleTransform(module=obs_module(), no_grad=True))
        rb.extend(TensorDict(observation=torch.eye(3).repeat(2, 1), batch_size=[6]))
        sample = rb.sample()
        assert sample["hidden"].shape == (4, 2)
        torch.testing.assert_close(sample["hidden"], linear()(sample["observation"]).detach())

    def test_errors(self):
        with pytest.raises(ValueError, match="at least one of `module` or `module_factory`"):
            ModuleTransform()
        with pytest.raises(ValueError, match="only one of `module` or `module_factory`"):
            ModuleTransform(module=obs_module(), module_factory=obs_module)
        with pytest.raises(TypeError, match="keyword arguments only"):
            ModuleTransform(obs_module())
        with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['foo'\]"):
            ModuleTransform(module=obs_module(), foo=1)
        with pytest.raises(ValueError, match="service"):
            ModuleTransform(module=obs_module(), use_ray_service=True)
        with pytest.raises(ValueError, match="service"):
            ModuleTransform(module=obs_module(), service_backend="ray")
        with pytest.raises(TypeError, match="must be callable"):
            ModuleTransform(module=3)
        bad = TensorDictModule(nn.Linear(5, 2), in_keys=["observation"], out_keys=["hidden"])
        with pytest.raises(RuntimeError, match=r"could not infer the specs of the module's outputs \['hidden'\].*observation_spec_transform"):
            TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=bad)).observation_spec  # noqa: B018

    def test_bad_in_key_fails_when_appended(self):
        reads_nope = TensorDictModule(lambda x: x, in_keys=["nope"], out_keys=["y"])
        with pytest.raises((KeyError, RuntimeError), match="nope"):
            TransformedEnv(PendulumEnv(seed=0), ModuleTransform(module=reads_nope)).observation_spec  # noqa: B018

    def test_repr(self):
        assert repr(ModuleTransform(module=print, inverse=True)) == "ModuleTransform(module=<built-in function print>, inverse=True)"


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
