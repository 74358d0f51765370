"""``DecodeVideoTransform``: decodes stored video (encoded bytes, files, lazy clip references) into frames."""
from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase, is_non_tensor
from tensordict.utils import NestedKey

from torchrl._utils._optional import has_module
from torchrl.envs.transforms._groups import holder
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["DecodeVideoTransform"]

_AV_ERROR = (
    "DecodeVideoTransform needs PyAV to decode videos; install it with `pip install av` (the video's container "
    "and codec must be supported by the FFmpeg build PyAV ships with)."
)


def _decode_one(source: Any, key: NestedKey) -> torch.Tensor:
    """The frames of one encoded video (bytes, a uint8 tensor of its bytes, or a file path): ``(T, 3, H, W)``."""
    import av  # optional dependency

    if isinstance(source, torch.Tensor):
        if source.dtype != torch.uint8 or source.ndim != 1:
            raise TypeError(
                f"DecodeVideoTransform: entry {key!r} holds a {source.dtype} tensor of shape {tuple(source.shape)} per "
                f"element; encoded video must be a 1-D uint8 tensor of the file's bytes."
            )
        source = source.cpu().numpy().tobytes()
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = io.BytesIO(bytes(source))
    elif not isinstance(source, (str, os.PathLike)):
        raise TypeError(
            f"DecodeVideoTransform: cannot decode entry {key!r} of type {type(source).__name__}; expected encoded "
            f"video bytes, a uint8 tensor of them, a file path, or a clip reference with a decode() method."
        )
    try:
        with av.open(source) as container:
            frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    except av.FFmpegError as err:
        raise ValueError(f"DecodeVideoTransform: entry {key!r} could not be decoded as a video: {err}") from err
    if not frames:
        raise ValueError(f"DecodeVideoTransform: entry {key!r} holds a video without frames.")
    return torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).contiguous()


def _stack(frames: list[torch.Tensor], batch: torch.Size, key: NestedKey) -> torch.Tensor:
    shapes = {tuple(f.shape) for f in frames}
    if len(shapes) > 1:
        raise ValueError(
            f"DecodeVideoTransform: the videos of entry {key!r} decode to different shapes {sorted(shapes)}; a batch "
            f"of them can only be stacked when every video has the same number and size of frames."
        )
    return torch.stack(frames).reshape(batch + frames[0].shape)


