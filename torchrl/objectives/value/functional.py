"""Value and advantage estimators as pure functions of tensors (rlax-style).

Conventions shared by every function here:

* Tensors have shape ``[*batch, T, *F]``: ``time_dim`` (default ``-2``) is the time dimension, the others
  are independent batch or feature dimensions (usually one trailing feature dimension of size 1). All the
  value, reward, done and terminated tensors of one call must have the same shape.
* ``gamma`` and ``lmbda`` are Python scalars or tensors broadcastable to that shape (e.g. one discount per
  step or per environment).
* ``terminated`` marks the end of an episode: the next state has no value and is never bootstrapped from.
  ``done`` marks the end of a trajectory, terminated *or truncated*: the recursion over the future (the
  :math:`\\lambda`-return, GAE's sum of TD errors, V-trace's trace) restarts there and nothing leaks across
  it, but a truncated step (done, not terminated) still bootstraps from its own ``next_state_value``.
  ``terminated`` defaults to ``done``; a terminated step is always treated as done. The last step of the
  batch is treated as a truncation (it bootstraps from its ``next_state_value``).
* The ``vec_*`` functions solve the reverse-time recurrence with an associative scan (no loop over time,
  no division by cumulative products, stable for horizons of many thousands of steps); the others are the
  plain reverse-time loops. Both agree to float tolerance and are differentiable.

References: Sutton & Barto, *Reinforcement Learning: An Introduction* (2nd ed., 2018), ch. 6, 7 and 12;
Schulman et al., *High-Dimensional Continuous Control Using Generalized Advantage Estimation*, ICLR 2016;
Espeholt et al., *IMPALA: Scalable Distributed Deep-RL with Importance Weighted Actor-Learner
Architectures*, ICML 2018.
"""
from __future__ import annotations

import torch

from torchrl._utils._deprecation import warn_once
from torchrl.objectives.value._functional_scan import fixed_gamma_loop, fixed_gamma_vec, reverse_loop, reverse_scan

__all__ = [
    "generalized_advantage_estimate",
    "vec_generalized_advantage_estimate",
    "td0_advantage_estimate",
    "td0_return_estimate",
    "td1_return_estimate",
    "vec_td1_return_estimate",
    "td1_advantage_estimate",
    "vec_td1_advantage_estimate",
    "td_lambda_return_estimate",
    "vec_td_lambda_return_estimate",
    "td_lambda_advantage_estimate",
    "vec_td_lambda_advantage_estimate",
    "vtrace_advantage_estimate",
    "reward2go",
]

# ---------------------------------------------------------------------------------------------- checks
def _check_tensors(fname: str, **tensors: torch.Tensor | None) -> torch.Size:
    """Returns the common shape of the given tensors (``None`` entries skipped), else raises."""
    given = {name: t for name, t in tensors.items() if t is not None}
    for name, t in given.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{fname}: {name} must be a torch.Tensor, got {type(t).__name__}.")
    shapes = [t.shape for t in given.values()]
    if any(s != shapes[0] for s in shapes[1:]):
        listing = ", ".join(f"{name} {tuple(t.shape)}" for name, t in given.items())
        raise RuntimeError(f"{fname}: shapes differ: {listing}.")
    return shapes[0]


def _time_dim(fname: str, time_dim: int, shape: torch.Size) -> int:
    ndim = len(shape)
    if not isinstance(time_dim, int) or not -ndim <= time_dim < ndim:
        raise IndexError(
            f"{fname}: time_dim={time_dim!r} is out of range for tensors of shape {tuple(shape)} "
            f"(expected an int in [{-ndim}, {ndim - 1}])."
        )
    return time_dim % ndim


def _coef(fname: str, name: str, value, shape: torch.Size, dtype: torch.dtype):
    """A Python float, a 0-dim tensor, or a tensor expanded to ``shape`` (after a broadcast check)."""
    if not isinstance(value, torch.Tensor):
        return float(value)
    if value.dtype != dtype:
        value = value.to(dtype)
    if value.numel() == 1 and value.dim() <= len(shape):
        return value.reshape(())
    try:
        ok = torch.broadcast_shapes(value.shape, shape) == shape
    except RuntimeError:
        ok = False
    if not ok:
        raise RuntimeError(
            f"{fname}: {name} of shape {tuple(value.shape)} cannot be broadcast to the data shape "
            f"{tuple(shape)}; pass a scalar or a tensor broadcastable to it (e.g. one value per step)."
        )
    return value.expand(shape)


