"""``TD0Estimator``: one-step bootstrapped targets, :math:`r_t + \\gamma (1 - \\text{terminated}_t) V(s_{t+1})`."""
from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModule, dispatch

from torchrl.objectives.utils import ValueEstimators, register_value_estimator
from torchrl.objectives.value._estimator_base import ValueEstimatorBase
from torchrl.objectives.value.functional import _td0, td0_return_estimate

__all__ = ["TD0Estimator"]


@register_value_estimator(ValueEstimators.TD0, default_kwargs={"gamma": 0.99, "differentiable": True})
class TD0Estimator(ValueEstimatorBase):
    """TD(0) value targets and advantages (Sutton & Barto, 2018, eq. 6.2).

    ``value_target = r + gamma * (1 - terminated) * V(s')``, ``advantage = value_target - V(s)``.

    Keyword Args:
        gamma: discount (scalar or tensor broadcastable to the data).
        value_network: the critic writing ``"state_value"``.
        average_rewards: standardise the rewards over the batch first (written back to the tensordict).
        shifted, differentiable, advantage_key, value_target_key, value_key, skip_existing, device,
        deactivate_vmap, value_chunk_size, num_chunks, num_chunk, value_chunk_dim, shifted_budget,
        group_key: see :class:`~torchrl.objectives.value.ValueEstimatorBase`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.objectives.value import TD0Estimator
        >>> est = TD0Estimator(gamma=0.5, value_network=None)
        >>> td = TensorDict({"state_value": torch.zeros(2, 1), "next": {"state_value": torch.full((2, 1), 4.0),
        ...     "reward": torch.ones(2, 1), "done": torch.tensor([[False], [True]])}}, [2])
        >>> est(td)["value_target"].squeeze(-1)
        tensor([3., 1.])
    """

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        value_network: TensorDictModule,
        shifted: bool = False,
        average_rewards: bool = False,
        differentiable: bool = False,
        advantage_key: NestedKey = None,
        value_target_key: NestedKey = None,
        value_key: NestedKey = None,
        skip_existing: bool | None = None,
        device: torch.device | None = None,
        deactivate_vmap: bool = False,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
        value_chunk_dim: int = 0,
        shifted_budget: int = 1,
        group_key: NestedKey | None = None,
    ):
        super().__init__(
            value_network=value_network, shifted=shifted, differentiable=differentiable,
            skip_existing=skip_existing, advantage_key=advantage_key, value_target_key=value_target_key,
            value_key=value_key, device=device, deactivate_vmap=deactivate_vmap,
            value_chunk_size=value_chunk_size, num_chunks=num_chunks, num_chunk=num_chunk,
            value_chunk_dim=value_chunk_dim, shifted_budget=shifted_budget, group_key=group_key,
        )
        self._coef_buffer("gamma", gamma)
        self.average_rewards = average_rewards

    @dispatch
    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
    ) -> TensorDictBase:
        """See :meth:`ValueEstimatorBase.forward`."""
        return super().forward(tensordict, params=params, target_params=target_params)

    def value_estimate(
        self,
        tensordict,
        target_params: TensorDictBase | None = None,
        next_value: torch.Tensor | None = None,
        **kwargs,
    ):
        """The TD(0) target ``r + gamma * (1 - terminated) * V(s')`` (``next_value`` skips the evaluation)."""
        if next_value is not None and self.differentiable:
            return self._target(tensordict, next_value, -1)  # the losses' path: nothing to evaluate
        with self._grad_ctx():
            if next_value is None:
                _, next_value = self._values(tensordict, None, target_params, need_value=False)
            return self._target(tensordict, next_value, -1)

    def _target(self, td, next_value, time_dim):
        reward, done, terminated = self._signals(td, next_value)
        self._check(None, next_value, reward, done, terminated)
        gamma = self._host_scalar("gamma", reward.dtype)
        if gamma is not None:  # the usual case: one fused multiply-add
            return _td0(gamma, next_value, reward, terminated)
        gamma = self.gamma
        if gamma.ndim == 0 and gamma.dtype == reward.dtype:
            return _td0(gamma, next_value, reward, terminated)
        return td0_return_estimate(gamma, next_value, reward, terminated)

    def _estimate(self, td, value, next_value, time_dim):
        target = self._target(td, next_value, time_dim)
        self._check_value(value, target)
        return target - value, target
