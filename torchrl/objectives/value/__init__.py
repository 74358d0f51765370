"""Value and advantage estimators: pure functions in :mod:`.functional`, estimator classes over TensorDicts."""
import inspect

from torchrl._utils._deprecation import deprecated_alias
from torchrl.objectives.value import functional
from torchrl.objectives.value._estimator_base import ValueEstimatorBase
from torchrl.objectives.value._gae import GAE
from torchrl.objectives.value._multiagent_gae import MultiAgentGAE
from torchrl.objectives.value._td0 import TD0Estimator
from torchrl.objectives.value._td1 import TD1Estimator
from torchrl.objectives.value._td_lambda import TDLambdaEstimator
from torchrl.objectives.value._vtrace import VTrace

TD0Estimate = deprecated_alias(TD0Estimator, "TD0Estimate", module=__name__)
TD1Estimate = deprecated_alias(TD1Estimator, "TD1Estimate", module=__name__)
TDLambdaEstimate = deprecated_alias(TDLambdaEstimator, "TDLambdaEstimate", module=__name__)
for _alias, _target in (
    (TD0Estimate, TD0Estimator), (TD1Estimate, TD1Estimator), (TDLambdaEstimate, TDLambdaEstimator)
):
    _alias.__signature__ = inspect.signature(_target)
del _alias, _target

__all__ = [
    "functional",
    "GAE",
    "MultiAgentGAE",
    "TD0Estimate",
    "TD0Estimator",
    "TD1Estimate",
    "TD1Estimator",
    "TDLambdaEstimate",
    "TDLambdaEstimator",
    "ValueEstimatorBase",
    "VTrace",
]
