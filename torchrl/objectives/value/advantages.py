"""TorchRL's module path for the estimator classes (each lives in its own file)."""
from __future__ import annotations

from torchrl.objectives.value._estimator_base import ValueEstimatorBase
from torchrl.objectives.value._gae import GAE
from torchrl.objectives.value._multiagent_gae import MultiAgentGAE
from torchrl.objectives.value._td0 import TD0Estimator
from torchrl.objectives.value._td1 import TD1Estimator
from torchrl.objectives.value._td_lambda import TDLambdaEstimator
from torchrl.objectives.value._vtrace import VTrace

__all__ = [
    "ValueEstimatorBase", "TD0Estimator", "TD1Estimator", "TDLambdaEstimator", "GAE", "MultiAgentGAE", "VTrace",
]
