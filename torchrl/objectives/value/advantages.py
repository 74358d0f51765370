"""TorchRL's module path for the estimator classes (each lives in its own file)."""
from __future__ import annotations

from torchrl.objectives.value.estimator_base import ValueEstimatorBase
from torchrl.objectives.value.gae import GAE
from torchrl.objectives.value.multiagent_gae import MultiAgentGAE
from torchrl.objectives.value.td0 import TD0Estimator
from torchrl.objectives.value.td1 import TD1Estimator
from torchrl.objectives.value.td_lambda import TDLambdaEstimator
from torchrl.objectives.value.vtrace import VTrace

__all__ = [
    "ValueEstimatorBase", "TD0Estimator", "TD1Estimator", "TDLambdaEstimator", "GAE", "MultiAgentGAE", "VTrace",
]
