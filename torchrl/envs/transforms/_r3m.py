"""``R3MTransform``: images embedded by R3M's pretrained ResNet (Nair et al., 2022)."""
from __future__ import annotations

from torchrl.envs.transforms._pretrained import ResNetEncoderTransform

__all__ = ["R3MTransform"]

_R3M_URL = "https://pytorch.s3.amazonaws.com/models/rl/r3m/"


class R3MTransform(ResNetEncoderTransform):
    """R3M: ResNet image embeddings pretrained on Ego4D for robot manipulation.

    Paper: *R3M: A Universal Visual Representation for Robot Manipulation* (Nair, Rajeswaran, Kumar, Finn,
    Gupta, 2022), https://arxiv.org/abs/2203.12601.

    A ``Compose`` of ``ToTensorImage`` (``(..., H, W, 3)`` uint8 to ``(..., 3, H, W)`` floats in
    ``[0, 1]``), ImageNet normalisation (``ObservationNorm``), a square ``Resize`` to ``size`` and the
    ResNet without its classifier, which writes ``(..., 512)`` embeddings (``(..., 2048)`` for
    ``resnet50``) and removes the images. With ``stack_images`` and several ``in_keys``, the images are
    stacked, embedded together and flattened into one ``(..., n_images * dim)`` entry.

    Weights: the R3M release checkpoint ``r3m_18.pt`` / ``r3m_34.pt`` / ``r3m_50.pt`` is looked up in
    ``download_path`` and in torch.hub's cache (``torch.hub.get_dir()/checkpoints``); with
    ``download=True`` a missing file is fetched from ``https://pytorch.s3.amazonaws.com/models/rl/r3m/``.
    ``download="IMAGENET1K_V1"`` (or a torchvision ``ResNet*_Weights`` member) uses torchvision's ImageNet
    weights instead (``resnet18-f37072fd.pth``, ...). When no weights can be found, construction fails with
    an error naming the paths searched and the URL; random weights are never used.

    Args:
        model_name: ``"resnet18"``, ``"resnet34"`` or ``"resnet50"``.
        in_keys: image entries (default ``["pixels"]``).
        out_keys: embedding entries (default ``["r3m_vec"]``; ``["r3m_vec_0", ...]`` with
            ``stack_images=False``).
        size: side of the square images given to the ResNet (default 244).
        stack_images: embed several ``in_keys`` into one entry (default) or each into its own.
        download: ``False`` (local weights only), ``True`` (download R3M's weights if missing), or the name
            of torchvision weights (``"IMAGENET1K_V1"``, ``"DEFAULT"``, a ``WeightsEnum`` member).
        download_path: folder searched first and where downloads go (default: torch.hub's cache).
        tensor_pixels_keys: copies of the raw images kept under these keys (one per ``in_key``).
        requires_grad: let gradients flow through the ResNet (default: frozen, run under ``no_grad``).

    Raises:
        PretrainedWeightsNotFoundError: (a ``FileNotFoundError``) no weights found or downloadable.
        ValueError: an unknown ``model_name``, or ``out_keys`` that do not fit ``stack_images``.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import R3MTransform
        >>> from torchrl.envs.transforms._backbones import resnet
        >>> folder = tempfile.mkdtemp()  # a checkpoint in R3M's layout, made here for the example
        >>> sd = {"module.convnet." + k: v for k, v in resnet("resnet18").state_dict().items()}
        >>> torch.save({"r3m": sd}, folder + "/r3m_18.pt")
        >>> t = R3MTransform("resnet18", in_keys=["pixels"], size=32, download_path=folder)
        >>> out = t(TensorDict(pixels=torch.randint(0, 256, (4, 40, 40, 3), dtype=torch.uint8), batch_size=[4]))
        >>> out["r3m_vec"].shape, "pixels" in out
        (torch.Size([4, 512]), False)
    """

    _default_out_key = "r3m_vec"
    _releases = {
        "resnet18": (["r3m_18.pt"], _R3M_URL + "r3m_18.pt"),
        "resnet34": (["r3m_34.pt"], _R3M_URL + "r3m_34.pt"),
        "resnet50": (["r3m_50.pt"], _R3M_URL + "r3m_50.pt"),
    }
    _wrapper_key = "r3m"
    _release_head = None  # R3M's convnet has no classifier

    def __init__(
        self,
        model_name: str,
        in_keys: list[str],
        out_keys: list[str] | None = None,
        size: int = 244,
        stack_images: bool = True,
        download=False,
        download_path: str | None = None,
        tensor_pixels_keys: list[str] | None = None,
        requires_grad: bool = False,
    ) -> None:
        super().__init__(
            model_name,
            in_keys,
            out_keys,
            size=size,
            stack_images=stack_images,
            download=download,
            download_path=download_path,
            tensor_pixels_keys=tensor_pixels_keys,
            requires_grad=requires_grad,
        )
