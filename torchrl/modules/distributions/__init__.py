"""``torchrl.modules.distributions``: distributions for policies (continuous, discrete, masked).

Every class works with tensordict's ``ProbabilisticTensorDictModule``: it reads ``rsample``/``sample``,
``log_prob``, ``deterministic_sample``, ``mode`` and ``mean``; ``TanhNormal`` also provides
``rsample_and_log_prob`` so the module scores the draw it sampled.
"""
from __future__ import annotations

from torchrl.modules.distributions.continuous import Delta, IndependentNormal, TanhDelta
from torchrl.modules.distributions.discrete import (
    MaskedCategorical,
    MaskedOneHotCategorical,
    OneHotCategorical,
    OneHotOrdinal,
    Ordinal,
    ReparamGradientStrategy,
)
from torchrl.modules.distributions._normal_param import NormalParamExtractor, NormalParamWrapper
from torchrl.modules.distributions._tanh_normal import TanhNormal
from torchrl.modules.distributions.truncated_normal import TruncatedNormal
from torchrl.modules.distributions.utils import has_analytic_entropy, has_analytic_kl

__all__ = [
    "Delta",
    "IndependentNormal",
    "MaskedCategorical",
    "MaskedOneHotCategorical",
    "NormalParamExtractor",
    "NormalParamWrapper",
    "OneHotCategorical",
    "OneHotOrdinal",
    "Ordinal",
    "ReparamGradientStrategy",
    "TanhDelta",
    "TanhNormal",
    "TruncatedNormal",
    "distributions_maps",
    "has_analytic_entropy",
    "has_analytic_kl",
]

# TorchRL keys this map by ``str(cls).lower()``.
distributions_maps = {
    str(dist).lower(): dist
    for dist in (
        Delta,
        IndependentNormal,
        TanhDelta,
        TanhNormal,
        TruncatedNormal,
        MaskedCategorical,
        MaskedOneHotCategorical,
        OneHotCategorical,
        OneHotOrdinal,
        Ordinal,
    )
}
