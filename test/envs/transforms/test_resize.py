import doctest

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import Resize
from torchrl.envs.transforms import _resize as module

from test.envs.transforms._pixel_env import chw_pixel_env
from test.envs.transforms.contract import TransformContract


class TestResize(TransformContract):
    def make_env(self, batch_size=()):
        return chw_pixel_env(batch_size=batch_size)

    def make_transform(self):
        return Resize(4, 5)

    def test_shapes_w_is_height(self):
        t = Resize(4, 5, in_keys=["p"])
        assert (t.w, t.h, t.interpolation) == (4, 5, "bilinear")
        assert t(TensorDict(p=torch.rand(3, 6, 8)))["p"].shape == (3, 4, 5)
        assert t(TensorDict(p=torch.rand(2, 7, 3, 6, 8)))["p"].shape == (2, 7, 3, 4, 5)
        assert Resize(4, in_keys=["p"])(TensorDict(p=torch.rand(3, 6, 8)))["p"].shape == (3, 4, 4)

    def test_known_values(self):
        # a constant image stays constant; 2x nearest downsampling of a 4x4 ramp picks every other pixel
        out = Resize(2, 3, in_keys=["p"])(TensorDict(p=torch.full((1, 5, 7), 0.25)))["p"]
        torch.testing.assert_close(out, torch.full((1, 2, 3), 0.25))
        img = torch.arange(16.0).reshape(1, 4, 4)
        out = Resize(2, 2, interpolation="nearest", in_keys=["p"])(TensorDict(p=img))["p"]
        torch.testing.assert_close(out, torch.tensor([[[0.0, 2.0], [8.0, 10.0]]]))
        # 2x2 box average
        out = Resize(2, 2, interpolation="area", in_keys=["p"])(TensorDict(p=img))["p"]
        torch.testing.assert_close(out, torch.tensor([[[2.5, 4.5], [10.5, 12.5]]]))

    @pytest.mark.parametrize("mode", ["bilinear", "bicubic", "nearest", "nearest-exact", "area"])
    def test_matches_interpolate(self, mode):
        x = torch.rand(2, 3, 6, 8)
        out = Resize(4, 5, interpolation=mode, in_keys=["p"])(TensorDict(p=x))["p"]
        kwargs = {"align_corners": False, "antialias": True} if mode in ("bilinear", "bicubic") else {}
        torch.testing.assert_close(out, F.interpolate(x, size=(4, 5), mode=mode, **kwargs))

    def test_uint8(self):
        x = torch.randint(0, 256, (3, 6, 8), dtype=torch.uint8)
        out = Resize(4, 5, in_keys=["p"])(TensorDict(p=x))["p"]
        assert out.dtype == torch.uint8
        ref = F.interpolate(x[None].float(), size=(4, 5), mode="bilinear", antialias=True)[0].round().clamp(0, 255)
        torch.testing.assert_close(out, ref.to(torch.uint8))

    def test_specs(self):
        env = TransformedEnv(chw_pixel_env((2,)), Resize(4, 5))
        spec = env.observation_spec["pixels"]
        assert isinstance(spec, Bounded) and spec.shape == (2, 3, 4, 5)
        assert spec.space.low.min() == 0 and spec.space.high.max() == 1
        spec = Resize(4, 5, in_keys=["p"]).transform_observation_spec(Composite(p=Unbounded((3, 6, 8))))
        assert isinstance(spec["p"], Unbounded) and spec["p"].shape == (3, 4, 5)

    def test_errors(self):
        with pytest.raises(ValueError, match="interpolation 'foo' is not supported"):
            Resize(4, interpolation="foo")
        with pytest.raises(ValueError, match="must be positive"):
            Resize(0)
        with pytest.raises(ValueError, match=r"got an entry of shape \(6, 8\)"):
            Resize(4, in_keys=["p"])(TensorDict(p=torch.rand(6, 8)))


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
