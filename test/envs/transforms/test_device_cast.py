import doctest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Composite, Unbounded
from torchrl.envs import PendulumEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms._device_cast import DeviceCastTransform
from torchrl.envs.transforms import _device_cast as device_cast_module

from test.envs.transforms.contract import TransformContract

CPU, CPU1 = torch.device("cpu"), torch.device("cpu", 1)


class TestDeviceCastWhole(TransformContract):
    """A second CPU device label stands for an accelerator: data and specs change device, values do not."""

    def make_env(self, batch_size=()):
        return PendulumEnv(batch_size=batch_size, seed=0, device="cpu")

    def make_transform(self):
        return DeviceCastTransform("cpu:1")

    def test_env_and_data_device(self):
        t = self.make_transform()
        env = TransformedEnv(self.make_env(), t)
        assert env.device == CPU1 and t.orig_device == CPU
        assert env.observation_spec.device == CPU1 and env.full_action_spec.device == CPU1
        assert env.reset().device == CPU1
        assert env.rollout(3).device == CPU1

    def test_inverse_moves_back(self):
        t = self.make_transform()
        TransformedEnv(self.make_env(), t)
        td = TensorDict(action=torch.zeros(1), device="cpu:1")
        assert t.inv(td).device == CPU and td.device == CPU1

    def test_explicit_orig_device_and_standalone(self):
        t = DeviceCastTransform(torch.device("cpu", 1), "cpu")
        assert t(TensorDict(a=torch.ones(1), device="cpu")).device == CPU1
        assert t.inv(TensorDict(a=torch.ones(1), device="cpu:1")).device == CPU

    def test_meta_device(self):
        td = DeviceCastTransform("meta")(TensorDict(a=torch.ones(3), b=TensorDict(c=torch.zeros(1))))
        assert td.device == torch.device("meta") and td["b", "c"].device == torch.device("meta")
        spec = DeviceCastTransform("meta").transform_observation_spec(Composite(a=Unbounded(shape=(3,))))
        assert spec.device == torch.device("meta") and spec["a"].device == torch.device("meta")


class TestDeviceCastKeys(TransformContract):
    def make_env(self, batch_size=()):
        return PendulumEnv(batch_size=batch_size, seed=0, device="cpu")

    def make_transform(self):
        return DeviceCastTransform("cpu:1", in_keys=["observation"], in_keys_inv=["action"])

    def test_only_selected_entries(self):
        env = TransformedEnv(self.make_env(), self.make_transform())
        assert env.device == CPU  # the env as a whole does not move
        assert env.observation_spec["observation"].device == CPU1
        assert env.observation_spec["th"].device == CPU
        assert env.full_action_spec["action"].device == CPU1
        td = env.reset()
        assert td.device is None  # mixed devices: the TensorDict carries none
        check_env_specs(env, seed=0)


def test_doctests():
    result = doctest.testmod(device_cast_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0


def test_nested_keys_standalone():
    t = DeviceCastTransform("meta", "cpu", in_keys=[("agent", "obs")], in_keys_inv=[("agent", "act")])
    td = t(TensorDict(agent=TensorDict(obs=torch.ones(2), other=torch.ones(1)), device="cpu"))
    assert td["agent", "obs"].device == torch.device("meta") and td["agent", "other"].device == CPU
    # the inverse moves inputs to orig_device (here meta stands for the env's device)
    t = DeviceCastTransform("cpu", "meta", in_keys_inv=[("agent", "act")])
    back = t.inv(TensorDict(agent=TensorDict(act=torch.ones(1), other=torch.ones(1)), device="cpu"))
    assert back["agent", "act"].device == torch.device("meta") and back["agent", "other"].device == CPU
