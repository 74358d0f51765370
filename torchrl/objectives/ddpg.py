"""``DDPGLoss``: deep deterministic policy gradient (Lillicrap et al., 2016, https://arxiv.org/abs/1509.02971)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictSequential, dispatch

from torchrl._fast import new_td
from torchrl.objectives._functional import ModuleRunner, gather_inputs
from torchrl.objectives.common import LossModule
from torchrl.objectives.utils import ValueEstimators, _check_reduction, _reduce, distance_loss, hold_out_params

__all__ = ["DDPGLoss"]

_EMPTY = torch.Size([])


class DDPGLoss(LossModule):
    """The DDPG actor and critic losses.

    * ``loss_value = distance(Q(s, a), target)`` with ``target`` from the value estimator on
      ``Q_target(s', mu_target(s'))`` (TD(0): ``r + gamma (1 - terminated) Q_target(s', mu_target(s'))``);
    * ``loss_actor = -Q(s, mu(s))``, the critic's parameters held out (the actor loss trains the actor only).

    The squared TD error is written to the input at ``tensor_keys.priority``.

    Key table (``loss.set_keys(...)``): ``state_action_value`` (the critic's output), ``reward``, ``done``,
    ``terminated`` (under ``"next"``), ``priority`` (``"td_error"``), ``priority_weight``. The action is the
    actor's output key.

    Args:
        actor_network: deterministic policy writing the action.
        value_network: critic reading observation and action, writing ``"state_action_value"``.

    Keyword Args:
        loss_function: ``"l2"`` (default), ``"l1"`` or ``"smooth_l1"``.
        delay_actor: target actor (``target_actor_network_params``). Defaults to ``False``.
        delay_value: target critic (``target_value_network_params``). Defaults to ``True``.
        gamma: deprecated; use ``make_value_estimator(gamma=...)``.
        separate_losses: parameters shared by actor and critic are trained by the actor loss only.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        use_prioritized_weights: ``"auto"``, ``True`` or ``False`` (see :class:`~torchrl.objectives.DQNLoss`).

    Value estimators: TD0 (default), TD1, TDLambda.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP
        >>> from torchrl.objectives import DDPGLoss
        >>> actor = TensorDictModule(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"], ["action"])
        >>> critic = TensorDictModule(MLP(in_features=4, out_features=1, num_cells=[8]), ["observation", "action"],
        ...     ["state_action_value"])
        >>> loss = DDPGLoss(actor, critic)
        >>> batch = TensorDict({"observation": torch.randn(5, 3), "action": torch.randn(5, 1), "next": {
        ...     "observation": torch.randn(5, 3), "reward": torch.randn(5, 1),
        ...     "done": torch.zeros(5, 1, dtype=torch.bool)}}, [5])
        >>> sorted(loss(batch).keys())
        ['loss_actor', 'loss_value', 'pred_value', 'pred_value_max', 'target_value', 'target_value_max', 'td_error']
    """

    @dataclass
    class _AcceptedKeys:
        """DDPG key table."""

        state_action_value: NestedKey = "state_action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.TD0
    supported_value_estimators = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)
    _estimator_key_map = {"value": "state_action_value"}
    _OUT_KEYS = ["loss_actor", "loss_value", "pred_value", "target_value", "pred_value_max", "target_value_max"]

    def __init__(
        self,
        actor_network: TensorDictModule,
        value_network: TensorDictModule,
        *,
        loss_function: str = "l2",
        delay_actor: bool = False,
        delay_value: bool = True,
        gamma: float | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
    ) -> None:
        super().__init__()
        self._deprecated_gamma(gamma)
        self.delay_actor, self.delay_value = bool(delay_actor), bool(delay_value)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=self.delay_actor)
        self.convert_to_functional(value_network, "value_network", create_target_params=self.delay_value)
        self.actor_in_keys = list(actor_network.in_keys)
        self.separate_losses = bool(separate_losses)
        distance_loss(torch.zeros(1), torch.zeros(1), loss_function)  # validates the name
        self.loss_function = loss_function
        self.reduction = _check_reduction("DDPGLoss", reduction)
        self.use_prioritized_weights = use_prioritized_weights
        actor_ids = {id(p) for p in actor_network.parameters()}
        self._shared = [p for p in value_network.parameters() if id(p) in actor_ids]
        self._keys_changed()

    def _keys_changed(self) -> None:
        f = self._functionals
        self._actor = ModuleRunner(self.actor_network)
        self._critic = ModuleRunner(self.value_network)
        self._t_actor = ModuleRunner(f["actor_network"].target_module or self.actor_network)
        self._t_critic = ModuleRunner(f["value_network"].target_module or self.value_network)

    def _in_keys_list(self) -> list:
        # as TorchRL: the actor's and critic's inputs now and at "next" (the critic's action included), the
        # next reward / done / terminated and the priority weights
        k = self.tensor_keys
        net_keys = [*self.actor_in_keys, *self.value_network.in_keys]
        return [("next", k.reward), ("next", k.done), ("next", k.terminated), *net_keys,
                *[("next", key) for key in net_keys], k.priority_weight]

    def _estimator_networks(self) -> dict:
        return {"value_network": TensorDictSequential(self.actor_network, self.value_network)}

    def _q(self, runner: ModuleRunner, td, extra=None, nxt=False, detached=False):
        inputs = gather_inputs(td, runner.in_keys, self._missing, extra=extra, nxt=nxt)
        out = runner(inputs, td.batch_size, detached=detached)
        key = self.tensor_keys.state_action_value
        if key not in out:
            raise self._missing(key)
        return out[key]

    def loss_actor(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``-Q(s, mu(s))`` with the critic's parameters held out; returns ``(loss, metadata)``."""
        actor = self._actor
        action = actor(gather_inputs(tensordict, actor.in_keys, self._missing), tensordict.batch_size)
        if torch.compiler.is_compiling():  # requires_grad_ does not trace: read the parameters detached instead
            q = self._q(self._critic, tensordict, extra=action, detached=True)
        else:
            with hold_out_params(self.value_network.parameters()):
                q = self._q(self._critic, tensordict, extra=action)
        loss = -q.squeeze(-1) if q.shape[-1:] == (1,) else -q
        return _reduce(loss, self.reduction, self._loss_mask(tensordict)), {}

    def loss_value(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        """``distance(Q(s, a), target)``; returns ``(loss, metadata)`` and writes the TD error."""
        k = self.tensor_keys
        if self.separate_losses and self._shared:
            if torch.compiler.is_compiling():
                pred = self._q(self._critic, tensordict, detached=frozenset(map(id, self._shared)))
            else:
                with hold_out_params(self._shared):
                    pred = self._q(self._critic, tensordict)
        else:
            pred = self._q(self._critic, tensordict)
        with torch.no_grad():
            t_actor = self._t_actor
            inputs = gather_inputs(tensordict, t_actor.in_keys, self._missing, nxt=True)
            next_action = t_actor(inputs, tensordict.batch_size)
            next_value = self._q(self._t_critic, tensordict, extra=next_action, nxt=True)
        target = self._value_target(tensordict, next_value=next_value)
        pred, target = pred.squeeze(-1), target.squeeze(-1)
        if pred.shape != target.shape:
            raise self._shape_error("the predicted and target values differ in shape", state_action_value=pred,
                                    value_target=target)
        td_error = (pred - target).detach().pow(2)
        tensordict.set(k.priority, td_error)
        loss = distance_loss(pred, target, self.loss_function)
        weights = self._priority_weights(tensordict, k.priority_weight)
        loss = _reduce(loss, self.reduction, self._loss_mask(tensordict), weights)
        return loss, {"td_error": td_error, "pred_value": pred.detach(), "target_value": target.detach()}

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes ``loss_actor``, ``loss_value`` and the diagnostics ``td_error``, ``pred_value``,
        ``target_value``, ``pred_value_max`` and ``target_value_max`` (as TorchRL)."""
        if self._warn_target:
            self._target_warning()
        loss_value, meta = self.loss_value(tensordict)
        loss_actor, _ = self.loss_actor(tensordict)
        pred, target = meta["pred_value"], meta["target_value"]
        return new_td(
            {"loss_actor": loss_actor, "loss_value": loss_value, "td_error": meta["td_error"], "pred_value": pred,
             "target_value": target, "pred_value_max": pred.max(), "target_value_max": target.max()},
            _EMPTY,
        )

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (TD0 default; TD1 and TDLambda supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    @property
    def in_keys(self):
        """Inputs: next reward/done/terminated, the actor's and critic's inputs (now and at ``"next"``)."""
        return super().in_keys
