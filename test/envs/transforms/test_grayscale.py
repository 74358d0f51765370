import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import GrayScale
from torchrl.envs.transforms import _grayscale as module

from test.envs.transforms._pixel_env import chw_pixel_env
from test.envs.transforms.contract import TransformContract


class TestGrayScale(TransformContract):
    def make_env(self, batch_size=()):
        return chw_pixel_env(batch_size=batch_size)

    def make_transform(self):
        return GrayScale()

    def test_known_values(self):
        t = GrayScale(in_keys=["p"])
        for channel, weight in enumerate((0.2989, 0.587, 0.114)):
            img = torch.zeros(3, 1, 1)
            img[channel] = 1.0
            torch.testing.assert_close(t(TensorDict(p=img))["p"], torch.full((1, 1, 1), weight))
        img = torch.tensor([0.5, 0.25, 1.0]).reshape(3, 1, 1).expand(3, 2, 2)
        torch.testing.assert_close(t(TensorDict(p=img))["p"], torch.full((1, 2, 2), 0.2989 * 0.5 + 0.587 * 0.25 + 0.114))
        # integer images keep their dtype (truncated, as torchvision)
        out = t(TensorDict(p=torch.full((3, 2, 2), 200, dtype=torch.uint8)))["p"]
        assert out.dtype == torch.uint8 and (out == 199).all()
        assert t(TensorDict(p=torch.rand(2, 5, 3, 4, 6)))["p"].shape == (2, 5, 1, 4, 6)

    def test_specs(self):
        env = TransformedEnv(chw_pixel_env((2,)), GrayScale())
        spec = env.observation_spec["pixels"]
        assert isinstance(spec, Bounded) and spec.shape == (2, 1, 8, 6) and spec.dtype == torch.float32
        assert GrayScale().in_keys == ["pixels"]
        spec = GrayScale(in_keys=["p"], out_keys=["g"]).transform_observation_spec(Composite(p=Unbounded((3, 4, 5))))
        assert spec["p"].shape == (3, 4, 5) and isinstance(spec["g"], Unbounded) and spec["g"].shape == (1, 4, 5)

    def test_errors(self):
        with pytest.raises(TypeError, match=r"expected RGB images of shape \(..., 3, H, W\), got an entry of shape \(2, 4, 5\)"):
            GrayScale(in_keys=["p"])(TensorDict(p=torch.rand(2, 4, 5)))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
