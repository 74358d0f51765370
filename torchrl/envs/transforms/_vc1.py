"""``VC1Transform``: images embedded by VC-1's pretrained MAE ViT (Majumdar et al., 2023)."""
from __future__ import annotations

import importlib.util
import os
import warnings

import torch
from tensordict import TensorDictBase

from torchrl.data.tensor_specs import TensorSpec
from torchrl.envs.transforms._backbones import VIT_CONFIGS, VisionTransformer, resize_pos_embed, vit
from torchrl.envs.transforms._center_crop import CenterCrop
from torchrl.envs.transforms._observation_norm import ObservationNorm
from torchrl.envs.transforms._pretrained import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    EncoderNet,
    TracksDeviceDtype,
    UnsupportedModelError,
    build_with_weights,
    checkpoint_dirs,
    find_checkpoint,
    load_checkpoint,
)
from torchrl.envs.transforms._resize import Resize
from torchrl.envs.transforms._to_tensor_image import ToTensorImage
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["VC1Transform"]

_VC1_URL = "https://dl.fbaipublicfiles.com/eai-vc/"
#: TorchRL's names and eai-vc's config names -> the release checkpoint file
_VC1_FILES = {"base": "vc1_vitb.pth", "large": "vc1_vitl.pth", "vc1_vitb": "vc1_vitb.pth", "vc1_vitl": "vc1_vitl.pth"}
#: attention heads of the MAE ViTs, by width (ViT-S/B/L/H and TorchRL's small test model)
_HEADS = {16: 4, 384: 6, 768: 12, 1024: 16, 1280: 16}


def _vc1_dirs() -> list[str]:
    """eai-vc's own checkpoint folder (when ``vc_models`` is installed), then torch.hub's cache."""
    dirs = []
    spec = importlib.util.find_spec("vc_models")
    if spec is not None and spec.origin:
        dirs.append(os.path.join(os.path.dirname(os.path.dirname(spec.origin)), "model_ckpts"))
    return dirs + checkpoint_dirs(None)