def _dtype(t: torch.Tensor) -> torch.dtype:
    """The float dtype coefficients are cast to (the reward's, or the default one for integer rewards)."""
    return t.dtype if t.is_floating_point() else torch.get_default_dtype()


def _flag(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype == torch.bool else t.bool()


class _Layout:
    """Moves the time dim last (``[N, T]``, for scans) or first (``[T, N]``, for loops) and back."""

    __slots__ = ("dim", "first", "moved")

    def __init__(self, shape: torch.Size, dim: int, *, first: bool):
        self.dim, self.first = dim, first
        rest = shape[:dim] + shape[dim + 1 :]
        self.moved = (shape[dim],) + rest if first else rest + (shape[dim],)

    def rows(self, x):
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            return x
        T = x.shape[self.dim]
        if self.first:
            return x.movedim(self.dim, 0).reshape(T, -1)
        return x.movedim(self.dim, -1).reshape(-1, T)

    def back(self, y: torch.Tensor) -> torch.Tensor:
        return y.reshape(self.moved).movedim(0 if self.first else -1, self.dim)

    def last_step(self, x: torch.Tensor) -> torch.Tensor:
        return x[-1] if self.first else x[:, -1]


def _not_done(lay: _Layout, done: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
    """``~(done | terminated)`` in the layout, with the last step of the batch forced to "done"."""
    nd = ~(lay.rows(done) | lay.rows(terminated))
    if nd.numel():
        lay.last_step(nd).fill_(False)
    return nd


def _default_terminated(done: torch.Tensor, terminated: torch.Tensor | None) -> torch.Tensor:
    return _flag(done) if terminated is None else _flag(terminated)


# ------------------------------------------------------------------------------------------------ TD(0)
def td0_return_estimate(
    gamma: float,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    done: torch.Tensor | None = None,
) -> torch.Tensor:
    """TD(0) (one-step, bootstrapped) return.

    .. math::

        G_t = r_t + \\gamma_t (1 - \\text{terminated}_t) V(s_{t+1})

    Sutton & Barto (2018), eq. 6.2. Only termination matters for a one-step target: a truncated step
    bootstraps from its next-state value like any other.

    Args:
        gamma: discount, a scalar or a tensor broadcastable to ``reward``.
        next_state_value: :math:`V(s_{t+1})`, same shape as ``reward``.
        reward: :math:`r_t`.
        terminated: boolean end-of-episode flags. Required (or the deprecated ``done``).

    Keyword Args:
        done: deprecated alias of ``terminated``.

    Returns:
        The return, same shape as ``reward``.

    Raises:
        TypeError: if neither ``terminated`` nor ``done`` is given.
        RuntimeError: if the tensor shapes differ or ``gamma`` does not broadcast to them.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import td0_return_estimate
        >>> td0_return_estimate(0.5, torch.tensor([[2.0], [4.0]]), torch.ones(2, 1), torch.tensor([[False], [True]]))
        tensor([[2.],
                [1.]])
    """
    fname = "td0_return_estimate"
    if terminated is None:
        if done is None:
            raise TypeError(f"{fname}: pass the boolean `terminated` tensor (end-of-episode flags).")
        warn_once(f"{fname}: the keyword 'done' is deprecated; pass 'terminated' instead.")
        terminated = done
    shape = _check_tensors(fname, next_state_value=next_state_value, reward=reward, terminated=terminated)
    return _td0(_coef(fname, "gamma", gamma, shape, _dtype(reward)), next_state_value, reward, terminated)


def _td0(gamma, next_state_value: torch.Tensor, reward: torch.Tensor, terminated: torch.Tensor) -> torch.Tensor:
    """The TD(0) formula on checked arguments (same shapes; ``gamma`` a float or a broadcastable tensor)."""
    bootstrap = next_state_value.masked_fill(_flag(terminated), 0.0)
    if type(gamma) is float:
        return reward.add(bootstrap, alpha=gamma)  # one fused multiply-add
    return reward + gamma * bootstrap


def td0_advantage_estimate(
    gamma: float,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
) -> torch.Tensor:
    """TD(0) advantage, the one-step TD error.

    .. math::

        \\delta_t = r_t + \\gamma_t (1 - \\text{terminated}_t) V(s_{t+1}) - V(s_t)

    Sutton & Barto (2018), eq. 6.5.

    Args:
        gamma: discount, a scalar or a tensor broadcastable to ``reward``.
        state_value: :math:`V(s_t)`.
        next_state_value: :math:`V(s_{t+1})`.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (only used as the default of ``terminated``).
        terminated: boolean end-of-episode flags. Defaults to ``done``.

    Returns:
        The advantage, same shape as ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or ``gamma`` does not broadcast to them.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import td0_advantage_estimate
        >>> v, nv, r = torch.tensor([[1.0]]), torch.tensor([[2.0]]), torch.tensor([[1.0]])
        >>> td0_advantage_estimate(0.5, v, nv, r, torch.tensor([[False]]))
        tensor([[1.]])
    """
    fname = "td0_advantage_estimate"
    shape = _check_tensors(
        fname, state_value=state_value, next_state_value=next_state_value, reward=reward, done=done,
        terminated=terminated,
    )
    gamma = _coef(fname, "gamma", gamma, shape, _dtype(reward))
    term = _default_terminated(done, terminated)
    return reward + gamma * torch.where(term, 0.0, next_state_value) - state_value


# ------------------------------------------------------------------------------------------------- GAE
def _gae(fname, vectorized, gamma, lmbda, state_value, next_state_value, reward, done, terminated, time_dim):
    shape = _check_tensors(
        fname, state_value=state_value, next_state_value=next_state_value, reward=reward, done=done,
        terminated=terminated,
    )
    lay = _Layout(shape, _time_dim(fname, time_dim, shape), first=not vectorized)
    dtype = _dtype(reward)
    gamma = lay.rows(_coef(fname, "gamma", gamma, shape, dtype))
    lmbda = lay.rows(_coef(fname, "lmbda", lmbda, shape, dtype))
    done, term = _flag(done), _default_terminated(done, terminated)
    value = lay.rows(state_value)
    delta = lay.rows(reward) + gamma * torch.where(lay.rows(term), 0.0, lay.rows(next_state_value)) - value
    carry = (gamma * lmbda) * _not_done(lay, done, term).to(dtype)
    advantage = (reverse_scan if vectorized else reverse_loop)(delta, carry)
    return lay.back(advantage), lay.back(advantage + value)


def generalized_advantage_estimate(
    gamma: float,
    lmbda: float,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimate (GAE), reverse-time loop.

    .. math::

        \\delta_t &= r_t + \\gamma_t (1 - \\text{terminated}_t) V(s_{t+1}) - V(s_t) \\\\
        \\hat A_t &= \\delta_t + \\gamma_t \\lambda_t (1 - \\text{done}_t) \\hat A_{t+1},
        \\qquad \\hat A_T = 0

    i.e. :math:`\\hat A_t = \\sum_{l \\ge 0} (\\gamma\\lambda)^l \\delta_{t+l}` within the trajectory. The value
    target is :math:`\\hat A_t + V(s_t)`. Schulman et al. (2016), eq. 16.

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        lmbda: GAE :math:`\\lambda`, a scalar or a tensor broadcastable to the data.
        state_value: :math:`V(s_t)`, shape ``[*batch, T, *F]``.
        next_state_value: :math:`V(s_{t+1})`.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.

    Keyword Args:
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        ``(advantage, value_target)``, both shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or a coefficient does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import generalized_advantage_estimate
        >>> v, nv, r = torch.tensor([[1.0], [2.0]]), torch.tensor([[2.0], [4.0]]), torch.ones(2, 1)
        >>> done = torch.tensor([[False], [True]])
        >>> adv, target = generalized_advantage_estimate(0.5, 0.5, v, nv, r, done, torch.zeros_like(done))
        >>> adv.squeeze(-1), target.squeeze(-1)
        (tensor([1.2500, 1.0000]), tensor([2.2500, 3.0000]))
    """
    return _gae(
        "generalized_advantage_estimate", False, gamma, lmbda, state_value, next_state_value, reward, done,
        terminated, time_dim,
    )


def vec_generalized_advantage_estimate(
    gamma: float | torch.Tensor,
    lmbda: float | torch.Tensor,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    *,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimate (GAE), vectorised over time.

    Same result as :func:`generalized_advantage_estimate` (Schulman et al., 2016, eq. 16):

    .. math::

        \\hat A_t = \\delta_t + \\gamma_t \\lambda_t (1 - \\text{done}_t) \\hat A_{t+1}, \\qquad
        \\delta_t = r_t + \\gamma_t (1 - \\text{terminated}_t) V(s_{t+1}) - V(s_t),

    computed as an associative scan over the affine maps :math:`A \\mapsto \\delta_t + c_t A` in
    :math:`\\lceil\\log_2 T\\rceil` vectorised steps (products of coefficients only, so no underflow-then-divide
    blow-up for long horizons).

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data (e.g. one per step).
        lmbda: GAE :math:`\\lambda`, a scalar or a tensor broadcastable to the data.
        state_value: :math:`V(s_t)`, shape ``[*batch, T, *F]``.
        next_state_value: :math:`V(s_{t+1})`.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.

    Keyword Args:
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        ``(advantage, value_target)``, both shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or a coefficient does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import vec_generalized_advantage_estimate
        >>> v, nv, r = torch.zeros(4, 100, 1), torch.zeros(4, 100, 1), torch.ones(4, 100, 1)
        >>> done = torch.zeros(4, 100, 1, dtype=torch.bool)
        >>> adv, target = vec_generalized_advantage_estimate(0.9, 1.0, v, nv, r, done)
        >>> adv.shape, round(adv[0, -1].item(), 4), round(adv[0, -2].item(), 4)
        (torch.Size([4, 100, 1]), 1.0, 1.9)
    """
    return _gae(
        "vec_generalized_advantage_estimate", True, gamma, lmbda, state_value, next_state_value, reward, done,
        terminated, time_dim,
    )


# ---------------------------------------------------------------------------------------- TD(1), TD(λ)
def _td_lambda(
    fname, vectorized, gamma, lmbda, next_state_value, reward, done, terminated, rolling_gamma, time_dim,
    state_value=None,
):
    shape = _check_tensors(
        fname, state_value=state_value, next_state_value=next_state_value, reward=reward, done=done,
        terminated=terminated,
    )
    if rolling_gamma is False and not vectorized and not (_per_step(gamma) or _per_step(lmbda)):
        raise RuntimeError(
            f"{fname}: rolling_gamma=False is expected only with time-sensitive gamma values (a gamma or "
            f"lmbda tensor with one value per step), got gamma={_describe(gamma)} and lmbda={_describe(lmbda)}; "
            f"leave rolling_gamma to None (or True) for a constant discount."
        )
    lay = _Layout(shape, _time_dim(fname, time_dim, shape), first=not vectorized)
    dtype = _dtype(reward)
    gamma = lay.rows(_coef(fname, "gamma", gamma, shape, dtype))
    lmbda = lay.rows(_coef(fname, "lmbda", lmbda, shape, dtype))
    done, term = _flag(done), _default_terminated(done, terminated)
    reward = lay.rows(reward)
    next_value = torch.where(lay.rows(term), 0.0, lay.rows(next_state_value))
    going_on = _not_done(lay, done, term).to(dtype)
    time_axis = 0 if lay.first else -1
    if rolling_gamma is False and (_varies(gamma, time_axis) or _varies(lmbda, time_axis)):
        # the gamma and lambda of the step a return starts from are used for its whole future
        full = lambda c: c.expand_as(reward) if isinstance(c, torch.Tensor) else torch.full_like(reward, c)  # noqa: E731
        kernel = fixed_gamma_vec if vectorized else fixed_gamma_loop
        ret = kernel(full(gamma), full(lmbda), going_on, reward, next_value)
    else:
        # ell_t: weight of G_{t+1} inside the bracket; (1 - ell_t) that of V(s_{t+1}).
        ell = lmbda * going_on
        ret = (reverse_scan if vectorized else reverse_loop)(reward + gamma * next_value * (1 - ell), gamma * ell)
    ret = lay.back(ret)
    return ret if state_value is None else ret - state_value


def _per_step(coef) -> bool:
    """Whether a gamma/lambda argument is a tensor with dimensions (time-sensitive), not a scalar."""
    return isinstance(coef, torch.Tensor) and coef.dim() > 0 and coef.numel() > 1


def _describe(coef) -> str:
    return f"tensor of shape {tuple(coef.shape)}" if isinstance(coef, torch.Tensor) else repr(coef)


def _varies(coef, time_axis: int) -> bool:
    """Whether a laid-out coefficient takes more than one value along time."""
    return (
        isinstance(coef, torch.Tensor)
        and coef.dim() > 0
        and not bool((coef == coef.narrow(time_axis, 0, 1)).all())
    )


_ROLLING_DOC = """rolling_gamma: how a per-step ``gamma`` tensor discounts the future. ``True`` (the default):
            each gamma discounts one transition, :math:`G_1 = v_1 + g_1 v_2 + g_1 g_2 v_3 + \\dots`.
            ``False``: the gamma (and the :math:`\\lambda`) of the step a return starts from is used for its
            whole future, :math:`G_1 = v_1 + g_1 v_2 + g_1^2 v_3 + \\dots` (costs :math:`O(T^2)`). The
            loop versions refuse ``False`` without a per-step gamma or lambda tensor (``RuntimeError``), as
            TorchRL does; the vectorised ones accept scalars too (then it changes nothing)."""


def td_lambda_return_estimate(
    gamma: float,
    lmbda: float,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(:math:`\\lambda`) return, reverse-time loop.

    .. math::

        G^\\lambda_t = r_t + \\gamma_t (1 - \\text{terminated}_t)
        \\big[(1 - \\lambda_t) V(s_{t+1}) + \\lambda_t G^\\lambda_{t+1}\\big]

    within a trajectory; at a ``done`` step (and at the last step of the batch) the bracket is
    :math:`V(s_{t+1})` alone, so truncated trajectories bootstrap and nothing leaks into the next one.
    Sutton & Barto (2018), eq. 12.18 (recursive form of the :math:`\\lambda`-return, eq. 12.2).

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        lmbda: :math:`\\lambda`, a scalar or a tensor broadcastable to the data.
        next_state_value: :math:`V(s_{t+1})`, shape ``[*batch, T, *F]``.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        {rolling}

    Keyword Args:
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The :math:`\\lambda`-return, shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or a coefficient does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import td_lambda_return_estimate
        >>> nv, r = torch.tensor([[2.0], [4.0]]), torch.zeros(2, 1)
        >>> td_lambda_return_estimate(0.5, 0.5, nv, r, torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([1., 2.])
    """
    return _td_lambda(
        "td_lambda_return_estimate", False, gamma, lmbda, next_state_value, reward, done, terminated,
        rolling_gamma, time_dim,
    )


def vec_td_lambda_return_estimate(
    gamma,
    lmbda,
    next_state_value,
    reward,
    done,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(:math:`\\lambda`) return, vectorised over time.

    Same result as :func:`td_lambda_return_estimate` (Sutton & Barto, 2018, eq. 12.18):
    :math:`G^\\lambda_t = r_t + \\gamma_t (1 - \\text{terminated}_t)[(1 - \\lambda_t) V(s_{t+1}) +
    \\lambda_t G^\\lambda_{t+1}]`, restarted at every ``done``, computed as an associative scan.

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        lmbda: :math:`\\lambda`, a scalar or a tensor broadcastable to the data.
        next_state_value: :math:`V(s_{t+1})`, shape ``[*batch, T, *F]``.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        {rolling}

    Keyword Args:
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The :math:`\\lambda`-return, shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or a coefficient does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import vec_td_lambda_return_estimate
        >>> nv, r = torch.tensor([[2.0], [4.0]]), torch.zeros(2, 1)
        >>> vec_td_lambda_return_estimate(0.5, 0.5, nv, r, torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([1., 2.])
    """
    return _td_lambda(
        "vec_td_lambda_return_estimate", True, gamma, lmbda, next_state_value, reward, done, terminated,
        rolling_gamma, time_dim,
    )


def td_lambda_advantage_estimate(
    gamma: float,
    lmbda: float,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(:math:`\\lambda`) advantage, :math:`G^\\lambda_t - V(s_t)`, reverse-time loop.

    See :func:`td_lambda_return_estimate` for :math:`G^\\lambda_t` (Sutton & Barto, 2018, eq. 12.18).

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        lmbda: :math:`\\lambda`, a scalar or a tensor broadcastable to the data.
        state_value: :math:`V(s_t)`, shape ``[*batch, T, *F]``.
        next_state_value: :math:`V(s_{t+1})`.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        {rolling}
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The advantage, shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or a coefficient does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import td_lambda_advantage_estimate
        >>> v, nv, r = torch.ones(2, 1), torch.tensor([[2.0], [4.0]]), torch.zeros(2, 1)
        >>> td_lambda_advantage_estimate(0.5, 0.5, v, nv, r, torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([0., 1.])
    """
    return _td_lambda(
        "td_lambda_advantage_estimate", False, gamma, lmbda, next_state_value, reward, done, terminated,
        rolling_gamma, time_dim, state_value,
    )


def vec_td_lambda_advantage_estimate(
    gamma,
    lmbda,
    state_value,
    next_state_value,
    reward,
    done,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(:math:`\\lambda`) advantage, :math:`G^\\lambda_t - V(s_t)`, vectorised over time.

    See :func:`vec_td_lambda_return_estimate` (Sutton & Barto, 2018, eq. 12.18).

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        lmbda: :math:`\\lambda`, a scalar or a tensor broadcastable to the data.
        state_value: :math:`V(s_t)`, shape ``[*batch, T, *F]``.
        next_state_value: :math:`V(s_{t+1})`.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        {rolling}
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The advantage, shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or a coefficient does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import vec_td_lambda_advantage_estimate
        >>> v, nv, r = torch.ones(2, 1), torch.tensor([[2.0], [4.0]]), torch.zeros(2, 1)
        >>> vec_td_lambda_advantage_estimate(0.5, 0.5, v, nv, r, torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([0., 1.])
    """
    return _td_lambda(
        "vec_td_lambda_advantage_estimate", True, gamma, lmbda, next_state_value, reward, done, terminated,
        rolling_gamma, time_dim, state_value,
    )


def td1_return_estimate(
    gamma: float,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    *,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) (Monte-Carlo, bootstrapped at truncation) return, reverse-time loop.

    .. math::

        G_t = r_t + \\gamma_t (1 - \\text{terminated}_t)
        \\begin{cases} V(s_{t+1}) & \\text{done}_t \\text{ or } t = T-1 \\\\ G_{t+1} & \\text{otherwise}\\end{cases}

    The :math:`\\lambda = 1` case of :func:`td_lambda_return_estimate` (Sutton & Barto, 2018, ch. 5 and 12).

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        next_state_value: :math:`V(s_{t+1})`, shape ``[*batch, T, *F]``.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        {rolling}

    Keyword Args:
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The return, shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or ``gamma`` does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import td1_return_estimate
        >>> nv, r = torch.tensor([[2.0], [4.0]]), torch.ones(2, 1)
        >>> td1_return_estimate(0.5, nv, r, torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([2.5000, 3.0000])
    """
    return _td_lambda(
        "td1_return_estimate", False, gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma,
        time_dim,
    )


def vec_td1_return_estimate(
    gamma,
    next_state_value,
    reward,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) return, vectorised over time; same result as :func:`td1_return_estimate`.

    :math:`G_t = r_t + \\gamma_t (1 - \\text{terminated}_t) G_{t+1}` within a trajectory, bootstrapping
    from :math:`V(s_{t+1})` at truncations and at the last step (Sutton & Barto, 2018, ch. 5 and 12).

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        next_state_value: :math:`V(s_{t+1})`, shape ``[*batch, T, *F]``.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        {rolling}
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The return, shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or ``gamma`` does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import vec_td1_return_estimate
        >>> nv, r = torch.tensor([[2.0], [4.0]]), torch.ones(2, 1)
        >>> vec_td1_return_estimate(0.5, nv, r, torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([2.5000, 3.0000])
    """
    return _td_lambda(
        "vec_td1_return_estimate", True, gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma,
        time_dim,
    )


def td1_advantage_estimate(
    gamma: float,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) advantage, :math:`G_t - V(s_t)` with :math:`G_t` from :func:`td1_return_estimate`.

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        state_value: :math:`V(s_t)`, shape ``[*batch, T, *F]``.
        next_state_value: :math:`V(s_{t+1})`.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        {rolling}
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The advantage, shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or ``gamma`` does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import td1_advantage_estimate
        >>> v, nv, r = torch.ones(2, 1), torch.tensor([[2.0], [4.0]]), torch.ones(2, 1)
        >>> td1_advantage_estimate(0.5, v, nv, r, torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([1.5000, 2.0000])
    """
    return _td_lambda(
        "td1_advantage_estimate", False, gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma,
        time_dim, state_value,
    )


def vec_td1_advantage_estimate(
    gamma,
    state_value,
    next_state_value,
    reward,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rolling_gamma: bool | None = None,
    time_dim: int = -2,
) -> torch.Tensor:
    """TD(1) advantage, vectorised over time; same result as :func:`td1_advantage_estimate`.

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        state_value: :math:`V(s_t)`, shape ``[*batch, T, *F]``.
        next_state_value: :math:`V(s_{t+1})`.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        {rolling}
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The advantage, shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or ``gamma`` does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import vec_td1_advantage_estimate
        >>> v, nv, r = torch.ones(2, 1), torch.tensor([[2.0], [4.0]]), torch.ones(2, 1)
        >>> vec_td1_advantage_estimate(0.5, v, nv, r, torch.zeros(2, 1, dtype=torch.bool)).squeeze(-1)
        tensor([1.5000, 2.0000])
    """
    return _td_lambda(
        "vec_td1_advantage_estimate", True, gamma, 1.0, next_state_value, reward, done, terminated, rolling_gamma,
        time_dim, state_value,
    )


for _fn in (
    td_lambda_return_estimate, vec_td_lambda_return_estimate, td_lambda_advantage_estimate,
    vec_td_lambda_advantage_estimate, td1_return_estimate, vec_td1_return_estimate, td1_advantage_estimate,
    vec_td1_advantage_estimate,
):
    if _fn.__doc__:  # None under python -OO
        _fn.__doc__ = _fn.__doc__.replace("{rolling}", _ROLLING_DOC)
del _fn


# --------------------------------------------------------------------------------------------- V-trace
def vtrace_advantage_estimate(
    gamma: float,
    log_pi: torch.Tensor,
    log_mu: torch.Tensor,
    state_value: torch.Tensor,
    next_state_value: torch.Tensor,
    reward: torch.Tensor,
    done: torch.Tensor,
    terminated: torch.Tensor | None = None,
    rho_thresh: float | torch.Tensor = 1.0,
    c_thresh: float | torch.Tensor = 1.0,
    time_dim: int = -2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """V-trace off-policy value targets and policy-gradient advantages.

    With importance ratios :math:`\\rho_t = \\pi(a_t|s_t) / \\mu(a_t|s_t)` truncated as
    :math:`\\bar\\rho_t = \\min(\\bar\\rho, \\rho_t)` and :math:`\\bar c_t = \\min(\\bar c, \\rho_t)`:

    .. math::

        \\delta_t &= \\bar\\rho_t \\big(r_t + \\gamma_t (1 - \\text{terminated}_t) V(s_{t+1}) - V(s_t)\\big) \\\\
        v_t - V(s_t) &= \\delta_t + \\gamma_t \\bar c_t (1 - \\text{done}_t) \\big(v_{t+1} - V(s_{t+1})\\big) \\\\
        A_t &= \\bar\\rho_t \\big(r_t + \\gamma_t (1 - \\text{terminated}_t) v'_{t} - V(s_t)\\big)

    where :math:`v'_t = v_{t+1}` inside a trajectory and :math:`V(s_{t+1})` at a ``done`` step or the last
    step. Espeholt et al. (2018), eq. 1 (targets :math:`v_t`) and section 4.2 (advantage). Gradients flow
    through every input; detach ``log_pi`` for the paper's stop-gradient on the ratios.

    Args:
        gamma: discount, a scalar or a tensor broadcastable to the data.
        log_pi: log-probability of the actions under the learner policy :math:`\\pi`.
        log_mu: log-probability of the actions under the behaviour policy :math:`\\mu`.
        state_value: :math:`V(s_t)`, shape ``[*batch, T, *F]``; every tensor argument has this shape.
        next_state_value: :math:`V(s_{t+1})`.
        reward: :math:`r_t`.
        done: boolean end-of-trajectory flags (terminated or truncated).
        terminated: boolean end-of-episode flags. Defaults to ``done``.
        rho_thresh: :math:`\\bar\\rho`, clipping of the ratios in the TD errors. Defaults to 1.
        c_thresh: :math:`\\bar c`, clipping of the trace coefficients. Defaults to 1.
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        ``(advantage, value_target)``, both shaped like ``reward``.

    Raises:
        RuntimeError: if the tensor shapes differ or a coefficient does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import vtrace_advantage_estimate
        >>> v, nv, r = torch.tensor([[1.0], [2.0]]), torch.tensor([[2.0], [4.0]]), torch.ones(2, 1)
        >>> logp = torch.zeros(2, 1)  # on-policy: V-trace is the TD(1) target
        >>> adv, vs = vtrace_advantage_estimate(0.5, logp, logp, v, nv, r, torch.zeros(2, 1, dtype=torch.bool))
        >>> adv.squeeze(-1), vs.squeeze(-1)
        (tensor([1.5000, 1.0000]), tensor([2.5000, 3.0000]))
    """
    fname = "vtrace_advantage_estimate"
    shape = _check_tensors(
        fname, log_pi=log_pi, log_mu=log_mu, state_value=state_value, next_state_value=next_state_value,
        reward=reward, done=done, terminated=terminated,
    )
    lay = _Layout(shape, _time_dim(fname, time_dim, shape), first=False)
    dtype = _dtype(reward)
    gamma = lay.rows(_coef(fname, "gamma", gamma, shape, dtype))
    rho_thresh = lay.rows(_coef(fname, "rho_thresh", rho_thresh, shape, dtype))
    c_thresh = lay.rows(_coef(fname, "c_thresh", c_thresh, shape, dtype))
    done, term = _flag(done), _default_terminated(done, terminated)
    rho = torch.exp(lay.rows(log_pi) - lay.rows(log_mu))
    rho_bar = torch.clamp(rho, max=rho_thresh)
    c_bar = torch.clamp(rho, max=c_thresh)
    value, reward = lay.rows(state_value), lay.rows(reward)
    next_value = torch.where(lay.rows(term), 0.0, lay.rows(next_state_value))
    nd = _not_done(lay, done, term)
    delta = rho_bar * (reward + gamma * next_value - value)
    value_target = reverse_scan(delta, gamma * c_bar * nd.to(dtype)) + value
    next_target = torch.cat([value_target[:, 1:], value_target[:, -1:]], dim=-1)
    next_target = torch.where(nd, next_target, next_value)
    advantage = rho_bar * (reward + gamma * next_target - value)
    return lay.back(advantage), lay.back(value_target)


# -------------------------------------------------------------------------------------- reward-to-go
def reward2go(reward: torch.Tensor, done: torch.Tensor, gamma: float | torch.Tensor, *, time_dim: int = -2):
    """Discounted reward-to-go, restarted at every ``done``.

    .. math::

        R_t = r_t + \\gamma_t (1 - \\text{done}_t) R_{t+1}, \\qquad R_T = 0

    i.e. :math:`R_t = \\sum_{k=t}^{\\text{end}} \\gamma^{k-t} r_k` up to the end of the trajectory (no
    bootstrapping: a trajectory cut by the end of the batch just sums what it has). Sutton & Barto (2018),
    eq. 3.8.

    Args:
        reward: :math:`r_t`, shape ``[*batch, T, *F]``.
        done: boolean end-of-trajectory flags, same shape.
        gamma: discount, a scalar or a tensor broadcastable to ``reward`` (1.0: undiscounted).

    Keyword Args:
        time_dim: the time dimension. Defaults to ``-2``.

    Returns:
        The reward-to-go, shaped like ``reward``.

    Raises:
        RuntimeError: if the shapes differ or ``gamma`` does not broadcast to them.
        IndexError: if ``time_dim`` is out of range.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.value.functional import reward2go
        >>> reward = torch.ones(1, 6)
        >>> done = torch.tensor([[False, False, True, False, False, False]])
        >>> reward2go(reward, done, 0.5, time_dim=-1)
        tensor([[1.7500, 1.5000, 1.0000, 1.7500, 1.5000, 1.0000]])
    """
    fname = "reward2go"
    shape = _check_tensors(fname, reward=reward, done=done)
    lay = _Layout(shape, _time_dim(fname, time_dim, shape), first=False)
    gamma = lay.rows(_coef(fname, "gamma", gamma, shape, _dtype(reward)))
    carry = gamma * (~lay.rows(_flag(done))).to(_dtype(reward))
    return lay.back(reverse_scan(lay.rows(reward), carry))
