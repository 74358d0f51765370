"""Running-statistics maths shared by the normalizing transforms (pure functions, tested against hand answers).

Two estimators live here:

* an exponential moving average of the first two moments with bias correction (``VecNormV2``):
  ``count <- count + n``, ``w = 1 - decay ** n`` (``w = n / count`` when ``decay == 1``: the plain running
  mean), ``loc <- loc + w * (mean_b(x) - loc)``, ``sq <- sq + w * (mean_b(x^2) - sq)``; then, with the bias
  correction ``c = 1 - decay ** count`` (``c = 1`` when ``decay == 1``), ``mean = loc / c`` and
  ``std = max(sqrt((sq - loc^2) / c), eps)`` (the Adam-style correction of a zero-initialized average).
* Chan et al.'s parallel Welford merge of a batch's mean/variance into running ones (``RunningMeanStd``):
  ``delta = mean_b - mean``, ``n' = n + n_b``, ``mean' = mean + delta * n_b / n'``,
  ``var' = (var * n + var_b * n_b + delta^2 * n * n_b / n') / n'`` (Chan, Golub, LeVeque, 1979).

``VecNorm`` (``vecnorm.py``) keeps decayed *sums* instead (``sum``, ``ssq``, ``count``), as TorchRL's first
version does; its checkpoints keep that layout, so it does not use these functions.
"""
from __future__ import annotations

import torch

__all__ = ["ema_loc_scale", "ema_normalize", "ema_update_", "welford_merge_"]


def ema_update_(
    loc: torch.Tensor, sq: torch.Tensor, count: torch.Tensor, x_mean: torch.Tensor, x_sq_mean: torch.Tensor, n: int, decay: float
) -> None:
    """Folds a batch summary into the decayed first and second moments, in place.

    Args:
        loc: running first moment (updated in place).
        sq: running second moment, ``E[x^2]`` (updated in place).
        count: number of samples seen, an integer tensor (updated in place).
        x_mean: the batch mean, broadcastable to ``loc``.
        x_sq_mean: the batch mean of squares.
        n: number of samples the batch summarizes.
        decay: the decay per sample (``1``: every sample weighs the same).
    """
    count.add_(n)
    if decay == 1.0:
        weight = n / count  # a 0-d tensor: exact running mean
    else:
        weight = 1.0 - decay**n
    loc.lerp_(x_mean, weight)
    sq.lerp_(x_sq_mean, weight)


def ema_loc_scale(
    loc: torch.Tensor, sq: torch.Tensor, count: torch.Tensor, decay: float, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The bias-corrected mean and standard deviation (clamped below at ``eps``) of :func:`ema_update_`'s moments."""
    var = torch.addcmul(sq, loc, loc, value=-1)
    if decay != 1.0:
        # no sample yet: loc and var are 0, the clamp keeps 0 / correction finite
        correction = (1.0 - torch.pow(decay, count.to(loc.dtype))).clamp_min_(torch.finfo(loc.dtype).tiny)
        loc = loc / correction
        var = var / correction
    return loc, var.clamp_min_(eps * eps).sqrt_()


def ema_normalize(
    x: torch.Tensor, loc: torch.Tensor, sq: torch.Tensor, count: torch.Tensor, decay: float, eps: float, seen: bool
) -> torch.Tensor:
    """``(x - mean) / std`` with :func:`ema_loc_scale`'s mean and std, in fewer kernels (the per-step path).

    ``seen`` says that ``count >= 1`` (the moments were just updated), so the bias correction is positive.
    """
    var = torch.addcmul(sq, loc, loc, value=-1)
    if decay == 1.0:
        return (x - loc) / var.clamp_min_(eps * eps).sqrt_()
    correction = torch.pow(decay, count).neg_().add_(1)  # 1 - decay^count (in place: no scalar-tensor wrap)
    if not seen:
        correction.clamp_min_(torch.finfo(correction.dtype).tiny)
    centered = torch.addcdiv(x, loc, correction, value=-1)  # x - loc / c
    return centered / var.div_(correction).clamp_min_(eps * eps).sqrt_()


def welford_merge_(
    mean: torch.Tensor, var: torch.Tensor, count: torch.Tensor, batch_mean: torch.Tensor, batch_var: torch.Tensor, batch_count: int
) -> None:
    """Merges a batch's mean and (population) variance into running ones, in place (Chan et al.)."""
    total = count + batch_count
    delta = batch_mean - mean
    ratio = batch_count / total
    # var' = (var * n + var_b * n_b) / n' + delta^2 * n * n_b / n'^2
    m2 = var * (count / total) + batch_var * ratio + delta * delta * (count * ratio / total)
    mean.add_(delta * ratio)
    var.copy_(m2)
    count.copy_(total)