def _mae_encoder(owner: str, path: str) -> tuple[VisionTransformer, int]:
    """The MAE encoder saved in ``path`` (``{"model": state_dict}``), its shape read from the checkpoint."""
    ckpt = load_checkpoint(owner, path)
    sd = ckpt["model"] if isinstance(ckpt.get("model"), dict) else ckpt
    sd = {k: v for k, v in sd.items() if "decoder" not in k and "mask_token" not in k and not k.startswith("head.")}
    try:
        dim = sd["cls_token"].shape[-1]
        patch = sd["patch_embed.proj.weight"].shape[-1]
        depth = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("blocks."))
    except (KeyError, ValueError) as err:
        raise RuntimeError(f"{owner}: {path} is not an MAE ViT checkpoint (no cls_token / patch_embed / blocks).") from err
    if dim not in _HEADS:
        raise RuntimeError(f"{owner}: {path} holds a ViT of width {dim}; known widths: {sorted(_HEADS)}.")
    img_size = 224
    if sd["pos_embed"].shape[1] != (img_size // patch) ** 2 + 1:  # a checkpoint made for another input size
        sd["pos_embed"] = resize_pos_embed(sd["pos_embed"], (img_size // patch) ** 2)
    net = build_with_weights(owner, lambda: VisionTransformer(dim, depth, _HEADS[dim], img_size=img_size, patch_size=patch), sd, path)
    return net, dim


class VC1Transform(TracksDeviceDtype, Transform):
    """VC-1: embeddings of an MAE Vision Transformer pretrained on egocentric video and ImageNet (eai-vc).

    Paper: *Where are we in the search for an Artificial Visual Cortex for Embodied Intelligence?*
    (Majumdar et al., 2023), https://github.com/facebookresearch/eai-vc.

    The images ``(..., H, W, 3)`` go through ``ToTensorImage``, a ``Resize`` to 256x256, a ``CenterCrop``
    to 224x224 and ImageNet normalisation (the model's own preprocessing, as TorchRL maps it), then the
    ViT, whose final-norm class token is written under the out_key: ``(..., 768)`` for ``"base"``,
    ``(..., 1024)`` for ``"large"``. The ViT is built here in plain torch (``vc_models``, timm and
    torchvision are not needed) and loads eai-vc's checkpoints as they are.

    Weights: ``"base"``/``"large"`` (or eai-vc's names ``"vc1_vitb"``/``"vc1_vitl"``) read
    ``vc1_vitb.pth``/``vc1_vitl.pth`` from eai-vc's ``model_ckpts`` folder (when ``vc_models`` is
    installed) or torch.hub's cache (``torch.hub.get_dir()/checkpoints``); a missing file is downloaded
    from ``https://dl.fbaipublicfiles.com/eai-vc/`` (as eai-vc does), and when that fails the error names
    the URL and the path where to place the file. ``model_name`` may also be the path of an MAE ViT
    checkpoint file. ``"default"`` is TorchRL's small *untrained* ViT (width 16), meant for tests only
    (a ``UserWarning`` says so).

    Args:
        in_keys: image entries (default ``["pixels"]``).
        out_keys: embedding entries (default ``["VC1_vec"]``).
        model_name: ``"base"``, ``"large"``, ``"vc1_vitb"``, ``"vc1_vitl"``, a checkpoint path, or ``"default"``.
        del_keys: remove the images from the output (default ``True``).

    Raises:
        PretrainedWeightsNotFoundError: (a ``FileNotFoundError``) the checkpoint is neither found nor downloadable.
        ValueError: an unknown ``model_name``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import VC1Transform
        >>> import warnings
        >>> with warnings.catch_warnings():
        ...     warnings.simplefilter("ignore")  # "default" is untrained, and says so
        ...     t = VC1Transform(["pixels"], ["VC1_vec"], "default")
        >>> out = t(TensorDict(pixels=torch.randint(0, 256, (2, 64, 64, 3), dtype=torch.uint8), batch_size=[2]))
        >>> out["VC1_vec"].shape, "pixels" in out
        (torch.Size([2, 16]), False)
    """

    inplace = False

    def __init__(self, in_keys, out_keys, model_name, del_keys: bool = True) -> None:
        in_keys = _key_list(in_keys) or ["pixels"]
        out_keys = _key_list(out_keys) or ["VC1_vec"]
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._check_keys()
        self.model_name = model_name
        self.del_keys = bool(del_keys)
        self._device = None
        self._dtype = None
        net, self.embd_size, self.weights_path = self._load(model_name)
        mean, std = torch.tensor(IMAGENET_MEAN).view(3, 1, 1), torch.tensor(IMAGENET_STD).view(3, 1, 1)
        preprocess = [
            ToTensorImage(in_keys=in_keys),
            Resize(256, 256, in_keys=in_keys),
            CenterCrop(224, in_keys=in_keys),
            ObservationNorm(loc=mean, scale=std, in_keys=in_keys, standard_normal=True),
        ]
        self._encoder = EncoderNet(in_keys, out_keys, preprocess, net, self.embd_size, del_keys=self.del_keys)

    def _load(self, model_name) -> tuple[VisionTransformer, int, str | None]:
        owner = type(self).__name__
        if model_name == "default":
            warnings.warn(
                "VC1Transform('default') is TorchRL's small untrained ViT, for tests: its embeddings are random "
                "features. Use model_name='base' or 'large' for VC-1's pretrained weights.",
                UserWarning,
                stacklevel=3,
            )
            return self.make_noload_model(), VIT_CONFIGS["vit_tiny_test_patch16"][0], None
        if model_name in _VC1_FILES:
            file = _VC1_FILES[model_name]
            path = find_checkpoint(owner, [file], _VC1_URL + file, _vc1_dirs(), download=True)
        elif isinstance(model_name, (str, os.PathLike)) and os.path.isfile(model_name):
            path = os.fspath(model_name)
        else:
            raise UnsupportedModelError(
                f"{owner}: unknown model_name {model_name!r}; expected 'base', 'large', 'vc1_vitb', 'vc1_vitl', "
                f"'default' (untrained, for tests) or the path of an MAE ViT checkpoint file."
            )
        net, dim = _mae_encoder(owner, path)
        return net, dim, path

    @property
    def model(self) -> VisionTransformer:
        """The ViT encoder."""
        return self._encoder.net

    @property
    def model_transforms(self):
        """The preprocessing (a ``Compose``) run before the ViT."""
        return self._encoder.preprocess

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._encoder._call(next_tensordict)

    def forward(self, next_tensordict):
        """Embeds the images of ``next_tensordict`` (outside an env: replay-buffer samples, plain data)."""
        return self._call(next_tensordict)

    def set_missing_tolerance(self, mode=False) -> None:
        super().set_missing_tolerance(mode)
        self._encoder.set_missing_tolerance(mode)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._encoder.transform_observation_spec(observation_spec)

    @classmethod
    def install_vc_models(cls, auto_exit=False):
        """Reports that ``vc_models`` is not needed: this transform builds the ViT itself.

        TorchRL clones and installs eai-vc here; the checkpoints are all this implementation reads.
        Returns the folders searched for them (the first one is where downloads go).
        """
        dirs = _vc1_dirs()
        print(
            "VC1Transform does not need vc_models: it builds the ViT itself. Checkpoints "
            f"({', '.join(sorted(set(_VC1_FILES.values())))}) are read from {dirs} or downloaded from {_VC1_URL}."
        )
        return dirs

    @classmethod
    def make_noload_model(cls) -> VisionTransformer:
        """TorchRL's small *untrained* ViT (width 16, 4 blocks, 4 heads, 224x224 inputs), for tests."""
        return vit("vit_tiny_test_patch16").eval()

    def __repr__(self) -> str:
        return f"VC1Transform(model_name={self.model_name!r}, in_keys={self.in_keys}, out_keys={self.out_keys}, del_keys={self.del_keys})"
