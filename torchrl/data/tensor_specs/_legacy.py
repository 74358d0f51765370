"""Old (pre-0.6) spec names: each builds the new class and warns once with a ``DeprecationWarning``."""
from __future__ import annotations

from torchrl._utils._deprecation import deprecated_alias
from torchrl.data.tensor_specs._binary import Binary
from torchrl.data.tensor_specs._bounded import Bounded
from torchrl.data.tensor_specs._categorical import Categorical
from torchrl.data.tensor_specs._composite import Composite
from torchrl.data.tensor_specs._multi import MultiCategorical, MultiOneHot
from torchrl.data.tensor_specs._non_tensor import NonTensor
from torchrl.data.tensor_specs._one_hot import OneHot
from torchrl.data.tensor_specs._stacked import Stacked, StackedComposite
from torchrl.data.tensor_specs._unbounded import UnboundedContinuous, UnboundedDiscrete

_MODULE = "torchrl.data.tensor_specs"

BinaryDiscreteTensorSpec = deprecated_alias(Binary, "BinaryDiscreteTensorSpec", module=_MODULE)
BoundedTensorSpec = deprecated_alias(Bounded, "BoundedTensorSpec", module=_MODULE)
CompositeSpec = deprecated_alias(Composite, "CompositeSpec", module=_MODULE)
DiscreteTensorSpec = deprecated_alias(Categorical, "DiscreteTensorSpec", module=_MODULE)
LazyStackedCompositeSpec = deprecated_alias(StackedComposite, "LazyStackedCompositeSpec", module=_MODULE)
LazyStackedTensorSpec = deprecated_alias(Stacked, "LazyStackedTensorSpec", module=_MODULE)
MultiDiscreteTensorSpec = deprecated_alias(MultiCategorical, "MultiDiscreteTensorSpec", module=_MODULE)
MultiOneHotDiscreteTensorSpec = deprecated_alias(MultiOneHot, "MultiOneHotDiscreteTensorSpec", module=_MODULE)
NonTensorSpec = deprecated_alias(NonTensor, "NonTensorSpec", module=_MODULE)
OneHotDiscreteTensorSpec = deprecated_alias(OneHot, "OneHotDiscreteTensorSpec", module=_MODULE)
UnboundedContinuousTensorSpec = deprecated_alias(UnboundedContinuous, "UnboundedContinuousTensorSpec", module=_MODULE)
UnboundedDiscreteTensorSpec = deprecated_alias(UnboundedDiscrete, "UnboundedDiscreteTensorSpec", module=_MODULE)

__all__ = [
    "BinaryDiscreteTensorSpec",
    "BoundedTensorSpec",
    "CompositeSpec",
    "DiscreteTensorSpec",
    "LazyStackedCompositeSpec",
    "LazyStackedTensorSpec",
    "MultiDiscreteTensorSpec",
    "MultiOneHotDiscreteTensorSpec",
    "NonTensorSpec",
    "OneHotDiscreteTensorSpec",
    "UnboundedContinuousTensorSpec",
    "UnboundedDiscreteTensorSpec",
]
