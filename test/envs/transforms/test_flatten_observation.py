import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import TransformedEnv, check_env_specs
from torchrl.envs.transforms import FlattenObservation
from torchrl.envs.transforms import _flatten_observation as module

from test.envs.transforms._pixel_env import PixelEnv, chw_pixel_env
from test.envs.transforms.contract import TransformContract


class TestFlattenObservation(TransformContract):
    def make_env(self, batch_size=()):
        return chw_pixel_env(batch_size=batch_size)

    def make_transform(self):
        return FlattenObservation(-3, -1)

    def test_values_and_properties(self):
        t = FlattenObservation(-3, -1, in_keys=["p"])
        assert (t.first_dim, t.last_dim) == (-3, -1)
        x = torch.rand(2, 3, 4, 5)
        torch.testing.assert_close(t(TensorDict(p=x))["p"], x.reshape(2, 60))
        out = FlattenObservation(-2, -1, in_keys=["p"], out_keys=["f"])(TensorDict(p=x, batch_size=[2]))
        assert out["p"].shape == (2, 3, 4, 5) and out["f"].shape == (2, 3, 20)
        assert FlattenObservation(-2, -1).in_keys == ["pixels"]

    def test_positive_dims_are_absolute(self):
        t = FlattenObservation(0, 1, in_keys=["p"], allow_positive_dim=True)
        assert t(TensorDict(p=torch.rand(2, 3, 4, 5)))["p"].shape == (6, 4, 5)

    def test_specs(self):
        env = TransformedEnv(chw_pixel_env((2,)), self.make_transform())
        spec = env.observation_spec["pixels"]
        assert isinstance(spec, Bounded) and spec.shape == (2, 144) and spec.dtype == torch.float32
        # uint8 HWC images flattened directly
        env = TransformedEnv(PixelEnv(), FlattenObservation(-3, -1))
        assert env.observation_spec["pixels"].shape == (144,) and env.observation_spec["pixels"].dtype == torch.uint8
        check_env_specs(env, seed=0)
        spec = FlattenObservation(-2, -1, in_keys=["p"]).transform_observation_spec(Composite(p=Unbounded((3, 6, 8))))
        assert isinstance(spec["p"], Unbounded) and spec["p"].shape == (3, 48)

    def test_errors(self):
        with pytest.raises(ValueError, match="first_dim=0 is not negative"):
            FlattenObservation(0, -1)
        with pytest.raises(ValueError, match="last_dim=2 is not negative"):
            FlattenObservation(-3, 2)


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
