"""``RunningMeanStd``: running mean and variance of a feature, merged batch by batch (Welford / Chan et al.)."""
from __future__ import annotations

import torch
from torch import nn

from torchrl.envs.transforms._running_stats import welford_merge_

__all__ = ["RunningMeanStd"]

# smallest standard deviation ``normalize`` divides by
_MIN_STD = 1e-4


class RunningMeanStd(nn.Module):
    """Tracks the running mean and variance of a feature with Welford's parallel algorithm.

    The statistics start at ``mean = 0``, ``var = 1`` and a pseudo-count ``epsilon``; each :meth:`update`
    merges a batch's mean and (population) variance into them (Chan et al.). They are buffers, so they
    travel in ``state_dict()`` and move with ``.to(device)``.

    Args:
        shape: feature shape tracked (e.g. ``(obs_dim,)``, or ``()`` for scalars; an int ``d`` means ``(d,)``).
        epsilon: initial count (a small prior that keeps the first merge finite).

    Examples:
        >>> import torch
        >>> from torchrl.envs.transforms import RunningMeanStd
        >>> rms = RunningMeanStd(shape=(2,))
        >>> rms.update(torch.tensor([[1.0, 2.0], [3.0, 6.0]]))
        >>> [round(v, 2) for v in rms.mean.tolist()], [round(v, 2) for v in rms.var.tolist()]
        ([2.0, 4.0], [1.0, 4.0])
        >>> rms.normalize(torch.tensor([3.0, 2.0])).round(decimals=2).tolist()
        [1.0, -1.0]
    """

    def __init__(self, shape: tuple = (), epsilon: float = 1e-4) -> None:
        super().__init__()
        shape = torch.Size((shape,) if isinstance(shape, int) else shape)
        self.register_buffer("mean", torch.zeros(shape))
        self.register_buffer("var", torch.ones(shape))
        self.register_buffer("count", torch.tensor(float(epsilon)))

    def update(self, x: torch.Tensor) -> None:
        """Merges a batch into the running statistics.

        Args:
            x: samples; every leading dimension is a batch dimension, the trailing ones must be
                ``self.mean.shape``. An empty batch leaves the statistics unchanged.

        Raises:
            RuntimeError: the trailing dimensions of ``x`` are not the tracked shape.
        """
        shape = self.mean.shape
        nd = len(shape)
        if x.ndim < nd or x.shape[x.ndim - nd :] != shape:
            raise RuntimeError(
                f"RunningMeanStd.update: samples of shape {tuple(x.shape)} do not end with the tracked feature "
                f"shape {tuple(shape)}."
            )
        x = x.detach().to(self.mean.dtype).reshape(-1, *shape)
        n = x.shape[0]
        if n == 0:
            return
        batch_var, batch_mean = torch.var_mean(x, dim=0, correction=0)
        welford_merge_(self.mean, self.var, self.count, batch_mean, batch_var, n)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / max(std, 1e-4)``: approximately zero mean and unit variance (in the statistics' dtype)."""
        return (x.to(self.mean.dtype) - self.mean) / self.var.sqrt().clamp_min(_MIN_STD)

    def extra_repr(self) -> str:
        return f"shape={tuple(self.mean.shape)}"
