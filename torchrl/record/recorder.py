"""TorchRL's ``torchrl.record.recorder`` module path: the recorder transforms, each in its own file."""
from torchrl.record._pixel_render import PixelRenderTransform
from torchrl.record._tensordict_recorder import TensorDictRecorder
from torchrl.record._video_recorder import VideoRecorder

__all__ = ["PixelRenderTransform", "TensorDictRecorder", "VideoRecorder"]
