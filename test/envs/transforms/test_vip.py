import doctest
import functools
import urllib.error

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from torchrl.data import Unbounded
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import VIPTransform
from torchrl.envs.transforms import _vip as module
from torchrl.envs.transforms._backbones import resnet
from torchrl.envs.transforms._pretrained import PretrainedWeightsNotFoundError

from test.envs.transforms._pixel_env import PixelEnv
from test.envs.transforms.contract import TransformContract
from test.envs.transforms.test_backbones import resnet_state_dict, vip_checkpoint, weights_dir

SIZE = 16  # small images keep the ResNet-50 cheap (layer3 and layer4 then see 1x1 maps)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_vip(**kwargs):
    vip_checkpoint()
    return VIPTransform("resnet50", size=SIZE, download_path=weights_dir(), **kwargs)


@functools.lru_cache(maxsize=None)
def _reference_net():
    net = resnet("resnet50", use_torchvision=False).eval()
    net.fc = torch.nn.Linear(2048, 1024)
    sd = torch.load(vip_checkpoint())["vip"]
    net.load_state_dict({k[len("module.convnet."):]: v for k, v in sd.items()})
    return net


def expected_vip(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 (..., H, W, 3) -> the VIP pipeline written out: /255, ImageNet norm, antialiased resize, ResNet-50 + fc."""
    x = pixels.permute(*range(pixels.ndim - 3), -1, -3, -2).float() / 255
    x = (x - torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)) / torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    lead = x.shape[:-3]
    x = F.interpolate(x.reshape(-1, *x.shape[-3:]), size=(SIZE, SIZE), mode="bilinear", antialias=True, align_corners=False)
    with torch.no_grad():
        return _reference_net()(x).reshape(*lead, -1)


class TestVIPTransform(TransformContract):
    steps = 2

    def make_env(self, batch_size=()):
        return PixelEnv(batch_size=batch_size)

    def make_transform(self):
        return make_vip()

    @pytest.mark.slow  # ParallelEnv ships the 100 MB ResNet-50 state dict to and from each worker
    def test_contract_state_survives_worker_restart(self):
        super().test_contract_state_survives_worker_restart()

    def test_to_records_device_and_dtype(self):
        t = make_vip()
        t.to(torch.float64)
        assert t.dtype is torch.float64 and t[-1].net.fc.weight.dtype is torch.float64
        t.to("cpu")
        assert t.device == torch.device("cpu") and t[-1].net.fc.weight.device.type == "cpu"

    def test_embedding_values_and_spec(self):
        env = TransformedEnv(PixelEnv(batch_size=(2,)), make_vip(tensor_pixels_keys=["raw"]))
        spec = env.observation_spec["vip_vec"]
        assert isinstance(spec, Unbounded) and spec.shape == (2, 1024) and "pixels" not in env.observation_spec.keys()
        td = env.reset()
        torch.testing.assert_close(td["vip_vec"], expected_vip(td["raw"]), rtol=1e-4, atol=1e-4)

    def test_stack_images_and_separate(self):
        a = torch.randint(0, 256, (8, 6, 3), dtype=torch.uint8)
        b = torch.randint(0, 256, (8, 6, 3), dtype=torch.uint8)
        out = make_vip(in_keys=["a", "b"])(TensorDict(a=a, b=b))
        assert set(out.keys()) == {"vip_vec"} and out["vip_vec"].shape == (2048,)
        torch.testing.assert_close(out["vip_vec"][1024:], expected_vip(b), rtol=1e-4, atol=1e-4)
        out = make_vip(in_keys=["a", "b"], stack_images=False)(TensorDict(a=a, b=b))
        assert set(out.keys()) == {"vip_vec_0", "vip_vec_1"}

    def test_torchvision_weights_have_no_vip_head(self, tmp_path):
        sd = resnet_state_dict("resnet50")  # torchvision's layout, with its 1000-way classifier
        torch.save(sd, tmp_path / "resnet50-11ad3fa6.pth")
        t = VIPTransform("resnet50", size=SIZE, download="IMAGENET1K_V2", download_path=str(tmp_path))
        assert isinstance(t[-1].net.fc, torch.nn.Identity) and t.outdim == 2048
        env = TransformedEnv(PixelEnv(), t)
        assert env.observation_spec["vip_vec"].shape == (2048,) and env.reset()["vip_vec"].shape == (2048,)

    def test_errors(self, tmp_path, monkeypatch):
        with pytest.raises(ValueError, match=r"model 'resnet18' is not supported; expected one of \['resnet50'\]"):
            VIPTransform("resnet18", download_path=weights_dir())
        monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path / "hub"))
        with pytest.raises(PretrainedWeightsNotFoundError, match="https://pytorch.s3.amazonaws.com/models/rl/vip/model.pt") as err:
            VIPTransform("resnet50")
        assert str(tmp_path / "hub" / "checkpoints" / "model.pt") in str(err.value)

        def offline(url, dst, **kwargs):
            raise urllib.error.URLError("offline")

        monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
        with pytest.raises(PretrainedWeightsNotFoundError, match="could not download"):
            VIPTransform("resnet50", download=True)


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
