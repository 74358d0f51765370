import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Composite, Unbounded
from torchrl.envs import TransformedEnv, check_env_specs
from torchrl.envs.transforms import ToTensorImage
from torchrl.envs.transforms import _to_tensor_image as module

from test.envs.transforms._pixel_env import PixelEnv
from test.envs.transforms.contract import TransformContract


class TestToTensorImage(TransformContract):
    def make_env(self, batch_size=()):
        return PixelEnv(batch_size=batch_size, seed=0)

    def make_transform(self):
        return ToTensorImage()

    def test_defaults(self):
        t = ToTensorImage()
        assert t.in_keys == ["pixels"] and t.out_keys == ["pixels"]
        assert t.from_int is None and t.unsqueeze is False and t.dtype == torch.float32 and t.shape_tolerant is False

    def test_known_values(self):
        x = torch.tensor([[[0, 51, 255]]], dtype=torch.uint8)  # H=1, W=1, C=3
        out = ToTensorImage(in_keys=["p"])(TensorDict(p=x))["p"]
        assert out.shape == (3, 1, 1) and out.dtype == torch.float32
        torch.testing.assert_close(out.flatten(), torch.tensor([0.0, 0.2, 1.0]))
        # layout: out[..., c, h, w] == x[..., h, w, c]
        x = torch.randint(0, 256, (2, 4, 5, 3), dtype=torch.uint8)
        out = ToTensorImage(in_keys=["p"])(TensorDict(p=x, batch_size=[2]))["p"]
        assert out.shape == (2, 3, 4, 5)
        torch.testing.assert_close(out[1, 2, 3, 4], x[1, 3, 4, 2].float() / 255)

    def test_from_int_dtype_and_floats(self):
        x = torch.full((4, 3, 3), 255, dtype=torch.uint8)
        assert ToTensorImage(in_keys=["p"], from_int=False)(TensorDict(p=x))["p"].max() == 255
        assert ToTensorImage(in_keys=["p"], dtype=torch.float64)(TensorDict(p=x))["p"].dtype == torch.float64
        # float inputs are not rescaled unless from_int=True
        assert ToTensorImage(in_keys=["p"])(TensorDict(p=torch.full((4, 3, 3), 2.0)))["p"].max() == 2.0
        assert ToTensorImage(in_keys=["p"], from_int=True)(TensorDict(p=torch.full((4, 3, 3), 51.0)))["p"].max() == 0.2

    def test_unsqueeze_and_shape_tolerant(self):
        t = ToTensorImage(in_keys=["p"], unsqueeze=True)
        assert t(TensorDict(p=torch.zeros(4, 3, 3, dtype=torch.uint8)))["p"].shape == (1, 3, 4, 3)
        assert t(TensorDict(p=torch.zeros(2, 4, 3, 3, dtype=torch.uint8)))["p"].shape == (2, 3, 4, 3)
        assert t.transform_observation_spec(Composite(p=Bounded(0, 255, (4, 3, 3), dtype=torch.uint8)))["p"].shape == (1, 3, 4, 3)
        t = ToTensorImage(in_keys=["p"], shape_tolerant=True)
        assert t(TensorDict(p=torch.zeros(4, 3, 5, dtype=torch.uint8)))["p"].shape == (4, 3, 5)
        assert t.transform_observation_spec(Composite(p=Bounded(0, 255, (4, 3, 5), dtype=torch.uint8)))["p"].shape == (4, 3, 5)
        assert ToTensorImage(in_keys=["p"])(TensorDict(p=torch.zeros(4, 3, 5, dtype=torch.uint8)))["p"].shape == (5, 4, 3)

    def test_specs(self):
        env = TransformedEnv(PixelEnv(batch_size=[2]), ToTensorImage())
        spec = env.observation_spec["pixels"]
        assert isinstance(spec, Bounded) and spec.shape == (2, 3, 8, 6) and spec.dtype == torch.float32
        assert spec.space.low.min() == 0 and spec.space.high.max() == 1
        assert env.observation_spec["observation"].shape == (2, 2)  # untouched
        spec = ToTensorImage(in_keys=["p"]).transform_observation_spec(Composite(p=Unbounded((4, 5, 3))))
        assert isinstance(spec["p"], Unbounded) and spec["p"].shape == (3, 4, 5)
        # absent in_keys are skipped on specs
        assert "pixels" not in ToTensorImage().transform_observation_spec(Composite(p=Unbounded((4, 5, 3))))

    def test_out_keys_and_rollout(self):
        env = TransformedEnv(PixelEnv(), ToTensorImage(in_keys=["pixels"], out_keys=["pixels_t"]))
        check_env_specs(env, seed=0)
        data = env.rollout(3)
        torch.testing.assert_close(data["pixels_t"], data["pixels"].permute(0, 3, 1, 2).float() / 255)

    def test_nested_keys(self):
        t = ToTensorImage(in_keys=[("agent", "pixels")])
        td = TensorDict({"agent": {"pixels": torch.zeros(2, 4, 5, 3, dtype=torch.uint8)}}, batch_size=[2])
        assert t(td)["agent", "pixels"].shape == (2, 3, 4, 5)
        spec = Composite(agent=Composite(pixels=Bounded(0, 255, (4, 5, 3), dtype=torch.uint8)))
        assert t.transform_observation_spec(spec)["agent", "pixels"].shape == (3, 4, 5)

    def test_errors(self):
        with pytest.raises(RuntimeError, match=r"expected images of shape \(..., H, W, C\), got an entry of shape \(4, 3\)"):
            ToTensorImage(in_keys=["p"])(TensorDict(p=torch.zeros(4, 3, dtype=torch.uint8)))
        with pytest.raises(KeyError, match="'pixels' not found"):
            ToTensorImage()(TensorDict(p=torch.zeros(4, 3, 3)))
        with pytest.raises(ValueError, match="differ in length"):
            ToTensorImage(in_keys=["a", "b"], out_keys=["c"])


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
