"""``TD1Estimator``: Monte-Carlo returns bootstrapped at truncations (:math:`\\lambda = 1`)."""
from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModule, dispatch

from torchrl.objectives.utils import ValueEstimators, register_value_estimator
from torchrl.objectives.value._estimator_base import ValueEstimatorBase
from torchrl.objectives.value.functional import vec_td1_return_estimate

__all__ = ["TD1Estimator"]


@register_value_estimator(ValueEstimators.TD1, default_kwargs={"gamma": 0.99, "differentiable": True})
class TD1Estimator(ValueEstimatorBase):
    """TD(1) value targets and advantages (Sutton & Barto, 2018, ch. 5 and 12).

    ``G_t = r_t + gamma (1 - terminated_t) G_{t+1}`` within a trajectory, bootstrapping from ``V(s_{t+1})``
    at truncations and at the last step of the batch.

    Keyword Args:
        gamma: discount (scalar or tensor broadcastable to the data).
        value_network: the critic writing ``"state_value"``.
        average_rewards: standardise the rewards over the batch first (written back to the tensordict).
        time_dim: the time dimension of the input tensordict (default: the one named ``"time"``, else the
            last).
        differentiable, skip_existing, advantage_key, value_target_key, value_key, shifted, device,
        deactivate_vmap, value_chunk_size, num_chunks, num_chunk, value_chunk_dim, shifted_budget,
        group_key: see :class:`~torchrl.objectives.value.ValueEstimatorBase`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.objectives.value import TD1Estimator
        >>> est = TD1Estimator(gamma=0.5, value_network=None)
        >>> td = TensorDict({"state_value": torch.zeros(1, 2, 1), "next": {"state_value": torch.full((1, 2, 1), 4.0),
        ...     "reward": torch.ones(1, 2, 1), "done": torch.zeros(1, 2, 1, dtype=torch.bool)}}, [1, 2])
        >>> est(td)["value_target"].squeeze(-1)
        tensor([[2.5000, 3.0000]])
    """

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        value_network: TensorDictModule,
        average_rewards: bool = False,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        advantage_key: NestedKey = None,
        value_target_key: NestedKey = None,
        value_key: NestedKey = None,
        shifted: bool = False,
        device: torch.device | None = None,
        time_dim: int | None = None,
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
        self.time_dim = time_dim

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
        time_dim: int | None = None,
        **kwargs,
    ):
        """The TD(1) return."""
        return super().value_estimate(
            tensordict, target_params=target_params, next_value=next_value, time_dim=time_dim, **kwargs
        )

    def _target(self, td, next_value, time_dim):
        reward, done, terminated = self._signals(td, next_value)
        self._check(None, next_value, reward, done, terminated)
        return vec_td1_return_estimate(self.gamma, next_value, reward, done, terminated, time_dim=time_dim)

    def _estimate(self, td, value, next_value, time_dim):
        target = self._target(td, next_value, time_dim)
        self._check_value(value, target)
        return target - value, target
