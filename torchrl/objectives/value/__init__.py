"""Value and advantage estimators."""
from torchrl.objectives.value import functional
