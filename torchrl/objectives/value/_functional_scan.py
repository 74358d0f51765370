"""Kernels behind :mod:`torchrl.objectives.value.functional`: reverse-time linear recurrences.

Every return and advantage in ``functional`` reduces to the first-order recurrence

.. math::

    y_t = b_t + c_t \\, y_{t+1}, \\qquad y_T = 0,

solved here four ways, all on tensors whose time dimension has been moved into place by the caller:

* :func:`reverse_scan` (time last, ``[N, T]``): an associative scan by recursive doubling. The pair
  :math:`(b_t, c_t)` is the affine map :math:`y \\mapsto b_t + c_t y`; composing neighbours at distance
  1, 2, 4, ... gives every :math:`y_t` in :math:`\\lceil\\log_2 T\\rceil` vectorised steps. It only ever
  multiplies coefficients (never divides by a cumulative product), so long horizons underflow
  gracefully to 0 instead of exploding, and memory stays :math:`O(NT)`.
* :func:`reverse_loop` (time first, ``[T, N]``): the plain reverse-time loop.
* :func:`fixed_gamma_vec` / :func:`fixed_gamma_loop`: the ``rolling_gamma=False`` case, where the discount
  and the :math:`\\lambda` of the step a return *starts* from are used for its whole future,
  :math:`y_t = \\sum_{k \\ge t} (\\gamma_t\\lambda_t)^{k-t} (\\prod_{j=t}^{k-1} m_j)
  (r_k + \\gamma_t e_k (1 - \\lambda_t m_k))` (:math:`m`: the trajectory goes on). This is not a
  first-order recurrence (each start has its own discount), so it costs :math:`O(NT^2)`; the vectorised
  version builds the discount matrix block of rows by block of rows to bound memory.
"""
from __future__ import annotations

import torch

__all__ = ["reverse_scan", "reverse_loop", "fixed_gamma_vec", "fixed_gamma_loop"]

# Elements of one row-block of the [N, rows, T] discount matrix in ``fixed_gamma_vec`` (16 MiB in float32).
_BLOCK_BUDGET = 1 << 22


def reverse_scan(b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Solves ``y[..., t] = b[..., t] + c[..., t] * y[..., t + 1]`` (``y[..., T] = 0``) along the last dim.

    ``b`` and ``c`` have the same shape; ``c[..., T - 1]`` is never used. Differentiable, out of place.
    """
    T = b.shape[-1]
    d = 1
    while d < T:
        # Element t now stands for the composed maps t .. t+d-1; fold in the block starting at t+d.
        head = torch.addcmul(b[..., : T - d], c[..., : T - d], b[..., d:])
        b = torch.cat([head, b[..., T - d :]], dim=-1)
        if 2 * d < T:
            # Only the first T-2d products are read at the next level.
            c = c[..., : T - 2 * d] * c[..., d : T - d]
        d *= 2
    return b


def reverse_loop(b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """Same recurrence as :func:`reverse_scan`, as a reverse-time loop over dim 0 (``[T, N]`` inputs)."""
    T = b.shape[0]
    if T == 0:
        return b.clone()
    bs, cs = b.unbind(0), c.unbind(0)
    acc = bs[T - 1]
    out = [acc]
    for t in range(T - 2, -1, -1):
        acc = torch.addcmul(bs[t], cs[t], acc)
        out.append(acc)
    out.reverse()
    return torch.stack(out, 0)


def fixed_gamma_loop(
    gamma: torch.Tensor, lmbda: torch.Tensor, mask: torch.Tensor, r: torch.Tensor, e: torch.Tensor
) -> torch.Tensor:
    """``y_t = sum_k prod_{j=t}^{k-1}(gamma_t lmbda_t mask_j) (r_k + gamma_t e_k (1 - lmbda_t mask_k))``, one start
    at a time (``[T, N]`` inputs): the discount and the :math:`\\lambda` of step ``t`` are used for its whole
    future (``mask``: 1 where the trajectory goes on, ``e``: the bootstrap values)."""
    T = r.shape[0]
    out = []
    for t in range(T):
        g, lm = gamma[t], lmbda[t]
        factors = (g * lm) * mask[t : T - 1]
        weights = torch.cat([torch.ones_like(g).unsqueeze(0), torch.cumprod(factors, dim=0)], 0)
        out.append((weights * (r[t:] + g * e[t:] * (1 - lm * mask[t:]))).sum(0))
    if not out:
        return r.clone()
    return torch.stack(out, 0)


def fixed_gamma_vec(
    gamma: torch.Tensor, lmbda: torch.Tensor, mask: torch.Tensor, r: torch.Tensor, e: torch.Tensor
) -> torch.Tensor:
    """Vectorised :func:`fixed_gamma_loop` on ``[N, T]`` inputs, by blocks of start steps.

    For the block of starts ``t0 <= t < t1`` the matrix ``W[n, t, k] = prod_{j=t}^{k-1} a[n, t] mask[n, j]``
    (``a = gamma * lmbda``, ``k >= t``) is an exclusive cumulative product along ``k`` of a masked matrix:
    products only, no division, so it is exact where the loop is. Then
    ``y_t = (W r)_t + gamma_t (W e)_t - a_t (W (mask e))_t``.
    """
    N, T = r.shape
    rows = max(1, min(T, _BLOCK_BUDGET // max(1, N * T)))
    rhs = torch.stack([r, e, mask * e], dim=-1)  # [N, T, 3]
    a = gamma * lmbda
    out = []
    for t0 in range(0, T, rows):
        t1 = min(T, t0 + rows)
        width = T - t0
        g, at = gamma[:, t0:t1], a[:, t0:t1]
        # Column k of row t holds the factor that enters when the horizon grows from k-1 to k.
        shifted = torch.cat([torch.ones_like(mask[:, t0 : t0 + 1]), mask[:, t0 : T - 1]], dim=-1)
        factors = at.unsqueeze(-1) * shifted.unsqueeze(1)  # [N, R, width]
        starts = torch.arange(t1 - t0, device=r.device).unsqueeze(-1)
        cols = torch.arange(width, device=r.device)
        factors = torch.where(cols > starts, factors, torch.ones((), dtype=factors.dtype, device=r.device))
        weights = torch.cumprod(factors, dim=-1) * (cols >= starts)
        both = weights @ rhs[:, t0:]  # [N, R, 3]
        out.append(both[..., 0] + g * both[..., 1] - at * both[..., 2])
    if not out:
        return r.clone()
    return torch.cat(out, dim=-1)
