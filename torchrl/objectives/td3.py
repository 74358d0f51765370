"""``TD3Loss``: twin delayed DDPG (Fujimoto et al., 2018, https://arxiv.org/abs/1802.09477)."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, dispatch

from torchrl._fast import new_td
from torchrl.data.tensor_specs import TensorSpec
from torchrl.objectives._td3_common import _TwinDelayedBase
from torchrl.objectives.utils import ValueEstimators, _reduce

__all__ = ["TD3Loss"]

_EMPTY = torch.Size([])


class TD3Loss(_TwinDelayedBase):
    """The TD3 actor and Q-value losses.

    * ``loss_qvalue = sum_i distance(Q_i(s, a), target)``, ``target`` from the value estimator on the
      clipped double-Q value ``min_i Q_target_i(s', clip(mu_target(s') + clip(noise), low, high))`` with
      ``noise ~ N(0, policy_noise)`` clipped to ``[-noise_clip, noise_clip]``;
    * ``loss_actor = -Q_0(s, mu(s))`` (the Q parameters detached: the actor loss trains the actor only).

    The Q-networks are an ensemble with stacked parameters (``loss.qvalue_network_params``, shape
    ``[num_qvalue_nets, ...]``), evaluated with :func:`torch.vmap` (a loop with ``deactivate_vmap=True``).
    The largest squared TD error over the ensemble is written to the input at ``tensor_keys.priority``.

    Key table (``loss.set_keys(...)``): ``action``, ``state_action_value``, ``reward``, ``done``,
    ``terminated`` (under ``"next"``), ``priority`` (``"td_error"``), ``priority_weight``.

    Args:
        actor_network: deterministic policy writing ``"action"``.
        qvalue_network: Q-network reading observation and action, writing ``"state_action_value"``; one
            network (copied ``num_qvalue_nets`` times, copies re-initialised) or a list of networks.

    Keyword Args:
        action_spec: bounded action spec (or a Composite with an ``"action"`` entry). Exclusive with
            ``bounds``; if neither is given, the actor's ``spec`` is used.
        bounds: ``(low, high)`` action bounds.
        num_qvalue_nets: ensemble size. Defaults to 2.
        policy_noise: std of the target-policy smoothing noise. Defaults to 0.2.
        noise_clip: clipping of that noise. Defaults to 0.5.
        loss_function: ``"smooth_l1"`` (default), ``"l2"`` or ``"l1"``.
        delay_actor: target actor. Defaults to ``True``.
        delay_qvalue: target Q-networks. Defaults to ``True``.
        gamma: deprecated; use ``make_value_estimator(gamma=...)``.
        priority_key: deprecated; use ``set_keys(priority=...)``.
        separate_losses: parameters shared by actor and Q-network are trained by the actor loss only.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        deactivate_vmap: loop over the Q-networks instead of vmapping.
        use_prioritized_weights: ``"auto"``, ``True`` or ``False``.

    Value estimators: TD0 (default), TD1, TDLambda.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP
        >>> from torchrl.objectives import TD3Loss
        >>> actor = TensorDictModule(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"], ["action"])
        >>> qnet = TensorDictModule(MLP(in_features=4, out_features=1, num_cells=[8]), ["observation", "action"],
        ...     ["state_action_value"])
        >>> loss = TD3Loss(actor, qnet, bounds=(-1.0, 1.0))
        >>> batch = TensorDict({"observation": torch.randn(5, 3), "action": torch.rand(5, 1) * 2 - 1, "next": {
        ...     "observation": torch.randn(5, 3), "reward": torch.randn(5, 1),
        ...     "done": torch.zeros(5, 1, dtype=torch.bool)}}, [5])
        >>> out = loss(batch)
        >>> out["loss_actor"].shape, out["pred_value"].shape
        (torch.Size([]), torch.Size([2, 5]))
    """

    _OUT_KEYS = ["loss_actor", "loss_qvalue", "pred_value", "state_action_value_actor", "next_state_value",
                 "target_value"]

    def __init__(
        self,
        actor_network: TensorDictModule,
        qvalue_network: TensorDictModule | list[TensorDictModule],
        *,
        action_spec: TensorSpec = None,
        bounds: tuple[float] | None = None,
        num_qvalue_nets: int = 2,
        policy_noise: float = 0.2,
        noise_clip: float = 0.5,
        loss_function: str = "smooth_l1",
        delay_actor: bool = True,
        delay_qvalue: bool = True,
        gamma: float | None = None,
        priority_key: str | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        deactivate_vmap: bool = False,
        use_prioritized_weights: str | bool = "auto",
    ) -> None:
        super().__init__()
        self._deprecated_gamma(gamma)
        self._setup(
            actor_network, qvalue_network, action_spec=action_spec, bounds=bounds,
            num_qvalue_nets=num_qvalue_nets, policy_noise=policy_noise, noise_clip=noise_clip,
            loss_function=loss_function, delay_actor=delay_actor, delay_qvalue=delay_qvalue,
            priority_key=priority_key, separate_losses=separate_losses, reduction=reduction,
            deactivate_vmap=deactivate_vmap, use_prioritized_weights=use_prioritized_weights,
        )

    def actor_loss(self, tensordict) -> tuple[torch.Tensor, dict]:
        """``-Q_0(s, mu(s))``; returns ``(loss, {"state_action_value_actor": ...})`` with the Q-values of every
        network on the policy's action (``[num_qvalue_nets, *B]``, as TorchRL)."""
        _, q_all = self._actor_q(tensordict, every_net=True)
        loss = _reduce(-q_all[0], self.reduction, self._loss_mask(tensordict))
        return loss, {"state_action_value_actor": q_all.detach()}

    def value_loss(self, tensordict) -> tuple[torch.Tensor, dict]:
        """The summed Q-network losses; returns ``(loss, metadata)`` (metadata holds ``td_error``)."""
        return self._q_loss(tensordict)

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes ``loss_actor``, ``loss_qvalue`` and diagnostics; writes the TD error."""
        if self._warn_target:
            self._target_warning()
        loss_actor, meta_actor = self.actor_loss(tensordict)
        loss_qvalue, meta = self.value_loss(tensordict)
        tensordict.set(self.tensor_keys.priority, meta.pop("td_error"))
        return new_td({"loss_actor": loss_actor, "loss_qvalue": loss_qvalue, **meta_actor, **meta}, _EMPTY)

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (TD0 default; TD1 and TDLambda supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    @property
    def in_keys(self):
        """Inputs: action, next reward/done/terminated, the actor's inputs (now and next), the Q inputs."""
        return super().in_keys
