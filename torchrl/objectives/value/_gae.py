"""``GAE``: generalized advantage estimation (Schulman et al., 2016, https://arxiv.org/abs/1506.02438)."""
from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModule, dispatch

from torchrl.objectives.utils import ValueEstimators, register_value_estimator
from torchrl.objectives.value._estimator_base import ValueEstimatorBase, _standardize
from torchrl.objectives.value.functional import generalized_advantage_estimate, vec_generalized_advantage_estimate
from torchrl.objectives.value._td_lambda import _compiling

__all__ = ["GAE"]


@register_value_estimator(
    ValueEstimators.GAE, default_kwargs={"gamma": 0.99, "lmbda": 0.95, "differentiable": True}
)
class GAE(ValueEstimatorBase):
    """Generalized advantage estimate and value target.

    :math:`\\hat A_t = \\sum_l (\\gamma\\lambda)^l \\delta_{t+l}` within each trajectory, with
    :math:`\\delta_t = r_t + \\gamma (1 - \\text{terminated}_t) V(s_{t+1}) - V(s_t)`; the value target is
    :math:`\\hat A_t + V(s_t)`.

    Keyword Args:
        gamma: discount (scalar or tensor broadcastable to the data).
        lmbda: GAE :math:`\\lambda` (scalar or tensor).
        value_network: the critic writing ``"state_value"`` (``None``: values must be in the data).
        average_gae: standardise the advantage (after the value target is computed). Defaults to ``False``.
        differentiable: keep gradients through the computation. Defaults to ``False``.
        vectorized: associative-scan version (default ``None``: yes unless compiling).
        skip_existing: reuse values already in the tensordict.
        advantage_key, value_target_key, value_key: deprecated, use :meth:`set_keys`.
        shifted: one compact value-network call for current and next values.
        device: device of the ``gamma`` / ``lmbda`` buffers.
        time_dim: the time dimension of the input tensordict (default: the one named ``"time"``, else the
            last).
        auto_reset_env: the data comes from an env that resets inside ``step`` (the ``"next"`` observation of
            a done step is the reset observation): done steps are then not bootstrapped.
        deactivate_vmap, value_chunk_size, num_chunks, num_chunk, value_chunk_dim, shifted_budget: see
            :class:`~torchrl.objectives.value.ValueEstimatorBase`.
        group_key: with ``average_gae``, an integer entry (one id per batch element, e.g. a task id) within
            whose groups the advantage is standardised.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.objectives.value import GAE
        >>> critic = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> gae = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
        >>> td = TensorDict({"observation": torch.randn(4, 10, 3), "next": {"observation": torch.randn(4, 10, 3),
        ...     "reward": torch.randn(4, 10, 1), "done": torch.zeros(4, 10, 1, dtype=torch.bool)}}, [4, 10])
        >>> gae(td)["advantage"].shape
        torch.Size([4, 10, 1])
    """

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        lmbda: float | torch.Tensor,
        value_network: TensorDictModule | None,
        average_gae: bool = False,
        differentiable: bool = False,
        vectorized: bool | None = None,
        skip_existing: bool | None = None,
        advantage_key: NestedKey = None,
        value_target_key: NestedKey = None,
        value_key: NestedKey = None,
        shifted: bool = False,
        device: torch.device | None = None,
        time_dim: int | None = None,
        auto_reset_env: bool = False,
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
        self.average_gae = average_gae
        self._vectorized = vectorized
        self.time_dim = time_dim
        self.auto_reset_env = auto_reset_env

    @property
    def vectorized(self) -> bool:
        """Whether the associative-scan version is used (by default: unless compiling)."""
        if self._vectorized is None:
            return not _compiling()
        return bool(self._vectorized)

    @vectorized.setter
    def vectorized(self, value: bool | None) -> None:
        self._vectorized = value

    def _advantage(self, td, value, next_value, time_dim):
        reward, done, terminated = self._signals(td, value)
        self._check(value, next_value, reward, done, terminated)
        if self.auto_reset_env:
            terminated = done
        fn = vec_generalized_advantage_estimate if self.vectorized else generalized_advantage_estimate
        return fn(self.gamma, self.lmbda, value, next_value, reward, done, terminated, time_dim=time_dim)

    def _estimate(self, td, value, next_value, time_dim):
        advantage, target = self._advantage(td, value, next_value, time_dim)
        if self.average_gae:
            groups = None if self.group_key is None else self._get(td, self.group_key)
            advantage = _standardize(advantage, groups)
        return advantage, target

    @dispatch
    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        params: list[torch.Tensor] | None = None,
        target_params: list[torch.Tensor] | None = None,
        time_dim: int | None = None,
    ) -> TensorDictBase:
        """See :meth:`ValueEstimatorBase.forward`."""
        return super().forward(tensordict, params=params, target_params=target_params, time_dim=time_dim)

    def value_estimate(
        self,
        tensordict,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
        time_dim: int | None = None,
        **kwargs,
    ):
        """The GAE value target (advantage + value); needs both current and next values."""
        tdim = self._time_dim(tensordict, time_dim)
        with self._grad_ctx():
            value, next_value = self._values(tensordict, params, target_params, time_dim=tdim)
            return self._advantage(tensordict, value, next_value, tdim)[1]
