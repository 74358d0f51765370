import doctest
import functools
import urllib.error

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from torchrl.data import Unbounded
from torchrl.envs import TransformedEnv
from torchrl.envs.transforms import VC1Transform
from torchrl.envs.transforms import _vc1 as module
from torchrl.envs.transforms._backbones import VisionTransformer, vit
from torchrl.envs.transforms._pretrained import PretrainedWeightsNotFoundError

from test.envs.transforms._pixel_env import PixelEnv
from test.envs.transforms.contract import TransformContract
from test.envs.transforms.test_backbones import vc1_checkpoint


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def make_vc1(**kwargs):
    return VC1Transform(["pixels"], ["VC1_vec"], vc1_checkpoint(), **kwargs)


@functools.lru_cache(maxsize=None)
def _reference_net():
    net = vit("vit_tiny_test_patch16").eval()
    sd = torch.load(vc1_checkpoint())["model"]
    net.load_state_dict({k: v for k, v in sd.items() if k != "mask_token" and not k.startswith("decoder")})
    return net


def expected_vc1(pixels):
    """uint8 (..., H, W, 3) -> /255, antialiased resize to 256x256, center crop 224, ImageNet norm, ViT."""
    x = pixels.permute(*range(pixels.ndim - 3), -1, -3, -2).float() / 255
    lead = x.shape[:-3]
    x = F.interpolate(x.reshape(-1, *x.shape[-3:]), size=(256, 256), mode="bilinear", antialias=True, align_corners=False)
    x = x[..., 16:240, 16:240]
    x = (x - torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)) / torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    with torch.no_grad():
        return _reference_net()(x).reshape(*lead, -1)


class TestVC1Transform(TransformContract):
    steps = 3

    def make_env(self, batch_size=()):
        return PixelEnv(batch_size=batch_size)

    def make_transform(self):
        return make_vc1()

    def test_to_records_device_and_dtype(self):
        t = make_vc1()
        t.to(torch.float64)
        assert t.dtype is torch.float64 and t.model.cls_token.dtype is torch.float64
        out = t(TensorDict(pixels=torch.randint(0, 256, (8, 6, 3), dtype=torch.uint8)))
        assert out["VC1_vec"].dtype is torch.float64
        t.to("cpu")
        assert t.device == torch.device("cpu")

    def test_values_and_specs(self):
        env = TransformedEnv(PixelEnv(batch_size=(2,)), make_vc1())
        spec = env.observation_spec
        assert isinstance(spec["VC1_vec"], Unbounded) and spec["VC1_vec"].shape == (2, 16) and "pixels" not in spec.keys()
        env.set_seed(0)
        td = env.reset()
        twin = PixelEnv(batch_size=(2,))  # the same seeded images, untransformed
        twin.set_seed(0)
        torch.testing.assert_close(td["VC1_vec"], expected_vc1(twin.reset()["pixels"]), rtol=1e-4, atol=1e-4)
        assert env.transform.embd_size == 16

    def test_del_keys_false_keeps_the_images(self):
        pixels = torch.randint(0, 256, (3, 8, 6, 3), dtype=torch.uint8)
        out = make_vc1(del_keys=False)(TensorDict(pixels=pixels, batch_size=[3]))
        assert torch.equal(out["pixels"], pixels) and out["VC1_vec"].shape == (3, 16)
        env = TransformedEnv(PixelEnv(), make_vc1(del_keys=False))
        assert env.observation_spec["pixels"].dtype is torch.uint8 and env.observation_spec["VC1_vec"].shape == (16,)

    def test_loaded_weights_and_attributes(self):
        t = make_vc1()
        ref = _reference_net()
        torch.testing.assert_close(t.model.pos_embed, ref.pos_embed)
        torch.testing.assert_close(t.model.blocks[3].mlp.fc2.weight, ref.blocks[3].mlp.fc2.weight)
        assert t.embd_size == 16 and t.weights_path == vc1_checkpoint()
        assert [type(m).__name__ for m in t.model_transforms] == ["ToTensorImage", "Resize", "CenterCrop", "ObservationNorm"]

    def test_pos_embed_is_resized_for_224_inputs(self, tmp_path):
        torch.manual_seed(0)
        small = VisionTransformer(16, 1, 4, img_size=112)  # a 7x7 grid
        torch.save({"model": small.state_dict()}, tmp_path / "vit112.pth")
        t = VC1Transform(["pixels"], ["VC1_vec"], str(tmp_path / "vit112.pth"))
        assert t.model.pos_embed.shape == (1, 197, 16)
        torch.testing.assert_close(t.model.pos_embed[:, 0], small.pos_embed[:, 0])

    def test_release_names_look_in_the_hub_cache_and_download(self, tmp_path, monkeypatch):
        monkeypatch.setattr(torch.hub, "get_dir", lambda: str(tmp_path))

        def offline(url, dst, **kwargs):
            raise urllib.error.URLError("offline")

        monkeypatch.setattr(torch.hub, "download_url_to_file", offline)
        with pytest.raises(PretrainedWeightsNotFoundError, match="could not download") as err:
            VC1Transform(["pixels"], ["VC1_vec"], "large")
        msg = str(err.value)
        assert "https://dl.fbaipublicfiles.com/eai-vc/vc1_vitl.pth" in msg
        assert str(tmp_path / "checkpoints" / "vc1_vitl.pth") in msg and "place it at" in msg

        seen = []

        def fake_download(url, dst, **kwargs):  # stands in for the network with the test checkpoint
            seen.append(url)
            torch.save(torch.load(vc1_checkpoint()), dst)

        monkeypatch.setattr(torch.hub, "download_url_to_file", fake_download)
        t = VC1Transform(["pixels"], ["VC1_vec"], "base")
        assert seen == ["https://dl.fbaipublicfiles.com/eai-vc/vc1_vitb.pth"]
        assert t.weights_path == str(tmp_path / "checkpoints" / "vc1_vitb.pth")
        VC1Transform(["pixels"], ["VC1_vec"], "vc1_vitb")  # eai-vc's name: the cached file, no new download
        assert len(seen) == 1

    def test_default_is_the_untrained_test_model(self):
        with pytest.warns(UserWarning, match="untrained ViT, for tests"):
            t = VC1Transform(None, None, "default")
        assert t.in_keys == ["pixels"] and t.out_keys == ["VC1_vec"] and t.weights_path is None
        assert t.embd_size == 16 and len(t.model.blocks) == 4
        assert isinstance(VC1Transform.make_noload_model(), VisionTransformer)

    def test_errors(self, tmp_path):
        with pytest.raises(ValueError, match="unknown model_name 'huge'"):
            VC1Transform(["pixels"], ["VC1_vec"], "huge")
        torch.save({"model": {"weight": torch.zeros(1)}}, tmp_path / "bad.pth")
        with pytest.raises(RuntimeError, match="is not an MAE ViT checkpoint"):
            VC1Transform(["pixels"], ["VC1_vec"], str(tmp_path / "bad.pth"))
        with pytest.raises(KeyError, match="image entry 'pixels' not found"):
            make_vc1()(TensorDict(other=torch.zeros(8, 6, 3)))
        with pytest.raises(ValueError, match="differ in length"):
            VC1Transform(["a", "b"], ["VC1_vec"], vc1_checkpoint())

    def test_install_vc_models_is_not_needed(self, capsys):
        dirs = VC1Transform.install_vc_models(auto_exit=True)
        assert dirs[-1].endswith("checkpoints") and "does not need vc_models" in capsys.readouterr().out


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
