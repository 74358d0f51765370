"""``BatchRenorm1d``: batch renormalisation (Ioffe, 2017, https://arxiv.org/abs/1702.03275)."""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["BatchRenorm1d"]


class BatchRenorm1d(nn.Module):
    r"""Batch renormalisation over the last (feature) dimension.

    During the first ``warmup_steps`` training calls it is a batch norm (batch statistics). After that,
    training calls normalise with the batch statistics corrected towards the running ones,

    .. math:: \hat x = \frac{x - \mu_B}{\sigma_B}\, r + d,\quad
              r = \mathrm{clip}_{[1/r_{max}, r_{max}]}\!\left(\frac{\sigma_B}{\sigma}\right),\quad
              d = \mathrm{clip}_{[-d_{max}, d_{max}]}\!\left(\frac{\mu_B - \mu}{\sigma}\right),

    with ``r`` and ``d`` treated as constants. With ``smooth=True``, ``r`` and ``d`` move linearly from
    ``1`` and ``0`` (batch norm) at step 0 to their renormalisation values at ``warmup_steps``. Evaluation
    uses the running statistics. The output is ``weight * x_hat + bias``.

    Args:
        num_features (int): size of the last dimension.

    Keyword Args:
        momentum (float, optional): update rate of the running statistics. Defaults to ``0.01``.
        eps (float, optional): added to the variances. Defaults to ``1e-5``.
        max_r (float, optional): bound of ``r``. Defaults to ``3.0``.
        max_d (float, optional): bound of ``d``. Defaults to ``5.0``.
        warmup_steps (int, optional): number of batch-norm training steps. Defaults to ``10000``.
        smooth (bool, optional): interpolate between batch norm and renorm during warm-up.
            Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from torchrl.modules.models import BatchRenorm1d
        >>> norm = BatchRenorm1d(3, warmup_steps=0)
        >>> norm(torch.randn(16, 3) * 5 + 2).shape
        torch.Size([16, 3])
    """

    def __init__(
        self,
        num_features: int,
        *,
        momentum: float = 0.01,
        eps: float = 1e-5,
        max_r: float = 3.0,
        max_d: float = 5.0,
        warmup_steps: int = 10000,
        smooth: bool = False,
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.momentum = momentum
        self.eps = eps
        self.max_r = max_r
        self.max_d = max_d
        self.warmup_steps = warmup_steps
        self.smooth = smooth
        self.weight = nn.Parameter(torch.ones(num_features))
        self.bias = nn.Parameter(torch.zeros(num_features))
        self.register_buffer("running_mean", torch.zeros(num_features))
        self.register_buffer("running_var", torch.ones(num_features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def reset_parameters(self) -> None:
        """Resets the affine parameters and the running statistics."""
        with torch.no_grad():
            self.weight.fill_(1.0)
            self.bias.zero_()
            self.running_mean.zero_()
            self.running_var.fill_(1.0)
            self.steps.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.num_features:
            raise ValueError(
                f"BatchRenorm1d: expected {self.num_features} features in the last dimension, got input of shape "
                f"{tuple(x.shape)}."
            )
        if not self.training:
            x_hat = (x - self.running_mean) / (self.running_var + self.eps).sqrt()
            return x_hat * self.weight + self.bias
        dims = tuple(range(x.ndim - 1))
        mean = x.mean(dims)
        var = x.var(dims, unbiased=False)
        std = (var + self.eps).sqrt()
        x_hat = (x - mean) / std
        step = int(self.steps)
        if self.smooth or step >= self.warmup_steps:
            with torch.no_grad():
                running_std = (self.running_var + self.eps).sqrt()
                r = (std / running_std).clamp(1.0 / self.max_r, self.max_r)
                d = ((mean - self.running_mean) / running_std).clamp(-self.max_d, self.max_d)
                if self.smooth and step < self.warmup_steps:
                    frac = step / max(self.warmup_steps, 1)
                    r = 1.0 + (r - 1.0) * frac
                    d = d * frac
            x_hat = x_hat * r + d
        with torch.no_grad():
            n = x.numel() // self.num_features
            unbiased = var * (n / max(n - 1, 1))
            self.running_mean.lerp_(mean.detach(), self.momentum)
            self.running_var.lerp_(unbiased.detach(), self.momentum)
            self.steps += 1
        return x_hat * self.weight + self.bias
