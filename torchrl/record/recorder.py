"""TorchRL's ``torchrl.record.recorder`` module path: the recorder transforms, each in its own file."""
from torchrl.record.pixel_render import PixelRenderTransform
from torchrl.record.tensordict_recorder import TensorDictRecorder
from torchrl.record.video_recorder import VideoRecorder

__all__ = ["PixelRenderTransform", "TensorDictRecorder", "VideoRecorder"]
