"""Image backbones of the pretrained-encoder transforms, in plain torch: ResNet-18/34/50 and an MAE-style ViT.

The parameter names follow the releases whose checkpoints they load:

- ``ResNet`` uses torchvision's names (``conv1.weight``, ``bn1.running_mean``, ``layer1.0.conv1.weight``,
  ``layer2.0.downsample.0.weight``, ``fc.weight``, ...), so torchvision, R3M and VIP state dicts load as they
  are. When torchvision imports, :func:`resnet` returns torchvision's own model instead.
- ``VisionTransformer`` uses timm's names as the MAE encoders of VC-1 (eai-vc) save them (``cls_token``,
  ``pos_embed``, ``patch_embed.proj.weight``, ``blocks.0.attn.qkv.weight``, ``blocks.0.mlp.fc1.weight``,
  ``norm.weight``, ...), and computes the MAE encoder's output: the final-norm class token.

Models are built on the ``meta`` device by the transforms and receive their parameters from a checkpoint
(``load_state_dict(..., assign=True)``): no random initialisation ever runs for a pretrained model.
"""
from __future__ import annotations

import importlib.util
import math

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ResNet", "VisionTransformer", "resnet", "vit", "RESNET_LAYERS", "VIT_CONFIGS"]

#: blocks per stage and block type of each supported ResNet
RESNET_LAYERS = {
    "resnet18": ("basic", (2, 2, 2, 2)),
    "resnet34": ("basic", (3, 4, 6, 3)),
    "resnet50": ("bottleneck", (3, 4, 6, 3)),
}

_HAS_TV = importlib.util.find_spec("torchvision") is not None


def _conv3x3(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=3, stride=stride, padding=1, bias=False)


def _conv1x1(cin: int, cout: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=1, stride=stride, bias=False)


