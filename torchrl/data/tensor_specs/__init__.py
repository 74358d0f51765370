"""``torchrl.data.tensor_specs``: specs describe the shape, dtype, device and values of tensors.

Read in this order: ``_base.py`` (what every spec does), the leaves (``_unbounded``, ``_bounded``,
``_categorical``, ``_one_hot``, ``_binary``, ``_multi``, ``_non_tensor``, ``_choice``), then
``_composite.py`` (the spec of a TensorDict) and ``_stacked.py`` (lazy stacks, ``torch.stack``).
``_legacy.py`` keeps the pre-0.6 names alive.
"""
from __future__ import annotations

from torchrl.data.tensor_specs._base import TensorSpec
from torchrl.data.tensor_specs._binary import Binary
from torchrl.data.tensor_specs._bounded import Bounded, BoundedContinuous, BoundedDiscrete
from torchrl.data.tensor_specs._boxes import BinaryBox, Box, BoxList, CategoricalBox, ContinuousBox, DiscreteBox
from torchrl.data.tensor_specs._categorical import Categorical
from torchrl.data.tensor_specs._choice import Choice
from torchrl.data.tensor_specs._composite import Composite
from torchrl.data.tensor_specs._legacy import (
    BinaryDiscreteTensorSpec,
    BoundedTensorSpec,
    CompositeSpec,
    DiscreteTensorSpec,
    LazyStackedCompositeSpec,
    LazyStackedTensorSpec,
    MultiDiscreteTensorSpec,
    MultiOneHotDiscreteTensorSpec,
    NonTensorSpec,
    OneHotDiscreteTensorSpec,
    UnboundedContinuousTensorSpec,
    UnboundedDiscreteTensorSpec,
)
from torchrl.data.tensor_specs._multi import MultiCategorical, MultiOneHot
from torchrl.data.tensor_specs._non_tensor import NonTensor
from torchrl.data.tensor_specs._one_hot import OneHot
from torchrl.data.tensor_specs._stacked import Stacked, StackedComposite
from torchrl.data.tensor_specs._unbounded import Unbounded, UnboundedContinuous, UnboundedDiscrete
from torchrl.data.tensor_specs._utils import DEVICE_ERR_MSG, DEVICE_TYPING, INDEX_TYPING, SHAPE_INDEX_TYPING

__all__ = [
    "Binary",
    "BinaryBox",
    "Bounded",
    "BoundedContinuous",
    "BoundedDiscrete",
    "Box",
    "BoxList",
    "Categorical",
    "CategoricalBox",
    "Choice",
    "Composite",
    "ContinuousBox",
    "DEVICE_ERR_MSG",
    "DEVICE_TYPING",
    "DiscreteBox",
    "INDEX_TYPING",
    "MultiCategorical",
    "MultiOneHot",
    "NonTensor",
    "OneHot",
    "SHAPE_INDEX_TYPING",
    "Stacked",
    "StackedComposite",
    "TensorSpec",
    "Unbounded",
    "UnboundedContinuous",
    "UnboundedDiscrete",
    # deprecated names
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
