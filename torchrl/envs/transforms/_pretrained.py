"""What the pretrained-encoder transforms share: finding and loading weights, the network transform, the pipeline.

Weights are looked up, in order, in ``download_path`` (when given) and in torch.hub's checkpoint cache
(``torch.hub.get_dir()/checkpoints``, i.e. ``$TORCH_HOME/hub/checkpoints``), under the file names the
releases use (``r3m_18.pt``, VIP's ``model.pt``, torchvision's ``resnet18-f37072fd.pth``, VC-1's
``vc1_vitb.pth``). A missing file is downloaded only when asked (R3M/VIP's ``download=...``; VC-1 always
tries, as eai-vc does); when it cannot be, the error names the URL and the path where the file should be
placed. Models are built on the ``meta`` device and take every tensor from the checkpoint: a model is
never left with random weights (only ``VC1Transform("default")``, TorchRL's untrained test model, is
random, and it warns).
"""
from __future__ import annotations

import os
from typing import Callable, ClassVar, Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from torchrl.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl.envs.transforms._backbones import resnet
from torchrl.envs.transforms._cat_tensors import CatTensors
from torchrl.envs.transforms._compose import Compose
from torchrl.envs.transforms._observation_norm import ObservationNorm
from torchrl.envs.transforms._resize import Resize
from torchrl.envs.transforms._to_tensor_image import ToTensorImage
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = []

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

_TV_URL = "https://download.pytorch.org/models/"
#: torchvision's ImageNet checkpoints of the supported ResNets (``DEFAULT`` is the last one listed)
_TV_FILES = {
    "resnet18": {"IMAGENET1K_V1": "resnet18-f37072fd.pth"},
    "resnet34": {"IMAGENET1K_V1": "resnet34-b627a593.pth"},
    "resnet50": {"IMAGENET1K_V1": "resnet50-0676ba61.pth", "IMAGENET1K_V2": "resnet50-11ad3fa6.pth"},
}


class PretrainedWeightsNotFoundError(FileNotFoundError):
    """No checkpoint file was found (or could be downloaded) for a pretrained-encoder transform."""


class UnsupportedModelError(ValueError, NotImplementedError):
    """A model name the transform does not know (TorchRL raises ``NotImplementedError`` here)."""


def checkpoint_dirs(download_path: str | os.PathLike | None) -> list[str]:
    """The folders searched for checkpoints: ``download_path`` (if given), then torch.hub's cache."""
    dirs = [] if download_path is None else [os.fspath(download_path)]
    hub = os.path.join(torch.hub.get_dir(), "checkpoints")
    return dirs + ([hub] if hub not in dirs else [])


def find_checkpoint(
    owner: str, filenames: Sequence[str], url: str, dirs: Sequence[str], *, download: bool
) -> str:
    """The path of the first of ``filenames`` found in ``dirs``; else downloads ``url`` when ``download``.

    Raises:
        PretrainedWeightsNotFoundError: the file is nowhere and ``download`` is False, or the download failed.
    """
    for d in dirs:
        for name in filenames:
            path = os.path.join(d, name)
            if os.path.isfile(path):
                return path
    target = os.path.join(dirs[0], filenames[0])
    looked = ", ".join(os.path.join(d, n) for d in dirs for n in filenames)
    if not download:
        raise PretrainedWeightsNotFoundError(
            f"{owner}: no pretrained weights found (looked for {looked}). Pass download=True to fetch them from "
            f"{url}, or download that file yourself and place it at {target} (or in the folder given as "
            f"download_path). Random weights are never used in place of pretrained ones."
        )
    try:
        os.makedirs(dirs[0], exist_ok=True)
        torch.hub.download_url_to_file(url, target, progress=True)
    except Exception as err:  # no network, HTTP error, read-only folder: say what to do instead
        raise PretrainedWeightsNotFoundError(
            f"{owner}: could not download the pretrained weights from {url} to {target} ({type(err).__name__}: "
            f"{err}). Download the file yourself and place it at {target}."
        ) from err
    return target


