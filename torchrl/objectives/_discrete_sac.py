"""``DiscreteSACLoss``: soft actor-critic for discrete actions (Christodoulou, 2019,
https://arxiv.org/abs/1910.07207). Public path: ``torchrl.objectives.sac``."""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from numbers import Number

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule, dispatch

from torchrl._fast import fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.objectives._functional import gather_inputs
from torchrl.objectives._tensor_calls import PolicyHead
from torchrl.objectives._sac_common import QEnsemble, TemperatureMixin, check_scalar_output_mode
from torchrl.objectives.dqn import _find_action_space
from torchrl.objectives.utils import ValueEstimators, _check_reduction, _has_random_module, distance_loss

__all__ = ["DiscreteSACLoss"]


def _log_probs(probs: torch.Tensor) -> torch.Tensor:
    """``log p`` with impossible actions (``p == 0``, e.g. masked) at ``log(1e-8)`` instead of ``-inf``."""
    return torch.where(probs == 0, torch.full_like(probs, 1e-8), probs).log()


class DiscreteSACLoss(TemperatureMixin):
    r"""The discrete SAC losses: the expectations over actions are exact sums over the action set.

    With :math:`\pi(\cdot|s)` the actor's probabilities and :math:`Q_i(s, \cdot)` the ensemble's action
    values (``"action_value"``, one per action):

    * ``loss_actor = sum_a pi(a|s) (alpha log pi(a|s) - min_i Q_i(s, a))`` (Q detached);
    * ``loss_qvalue = sum_i distance(Q_i(s, a_data), y)``, ``y`` from the value estimator on the soft next
      value :math:`\sum_{a'} \pi(a'|s') (\min_i Q^{target}_i(s', a') - \alpha \log\pi(a'|s'))`;
    * ``loss_alpha = -log_alpha * (sum_a pi log pi + target_entropy)``.

    Also returned: ``alpha`` and ``entropy``. The largest absolute TD error over the ensemble is written at
    ``tensor_keys.priority``. The automatic target entropy is ``target_entropy_weight * log(num_actions)``.

    Key table (``loss.set_keys(...)``): ``action``, ``value``, ``action_value``, ``priority``
    (``"td_error"``), ``reward``, ``done``, ``terminated``, ``log_prob`` (listed as in TorchRL),
    ``priority_weight``.

    Args:
        actor_network: actor with a categorical distribution (``OneHotCategorical``, ``Categorical``,
            ``MaskedCategorical``, ...).
        qvalue_network: network writing ``"action_value"`` (one value per action).

    Keyword Args:
        action_space: ``"one-hot"``, ``"categorical"``, ... or a spec (how stored actions are encoded).
            Defaults to the actor's spec, else ``"one-hot"`` (with a warning).
        num_actions: the number of actions; required with ``target_entropy="auto"`` (``ValueError``
            otherwise, as in TorchRL).
        num_qvalue_nets: ensemble size. Defaults to 2.
        loss_function: ``"smooth_l1"`` (default), ``"l2"`` or ``"l1"``.
        alpha_init, min_alpha, max_alpha, fixed_alpha: the temperature (see :class:`SACLoss`).
        target_entropy_weight: scale of the automatic target entropy. Defaults to 0.98.
        target_entropy: a number or ``"auto"``.
        delay_qvalue: target Q-networks. Defaults to ``True``.
        priority_key: deprecated; use ``set_keys(priority=...)``.
        separate_losses: parameters shared with the actor are trained by the actor loss only.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        skip_done_states: run the networks on non-terminal next states only (truncated steps still
            bootstrap from their next state).
        deactivate_vmap: loop over the Q-networks (networks that are not plain MLPs).
        use_prioritized_weights: ``"auto"``, ``True`` or ``False``.
        scalar_output_mode: see :class:`SACLoss`.

    Value estimators: TD0 (default), TD1, TDLambda.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor
        >>> from torchrl.objectives import DiscreteSACLoss
        >>> actor = ProbabilisticActor(TensorDictModule(MLP(in_features=3, out_features=4, num_cells=[8]),
        ...     ["observation"], ["logits"]), ["logits"], distribution_class=OneHotCategorical)
        >>> qnet = TensorDictModule(MLP(in_features=3, out_features=4, num_cells=[8]), ["observation"],
        ...     ["action_value"])
        >>> loss = DiscreteSACLoss(actor, qnet, action_space="one-hot", num_actions=4)
        >>> data = TensorDict({"observation": torch.randn(5, 3), "action": torch.eye(4)[[0, 1, 2, 3, 0]].long(),
        ...     "next": {"observation": torch.randn(5, 3), "reward": torch.randn(5, 1),
        ...     "done": torch.zeros(5, 1, dtype=torch.bool)}}, [5])
        >>> sorted(loss(data).keys())
        ['alpha', 'entropy', 'loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    @dataclass
    class _AcceptedKeys:
        """Discrete SAC key table."""

        action: NestedKey = "action"
        value: NestedKey = "state_value"
        action_value: NestedKey = "action_value"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        log_prob: NestedKey = "log_prob"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    # TorchRL's DiscreteSACLoss saves its target entropy as ``target_entropy``
    _BUFFER_RENAMES = (("_target_entropy", "target_entropy"),)
    default_value_estimator = ValueEstimators.TD0
    supported_value_estimators = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)
    _OUT_KEYS = ["loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy"]

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential,
        qvalue_network: TensorDictModule,
        *,
        action_space: str | TensorSpec = None,
        num_actions: int | None = None,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        fixed_alpha: bool = False,
        target_entropy_weight: float = 0.98,
        target_entropy: str | Number = "auto",
        delay_qvalue: bool = True,
        priority_key: str | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        skip_done_states: bool = False,
        deactivate_vmap: bool = False,
        use_prioritized_weights: str | bool = "auto",
        scalar_output_mode: str | None = None,
    ):
        super().__init__()
        owner = "DiscreteSACLoss"
        if action_space is None:
            action_space = getattr(actor_network, "spec", None)
            if isinstance(action_space, Composite):
                action_space = action_space["action"] if "action" in action_space.keys() else None
            if action_space is None:
                warnings.warn(
                    "DiscreteSACLoss: action_space was not given and the actor has no action spec; assuming "
                    "one-hot actions. Pass action_space='one-hot' / 'categorical' (or a spec).",
                    UserWarning, stacklevel=2,
                )
                action_space = "one-hot"
        if num_actions is None and isinstance(target_entropy, str) and target_entropy == "auto":
            raise ValueError(
                "DiscreteSACLoss: num_actions needs to be provided if target_entropy == 'auto' (the automatic "
                "target entropy is target_entropy_weight * log(num_actions)); pass num_actions=<n> or a number "
                "as target_entropy."
            )
        self.action_space = _find_action_space(action_space)
        self.num_actions = num_actions
        self.delay_qvalue = bool(delay_qvalue)
        self.convert_to_functional(actor_network, "actor_network")
        self.separate_losses = bool(separate_losses)
        nets = list(qvalue_network) if isinstance(qvalue_network, (list, tuple)) else [qvalue_network]
        self.num_qvalue_nets = len(nets) if len(nets) > 1 else num_qvalue_nets
        self.convert_to_functional(
            nets if len(nets) > 1 else nets[0], "qvalue_network", self.num_qvalue_nets,
            create_target_params=self.delay_qvalue,
            compare_against=list(actor_network.parameters()) if self.separate_losses else None,
        )
        distance_loss(torch.zeros(1), torch.zeros(1), loss_function)  # validates the name
        self.loss_function = loss_function
        self.reduction = _check_reduction(owner, reduction)
        self.skip_done_states = bool(skip_done_states)
        self.deactivate_vmap = bool(deactivate_vmap)
        self.use_prioritized_weights = use_prioritized_weights
        self.scalar_output_mode = check_scalar_output_mode(owner, scalar_output_mode)
        self.target_entropy_weight = float(target_entropy_weight)
        auto = None if num_actions is None else self.target_entropy_weight * math.log(num_actions)
        self._setup_alpha(alpha_init=alpha_init, min_alpha=min_alpha, max_alpha=max_alpha, fixed_alpha=fixed_alpha,
                          target_entropy=target_entropy, auto=auto)
        if priority_key is not None:
            self.set_keys(priority=priority_key)
        self._keys_changed()

    def _keys_changed(self) -> None:
        self._head = PolicyHead(self.actor_network)
        randomness = "different" if _has_random_module(self.qvalue_network) else "error"
        self._default_randomness = randomness
        self._q = QEnsemble(self.qvalue_network, self.tensor_keys.action_value, vmap=not self.deactivate_vmap,
                            randomness=randomness)
        self._te_known = not math.isnan(float(self._target_entropy))

    def _in_keys_list(self) -> list:
        k = self.tensor_keys
        actor_keys = PolicyHead(self.actor_network).in_keys
        q_keys = list(self.qvalue_network.in_keys)
        nxt = [("next", *((x,) if isinstance(x, str) else x)) for x in dict.fromkeys(actor_keys + q_keys)]
        return [k.action, ("next", k.reward), ("next", k.done), ("next", k.terminated), *actor_keys, *q_keys, *nxt]

    def _estimator_networks(self) -> dict:
        return {"value_network": None}

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (TD0 default; TD1 and TDLambda supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    # ------------------------------------------------------------------------------------ pieces
    def _qvalues(self, params, inputs: dict, bs) -> torch.Tensor:
        q = self._q
        if q.stacked is None:
            q.fallback.randomness = self._vmap_randomness or self._default_randomness
        return q(params, inputs, bs)

    def _policy(self, td: TensorDictBase, nxt: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        probs = self._head(td, self._missing, nxt=nxt).probs
        return probs, _log_probs(probs)

    def _next_value(self, td: TensorDictBase, alpha) -> torch.Tensor:
        bs = td.batch_size
        with torch.no_grad():
            source, keep = td, None
            if self.skip_done_states:
                term = self._get(td, ("next", self.tensor_keys.terminated)).reshape(bs).bool()
                if term.any():
                    keep = ~term
                    source = self._get(td, "next")[keep]
            nxt = keep is None
            probs, logp = self._policy(source, nxt=nxt)
            inputs = gather_inputs(source, self._q.in_keys, self._missing, nxt=nxt)
            q = self._qvalues(self.target_qvalue_network_params, inputs, source.batch_size)
            if q.shape[1:] != probs.shape:
                raise self._shape_error("the action values and the action probabilities differ in shape",
                                        action_value=q[0], probs=probs)
            value = (probs * (q.min(0).values - alpha * logp)).sum(-1)
            if keep is None:
                return value
            return torch.zeros(bs, dtype=value.dtype, device=value.device).index_put((keep,), value)

    def _chosen(self, q: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        if self.action_space == "categorical":
            if action.shape != q.shape[1:-1] + (1,):
                if action.shape != q.shape[1:-1]:
                    raise self._shape_error("the action does not index the action values",
                                            action=action, action_value=q[0])
                action = action.unsqueeze(-1)
            index = action.long().expand(q.shape[0], *action.shape)
            return q.gather(-1, index).squeeze(-1)
        if action.shape != q.shape[1:]:
            raise self._shape_error("the one-hot action and the action values differ in shape",
                                    action=action, action_value=q[0])
        return (q * action.to(q.dtype)).sum(-1)

    def qvalue_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """The Q loss per element (summed over the ensemble) and ``{"td_error", "action_value"}``."""
        target = self._value_target(tensordict, next_value=self._next_value(tensordict, self._alpha).unsqueeze(-1))
        target = target.squeeze(-1)
        inputs = gather_inputs(tensordict, self._q.in_keys, self._missing)
        q = self._qvalues(self.qvalue_network_params, inputs, tensordict.batch_size)
        chosen = self._chosen(q, self._get(tensordict, self.tensor_keys.action))
        if chosen.shape[1:] != target.shape:
            raise self._shape_error("the chosen action values and the value target differ in shape",
                                    action_value=chosen[0], value_target=target)
        loss = distance_loss(chosen, target.expand_as(chosen), self.loss_function).sum(0)
        td_error = (chosen.detach() - target).abs().max(0).values
        return loss, {"td_error": td_error, "action_value": q.detach()}

    def _actor_terms(self, td: TensorDictBase, q: torch.Tensor, alpha):
        probs, logp = self._policy(td)
        min_q = q.min(0).values
        if min_q.shape != probs.shape:
            raise self._shape_error("the action values and the action probabilities differ in shape",
                                    action_value=min_q, probs=probs)
        loss = (probs * (alpha * logp - min_q)).sum(-1)
        return loss, (probs * logp).sum(-1)

    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(sum_a pi (alpha log pi - min_i Q_i)`` per element, ``{"log_prob": sum_a pi log pi}``)."""
        with torch.no_grad():
            inputs = gather_inputs(tensordict, self._q.in_keys, self._missing)
            q = self._qvalues(self.qvalue_network_params, inputs, tensordict.batch_size)
        loss, log_prob = self._actor_terms(tensordict, q, self._alpha)
        return loss, {"log_prob": log_prob.detach()}

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes every loss term; writes the TD error at ``tensor_keys.priority``."""
        if self._warn_target:
            self._target_warning()
        alpha = self._alpha
        loss_q, meta = self.qvalue_loss(tensordict)
        loss_actor, log_prob = self._actor_terms(tensordict, meta["action_value"], alpha)
        fast_set(tensordict, self.tensor_keys.priority, meta["td_error"])
        losses = {"loss_actor": loss_actor, "loss_qvalue": loss_q, "loss_alpha": self.alpha_loss(log_prob)}
        weights = self._priority_weights(tensordict, self.tensor_keys.priority_weight)
        scalars = {"alpha": alpha, "entropy": -log_prob.detach().mean()}
        return self._finish(losses, scalars, tensordict, weights)
