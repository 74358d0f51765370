"""Which names of the TorchRL 0.14.1 API this project covers, module by module.

Each issue that lands a module adds its names here; ``test_api.py`` then checks that every listed name
exists with TorchRL's parameter names (extra keyword-only options with defaults are allowed).
"""
from __future__ import annotations

SPEC_NAMES = [
    "Binary", "BinaryBox", "Bounded", "BoundedContinuous", "BoundedDiscrete", "Box", "BoxList", "Categorical",
    "CategoricalBox", "Choice", "Composite", "ContinuousBox", "DEVICE_ERR_MSG", "DEVICE_TYPING", "DiscreteBox",
    "INDEX_TYPING", "MultiCategorical", "MultiOneHot", "NonTensor", "OneHot", "SHAPE_INDEX_TYPING", "Stacked",
    "StackedComposite", "TensorSpec", "Unbounded", "UnboundedContinuous", "UnboundedDiscrete",
]

SCOPE: dict[str, list[str] | str] = {
    "torchrl": "all",
    "torchrl.data.tensor_specs": SPEC_NAMES,
    "torchrl.data": [
        "Binary", "Bounded", "BoundedContinuous", "Categorical", "Choice", "Composite", "DEVICE_TYPING",
        "MultiCategorical", "MultiOneHot", "NonTensor", "OneHot", "Stacked", "StackedComposite", "TensorSpec",
        "Unbounded", "UnboundedContinuous", "UnboundedDiscrete",
    ],
}
