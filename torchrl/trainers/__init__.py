"""``torchrl.trainers``: a training loop (:class:`Trainer`) assembled from hooks.

Where things live:

- ``trainer.py``: :class:`Trainer` (the loop, hook dispatch, checkpoints); ``_checkpoint.py``: atomic
  checkpoint files and the global RNG states.
- ``_hook_base.py``: :class:`TrainerHookBase`, :func:`mask_batch`.
- ``_optim_hooks.py``: :class:`OptimizerHook`, the optimization steppers, :class:`LRSchedulerHook`,
  :class:`TargetNetUpdaterHook`.
- ``_buffer_hooks.py``: :class:`ReplayBufferTrainer`, :class:`BatchSubSampler`, :class:`SelectKeys`,
  :class:`RewardNormalizer`, :class:`ValueEstimatorHook`.
- ``_logging_hooks.py``: :class:`LogScalar`, :class:`CountFramesLog`, :class:`LogTiming`,
  :class:`LogValidationReward`, :class:`UTDRHook`.
- ``_misc_hooks.py``: :class:`UpdateWeights`, :class:`EarlyStopping`, :class:`ClearCudaCache`.
- ``trainers.py``: TorchRL's ``torchrl.trainers.trainers`` import path (a re-export shim).
"""
from __future__ import annotations

from torchrl.trainers._buffer_hooks import (
    BatchSubSampler,
    ReplayBufferTrainer,
    RewardNormalizer,
    SelectKeys,
    ValueEstimatorHook,
)
from torchrl.trainers._hook_base import mask_batch, TrainerHookBase
from torchrl.trainers._logging_hooks import CountFramesLog, LogScalar, LogTiming, LogValidationReward, UTDRHook
from torchrl.trainers._misc_hooks import ClearCudaCache, EarlyStopping, UpdateWeights
from torchrl.trainers._optim_hooks import (
    DefaultOptimizationStepper,
    LRSchedulerHook,
    MixedPrecisionOptimizationStepper,
    OptimizationStepper,
    OptimizerHook,
    TargetNetUpdaterHook,
)
from torchrl.trainers._trainer import Trainer

__all__ = [
    "BatchSubSampler",
    "ClearCudaCache",
    "CountFramesLog",
    "DefaultOptimizationStepper",
    "EarlyStopping",
    "LRSchedulerHook",
    "LogScalar",
    "LogTiming",
    "LogValidationReward",
    "MixedPrecisionOptimizationStepper",
    "OptimizationStepper",
    "OptimizerHook",
    "ReplayBufferTrainer",
    "RewardNormalizer",
    "SelectKeys",
    "TargetNetUpdaterHook",
    "Trainer",
    "TrainerHookBase",
    "UTDRHook",
    "UpdateWeights",
    "ValueEstimatorHook",
    "mask_batch",
]

# TorchRL's module path ``torchrl.trainers.trainers`` (a re-export shim), importable as an attribute too.
from torchrl.trainers import trainers  # noqa: E402
