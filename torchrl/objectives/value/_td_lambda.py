"""``TDLambdaEstimator``: :math:`\\lambda`-returns (Sutton & Barto, 2018, eq. 12.18)."""
from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModule, dispatch

from torchrl.objectives.utils import ValueEstimators, register_value_estimator
from torchrl.objectives.value._estimator_base import ValueEstimatorBase
from torchrl.objectives.value.functional import td_lambda_return_estimate, vec_td_lambda_return_estimate

__all__ = ["TDLambdaEstimator"]


def _compiling() -> bool:
    try:
        return torch.compiler.is_compiling()
    except AttributeError:  # pragma: no cover - older torch
        return False


@register_value_estimator(
    ValueEstimators.TDLambda, default_kwargs={"gamma": 0.99, "lmbda": 0.95, "differentiable": True}
)
class TDLambdaEstimator(ValueEstimatorBase):
    """TD(:math:`\\lambda`) value targets and advantages.

    ``G_t = r_t + gamma (1 - terminated_t) [(1 - lmbda) V(s_{t+1}) + lmbda G_{t+1}]`` within a trajectory.

    Keyword Args:
        gamma: discount (scalar or tensor broadcastable to the data).
        lmbda: :math:`\\lambda` (scalar or tensor).
        value_network: the critic writing ``"state_value"``.
        average_rewards: standardise the rewards over the batch first (written back to the tensordict).
        vectorized: use the associative-scan version (default ``True``); ``False``: the reverse-time loop.
        time_dim: the time dimension of the input tensordict (default: the one named ``"time"``, else the
            last).
        differentiable, skip_existing, advantage_key, value_target_key, value_key, shifted, device,
        deactivate_vmap, value_chunk_size, num_chunks, num_chunk, value_chunk_dim, shifted_budget,
        group_key: see :class:`~torchrl.objectives.value.ValueEstimatorBase`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.objectives.value import TDLambdaEstimator
        >>> est = TDLambdaEstimator(gamma=0.5, lmbda=0.5, value_network=None)
        >>> td = TensorDict({"state_value": torch.zeros(1, 2, 1),
        ...     "next": {"state_value": torch.tensor([[[2.0], [4.0]]]),
        ...     "reward": torch.zeros(1, 2, 1), "done": torch.zeros(1, 2, 1, dtype=torch.bool)}}, [1, 2])
        >>> est(td)["value_target"].squeeze(-1)
        tensor([[1., 2.]])
    """

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        lmbda: float | torch.Tensor,
        value_network: TensorDictModule,
        average_rewards: bool = False,
        differentiable: bool = False,
        vectorized: bool = True,
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
        self._coef_buffer("lmbda", lmbda)
        self.average_rewards = average_rewards
        self._vectorized = vectorized
        self.time_dim = time_dim

    @property
    def vectorized(self) -> bool:
        """Whether the associative-scan version is used (never while compiling)."""
        return bool(self._vectorized) and not _compiling()

    @vectorized.setter
    def vectorized(self, value: bool) -> None:
        self._vectorized = value

    @dispatch
    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        params: list[torch.Tensor] | None = None,
        target_params: list[torch.Tensor] | None = None,
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
        """The :math:`\\lambda`-return."""
        return super().value_estimate(
            tensordict, target_params=target_params, next_value=next_value, time_dim=time_dim, **kwargs
        )

    def _target(self, td, next_value, time_dim):
        reward, done, terminated = self._signals(td, next_value)
        self._check(None, next_value, reward, done, terminated)
        fn = vec_td_lambda_return_estimate if self.vectorized else td_lambda_return_estimate
        return fn(self.gamma, self.lmbda, next_value, reward, done, terminated, time_dim=time_dim)

    def _estimate(self, td, value, next_value, time_dim):
        target = self._target(td, next_value, time_dim)
        self._check_value(value, target)
        return target - value, target
