import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import CenterCrop
from torchrl.envs.transforms import _center_crop as module

from test.envs.transforms._pixel_env import chw_pixel_env
from test.envs.transforms.contract import TransformContract


class TestCenterCrop(TransformContract):
    def make_env(self, batch_size=()):
        return chw_pixel_env(batch_size=batch_size)

    def make_transform(self):
        return CenterCrop(4, 2)

    def test_known_values(self):
        img = torch.arange(48.0).reshape(1, 6, 8)
        # rows start at round((6 - 4) / 2) = 1, columns at round((8 - 2) / 2) = 3
        out = CenterCrop(4, 2, in_keys=["p"])(TensorDict(p=img))["p"]
        torch.testing.assert_close(out, img[:, 1:5, 3:5])
        # round half to even, as torchvision: rows at round(1.5) = 2, columns at round(2.5) = 2
        out = CenterCrop(3, in_keys=["p"])(TensorDict(p=img))["p"]
        torch.testing.assert_close(out, img[:, 2:5, 2:5])
        t = CenterCrop(4)
        assert (t.w, t.h) == (4, 4) and t.in_keys == ["pixels"]
        assert t(TensorDict(pixels=torch.rand(2, 5, 3, 6, 8)))["pixels"].shape == (2, 5, 3, 4, 4)

    def test_larger_window_is_zero_padded(self):
        out = CenterCrop(4, in_keys=["p"])(TensorDict(p=torch.ones(1, 2, 3)))["p"]
        expected = torch.zeros(1, 4, 4)
        expected[:, 1:3, 0:3] = 1
        torch.testing.assert_close(out, expected)

    def test_specs(self):
        env = TransformedEnv(chw_pixel_env((2,)), self.make_transform())
        spec = env.observation_spec["pixels"]
        assert isinstance(spec, Bounded) and spec.shape == (2, 3, 4, 2)
        spec = CenterCrop(3, 2, in_keys=["p"]).transform_observation_spec(Composite(p=Unbounded((3, 6, 8))))
        assert isinstance(spec["p"], Unbounded) and spec["p"].shape == (3, 3, 2)

    def test_errors(self):
        with pytest.raises(ValueError, match="must be positive"):
            CenterCrop(-1)
        with pytest.raises(ValueError, match=r"got an entry of shape \(5,\)"):
            CenterCrop(2, in_keys=["p"])(TensorDict(p=torch.rand(5)))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
