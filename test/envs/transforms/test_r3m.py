import doctest
import functools
import os
import urllib.error

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from torchrl.data import Unbounded
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import Compose, R3MTransform
from torchrl.envs.transforms import _r3m as module
from torchrl.envs.transforms._backbones import resnet
from torchrl.envs.transforms._pretrained import PretrainedWeightsNotFoundError

from test.envs.transforms._pixel_env import PixelEnv
from test.envs.transforms.contract import TransformContract
from test.envs.transforms.test_backbones import r3m_checkpoint, resnet_state_dict, weights_dir

SIZE = 16  # small images keep the ResNet cheap (layer3 and layer4 then see 1x1 maps)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_r3m(**kwargs):
    r3m_checkpoint("resnet18")
    kwargs.setdefault("in_keys", ["pixels"])
    return R3MTransform("resnet18", size=SIZE, download_path=weights_dir(), **kwargs)


@functools.lru_cache(maxsize=None)
def _reference_net():
    net = resnet("resnet18", use_torchvision=False).eval()
    net.load_state_dict(resnet_state_dict("resnet18"))
    net.fc = torch.nn.Identity()
    return net


def _expected_embedding(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 (..., H, W, 3) -> the R3M pipeline written out: /255, ImageNet norm, antialiased resize, ResNet."""
    net = _reference_net()
    x = pixels.permute(*range(pixels.ndim - 3), -1, -3, -2).float() / 255
    mean, std = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1), torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    x = (x - mean) / std
    lead = x.shape[:-3]
    x = F.interpolate(x.reshape(-1, *x.shape[-3:]), size=(SIZE, SIZE), mode="bilinear", antialias=True, align_corners=False)
    with torch.no_grad():
        return net(x).reshape(*lead, -1)


class TestR3MTransform(TransformContract):
    steps = 3

    def make_env(self, batch_size=()):
        return PixelEnv(batch_size=batch_size)

    def make_transform(self):
        return make_r3m()

    def test_to_records_device_and_dtype(self):
        t = make_r3m()
        assert t.device is None and t.dtype is None
        t.to(torch.float64)
        assert t.dtype is torch.float64 and all(p.dtype is torch.float64 for p in t.parameters())
        out = t(TensorDict(pixels=torch.randint(0, 256, (2, 8, 6, 3), dtype=torch.uint8), batch_size=[2]))
        assert out["r3m_vec"].dtype is torch.float64
        t.to("cpu")
        assert t.device == torch.device("cpu")

    def test_output_matches_written_out_pipeline(self):
        env = TransformedEnv(PixelEnv(batch_size=(2,)), make_r3m(tensor_pixels_keys=["raw"]))
        td = env.reset()
        assert "pixels" not in td.keys() and td["raw"].dtype is torch.uint8
        torch.testing.assert_close(td["r3m_vec"], _expected_embedding(td["raw"]), rtol=1e-4, atol=1e-4)

    def test_specs_and_keys(self):
        env = TransformedEnv(PixelEnv(batch_size=(3,)), make_r3m())
        spec = env.observation_spec
        assert "pixels" not in spec.keys()
        assert isinstance(spec["r3m_vec"], Unbounded) and spec["r3m_vec"].shape == (3, 512)
        assert spec["r3m_vec"].dtype is torch.float32
        assert isinstance(env.transform, Compose) and env.transform.in_keys == ["pixels"]
        assert env.transform.out_keys == ["r3m_vec"]
        rollout = env.rollout(2)
        assert rollout["next", "r3m_vec"].shape == (3, 2, 512)

    def test_stack_images(self):
        pixels = torch.randint(0, 256, (2, 8, 6, 3), dtype=torch.uint8)
        other = torch.randint(0, 256, (2, 8, 6, 3), dtype=torch.uint8)
        data = TensorDict(pixels=pixels, other=other, batch_size=[2])
        stacked = make_r3m(in_keys=["pixels", "other"])(data.clone())
        assert set(stacked.keys()) == {"r3m_vec"} and stacked["r3m_vec"].shape == (2, 1024)
        # the images are embedded in the order of in_keys, then flattened
        expected = torch.cat([_expected_embedding(pixels), _expected_embedding(other)], -1)
        torch.testing.assert_close(stacked["r3m_vec"], expected, rtol=1e-4, atol=1e-4)
        separate = make_r3m(in_keys=["pixels", "other"], stack_images=False)(data.clone())
        assert set(separate.keys()) == {"r3m_vec_0", "r3m_vec_1"}
        torch.testing.assert_close(separate["r3m_vec_1"], expected[:, 512:], rtol=1e-4, atol=1e-4)
        # unbatched images
        single = make_r3m(in_keys=["pixels", "other"])(TensorDict(pixels=pixels[0], other=other[0]))
        torch.testing.assert_close(single["r3m_vec"], expected[0], rtol=1e-4, atol=1e-4)

    def test_stack_images_spec(self):
        env = TransformedEnv(TwoCameraEnv(batch_size=(2,)), make_r3m(in_keys=["pixels", "p2"]))
        assert env.observation_spec["r3m_vec"].shape == (2, 1024)
        assert env.rollout(2)["next", "r3m_vec"].shape == (2, 2, 1024)

    def test_weights_come_from_the_checkpoint(self):
        t = make_r3m()
        net = t[-1].net
        ref = resnet_state_dict("resnet18")
        torch.testing.assert_close(net.conv1.weight, ref["conv1.weight"])
        torch.testing.assert_close(net.layer4[1].bn2.running_var, ref["layer4.1.bn2.running_var"])
        assert isinstance(net.fc, torch.nn.Identity) and not net.training
        assert t.weights_path == os.path.join(weights_dir(), "r3m_18.pt")
        assert not any(p.requires_grad for p in net.parameters())

    def test_requires_grad(self):
        t = make_r3m(requires_grad=True)
        out = t(TensorDict(pixels=torch.randint(0, 256, (1, 8, 6, 3), dtype=torch.uint8), batch_size=[1]))
        out["r3m_vec"].sum().backward()
        assert t[-1].net.conv1.weight.grad is not None

    def test_hub_cache_is_searched(self, tmp_path, monkeypatch):
        os.makedirs(tmp_path / "checkpoints")
        torch.save(torch.load(r3m_checkpoint("resnet18")), tmp_path / "checkpoints" / "r3m_18.pt")
        monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))
        t = R3MTransform("resnet18", in_keys=["pixels"], size=SIZE)
        assert t.weights_path == str(tmp_path / "checkpoints" / "r3m_18.pt")

    def test_torchvision_weights(self, tmp_path):
        torch.save(resnet_state_dict("resnet18", seed=3), tmp_path / "resnet18-f37072fd.pth")
        t = R3MTransform("resnet18", in_keys=["pixels"], size=SIZE, download="IMAGENET1K_V1", download_path=str(tmp_path))
        torch.testing.assert_close(t[-1].net.conv1.weight, resnet_state_dict("resnet18", seed=3)["conv1.weight"])
        assert isinstance(t[-1].net.fc, torch.nn.Identity)  # torchvision's classifier is dropped
        assert R3MTransform("resnet18", in_keys=["pixels"], size=SIZE, download="DEFAULT", download_path=str(tmp_path))
        with pytest.raises(ValueError, match="unknown torchvision weights 'IMAGENET1K_V2' for resnet18"):
            R3MTransform("resnet18", in_keys=["pixels"], download="IMAGENET1K_V2", download_path=str(tmp_path))

    def test_no_weights_error_says_where_it_looked(self, tmp_path, monkeypatch):
        monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
        with pytest.raises(PretrainedWeightsNotFoundError) as err:
            R3MTransform("resnet34", in_keys=["pixels"], download_path=str(tmp_path / "mine"))
        msg = str(err.value)
        assert isinstance(err.value, FileNotFoundError)
        assert str(tmp_path / "mine" / "r3m_34.pt") in msg and str(tmp_path / "hub" / "checkpoints" / "r3m_34.pt") in msg
        assert "download=True" in msg and "https://pytorch.s3.amazonaws.com/models/rl/r3m/r3m_34.pt" in msg

    def test_failed_download_names_url_and_path(self, tmp_path, monkeypatch):
        def offline(url, dst, **kwargs):
            raise urllib.error.URLError("no network")

        monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
        with pytest.raises(PretrainedWeightsNotFoundError, match="could not download") as err:
            R3MTransform("resnet34", in_keys=["pixels"], download=True, download_path=str(tmp_path))
        msg = str(err.value)
        assert "https://pytorch.s3.amazonaws.com/models/rl/r3m/r3m_34.pt" in msg and str(tmp_path / "r3m_34.pt") in msg
        assert "no network" in msg

    def test_download_goes_to_download_path(self, tmp_path, monkeypatch):
        seen = []

        def fake_download(url, dst, **kwargs):  # stands in for the network: copies the test checkpoint
            seen.append((url, dst))
            torch.save(torch.load(r3m_checkpoint("resnet18")), dst)

        monkeypatch.setattr(torch.hub, "download_url_to_file", fake_download)
        t = R3MTransform("resnet18", in_keys=["pixels"], size=SIZE, download=True, download_path=str(tmp_path / "new"))
        assert seen == [("https://pytorch.s3.amazonaws.com/models/rl/r3m/r3m_18.pt", str(tmp_path / "new" / "r3m_18.pt"))]
        assert t.weights_path == seen[0][1]
        R3MTransform("resnet18", in_keys=["pixels"], size=SIZE, download=True, download_path=str(tmp_path / "new"))
        assert len(seen) == 1  # cached: not downloaded again

    def test_checkpoint_mismatch(self, tmp_path):
        torch.save({"r3m": {"module.convnet.conv1.weight": torch.zeros(64, 3, 7, 7)}}, tmp_path / "r3m_18.pt")
        with pytest.raises(RuntimeError, match=r"r3m_18.pt does not match the model: missing \['bn1.weight'"):
            R3MTransform("resnet18", in_keys=["pixels"], download_path=str(tmp_path))
        (tmp_path / "r3m_50.pt").write_text("not a checkpoint")
        with pytest.raises(RuntimeError, match="could not read the checkpoint"):
            R3MTransform("resnet50", in_keys=["pixels"], download_path=str(tmp_path))

    def test_argument_errors(self):
        with pytest.raises(ValueError, match="model 'resnet101' is not supported"):
            make_r3m_name("resnet101")
        with pytest.raises(NotImplementedError):  # TorchRL's exception type
            make_r3m_name("resnet101")
        with pytest.raises(ValueError, match="out_keys must hold one key when stack_images=True"):
            make_r3m(in_keys=["a", "b"], out_keys=["x", "y"])
        with pytest.raises(ValueError, match="one key per in_key"):
            make_r3m(in_keys=["a", "b"], out_keys=["x"], stack_images=False)
        with pytest.raises(ValueError, match="tensor_pixels_keys"):
            make_r3m(in_keys=["a", "b"], tensor_pixels_keys=["c"])
        with pytest.raises(KeyError, match="image entry 'pixels' not found"):
            make_r3m()(TensorDict(other=torch.zeros(3, 8, 8, 3)))

    def test_default_keys_and_clone(self):
        t = R3MTransform("resnet18", None, size=SIZE, download_path=weights_dir())
        assert t.in_keys == ["pixels"] and t.out_keys == ["r3m_vec"]
        c = t.clone()
        assert type(c) is R3MTransform and c.container is None and c[-1].net is not t[-1].net
        assert "R3MTransform(model_name='resnet18'" in repr(t)


def make_r3m_name(name):
    return R3MTransform(name, in_keys=["pixels"], download_path=weights_dir())


class TwoCameraEnv(PixelEnv):
    """``PixelEnv`` with a second camera ``"p2"`` (the image upside down)."""

    def __init__(self, batch_size=()):
        super().__init__(batch_size=batch_size)
        self.observation_spec["p2"] = self.observation_spec["pixels"].clone()

    def _td(self, extra=None):
        td = super()._td(extra)
        td["p2"] = td["pixels"].flip(-3)
        return td


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
