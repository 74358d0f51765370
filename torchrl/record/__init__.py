"""Recording what happens during training: loggers and recorder transforms.

- ``torchrl.record.loggers``: :class:`CSVLogger`, :class:`TensorboardLogger`, :class:`WandbLogger`,
  :class:`MLFlowLogger`; :class:`ProcessLogger` / :class:`RayLogger` (a logger in its own process or
  Ray actor); :class:`LoggerMonitor` (logs ``stats()`` of collectors and replay buffers).
- recorder transforms: :class:`VideoRecorder` (image observations to a logger as videos),
  :class:`TensorDictRecorder` (rollout data to disk), :class:`PixelRenderTransform` (``env.render()``
  output into the data).

Optional libraries (tensorboard, wandb, mlflow, av, matplotlib) are imported only by the classes that need
them, when they are built.
"""
from torchrl.record.loggers import (
    CSVLogger,
    Every,
    LoggerMonitor,
    MLFlowLogger,
    ProcessLogger,
    RayLogger,
    TensorboardLogger,
    WandbLogger,
)
from torchrl.record.recorder import PixelRenderTransform, TensorDictRecorder, VideoRecorder

__all__ = [
    "CSVLogger",
    "Every",
    "LoggerMonitor",
    "MLFlowLogger",
    "PixelRenderTransform",
    "ProcessLogger",
    "RayLogger",
    "TensorDictRecorder",
    "TensorboardLogger",
    "VideoRecorder",
    "WandbLogger",
]
