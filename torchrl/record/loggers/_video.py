"""Video tensors for loggers: layout normalisation, tiling, and mp4/gif encoding.

Loggers receive videos as ``(T, C, H, W)`` or ``(N, T, C, H, W)`` tensors (uint8, or floats in ``[0, 1]``),
the layout TensorBoard uses. Encoders want ``(T, H, W, C)`` uint8 frames; :func:`to_thwc` converts, tiling
``N`` videos side by side. mp4 needs PyAV (``pip install av``); gif needs Pillow. Both are imported when a
file is written, never when torchrl is imported.
"""
from __future__ import annotations

import importlib.util
import io
import math
from pathlib import Path

import numpy as np
import torch

__all__ = ["has_mp4_backend", "tile", "to_thwc", "to_uint8", "encode_gif", "write_mp4", "write_video"]


def has_mp4_backend() -> bool:
    """Whether mp4 files can be written here (PyAV installed)."""
    return importlib.util.find_spec("av") is not None


def to_uint8(frames: torch.Tensor) -> torch.Tensor:
    """uint8 as is; floats are read in ``[0, 1]`` and scaled to ``[0, 255]``; other integers are clamped."""
    if frames.dtype == torch.uint8:
        return frames
    if frames.is_floating_point():
        return (frames.clamp(0, 1) * 255).round().to(torch.uint8)
    return frames.clamp(0, 255).to(torch.uint8)


def tile(frames: torch.Tensor) -> torch.Tensor:
    """Tiles ``(N, C, H, W)`` images into one ``(C, rows * H, cols * W)`` image (``cols = ceil(sqrt(N))``).

    Row-major order; unused cells are black.

    Examples:
        >>> import torch
        >>> tile(torch.ones(3, 1, 2, 2, dtype=torch.uint8)).shape
        torch.Size([1, 4, 4])
    """
    n, c, h, w = frames.shape
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    if rows * cols != n:
        frames = torch.cat([frames, frames.new_zeros(rows * cols - n, c, h, w)])
    return frames.reshape(rows, cols, c, h, w).permute(2, 0, 3, 1, 4).reshape(c, rows * h, cols * w)


def to_thwc(video, name: str = "video") -> torch.Tensor:
    """``(T, C, H, W)`` or ``(N, T, C, H, W)`` (tensor or array) to contiguous uint8 ``(T, H, W, C)`` on CPU."""
    video = torch.as_tensor(video).detach().cpu()
    if video.ndim == 5:
        n, t, c, h, w = video.shape
        video = torch.stack([tile(video[:, i]) for i in range(t)]) if n > 1 else video[0]
    if video.ndim != 4:
        raise ValueError(
            f"{name}: expected a video of shape (T, C, H, W) or (N, T, C, H, W), got shape {tuple(video.shape)}."
        )
    if video.shape[1] not in (1, 3, 4):
        raise ValueError(
            f"{name}: expected 1, 3 or 4 channels in dim -3 of (T, C, H, W), got shape {tuple(video.shape)}; "
            f"permute channels-last frames with video.permute(0, 3, 1, 2)."
        )
    return to_uint8(video).permute(0, 2, 3, 1).contiguous()


def _rgb(frames: torch.Tensor) -> np.ndarray:
    """``(T, H, W, C)`` uint8 to ``(T, H, W, 3)`` numpy (grey repeated, alpha dropped)."""
    if frames.shape[-1] == 1:
        frames = frames.expand(*frames.shape[:-1], 3)
    return np.ascontiguousarray(frames[..., :3].numpy())


def encode_gif(frames: torch.Tensor, fps: float) -> bytes:
    """Encodes ``(T, H, W, C)`` uint8 frames as an animated gif (needs Pillow)."""
    try:
        from PIL import Image
    except ImportError as err:  # pragma: no cover - Pillow ships with tensorboard and matplotlib
        raise ImportError("Writing gif videos requires Pillow: pip install pillow") from err
    images = [Image.fromarray(frame) for frame in _rgb(frames)]
    buffer = io.BytesIO()
    duration = max(int(round(1000 / fps)), 1)
    images[0].save(buffer, format="GIF", save_all=True, append_images=images[1:], duration=duration, loop=0)
    return buffer.getvalue()


def write_mp4(path: str | Path, frames: torch.Tensor, fps: float) -> None:
    """Writes ``(T, H, W, C)`` uint8 frames to an H.264 mp4 (needs PyAV; odd sizes are padded to even)."""
    try:
        import av
    except ImportError as err:
        raise ImportError(
            "Writing mp4 videos requires PyAV: pip install av (or use video_format='pt' / 'memmap')."
        ) from err
    rgb = _rgb(frames)
    _, h, w, _ = rgb.shape
    if h % 2 or w % 2:
        rgb = np.pad(rgb, ((0, 0), (0, h % 2), (0, w % 2), (0, 0)))
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream("libx264", rate=int(round(fps)))
        stream.height, stream.width = rgb.shape[1], rgb.shape[2]
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "18"}
        for frame in rgb:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def write_video(path: str | Path, video, fps: float, name: str = "video") -> Path:
    """Writes ``video`` (``(T, C, H, W)`` or ``(N, T, C, H, W)``) to ``path`` as mp4 or gif (by extension)."""
    path = Path(path)
    frames = to_thwc(video, name)
    suffix = path.suffix.lower()
    if suffix == ".mp4":
        write_mp4(path, frames, fps)
    elif suffix == ".gif":
        path.write_bytes(encode_gif(frames, fps))
    else:
        raise ValueError(f"{name}: unsupported video file extension {suffix!r}; use '.mp4' or '.gif'.")
    return path
