"""Splitting a network output into a normal distribution's location and scale.

``NormalParamExtractor`` is tensordict's (TorchRL re-exports it); ``NormalParamWrapper`` is TorchRL's
deprecated wrapper that applies it after a module.
"""
from __future__ import annotations

from numbers import Number

import torch
from tensordict.nn.distributions import NormalParamExtractor
from torch import nn

from torchrl._utils._deprecation import warn_once

__all__ = ["NormalParamExtractor", "NormalParamWrapper"]


class NormalParamWrapper(nn.Module):
    """Deprecated: runs ``operator`` and splits its (first) output into ``(loc, scale)``.

    Use ``nn.Sequential(operator, NormalParamExtractor(scale_mapping, scale_lb))`` instead. Extra outputs of
    ``operator`` (e.g. an RNN's hidden state) are returned after the scale.

    Args:
        operator (nn.Module): the module whose output is split in two along the last dimension.
        scale_mapping (str, optional): mapping to positive values of the scale (see
            ``tensordict.nn.mappings``). Defaults to ``"biased_softplus_1.0"``.
        scale_lb (Number, optional): lower bound of the scale. Defaults to ``1e-4``.

    Examples:
        >>> import torch
        >>> from torch import nn
        >>> from torchrl.modules.distributions import NormalParamWrapper
        >>> module = NormalParamWrapper(nn.Linear(3, 4))
        >>> loc, scale = module(torch.randn(2, 3))
        >>> loc.shape, bool((scale > 0).all())
        (torch.Size([2, 2]), True)
    """

    def __init__(
        self, operator: nn.Module, scale_mapping: str = "biased_softplus_1.0", scale_lb: Number = 1e-4
    ) -> None:
        warn_once(
            "NormalParamWrapper is deprecated; use nn.Sequential(module, NormalParamExtractor()) instead.",
            stacklevel=3,
        )
        super().__init__()
        self.operator = operator
        self.extractor = NormalParamExtractor(scale_mapping=scale_mapping, scale_lb=scale_lb)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.operator(*inputs)
        if isinstance(out, torch.Tensor):
            out = (out,)
        return self.extractor(*out)
