"""``TD3BCLoss``: TD3 with a behaviour-cloning term for offline RL (Fujimoto & Gu, 2021,
https://arxiv.org/abs/2106.06860)."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, dispatch

from torchrl._fast import new_td
from torchrl.data.tensor_specs import TensorSpec
from torchrl.objectives._td3_common import _TwinDelayedBase
from torchrl.objectives.utils import ValueEstimators, _reduce

__all__ = ["TD3BCLoss"]

_EMPTY = torch.Size([])


class TD3BCLoss(_TwinDelayedBase):
    """The TD3+BC actor and Q-value losses.

    The Q-value loss is TD3's (see :class:`~torchrl.objectives.TD3Loss`). The actor loss adds behaviour
    cloning to the normalised policy improvement term:

    .. math:: \\mathcal{L}_\\pi = -\\lambda\\, Q_0(s, \\pi(s)) + (\\pi(s) - a)^2, \\qquad
        \\lambda = \\frac{\\alpha}{\\operatorname{mean}|Q_0(s, \\pi(s))|}

    where the squared error is averaged over the batch and the action dimensions, and :math:`\\lambda` is
    not differentiated.

    Key table (``loss.set_keys(...)``): ``action``, ``state_action_value``, ``reward``, ``done``,
    ``terminated`` (under ``"next"``), ``priority`` (``"td_error"``), ``priority_weight``.

    Args:
        actor_network: deterministic policy writing ``"action"``.
        qvalue_network: one Q-network (copied ``num_qvalue_nets`` times) or a list of Q-networks.

    Keyword Args:
        action_spec, bounds, num_qvalue_nets, policy_noise, noise_clip, loss_function, delay_actor,
        delay_qvalue, priority_key, separate_losses, reduction, deactivate_vmap, use_prioritized_weights:
            as for :class:`~torchrl.objectives.TD3Loss`.
        alpha: the :math:`\\alpha` weighting of the Q term. Defaults to 2.5.

    Value estimators: TD0 (default), TD1, TDLambda.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP
        >>> from torchrl.objectives import TD3BCLoss
        >>> actor = TensorDictModule(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"], ["action"])
        >>> qnet = TensorDictModule(MLP(in_features=4, out_features=1, num_cells=[8]), ["observation", "action"],
        ...     ["state_action_value"])
        >>> loss = TD3BCLoss(actor, qnet, bounds=(-1.0, 1.0))
        >>> batch = TensorDict({"observation": torch.randn(5, 3), "action": torch.rand(5, 1) * 2 - 1, "next": {
        ...     "observation": torch.randn(5, 3), "reward": torch.randn(5, 1),
        ...     "done": torch.zeros(5, 1, dtype=torch.bool)}}, [5])
        >>> sorted(k for k in loss(batch).keys() if k.startswith("loss"))
        ['loss_actor', 'loss_qvalue']
    """

    _OUT_KEYS = ["loss_actor", "loss_qvalue", "bc_loss", "lmbd", "pred_value", "state_action_value_actor",
                 "next_state_value", "target_value"]

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
        alpha: float = 2.5,
        loss_function: str = "smooth_l1",
        delay_actor: bool = True,
        delay_qvalue: bool = True,
        priority_key: str | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        deactivate_vmap: bool = False,
        use_prioritized_weights: str | bool = "auto",
    ) -> None:
        super().__init__()
        self._setup(
            actor_network, qvalue_network, action_spec=action_spec, bounds=bounds,
            num_qvalue_nets=num_qvalue_nets, policy_noise=policy_noise, noise_clip=noise_clip,
            loss_function=loss_function, delay_actor=delay_actor, delay_qvalue=delay_qvalue,
            priority_key=priority_key, separate_losses=separate_losses, reduction=reduction,
            deactivate_vmap=deactivate_vmap, use_prioritized_weights=use_prioritized_weights,
        )
        self.alpha = float(alpha)

    def actor_loss(self, tensordict) -> tuple[torch.Tensor, dict]:
        """``-lmbd * Q_0(s, pi(s)) + bc_loss``; returns ``(loss, metadata)``."""
        action, q = self._actor_q(tensordict)
        data_action = self._get(tensordict, self.tensor_keys.action)
        if action.shape != data_action.shape:
            raise self._shape_error("the policy action and the data action differ in shape",
                                    policy_action=action, **{repr(self.tensor_keys.action): data_action})
        bc_loss = torch.nn.functional.mse_loss(action, data_action)
        lmbd = self.alpha / q.abs().mean().detach()
        loss = _reduce(-lmbd * q + bc_loss, self.reduction, self._loss_mask(tensordict))
        return loss, {"state_action_value_actor": q.detach(), "bc_loss": bc_loss.detach(), "lmbd": lmbd}

    def qvalue_loss(self, tensordict) -> tuple[torch.Tensor, dict]:
        """The summed Q-network losses (as in TD3); returns ``(loss, metadata)``."""
        return self._q_loss(tensordict)

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes ``loss_actor``, ``loss_qvalue`` and diagnostics; writes the TD error."""
        if self._warn_target:
            self._target_warning()
        loss_actor, meta_actor = self.actor_loss(tensordict)
        loss_qvalue, meta = self.qvalue_loss(tensordict)
        tensordict.set(self.tensor_keys.priority, meta.pop("td_error"))
        return new_td({"loss_actor": loss_actor, "loss_qvalue": loss_qvalue, **meta_actor, **meta}, _EMPTY)

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (TD0 default; TD1 and TDLambda supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    @property
    def in_keys(self):
        """Inputs: action, next reward/done/terminated, the actor's inputs (now and next), the Q inputs."""
        return super().in_keys
