import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import Crop
from torchrl.envs.transforms import _crop as module

from test.envs.transforms._pixel_env import chw_pixel_env
from test.envs.transforms.contract import TransformContract


class TestCrop(TransformContract):
    def make_env(self, batch_size=()):
        return chw_pixel_env(batch_size=batch_size)

    def make_transform(self):
        return Crop(3, 2, top=1, left=2)

    def test_known_values(self):
        img = torch.arange(48.0).reshape(1, 6, 8)
        out = Crop(4, 2, top=1, left=2, in_keys=["p"])(TensorDict(p=img))["p"]
        torch.testing.assert_close(out, img[:, 1:5, 2:4])  # w rows, h columns
        out = Crop(3, in_keys=["p"])(TensorDict(p=img))["p"]
        torch.testing.assert_close(out, img[:, :3, :3])
        t = Crop(4, 2, 1, 2)
        assert (t.w, t.h, t.top, t.left) == (4, 2, 1, 2) and t.in_keys == ["pixels"]
        out = t(TensorDict(pixels=torch.rand(2, 5, 3, 6, 8)))["pixels"]
        assert out.shape == (2, 5, 3, 4, 2)

    def test_window_outside_is_zero_padded(self):
        img = torch.arange(48.0).reshape(1, 6, 8)
        out = Crop(3, 3, top=4, left=6, in_keys=["p"])(TensorDict(p=img))["p"]
        expected = torch.tensor([[[38.0, 39.0, 0.0], [46.0, 47.0, 0.0], [0.0, 0.0, 0.0]]])
        torch.testing.assert_close(out, expected)

    def test_specs(self):
        env = TransformedEnv(chw_pixel_env((2,)), self.make_transform())
        spec = env.observation_spec["pixels"]
        assert isinstance(spec, Bounded) and spec.shape == (2, 3, 3, 2)
        spec = Crop(3, 2, in_keys=["p"]).transform_observation_spec(Composite(p=Unbounded((3, 6, 8))))
        assert isinstance(spec["p"], Unbounded) and spec["p"].shape == (3, 3, 2)

    def test_errors(self):
        with pytest.raises(ValueError, match="must be positive"):
            Crop(0)
        with pytest.raises(ValueError, match=r"got an entry of shape \(5,\)"):
            Crop(2, in_keys=["p"])(TensorDict(p=torch.rand(5)))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
