"""Experiment loggers: CSV, TensorBoard, Weights & Biases, MLflow; services and monitoring.

Optional backends (``tensorboard``, ``wandb``, ``mlflow``, ``ray``, ``av`` for mp4) are imported when a logger
that needs them is built, never at import time.
"""
from torchrl.record.loggers._ray_service import RayLogger
from torchrl.record.loggers._service import ProcessLogger
from torchrl.record.loggers.common import Logger
from torchrl.record.loggers.csv import CSVLogger
from torchrl.record.loggers.mlflow import MLFlowLogger
from torchrl.record.loggers.monitoring import Every, LoggerMonitor
from torchrl.record.loggers.tensorboard import TensorboardLogger
from torchrl.record.loggers.utils import generate_exp_name, get_logger
from torchrl.record.loggers.wandb import WandbLogger

__all__ = [
    "CSVLogger",
    "Every",
    "Logger",
    "LoggerMonitor",
    "MLFlowLogger",
    "ProcessLogger",
    "RayLogger",
    "TensorboardLogger",
    "WandbLogger",
    "generate_exp_name",
    "get_logger",
]