class _BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin: int, width: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv3x3(cin, width, stride)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = _conv3x3(width, width)
        self.bn2 = nn.BatchNorm2d(width)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class _Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck (the stride sits on the 3x3 conv), as torchvision's."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1, downsample: nn.Module | None = None) -> None:
        super().__init__()
        self.conv1 = _conv1x1(cin, width)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = _conv3x3(width, width, stride)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = _conv1x1(width, width * 4)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet(nn.Module):
    """A ResNet with torchvision's layout and parameter names.

    Args:
        block: ``"basic"`` (ResNet-18/34) or ``"bottleneck"`` (ResNet-50 and deeper).
        layers: number of blocks in each of the four stages.
        num_classes: output size of the final ``fc`` layer.

    Examples:
        >>> import torch
        >>> from torchrl.envs.transforms._backbones import ResNet
        >>> net = ResNet("basic", (2, 2, 2, 2)).eval()
        >>> net(torch.rand(1, 3, 32, 32)).shape
        torch.Size([1, 1000])
        >>> list(net.state_dict())[:3]
        ['conv1.weight', 'bn1.weight', 'bn1.bias']
    """

    def __init__(self, block: str, layers: tuple[int, ...], num_classes: int = 1000) -> None:
        super().__init__()
        if block not in ("basic", "bottleneck"):
            raise ValueError(f"ResNet: block must be 'basic' or 'bottleneck', got {block!r}.")
        cls = _BasicBlock if block == "basic" else _Bottleneck
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._stage(cls, 64, layers[0], 1)
        self.layer2 = self._stage(cls, 128, layers[1], 2)
        self.layer3 = self._stage(cls, 256, layers[2], 2)
        self.layer4 = self._stage(cls, 512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * cls.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _stage(self, cls, width: int, blocks: int, stride: int) -> nn.Sequential:
        downsample = None
        if stride != 1 or self.inplanes != width * cls.expansion:
            downsample = nn.Sequential(
                _conv1x1(self.inplanes, width * cls.expansion, stride), nn.BatchNorm2d(width * cls.expansion)
            )
        out = [cls(self.inplanes, width, stride, downsample)]
        self.inplanes = width * cls.expansion
        out += [cls(self.inplanes, width) for _ in range(1, blocks)]
        return nn.Sequential(*out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet(model_name: str, *, use_torchvision: bool | None = None) -> nn.Module:
    """Builds ``"resnet18"``, ``"resnet34"`` or ``"resnet50"`` (torchvision's model when torchvision imports).

    The weights are freshly initialised; build under ``torch.device("meta")`` to skip that when a checkpoint
    will provide them.
    """
    if model_name not in RESNET_LAYERS:
        raise ValueError(f"unknown ResNet {model_name!r}; expected one of {sorted(RESNET_LAYERS)}.")
    if use_torchvision is None:
        use_torchvision = _HAS_TV
    if use_torchvision:
        from torchvision import models  # optional dependency

        return getattr(models, model_name)()
    block, layers = RESNET_LAYERS[model_name]
    return ResNet(block, layers)


# -- ViT ---------------------------------------------------------------------------------------------------

#: (embed_dim, depth, num_heads) of the VC-1 encoders and of TorchRL's small untrained test model
VIT_CONFIGS = {
    "vit_base_patch16": (768, 12, 12),
    "vit_large_patch16": (1024, 24, 16),
    "vit_tiny_test_patch16": (16, 4, 4),
}


class _PatchEmbed(nn.Module):
    def __init__(self, img_size: int, patch_size: int, embed_dim: int) -> None:
        super().__init__()
        self.grid_size = (img_size // patch_size, img_size // patch_size)
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.proj = nn.Conv2d(3, embed_dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).flatten(2).transpose(1, 2)


class _Attention(nn.Module):
    def __init__(self, dim: int, num_heads: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.num_heads, d // self.num_heads).permute(2, 0, 3, 1, 4)
        x = F.scaled_dot_product_attention(q, k, v)
        return self.proj(x.transpose(1, 2).reshape(b, n, d))


class _Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class _Block(nn.Module):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: float) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = _Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = _Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class VisionTransformer(nn.Module):
    """The MAE ViT encoder of VC-1 (timm's parameter names), returning the final-norm class token.

    Args:
        embed_dim: token width.
        depth: number of transformer blocks.
        num_heads: attention heads per block.
        img_size: the input side the position embedding is made for.
        patch_size: side of the square patches.
        mlp_ratio: hidden width of the MLPs, relative to ``embed_dim``.

    Examples:
        >>> import torch
        >>> from torchrl.envs.transforms._backbones import VisionTransformer
        >>> net = VisionTransformer(16, 2, 4, img_size=32)
        >>> net(torch.rand(2, 3, 32, 32)).shape
        torch.Size([2, 16])
    """

    def __init__(
        self, embed_dim: int, depth: int, num_heads: int, *, img_size: int = 224, patch_size: int = 16, mlp_ratio: float = 4.0
    ) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.patch_embed = _PatchEmbed(img_size, patch_size, embed_dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, embed_dim))
        self.blocks = nn.Sequential(*[_Block(embed_dim, num_heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        if not self.cls_token.is_meta:
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
            nn.init.normal_(self.cls_token, std=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch_embed(x)
        if x.shape[1] != self.pos_embed.shape[1] - 1:
            raise ValueError(
                f"VisionTransformer: the input gives {x.shape[1]} patches, the position embedding is made for "
                f"{self.pos_embed.shape[1] - 1}; resize the images to the model's input size."
            )
        x = x + self.pos_embed[:, 1:]
        cls = (self.cls_token + self.pos_embed[:, :1]).expand(x.shape[0], -1, -1)
        x = self.blocks(torch.cat((cls, x), dim=1))
        return self.norm(x)[:, 0]


def resize_pos_embed(pos_embed: torch.Tensor, num_patches: int) -> torch.Tensor:
    """Bicubic resize of a ``(1, 1 + g*g, D)`` position embedding (class token first) to ``num_patches``."""
    cls, grid = pos_embed[:, :1], pos_embed[:, 1:]
    old, new = math.isqrt(grid.shape[1]), math.isqrt(num_patches)
    grid = grid.reshape(1, old, old, -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=(new, new), mode="bicubic", align_corners=False)
    return torch.cat((cls, grid.permute(0, 2, 3, 1).reshape(1, new * new, -1)), dim=1)


def vit(arch: str, img_size: int = 224) -> VisionTransformer:
    """Builds one of :data:`VIT_CONFIGS` (patch size 16)."""
    if arch not in VIT_CONFIGS:
        raise ValueError(f"unknown ViT {arch!r}; expected one of {sorted(VIT_CONFIGS)}.")
    dim, depth, heads = VIT_CONFIGS[arch]
    return VisionTransformer(dim, depth, heads, img_size=img_size)
