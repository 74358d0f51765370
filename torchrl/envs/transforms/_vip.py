"""``VIPTransform``: images embedded by VIP's pretrained ResNet-50 (Ma et al., 2022)."""
from __future__ import annotations

from torchrl.envs.transforms._pretrained import ResNetEncoderTransform

__all__ = ["VIPTransform"]


class VIPTransform(ResNetEncoderTransform):
    """VIP: ResNet-50 image embeddings (value-implicit pre-training on Ego4D), usable as goal-based rewards.

    Paper: *VIP: Towards Universal Visual Reward and Representation via Value-Implicit Pre-Training* (Ma,
    Sodhani, Jayaraman, Bastani, Kumar, Zhang, 2022), https://arxiv.org/abs/2210.00030.

    A ``Compose`` of ``ToTensorImage``, ImageNet normalisation, a square ``Resize`` to ``size`` and VIP's
    ResNet-50, whose final layer maps the 2048 pooled features to ``(..., 1024)`` embeddings; the images
    are removed. With ``stack_images`` and several ``in_keys`` the images are embedded together into one
    flattened ``(..., n_images * 1024)`` entry.

    Weights: VIP's release checkpoint, cached by torch.hub as ``model.pt``
    (``https://pytorch.s3.amazonaws.com/models/rl/vip/model.pt``), looked up in ``download_path`` and in
    ``torch.hub.get_dir()/checkpoints`` (``vip_50.pt`` is accepted too), downloaded when ``download=True``.
    ``download="IMAGENET1K_V1"``/``"IMAGENET1K_V2"`` (or a ``ResNet50_Weights`` member) uses torchvision's
    ImageNet ResNet-50 instead; that checkpoint has no VIP head, so the embeddings are then the 2048 pooled
    features. Without weights, construction fails with an error naming the paths searched and the URL.

    Args:
        model_name: ``"resnet50"``.
        in_keys: image entries (default ``["pixels"]``).
        out_keys: embedding entries (default ``["vip_vec"]``; ``["vip_vec_0", ...]`` with ``stack_images=False``).
        size: side of the square images given to the ResNet (default 244).
        stack_images: embed several ``in_keys`` into one entry (default) or each into its own.
        download: ``False`` (local weights only), ``True`` (download VIP's weights if missing), or the name
            of torchvision weights.
        download_path: folder searched first and where downloads go (default: torch.hub's cache).
        tensor_pixels_keys: copies of the raw images kept under these keys (one per ``in_key``).

    Raises:
        PretrainedWeightsNotFoundError: (a ``FileNotFoundError``) no weights found or downloadable.
        ValueError: a ``model_name`` other than ``"resnet50"``, or ``out_keys`` that do not fit ``stack_images``.

    Examples:
        >>> import tempfile, torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import VIPTransform
        >>> from torchrl.envs.transforms._backbones import resnet
        >>> folder = tempfile.mkdtemp()  # a checkpoint in VIP's layout, made here for the example
        >>> net = resnet("resnet50")
        >>> net.fc = torch.nn.Linear(2048, 1024)
        >>> torch.save({"vip": {"module.convnet." + k: v for k, v in net.state_dict().items()}}, folder + "/model.pt")
        >>> t = VIPTransform("resnet50", size=32, download_path=folder)
        >>> t(TensorDict(pixels=torch.randint(0, 256, (2, 32, 32, 3), dtype=torch.uint8), batch_size=[2]))["vip_vec"].shape
        torch.Size([2, 1024])
    """

    _default_out_key = "vip_vec"
    _releases = {"resnet50": (["model.pt", "vip_50.pt"], "https://pytorch.s3.amazonaws.com/models/rl/vip/model.pt")}
    _wrapper_key = "vip"
    _release_head = (2048, 1024)

    def __init__(
        self,
        model_name: str,
        in_keys: list[str] | None = None,
        out_keys: list[str] | None = None,
        size: int = 244,
        stack_images: bool = True,
        download=False,
        download_path: str | None = None,
        tensor_pixels_keys: list[str] | None = None,
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
        )