class DecodeVideoTransform(Transform):
    """Decodes stored video into dense ``uint8`` frames when data is read (e.g. on ``ReplayBuffer.sample``).

    A read-side codec for replay buffers: the storage keeps compact encoded video and ``sample()`` returns
    frames. Each element at an ``in_key`` may hold:

    - the bytes of an encoded video file (``bytes``, as non-tensor data, or a 1-D ``uint8`` tensor of them),
    - the path of a video file (``str`` or ``os.PathLike``),
    - a lazy clip reference with a ``decode(device=..., dtype=...)`` method (TorchRL's ``VideoClipRef``),
      whose ``decode`` does the work.

    Encoded video and files are decoded with PyAV (the first video stream, all its frames, in RGB) into a
    ``(T, 3, H, W)`` tensor per element; a batch of elements gives ``(*batch, T, 3, H, W)``, where ``batch`` is the batch shape of the
    tensordict holding the entry (a group's, e.g. ``("agents", "clip")``, includes its agent dim; every video
    must then have the same number and size of frames). The frames are written at ``out_keys``. There is
    no inverse. In an environment, elements missing from the data are skipped; elsewhere a missing
    ``in_key`` raises ``KeyError``. No specs are declared for the frames (as in TorchRL, this transform
    is meant for the sample path).

    Keyword Args:
        in_keys: the entries holding the videos.
        out_keys: where the frames go. Defaults to ``in_keys`` (replaced in place).
        device: device of the frames. Defaults to ``None`` (a clip reference's own choice, else CPU).
        dtype: dtype of the frames (a plain cast, no rescaling). Defaults to ``None`` (``uint8``).

    Raises:
        ModuleNotFoundError: PyAV (``av``) is not installed.
        ValueError: ``in_keys`` and ``out_keys`` of different lengths; data that cannot be decoded, or a
            batch of videos of different shapes.
        TypeError: an element that is neither encoded video, a path nor a clip reference.

    Examples:
        >>> import io
        >>> import av, numpy as np, torch
        >>> from tensordict import NonTensorData, TensorDict
        >>> from torchrl.envs.transforms import DecodeVideoTransform
        >>> buffer = io.BytesIO()
        >>> with av.open(buffer, mode="w", format="nut") as container:  # 3 frames of 4x2, losslessly encoded
        ...     stream = container.add_stream("rawvideo", rate=10)
        ...     stream.width, stream.height, stream.pix_fmt = 4, 2, "rgb24"
        ...     for i in range(3):
        ...         frame = av.VideoFrame.from_ndarray(np.full((2, 4, 3), 10 * i, dtype=np.uint8), format="rgb24")
        ...         container.mux(stream.encode(frame))
        ...     container.mux(stream.encode())
        >>> data = TensorDict(clip=NonTensorData(buffer.getvalue()))
        >>> frames = DecodeVideoTransform(in_keys=["clip"], out_keys=["pixels"])(data)["pixels"]
        >>> frames.shape, frames.dtype, frames[:, 0, 0, 0].tolist()
        (torch.Size([3, 3, 2, 4]), torch.uint8, [0, 10, 20])
    """

    # in an env, the videos may be absent from the outputs (skipped): in_keys are not required env entries
    _in_keys_are_env_keys = False

    def __init__(
        self,
        *,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if not has_module("av"):
            raise ModuleNotFoundError(_AV_ERROR)
        in_keys = _key_list(in_keys)
        out_keys = list(in_keys) if out_keys is None else _key_list(out_keys)
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"DecodeVideoTransform: in_keys {in_keys} and out_keys {out_keys} differ in length."
            )
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self.device = torch.device(device) if device is not None else None
        self.dtype = dtype

    def _decode(self, value: Any, batch: torch.Size, key: NestedKey) -> torch.Tensor:
        decode = getattr(value, "decode", None)
        if callable(decode) and not isinstance(value, (bytes, bytearray, str)) and not is_non_tensor(value):
            return decode(device=self.device, dtype=self.dtype)
        if is_non_tensor(value):
            items = value.tolist() if batch else [value.data]
        elif isinstance(value, torch.Tensor):
            items = list(value.reshape((-1,) + value.shape[len(batch):])) if batch else [value]
        else:
            items = [value]
        frames = _stack([_decode_one(item, key) for item in _flatten(items)], batch, key)
        if self.dtype is not None:
            frames = frames.to(self.dtype)
        if self.device is not None:
            frames = frames.to(self.device)
        return frames

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            # one video per element of the tensordict holding the entry: a group's (e.g. ("agents", "clip"))
            # batch shape includes its agent dim
            batch = holder(next_tensordict, in_key).batch_size
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"DecodeVideoTransform: key {in_key!r} not found; available keys: "
                    f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            frames = self._decode(value, batch, in_key)
            if out_key in next_tensordict.keys(True) and not isinstance(next_tensordict.get(out_key), torch.Tensor):
                del next_tensordict[out_key]
            next_tensordict.set(out_key, frames)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call_tolerant(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call_tolerant(tensordict_reset)

    def _call_tolerant(self, tensordict: TensorDictBase) -> TensorDictBase:
        tolerance = self._missing_tolerance
        self._missing_tolerance = True
        try:
            return self._call(tensordict)
        finally:
            self._missing_tolerance = tolerance

    def __repr__(self) -> str:
        return f"DecodeVideoTransform(in_keys={self.in_keys}, out_keys={self.out_keys}, device={self.device}, dtype={self.dtype})"


def _flatten(items: list) -> list:
    """The leaves of a nested list (a multi-dimensional ``NonTensorStack``), in row-major order."""
    out = []
    for item in items:
        if isinstance(item, list):
            out.extend(_flatten(item))
        else:
            out.append(item)
    return out
