"""The plain-torch backbones of the pretrained-encoder transforms, and the checkpoints their tests use.

The checkpoint helpers save locally built models in the releases' file layouts (R3M's
``{"r3m": {"module.convnet.*": ...}}``, VIP's ``{"vip": ...}``, VC-1's ``{"model": ...}``), once per
process, into a temporary folder the tests pass as ``download_path``: this exercises the real loading path;
the weights are test weights, never presented as pretrained ones.
"""
from __future__ import annotations

import doctest
import functools
import tempfile

import pytest
import torch
import torch.nn.functional as F

from torchrl.envs.transforms import _backbones as module
from torchrl.envs.transforms._backbones import ResNet, VisionTransformer, resize_pos_embed, resnet, vit


# -- checkpoints shared by the encoder tests --------------------------------------------------------------
@functools.lru_cache(maxsize=None)
def weights_dir() -> str:
    return tempfile.mkdtemp(prefix="torchrl-encoder-weights-")


def resnet_state_dict(name: str, seed: int = 0) -> dict:
    """A seeded ResNet's state dict (a fresh dict of the cached tensors: do not modify them)."""
    return dict(_resnet_state_dict(name, seed))


@functools.lru_cache(maxsize=None)
def _resnet_state_dict(name: str, seed: int) -> dict:
    torch.manual_seed(seed)
    return resnet(name, use_torchvision=False).state_dict()


@functools.lru_cache(maxsize=None)
def r3m_checkpoint(name: str = "resnet18") -> str:
    """``<dir>/r3m_18.pt`` in R3M's layout (no ``fc``), with a language head the loader must ignore."""
    sd = {f"module.convnet.{k}": v for k, v in resnet_state_dict(name).items() if not k.startswith("fc.")}
    sd["module.lang_enc.weight"] = torch.zeros(2, 2)
    path = f"{weights_dir()}/r3m_{name[len('resnet'):]}.pt"
    torch.save({"r3m": sd}, path)
    return path


@functools.lru_cache(maxsize=None)
def vip_checkpoint() -> str:
    """``<dir>/model.pt`` in VIP's layout: ResNet-50 with a 2048 -> 1024 ``fc``."""
    sd = resnet_state_dict("resnet50")
    torch.manual_seed(1)
    sd["fc.weight"] = torch.randn(1024, 2048) * 0.01
    sd["fc.bias"] = torch.zeros(1024)
    path = f"{weights_dir()}/model.pt"
    torch.save({"vip": {f"module.convnet.{k}": v for k, v in sd.items()}}, path)
    return path


@functools.lru_cache(maxsize=None)
def vc1_checkpoint(filename: str = "vc1_test.pth") -> str:
    """An MAE checkpoint (``{"model": ...}`` with decoder entries) of the small test ViT."""
    torch.manual_seed(0)
    sd = vit("vit_tiny_test_patch16").state_dict()
    sd["mask_token"] = torch.zeros(1, 1, sd["cls_token"].shape[-1])
    sd["decoder_embed.weight"] = torch.zeros(2, 2)
    path = f"{weights_dir()}/{filename}"
    torch.save({"model": sd}, path)
    return path


# -- ResNet ---------------------------------------------------------------------------------------------
# torchvision's published parameter counts
@pytest.mark.parametrize("name,count", [("resnet18", 11_689_512), ("resnet34", 21_797_672), ("resnet50", 25_557_032)])
def test_resnet_parameter_counts_match_torchvision(name, count):
    with torch.device("meta"):
        net = resnet(name, use_torchvision=False)
    assert sum(p.numel() for p in net.parameters()) == count


def test_resnet18_state_dict_keys_are_torchvisions():
    with torch.device("meta"):
        keys = list(resnet("resnet18", use_torchvision=False).state_dict())
    assert keys[:7] == [
        "conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked",
        "layer1.0.conv1.weight",
    ]
    assert "layer2.0.downsample.0.weight" in keys and "layer2.0.downsample.1.running_var" in keys
    assert "layer1.0.downsample.0.weight" not in keys  # stage 1 keeps 64 channels at stride 1
    assert keys[-2:] == ["fc.weight", "fc.bias"] and len(keys) == 122  # 6 + 8 blocks x 12 + 3 x 6 + 2
    with torch.device("meta"):
        keys50 = list(resnet("resnet50", use_torchvision=False).state_dict())
    assert "layer1.0.conv3.weight" in keys50 and "layer1.0.downsample.0.weight" in keys50 and len(keys50) == 320  # 6 + 16 blocks x 18 + 4 downsamples x 6 + 2


def _bn(x, sd, p):
    return F.batch_norm(x, sd[p + ".running_mean"], sd[p + ".running_var"], sd[p + ".weight"], sd[p + ".bias"], eps=1e-5)


def _reference_resnet18(x, sd):
    """ResNet-18 written out with functional ops from the state dict (torchvision's architecture)."""
    x = F.relu(_bn(F.conv2d(x, sd["conv1.weight"], stride=2, padding=3), sd, "bn1"))
    x = F.max_pool2d(x, 3, 2, 1)
    for stage, stride in zip(range(1, 5), (1, 2, 2, 2)):
        for b in range(2):
            p = f"layer{stage}.{b}"
            s = stride if b == 0 else 1
            out = F.relu(_bn(F.conv2d(x, sd[p + ".conv1.weight"], stride=s, padding=1), sd, p + ".bn1"))
            out = _bn(F.conv2d(out, sd[p + ".conv2.weight"], padding=1), sd, p + ".bn2")
            idt = x
            if p + ".downsample.0.weight" in sd:
                idt = _bn(F.conv2d(x, sd[p + ".downsample.0.weight"], stride=s), sd, p + ".downsample.1")
            x = F.relu(out + idt)
    return F.linear(x.mean((-2, -1)), sd["fc.weight"], sd["fc.bias"])


