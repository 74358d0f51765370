"""Noisy linear layers (Fortunato et al., 2017, "Noisy Networks for Exploration").

``weight = weight_mu + weight_sigma * weight_epsilon`` and likewise for the bias, with factorised Gaussian
noise: ``weight_epsilon = f(eps_out) f(eps_in)^T``, ``f(x) = sign(x) sqrt(|x|)``. The noise is redrawn by
``reset_noise``; ``net.apply(reset_noise)`` redraws it in every noisy layer of a network.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

from torchrl._utils._exploration import ExplorationType, exploration_type

__all__ = ["NoisyLinear", "NoisyLazyLinear", "reset_noise"]


def _scaled_noise(size: int, like: torch.Tensor) -> torch.Tensor:
    x = torch.randn(size, device=like.device, dtype=like.dtype)
    return x.sign() * x.abs().sqrt()


class NoisyLinear(nn.Linear):
    """A linear layer with learned, factorised Gaussian noise on its weights and bias.

    Noise is applied when the module is in training mode. With ``use_exploration_type=True`` the
    exploration type decides when one is set: noise under ``ExplorationType.RANDOM``, none under
    ``DETERMINISTIC``/``MODE``/``MEAN``; outside any exploration context the training flag decides.

    Args:
        in_features (int): input size.
        out_features (int): output size.
        bias (bool, optional): learn a (noisy) bias. Defaults to ``True``.
        device (torch.device, optional): device of the parameters.
        dtype (torch.dtype, optional): dtype of the parameters.
        std_init (float, optional): initial noise scale; ``weight_sigma`` starts at
            ``std_init / sqrt(in_features)`` and ``bias_sigma`` at ``std_init / sqrt(out_features)``.
            Defaults to ``0.5``.
        use_exploration_type (bool, optional): let the exploration type switch the noise (see above).
            Defaults to ``True``.

    Examples:
        >>> import torch
        >>> layer = NoisyLinear(3, 2)
        >>> x = torch.randn(5, 3)
        >>> y0 = layer(x)
        >>> layer.reset_noise()
        >>> bool((layer(x) != y0).any())
        True
        >>> _ = layer.eval()
        >>> torch.allclose(layer(x), x @ layer.weight_mu.T + layer.bias_mu)
        True
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype: torch.dtype | None = None,
        std_init: float = 0.5,
        use_exploration_type: bool | None = True,
    ) -> None:
        nn.Module.__init__(self)
        factory = {"device": device, "dtype": dtype}
        self.in_features = in_features
        self.out_features = out_features
        self.std_init = std_init
        self.use_exploration_type = bool(use_exploration_type)
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features, **factory))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features, **factory))
        self.register_buffer("weight_epsilon", torch.empty(out_features, in_features, **factory))
        if bias:
            self.bias_mu = nn.Parameter(torch.empty(out_features, **factory))
            self.bias_sigma = nn.Parameter(torch.empty(out_features, **factory))
            self.register_buffer("bias_epsilon", torch.empty(out_features, **factory))
        else:
            self.register_parameter("bias_mu", None)
            self.register_parameter("bias_sigma", None)
            self.register_buffer("bias_epsilon", None)
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self) -> None:
        """Initialises ``*_mu`` uniformly in ``±1/sqrt(in_features)`` and ``*_sigma`` from ``std_init``."""
        bound = 1.0 / math.sqrt(self.in_features)
        with torch.no_grad():
            self.weight_mu.uniform_(-bound, bound)
            self.weight_sigma.fill_(self.std_init / math.sqrt(self.in_features))
            if self.bias_mu is not None:
                self.bias_mu.uniform_(-bound, bound)
                self.bias_sigma.fill_(self.std_init / math.sqrt(self.out_features))

    def reset_noise(self) -> None:
        """Draws new factorised noise for the weights and the bias."""
        eps_in = _scaled_noise(self.in_features, self.weight_epsilon)
        eps_out = _scaled_noise(self.out_features, self.weight_epsilon)
        self.weight_epsilon.copy_(torch.outer(eps_out, eps_in))
        if self.bias_epsilon is not None:
            self.bias_epsilon.copy_(eps_out)

    def _noisy(self) -> bool:
        if self.use_exploration_type:
            kind = exploration_type()
            if kind is not None:
                return kind is ExplorationType.RANDOM
        return self.training

    @property
    def weight(self) -> torch.Tensor:
        if self._noisy():
            return self.weight_mu + self.weight_sigma * self.weight_epsilon
        return self.weight_mu

    @property
    def bias(self) -> torch.Tensor | None:
        if self.bias_mu is None:
            return None
        if self._noisy():
            return self.bias_mu + self.bias_sigma * self.bias_epsilon
        return self.bias_mu

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias_mu is not None}, std_init={self.std_init}"
        )


