"""``VTrace``: off-policy value targets and advantages (Espeholt et al., 2018, https://arxiv.org/abs/1802.01561)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key
from tensordict.nn import TensorDictModule, dispatch

from torchrl.objectives.utils import ValueEstimators, hold_out_net, register_value_estimator
from torchrl.objectives.value._estimator_base import ValueEstimatorBase, _standardize
from torchrl.objectives.value.functional import vtrace_advantage_estimate

__all__ = ["VTrace"]


@register_value_estimator(ValueEstimators.VTrace, default_kwargs={"gamma": 0.99, "differentiable": True})
class VTrace(ValueEstimatorBase):
    """V-trace targets :math:`v_t` and policy-gradient advantages.

    The behaviour policy's log-probability of the taken action is read at ``tensor_keys.sample_log_prob``;
    the learner policy's is computed by ``actor_network`` (``get_dist(td).log_prob(action)``, with the
    actor's parameters held out). Ratios :math:`\\rho = \\pi / \\mu` are clipped at ``rho_thresh`` (TD
    errors) and ``c_thresh`` (traces).

    Keyword Args:
        gamma: discount (scalar or tensor broadcastable to the data).
        actor_network: the learner policy (a probabilistic module with ``get_dist``).
        value_network: the critic writing ``"state_value"``.
        rho_thresh: :math:`\\bar\\rho`. Defaults to 1.
        c_thresh: :math:`\\bar c`. Defaults to 1.
        average_adv: standardise the advantage. Defaults to ``False``.
        time_dim: the time dimension of the input tensordict.
        differentiable, skip_existing, advantage_key, value_target_key, value_key, shifted, device,
        value_chunk_size, num_chunks, num_chunk, value_chunk_dim, shifted_budget, group_key: see
            :class:`~torchrl.objectives.value.ValueEstimatorBase`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor, ProbabilisticTensorDictModule as Prob
        >>> from tensordict.nn import ProbabilisticTensorDictSequential as Seq, TensorDictModule as Mod
        >>> from torchrl.objectives.value import VTrace
        >>> actor = Seq(Mod(torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor()), ["observation"],
        ...     ["loc", "scale"]), Prob(in_keys=["loc", "scale"], out_keys=["action"],
        ...     distribution_class=torch.distributions.Normal))
        >>> critic = Mod(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> vt = VTrace(gamma=0.9, actor_network=actor, value_network=critic)
        >>> td = TensorDict({"observation": torch.randn(2, 4, 3), "action": torch.randn(2, 4, 1),
        ...     "action_log_prob": torch.zeros(2, 4, 1), "next": {"observation": torch.randn(2, 4, 3),
        ...     "reward": torch.ones(2, 4, 1), "done": torch.zeros(2, 4, 1, dtype=torch.bool)}}, [2, 4])
        >>> vt(td)["advantage"].shape
        torch.Size([2, 4, 1])
    """

    @dataclass
    class _AcceptedKeys(ValueEstimatorBase._AcceptedKeys):
        """Key table: the base table plus the taken ``action``."""

        action: NestedKey = "action"

    default_keys = _AcceptedKeys

    def __init__(
        self,
        *,
        gamma: float | torch.Tensor,
        actor_network: TensorDictModule,
        value_network: TensorDictModule,
        rho_thresh: float | torch.Tensor = 1.0,
        c_thresh: float | torch.Tensor = 1.0,
        average_adv: bool = False,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        advantage_key: NestedKey | None = None,
        value_target_key: NestedKey | None = None,
        value_key: NestedKey | None = None,
        shifted: bool = False,
        device: torch.device | None = None,
        time_dim: int | None = None,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
        value_chunk_dim: int = 0,
        shifted_budget: int = 1,
        group_key: NestedKey | None = None,
    ):
        if actor_network is None:
            raise ValueError("VTrace: actor_network is required (it gives the learner's log-probabilities).")
        super().__init__(
            value_network=value_network, shifted=shifted, differentiable=differentiable,
            skip_existing=skip_existing, advantage_key=advantage_key, value_target_key=value_target_key,
            value_key=value_key, device=device, value_chunk_size=value_chunk_size, num_chunks=num_chunks,
            num_chunk=num_chunk, value_chunk_dim=value_chunk_dim, shifted_budget=shifted_budget,
            group_key=group_key,
        )
        self.actor_network = actor_network
        self._coef_buffer("gamma", gamma)
        self._coef_buffer("rho_thresh", rho_thresh)
        self._coef_buffer("c_thresh", c_thresh)
        self.average_adv = average_adv
        self.time_dim = time_dim

    @classmethod
    def for_loss(cls, loss_module, **hyperparams):
        """A V-trace estimator on ``loss_module``'s actor and critic."""
        nets = loss_module._estimator_networks()
        if nets.get("actor_network") is None:
            raise NotImplementedError(
                f"{type(loss_module).__name__} has no actor network, so V-trace does not apply to it."
            )
        kwargs = {"value_network": nets.get("value_network"), "actor_network": nets["actor_network"]}
        kwargs.update(hyperparams)
        return cls(**kwargs)

    @property
    def in_keys(self):
        """The base inputs plus the actor's inputs, the action and the behaviour log-probability."""
        keys = list(super().in_keys) + list(self.actor_network.in_keys)
        keys += [unravel_key(self.tensor_keys.action), unravel_key(self.sample_log_prob_key)]
        return list(dict.fromkeys(keys))

    def _log_pi(self, td, like):
        with hold_out_net(self.actor_network):
            dist = self.actor_network.get_dist(td.copy())
            log_pi = dist.log_prob(self._get(td, self.tensor_keys.action))
        return log_pi.reshape(like.shape) if log_pi.numel() == like.numel() else log_pi

    def _vtrace(self, td, value, next_value, time_dim):
        reward, done, terminated = self._signals(td, value)
        log_mu = self._get(td, self.sample_log_prob_key)
        log_mu = log_mu.reshape(value.shape) if log_mu.numel() == value.numel() else log_mu
        log_pi = self._log_pi(td, value)
        self._check(value, next_value, reward, done, terminated,
                    **{repr(self.sample_log_prob_key): log_mu, "actor log-prob": log_pi})
        return vtrace_advantage_estimate(
            self.gamma, log_pi, log_mu, value, next_value, reward, done, terminated,
            self.rho_thresh, self.c_thresh, time_dim=time_dim,
        )

    def _estimate(self, td, value, next_value, time_dim):
        advantage, target = self._vtrace(td, value, next_value, time_dim)
        if self.average_adv:
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

    def value_estimate(self, tensordict, target_params: TensorDictBase | None = None, next_value=None, **kwargs):
        """The V-trace target :math:`v_t`."""
        tdim = self._time_dim(tensordict, kwargs.get("time_dim"))
        with self._grad_ctx():
            value, nv = self._values(tensordict, kwargs.get("params"), target_params, time_dim=tdim)
            return self._vtrace(tensordict, value, nv if next_value is None else next_value, tdim)[1]