def test_resnet18_forward_matches_functional_reference():
    torch.manual_seed(0)
    net = ResNet("basic", (2, 2, 2, 2)).eval()
    for m in net.modules():  # non-trivial batch-norm statistics
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)
    x = torch.rand(2, 3, 40, 48)
    with torch.no_grad():
        torch.testing.assert_close(net(x), _reference_resnet18(x, net.state_dict()), rtol=1e-4, atol=1e-4)


def test_resnet_errors():
    with pytest.raises(ValueError, match="unknown ResNet 'resnet101'"):
        resnet("resnet101")
    with pytest.raises(ValueError, match="block must be 'basic' or 'bottleneck'"):
        ResNet("wide", (1, 1, 1, 1))


# -- ViT ------------------------------------------------------------------------------------------------
# timm's vit_base_patch16_224 / vit_large_patch16_224 counts (86,567,656 / 304,326,632) less the 1000-way head
@pytest.mark.parametrize("arch,count", [("vit_base_patch16", 85_798_656), ("vit_large_patch16", 303_301_632)])
def test_vit_parameter_counts_match_timm(arch, count):
    with torch.device("meta"):
        net = vit(arch)
    assert sum(p.numel() for p in net.parameters()) == count


def test_vit_state_dict_keys_are_timms():
    with torch.device("meta"):
        keys = list(vit("vit_tiny_test_patch16").state_dict())
    assert keys[:4] == ["cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias"]
    assert keys[4:16] == [
        f"blocks.0.{n}"
        for n in ("norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
                  "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight", "mlp.fc2.bias")
    ]
    assert keys[-2:] == ["norm.weight", "norm.bias"] and len(keys) == 4 + 4 * 12 + 2


def _reference_vit(x, sd, heads):
    """One MAE encoder pass written out by hand (softmax attention, pre-norm blocks, final-norm cls token)."""
    d = sd["cls_token"].shape[-1]
    t = F.conv2d(x, sd["patch_embed.proj.weight"], sd["patch_embed.proj.bias"], stride=16).flatten(2).transpose(1, 2)
    t = torch.cat([(sd["cls_token"] + sd["pos_embed"][:, :1]).expand(len(x), 1, d), t + sd["pos_embed"][:, 1:]], 1)
    i = 0
    while f"blocks.{i}.norm1.weight" in sd:
        p = f"blocks.{i}."
        h = F.layer_norm(t, (d,), sd[p + "norm1.weight"], sd[p + "norm1.bias"], eps=1e-6)
        q, k, v = F.linear(h, sd[p + "attn.qkv.weight"], sd[p + "attn.qkv.bias"]).chunk(3, -1)
        split = lambda z: z.reshape(len(x), -1, heads, d // heads).transpose(1, 2)  # noqa: E731
        q, k, v = split(q), split(k), split(v)
        a = torch.softmax(q @ k.transpose(-2, -1) / (d // heads) ** 0.5, -1) @ v
        t = t + F.linear(a.transpose(1, 2).reshape(len(x), -1, d), sd[p + "attn.proj.weight"], sd[p + "attn.proj.bias"])
        h = F.layer_norm(t, (d,), sd[p + "norm2.weight"], sd[p + "norm2.bias"], eps=1e-6)
        h = F.linear(F.gelu(F.linear(h, sd[p + "mlp.fc1.weight"], sd[p + "mlp.fc1.bias"])), sd[p + "mlp.fc2.weight"], sd[p + "mlp.fc2.bias"])
        t = t + h
        i += 1
    return F.layer_norm(t, (d,), sd["norm.weight"], sd["norm.bias"], eps=1e-6)[:, 0]


def test_vit_forward_matches_hand_written_encoder():
    torch.manual_seed(0)
    net = VisionTransformer(32, 2, 4, img_size=48)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    x = torch.rand(3, 3, 48, 48)
    with torch.no_grad():
        torch.testing.assert_close(net(x), _reference_vit(x, net.state_dict(), heads=4), rtol=1e-4, atol=1e-5)


def test_vit_wrong_input_size_and_pos_embed_resize():
    net = VisionTransformer(16, 1, 4, img_size=32)
    with pytest.raises(ValueError, match="gives 9 patches, the position embedding is made for 4"):
        net(torch.rand(1, 3, 48, 48))
    pe = torch.arange(5.0).reshape(1, 5, 1).expand(1, 5, 2)  # cls + a 2x2 grid
    out = resize_pos_embed(pe, 16)
    assert out.shape == (1, 17, 2)
    torch.testing.assert_close(out[:, 0], pe[:, 0])  # the class token's embedding is kept
    torch.testing.assert_close(resize_pos_embed(pe, 4), pe)  # same grid: unchanged
    with pytest.raises(ValueError, match="unknown ViT 'vit_giant'"):
        vit("vit_giant")


def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