class NoisyLazyLinear(LazyModuleMixin, NoisyLinear):
    """A :class:`NoisyLinear` whose ``in_features`` is read from the first input.

    Args:
        out_features (int): output size.
        bias (bool, optional): learn a (noisy) bias. Defaults to ``True``.
        device (torch.device, optional): device of the parameters.
        dtype (torch.dtype, optional): dtype of the parameters.
        std_init (float, optional): initial noise scale (see :class:`NoisyLinear`). Defaults to ``0.5``.
        use_exploration_type (bool, optional): see :class:`NoisyLinear`. Defaults to ``True``.

    Examples:
        >>> import torch
        >>> layer = NoisyLazyLinear(2)
        >>> layer(torch.randn(5, 7)).shape, layer.in_features
        (torch.Size([5, 2]), 7)
    """

    cls_to_become = NoisyLinear

    def __init__(
        self,
        out_features: int,
        bias: bool = True,
        device=None,
        dtype: torch.dtype | None = None,
        std_init: float = 0.5,
        use_exploration_type: bool | None = True,
    ) -> None:
        super().__init__(0, 0, False, device=device, dtype=dtype, std_init=std_init,
                         use_exploration_type=use_exploration_type)
        factory = {"device": device, "dtype": dtype}
        self.out_features = out_features
        self.weight_mu = UninitializedParameter(**factory)
        self.weight_sigma = UninitializedParameter(**factory)
        self.weight_epsilon = UninitializedBuffer(**factory)
        if bias:
            self.bias_mu = UninitializedParameter(**factory)
            self.bias_sigma = UninitializedParameter(**factory)
            self.bias_epsilon = UninitializedBuffer(**factory)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def reset_noise(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_noise()

    def initialize_parameters(self, input: torch.Tensor) -> None:  # noqa: A002 - torch's argument name
        """Materialises the parameters from the last dimension of ``input``, then initialises them."""
        if not self.has_uninitialized_params():
            return
        with torch.no_grad():
            self.in_features = input.shape[-1]
            shape = (self.out_features, self.in_features)
            self.weight_mu.materialize(shape)
            self.weight_sigma.materialize(shape)
            self.weight_epsilon.materialize(shape)
            if self.bias_mu is not None:
                self.bias_mu.materialize((self.out_features,))
                self.bias_sigma.materialize((self.out_features,))
                self.bias_epsilon.materialize((self.out_features,))
            self.reset_parameters()
            self.reset_noise()

    @property
    def weight(self) -> torch.Tensor:
        return NoisyLinear.weight.fget(self)

    @property
    def bias(self) -> torch.Tensor | None:
        return NoisyLinear.bias.fget(self)


def reset_noise(layer: nn.Module) -> None:
    """Redraws the noise of ``layer`` if it has any; use as ``net.apply(reset_noise)``.

    Examples:
        >>> import torch
        >>> net = torch.nn.Sequential(NoisyLinear(3, 4), torch.nn.Tanh(), NoisyLinear(4, 1))
        >>> _ = net.apply(reset_noise)
    """
    if hasattr(layer, "reset_noise"):
        layer.reset_noise()