def torchvision_weights(owner: str, model_name: str, weights) -> tuple[str, str]:
    """``(file name, url)`` of torchvision's ImageNet weights named by ``weights`` (a string or a WeightsEnum)."""
    url = getattr(weights, "url", None)
    if isinstance(url, str):  # a torchvision WeightsEnum member
        return url.rsplit("/", 1)[-1], url
    name = str(weights).rsplit(".", 1)[-1].upper()
    files = _TV_FILES[model_name]
    if name == "DEFAULT":
        name = list(files)[-1]
    if name not in files:
        raise ValueError(
            f"{owner}: unknown torchvision weights {weights!r} for {model_name}; expected one of "
            f"{sorted(files) + ['DEFAULT']} (or a torchvision WeightsEnum member)."
        )
    return files[name], _TV_URL + files[name]


def load_checkpoint(owner: str, path: str) -> dict:
    """``torch.load`` of a checkpoint holding tensors only (``weights_only=True``), with a clear error."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise RuntimeError(f"{owner}: could not read the checkpoint {path} ({type(err).__name__}: {err}).") from err
    if not isinstance(ckpt, dict):
        raise RuntimeError(f"{owner}: the checkpoint {path} holds a {type(ckpt).__name__}, not a state dict.")
    return ckpt


def network_state_dict(ckpt: dict, wrapper_keys: Sequence[str] = ()) -> dict:
    """The network's entries of ``ckpt``: unwrapped from ``ckpt[key]`` and stripped of a
    ``"module.convnet."`` / ``"convnet."`` / ``"module."`` prefix (R3M and VIP save ``{"r3m": {"module.convnet.conv1.weight": ...}}``)."""
    for key in wrapper_keys:
        if isinstance(ckpt.get(key), dict):
            ckpt = ckpt[key]
            break
    for prefix in ("module.convnet.", "convnet.", "module."):
        if any(k.startswith(prefix) for k in ckpt):
            return {k[len(prefix):]: v for k, v in ckpt.items() if k.startswith(prefix)}
    return dict(ckpt)


def build_with_weights(owner: str, factory: Callable[[], nn.Module], state_dict: dict, path: str) -> nn.Module:
    """Builds ``factory()`` on the meta device and gives it every tensor of ``state_dict`` (strictly)."""
    with torch.device("meta"):
        net = factory()
    result = net.load_state_dict(state_dict, strict=False, assign=True)
    left = [name for name, t in list(net.named_parameters()) + list(net.named_buffers()) if t.is_meta]
    if result.missing_keys or result.unexpected_keys or left:
        raise RuntimeError(
            f"{owner}: the checkpoint {path} does not match the model: missing "
            f"{_few(result.missing_keys or left)}, unexpected {_few(result.unexpected_keys)}."
        )
    return net.eval()


def _few(keys: Sequence[str], n: int = 6) -> str:
    keys = list(keys)
    return str(keys[:n])[:-1] + (f", ... ({len(keys)} in all)]" if len(keys) > n else "]")


class EncoderNet(Transform):
    """Preprocesses images and runs a network on them, writing embeddings ``(..., outdim)``.

    The preprocessing transforms run on a selection of the ``in_keys`` (they are held here, not in the
    outer ``Compose``, so that the env only ever sees the embeddings); with ``stack``, the preprocessed
    ``(..., C, H, W)`` images are stacked on dim -4, embedded together and flattened to ``(..., K * outdim)``
    under the single out_key.

    Args:
        in_keys: raw image entries. out_keys: embedding entries (one, with ``stack``).
        preprocess: transforms applied to the images first (in place on the ``in_keys``).
        net: the network (``(N, C, H, W) -> (N, outdim)``). outdim: its output size.
        stack: embed all ``in_keys`` into the one out_key.
        del_keys: remove the ``in_keys`` from the output.
        requires_grad: let gradients flow through the network (default: frozen, run under ``no_grad``).
    """

    def __init__(
        self,
        in_keys,
        out_keys,
        preprocess: Sequence[Transform],
        net: nn.Module,
        outdim: int,
        *,
        stack: bool = False,
        del_keys: bool = True,
        requires_grad: bool = False,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.stack = bool(stack) and len(self.in_keys) > 1
        if not self.stack:
            self._check_keys()
        self.preprocess = Compose(*preprocess)
        self.net = net
        self.outdim = int(outdim)
        self.del_keys = bool(del_keys)
        self.requires_grad = bool(requires_grad)
        net.requires_grad_(self.requires_grad)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """Runs the network on preprocessed images ``(..., C, H, W)``; returns ``(..., outdim)``."""
        lead = images.shape[:-3]
        x = images.reshape(-1, *images.shape[-3:])
        param = next(self.net.parameters())
        with torch.set_grad_enabled(self.requires_grad and torch.is_grad_enabled()):
            out = self.net(x.to(param.dtype))
        return out.reshape(*lead, out.shape[-1])

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        present = []
        for key in self.in_keys:
            if next_tensordict.get(key, None) is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"{type(self).__name__}: image entry {key!r} not found; available keys: "
                    f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            present.append(key)
        if not present:
            return next_tensordict
        images = self.preprocess(next_tensordict.select(*present))
        if self.stack:
            stacked = torch.stack([images.get(k) for k in present], dim=-4)
            next_tensordict.set(self.out_keys[0], self.embed(stacked).flatten(-2, -1))
        else:
            for in_key, out_key in zip(self.in_keys, self.out_keys):
                if in_key in present:
                    next_tensordict.set(out_key, self.embed(images.get(in_key)))
        if self.del_keys:
            gone = [k for k in present if k not in self.out_keys]
            if gone:
                next_tensordict.exclude(*gone, inplace=True)
        return next_tensordict

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not isinstance(observation_spec, Composite):
            raise ValueError(
                f"{type(self).__name__}: expected a Composite observation spec, got {type(observation_spec).__name__}."
            )
        dtype = next(self.net.parameters()).dtype
        leaves = set(observation_spec.keys(True, True))
        present = [k for k in self.in_keys if k in leaves or (isinstance(k, tuple) and len(k) == 1 and k[0] in leaves)]
        if not present:
            return observation_spec
        first = observation_spec[present[0]]
        if self.stack:
            shapes = {tuple(observation_spec[k].shape[:-3]) for k in present}
            if len(shapes) != 1:
                raise ValueError(f"{type(self).__name__}: the stacked images {present} have different batch dims {sorted(shapes)}.")
            outs = {self.out_keys[0]: (*first.shape[:-3], len(present) * self.outdim)}
        else:
            outs = {
                o: (*observation_spec[i].shape[:-3], self.outdim) for i, o in zip(self.in_keys, self.out_keys) if i in present
            }
        if self.del_keys:
            for key in present:
                if key not in self.out_keys:
                    del observation_spec[key]
        for key, shape in outs.items():
            observation_spec[key] = Unbounded(shape=shape, device=first.device, dtype=dtype)
        return observation_spec


def encoder_pipeline(
    owner: str,
    in_keys: list,
    out_keys: list,
    *,
    stack_images: bool,
    tensor_pixels_keys: list,
    preprocess: list[Transform],
    net: nn.Module,
    outdim: int,
    requires_grad: bool = False,
) -> list[Transform]:
    """The transforms of an encoder: copies of the raw images (``tensor_pixels_keys``), then the network
    stage (preprocessing, network; several images stacked when ``stack_images``)."""
    out: list[Transform] = []
    if tensor_pixels_keys:
        if len(tensor_pixels_keys) != len(in_keys):
            raise ValueError(
                f"{owner}: tensor_pixels_keys {tensor_pixels_keys} must name one entry per in_key {in_keys}."
            )
        out += [CatTensors([k], t, del_keys=False) for k, t in zip(in_keys, tensor_pixels_keys)]
    out.append(
        EncoderNet(in_keys, out_keys, preprocess, net, outdim, stack=stack_images, del_keys=True, requires_grad=requires_grad)
    )
    return out


def imagenet_preprocess(in_keys: list, size: int) -> list[Transform]:
    """``ToTensorImage``, ImageNet normalisation and a square ``Resize`` of the ``in_keys``, as TorchRL orders them."""
    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
    return [
        ToTensorImage(in_keys=in_keys),
        ObservationNorm(loc=mean, scale=std, in_keys=in_keys, standard_normal=True),
        Resize(size, size, in_keys=in_keys),
    ]


class TracksDeviceDtype:
    """``device`` / ``dtype``: what was last given to ``to`` (``None`` until then), as TorchRL's encoder
    transforms report them. Set ``_device`` and ``_dtype`` to ``None`` in ``__init__``."""

    @property
    def device(self):
        """The device last given to ``to`` (``None`` until then)."""
        return self._device

    @property
    def dtype(self):
        """The dtype last given to ``to`` (``None`` until then)."""
        return self._dtype

    def to(self, dest, *args, **kwargs):
        if isinstance(dest, torch.dtype):
            self._dtype = dest
        elif dest is not None:
            self._device = torch.device(dest)
        return super().to(dest, *args, **kwargs)


class ResNetEncoderTransform(TracksDeviceDtype, Compose):
    """Base of ``R3MTransform`` and ``VIPTransform``: a ``Compose`` of preprocessing and a ResNet encoder.

    Subclasses describe their release: ``_default_out_key``, ``_releases`` (model name -> checkpoint file
    names and URL), ``_wrapper_key`` (the checkpoint's top-level entry) and ``_release_head`` (the
    ``(in, out)`` sizes of the release's ``fc`` layer, or ``None`` when the release drops it).
    """

    _default_out_key = "vec"
    _releases: ClassVar[dict] = {}
    _wrapper_key = ""
    _release_head: tuple[int, int] | None = None

    def __init__(
        self,
        model_name: str,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        size: int = 244,
        stack_images: bool = True,
        download=False,
        download_path: str | None = None,
        tensor_pixels_keys: Sequence[NestedKey] | None = None,
        requires_grad: bool = False,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        in_keys = _key_list(in_keys) or ["pixels"]
        out_keys = _key_list(out_keys)
        if not out_keys:
            base = self._default_out_key
            out_keys = [base] if stack_images else [f"{base}_{i}" for i in range(len(in_keys))]
        elif stack_images and len(out_keys) != 1:
            raise ValueError(f"{owner}: out_keys must hold one key when stack_images=True, got {out_keys}.")
        elif not stack_images and len(out_keys) != len(in_keys):
            raise ValueError(
                f"{owner}: out_keys {out_keys} must hold one key per in_key {in_keys} when stack_images=False."
            )
        if int(size) <= 0:
            raise ValueError(f"{owner}: size must be positive, got {size}.")
        self.model_name = model_name
        self.size = int(size)
        self.stack_images = bool(stack_images)
        self.download = download
        self.download_path = download_path
        self.tensor_pixels_keys = _key_list(tensor_pixels_keys)
        self.requires_grad = bool(requires_grad)
        self._device = None
        self._dtype = None
        net, self.outdim, self.weights_path = self._load_network(model_name, download, download_path)
        for t in encoder_pipeline(
            owner,
            in_keys,
            out_keys,
            stack_images=self.stack_images,
            tensor_pixels_keys=self.tensor_pixels_keys,
            preprocess=imagenet_preprocess(in_keys, self.size),
            net=net,
            outdim=self.outdim,
            requires_grad=self.requires_grad,
        ):
            self.append(t)
        self.in_keys, self.out_keys = in_keys, out_keys

    def _load_network(self, model_name, download, download_path) -> tuple[nn.Module, int, str]:
        """``(network, embedding size, checkpoint path)``: the release's weights when ``download`` is a bool,
        torchvision's ImageNet weights when it names them."""
        owner = type(self).__name__
        if model_name not in self._releases:
            raise UnsupportedModelError(
                f"{owner}: model {model_name!r} is not supported; expected one of {sorted(self._releases)}."
            )
        dirs = checkpoint_dirs(download_path)
        if isinstance(download, bool):
            files, url = self._releases[model_name]
            path = find_checkpoint(owner, files, url, dirs, download=download)
            state_dict = network_state_dict(load_checkpoint(owner, path), (self._wrapper_key,))
            head = self._release_head
        else:
            file, url = torchvision_weights(owner, model_name, download)
            path = find_checkpoint(owner, [file], url, dirs, download=True)
            state_dict = network_state_dict(load_checkpoint(owner, path))
            head = None  # torchvision's fc is an ImageNet classifier: the embedding is the pooled features
        if head is None:
            state_dict = {k: v for k, v in state_dict.items() if not k.startswith("fc.")}

        def factory():
            net = resnet(model_name)
            net.fc = nn.Identity() if head is None else nn.Linear(*head)
            return net

        outdim = head[1] if head is not None else (2048 if model_name == "resnet50" else 512)
        return build_with_weights(owner, factory, state_dict, path), outdim, path

    def clone(self):
        self.reset_parent()
        return Transform.clone(self)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model_name={self.model_name!r}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys}, size={self.size}, stack_images={self.stack_images})"
        )
