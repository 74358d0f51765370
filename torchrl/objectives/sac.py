"""Soft actor-critic (Haarnoja et al., 2018, https://arxiv.org/abs/1801.01290 and
https://arxiv.org/abs/1812.05905): ``SACLoss`` (continuous actions) and ``DiscreteSACLoss``
(Christodoulou, 2019, https://arxiv.org/abs/1910.07207, defined in ``_discrete_sac.py``)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule, dispatch

from torchrl._fast import fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.objectives._discrete_sac import DiscreteSACLoss
from torchrl.objectives._functional import gather_inputs
from torchrl.objectives._tensor_calls import ModuleChain, PolicyHead
from torchrl.objectives._sac_common import QEnsemble, TemperatureMixin, check_scalar_output_mode
from torchrl.objectives.utils import ValueEstimators, _check_reduction, _has_random_module, distance_loss

__all__ = ["SACLoss", "DiscreteSACLoss"]


def _auto_entropy(action_spec, actor_network, action_key) -> float | None:
    """``-prod(action shape)`` from ``action_spec`` or the actor's spec; ``None`` if neither knows it."""
    spec = action_spec if action_spec is not None else getattr(actor_network, "spec", None)
    if isinstance(spec, Composite):
        spec = spec[action_key] if action_key in spec.keys(True, True) else None
    if not isinstance(spec, TensorSpec):
        return None
    return -float(math.prod(spec.shape))


class SACLoss(TemperatureMixin):
    r"""The SAC losses, with (SAC v1) or without (SAC v2) a state-value network.

    With :math:`a \sim \pi(\cdot|s)` reparameterised and :math:`\alpha = e^{\log\alpha}`:

    * ``loss_actor = alpha * log pi(a|s) - min_i Q_i(s, a)`` (Q parameters detached);
    * ``loss_qvalue = sum_i distance(Q_i(s, a_data), y)`` (v2) with the value estimator's target on the
      soft next value :math:`\min_i Q^{target}_i(s', a') - \alpha \log\pi(a'|s')`, :math:`a' \sim \pi(s')`;
      in v1, ``y`` bootstraps on the target value network :math:`V^{target}(s')` and the ensemble losses are
      averaged (``mean_i``);
    * ``loss_value`` (v1 only) ``= distance(V(s), min_i Q_i(s, a) - alpha log pi(a|s))`` (target without
      gradient; ``a`` is the actor loss's sample);
    * ``loss_alpha = -log_alpha * (log pi(a|s) + target_entropy)``.

    Also returned: ``alpha`` and ``entropy`` (``-mean log pi``). The largest absolute TD error over the
    ensemble is written to the input at ``tensor_keys.priority``. Random draws happen in this order: the
    next action (v2), then the actor's action.

    Key table (``loss.set_keys(...)``): ``action``, ``value`` (``"state_value"``), ``state_action_value``,
    ``log_prob`` (the actor's log-probability key), ``priority`` (``"td_error"``), ``reward``, ``done``,
    ``terminated``, ``priority_weight``.

    Args:
        actor_network: stochastic actor with a reparameterisable distribution (e.g. ``TanhNormal``).
        qvalue_network: Q-network reading observation and action, writing ``"state_action_value"``; one
            network (copied ``num_qvalue_nets`` times, copies re-initialised) or a list of networks.
        value_network: state-value network (SAC v1); ``None`` (default) for SAC v2.

    Keyword Args:
        num_qvalue_nets: ensemble size. Defaults to 2.
        loss_function: ``"smooth_l1"`` (default), ``"l2"`` or ``"l1"``.
        alpha_init: initial temperature. Defaults to 1.0.
        min_alpha, max_alpha: bounds of the temperature.
        action_spec: the action spec, for ``target_entropy="auto"`` (default: the actor's spec).
        fixed_alpha: keep the temperature constant (``log_alpha`` is then a buffer).
        target_entropy: a float, or ``"auto"`` (``-prod(action shape)`` from the spec; without one the
            forward pass raises ``RuntimeError``, as in TorchRL).
        delay_actor: target actor for the next action. Defaults to ``False``.
        delay_qvalue: target Q-networks. Defaults to ``True``.
        delay_value: target value network (v1). Defaults to ``True``.
        gamma: deprecated; use ``make_value_estimator(gamma=...)``.
        priority_key: deprecated; use ``set_keys(priority=...)``.
        separate_losses: parameters shared with the actor are trained by the actor loss only.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        skip_done_states: run the actor and target Q-networks on non-terminal next states only.
        deactivate_vmap: loop over the Q-networks (networks that are not plain MLPs).
        use_prioritized_weights: ``"auto"``, ``True`` or ``False`` (weights the Q-value loss).
        scalar_output_mode: with ``reduction="none"``: ``None`` keeps ``alpha``/``entropy`` as 0-dim
            tensors, ``"exclude"`` drops them, ``"non_tensor"`` stores them as non-tensor data.

    Value estimators: TD0 (default), TD1, TDLambda.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP, NormalParamExtractor, ProbabilisticActor, TanhNormal, ValueOperator
        >>> from torchrl.data import Bounded
        >>> from torchrl.objectives import SACLoss
        >>> net = TensorDictModule(torch.nn.Sequential(MLP(in_features=3, out_features=2, num_cells=[8]),
        ...     NormalParamExtractor()), ["observation"], ["loc", "scale"])
        >>> actor = ProbabilisticActor(net, ["loc", "scale"], distribution_class=TanhNormal)
        >>> qnet = ValueOperator(MLP(in_features=4, out_features=1, num_cells=[8]), ["observation", "action"])
        >>> loss = SACLoss(actor, qnet, action_spec=Bounded(-1.0, 1.0, (1,)))
        >>> data = TensorDict({"observation": torch.randn(5, 3), "action": torch.rand(5, 1) * 2 - 1, "next": {
        ...     "observation": torch.randn(5, 3), "reward": torch.randn(5, 1),
        ...     "done": torch.zeros(5, 1, dtype=torch.bool)}}, [5])
        >>> sorted(loss(data).keys())
        ['alpha', 'entropy', 'loss_actor', 'loss_alpha', 'loss_qvalue']
    """

    @dataclass
    class _AcceptedKeys:
        """SAC key table."""

        action: NestedKey = "action"
        value: NestedKey = "state_value"
        state_action_value: NestedKey = "state_action_value"
        log_prob: NestedKey = None
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.TD0
    supported_value_estimators = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential,
        qvalue_network: TensorDictModule | list[TensorDictModule],
        value_network: TensorDictModule | None = None,
        *,
        num_qvalue_nets: int = 2,
        loss_function: str = "smooth_l1",
        alpha_init: float = 1.0,
        min_alpha: float | None = None,
        max_alpha: float | None = None,
        action_spec: TensorSpec | None = None,
        fixed_alpha: bool = False,
        target_entropy: str | float = "auto",
        delay_actor: bool = False,
        delay_qvalue: bool = True,
        delay_value: bool = True,
        gamma: float | None = None,
        priority_key: str | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        skip_done_states: bool = False,
        deactivate_vmap: bool = False,
        use_prioritized_weights: str | bool = "auto",
        scalar_output_mode: str | None = None,
    ) -> None:
        super().__init__()
        owner = type(self).__name__
        self._deprecated_gamma(gamma)
        head = PolicyHead(actor_network)
        if head.composite:
            raise TypeError(
                f"{owner}: the actor samples a composite (multi-head) action; SACLoss needs a single action tensor "
                "for its Q-networks. Use one distribution over the concatenated action (e.g. TanhNormal)."
            )
        self.delay_actor, self.delay_qvalue = bool(delay_actor), bool(delay_qvalue)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=self.delay_actor)
        self.separate_losses = bool(separate_losses)
        actor_params = list(actor_network.parameters())
        if value_network is not None:
            self.delay_value = bool(delay_value)
            self.convert_to_functional(value_network, "value_network", create_target_params=self.delay_value)
            ids = {id(p) for p in actor_params}
            shared = [p for p in value_network.parameters() if id(p) in ids]
        else:
            self.delay_value = False
            self.value_network = None
            shared = []
        self._value_shared = frozenset(map(id, shared)) if self.separate_losses else frozenset()
        nets = list(qvalue_network) if isinstance(qvalue_network, (list, tuple)) else [qvalue_network]
        self.num_qvalue_nets = len(nets) if len(nets) > 1 else num_qvalue_nets
        compare = actor_params + (list(value_network.parameters()) if value_network is not None else [])
        self.convert_to_functional(
            nets if len(nets) > 1 else nets[0], "qvalue_network", self.num_qvalue_nets,
            create_target_params=self.delay_qvalue, compare_against=compare if self.separate_losses else None,
        )
        self._version = 1 if value_network is not None else 2
        distance_loss(torch.zeros(1), torch.zeros(1), loss_function)  # validates the name
        self.loss_function = loss_function
        self.reduction = _check_reduction(owner, reduction)
        self.skip_done_states = bool(skip_done_states)
        self.deactivate_vmap = bool(deactivate_vmap)
        self.use_prioritized_weights = use_prioritized_weights
        self.scalar_output_mode = check_scalar_output_mode(owner, scalar_output_mode)
        if self.tensor_keys.log_prob is None:
            self.tensor_keys.log_prob = head.log_prob_keys[0] if head.log_prob_keys else "action_log_prob"
        self._setup_alpha(alpha_init=alpha_init, min_alpha=min_alpha, max_alpha=max_alpha, fixed_alpha=fixed_alpha,
                          target_entropy=target_entropy,
                          auto=_auto_entropy(action_spec, actor_network, self.tensor_keys.action))
        if priority_key is not None:
            self.set_keys(priority=priority_key)
        self._keys_changed()

    # ------------------------------------------------------------------------------------- wiring
    def _keys_changed(self) -> None:
        k = self.tensor_keys
        self._head = PolicyHead(self.actor_network)
        target_actor = self._functionals["actor_network"].target_module
        self._next_head = PolicyHead(target_actor) if target_actor is not None else self._head
        randomness = "different" if _has_random_module(self.qvalue_network) else "error"
        self._default_randomness = randomness
        self._q = QEnsemble(self.qvalue_network, k.state_action_value, vmap=not self.deactivate_vmap,
                            randomness=randomness)
        if self.value_network is not None:
            self._v = ModuleChain(self.value_network, detach=self._value_shared)
            target = self._functionals["value_network"].target_module
            self._target_v = ModuleChain(target) if target is not None else self._v
        self._te_known = not math.isnan(float(self._target_entropy))

    def _in_keys_list(self) -> list:
        k = self.tensor_keys
        actor_keys = PolicyHead(self.actor_network).in_keys
        keys = [k.action, ("next", k.reward), ("next", k.done), ("next", k.terminated), *actor_keys]
        keys += [q for q in self.qvalue_network.in_keys if q != k.action]
        if self.value_network is not None:
            keys += list(self.value_network.in_keys) + [("next", *_tuple(x)) for x in self.value_network.in_keys]
        else:
            keys += [("next", *_tuple(x)) for x in actor_keys]
            keys += [("next", *_tuple(x)) for x in self.qvalue_network.in_keys if x != k.action]
        return keys

    def _estimator_networks(self) -> dict:
        return {"value_network": None}  # the loss hands next-state values to the estimator

    @property
    def device(self) -> torch.device:
        """The device of the loss's parameters."""
        return self.log_alpha.device

    @property
    def out_keys(self):
        """``loss_actor``, ``loss_qvalue``, ``loss_alpha``, ``alpha``, ``entropy`` (+ ``loss_value`` in v1)."""
        keys = ["loss_actor", "loss_qvalue", "loss_alpha", "alpha", "entropy"]
        if self._version == 1:
            keys.append("loss_value")
        if self.reduction == "none" and self.scalar_output_mode == "exclude":
            keys = [x for x in keys if x.startswith("loss")]
        return keys

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._OUT_KEYS = list(value)

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (TD0 default; TD1 and TDLambda supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """The module state dict (the target entropy included, NaN while still to be inferred)."""
        return super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        """Loads a state dict (a target entropy inferred by the other loss comes along)."""
        out = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self._te_known = not math.isnan(float(self._target_entropy))
        return out

    # ------------------------------------------------------------------------------------ pieces
    def _qvalues(self, params, inputs: dict, bs, detach: bool = False) -> torch.Tensor:
        q = self._q
        if q.stacked is None:
            q.fallback.randomness = self._vmap_randomness or self._default_randomness
        values = q(params, inputs, bs, detach=detach)
        return values.squeeze(-1) if values.shape[-1:] == (1,) else values

    def _sample(self, head: PolicyHead, td, *, nxt: bool = False):
        dist = head(td, self._missing, nxt=nxt)
        joint = getattr(dist, "rsample_and_log_prob", None)
        if joint is not None:
            action, log_prob = joint()
        else:
            action = dist.rsample()
            log_prob = dist.log_prob(action)
        if not self._te_known:
            self._unknown_action_dim()
        return action, log_prob

    def _unknown_action_dim(self):
        raise RuntimeError(
            "SACLoss: cannot infer the dimensionality of the action for target_entropy='auto': no action spec was "
            f"given (action_spec=None) and the actor has no spec for {self.tensor_keys.action!r}. Pass "
            "action_spec=env.action_spec, build the actor with spec=..., or pass a number as target_entropy."
        )

    def _actor_terms(self, td: TensorDictBase, alpha: torch.Tensor):
        """``(loss_actor, log_prob, min_i Q_i(s, a))`` for a fresh reparameterised action."""
        action, log_prob = self._sample(self._head, td)
        inputs = gather_inputs(td, self._q.in_keys, self._missing, extra={self.tensor_keys.action: action})
        min_q = self._qvalues(self.qvalue_network_params, inputs, td.batch_size, detach=True).min(0).values
        if log_prob.shape != min_q.shape:
            raise self._shape_error("the log-probability and the Q-values differ in shape",
                                    log_prob=log_prob, state_action_value=min_q)
        return alpha * log_prob - min_q, log_prob, min_q

    def actor_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``(alpha * log pi(a|s) - min_i Q_i(s, a)`` per element, ``{"log_prob": ...}``)."""
        loss, log_prob, _ = self._actor_terms(tensordict, self._alpha)
        return loss, {"log_prob": log_prob.detach()}

    def _next_value_v2(self, td: TensorDictBase, alpha: torch.Tensor) -> torch.Tensor:
        k = self.tensor_keys
        bs = td.batch_size
        target_params = self.target_qvalue_network_params
        with torch.no_grad():
            if self.skip_done_states:
                term = self._get(td, ("next", k.terminated)).reshape(bs).bool()
                if term.any():
                    keep = ~term
                    nxt = self._get(td, "next")[keep]
                    out = torch.zeros(bs, dtype=torch.get_default_dtype(), device=term.device)
                    if keep.any():
                        action, log_prob = self._sample(self._next_head, nxt)
                        inputs = gather_inputs(nxt, self._q.in_keys, self._missing, extra={k.action: action})
                        q = self._qvalues(target_params, inputs, nxt.batch_size)
                        out = out.to(q.dtype).index_put((keep,), (q - alpha * log_prob).min(0).values)
                    return out
            action, log_prob = self._sample(self._next_head, td, nxt=True)
            inputs = gather_inputs(td, self._q.in_keys, self._missing, extra={k.action: action}, nxt=True)
            q = self._qvalues(target_params, inputs, bs)
            if q.shape[1:] != log_prob.shape:
                raise self._shape_error("the next log-probability and the target Q-values differ in shape",
                                        log_prob=log_prob, state_action_value=q[0])
            return (q - alpha * log_prob).min(0).values

    def _q_loss(self, td: TensorDictBase, next_value: torch.Tensor, reduce_members: str):
        target = self._value_target(td, next_value=next_value.unsqueeze(-1)).squeeze(-1)
        inputs = gather_inputs(td, self._q.in_keys, self._missing)
        pred = self._qvalues(self.qvalue_network_params, inputs, td.batch_size)
        if pred.shape[1:] != target.shape:
            raise self._shape_error("the Q-values and the value target differ in shape",
                                    state_action_value=pred[0], value_target=target)
        loss = distance_loss(pred, target.expand_as(pred), self.loss_function)
        loss = loss.sum(0) if reduce_members == "sum" else loss.mean(0)
        td_error = (pred.detach() - target).abs().max(0).values
        return loss, {"td_error": td_error}

    def qvalue_v2_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """SAC v2 Q loss per element (summed over the ensemble) and ``{"td_error": ...}``."""
        return self._q_loss(tensordict, self._next_value_v2(tensordict, self._alpha), "sum")

    def _next_value_v1(self, td: TensorDictBase) -> torch.Tensor:
        with torch.no_grad():
            value = self._target_v(td, self._missing, nxt=True).get(self.tensor_keys.value)
            if value is None:
                raise self._value_key_error()
        return value.squeeze(-1) if value.shape[-1:] == (1,) else value

    def qvalue_v1_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """SAC v1 Q loss per element (averaged over the ensemble), bootstrapped on the target value network."""
        if self.value_network is None:
            raise RuntimeError("SACLoss: qvalue_v1_loss needs a value_network (SAC v1).")
        return self._q_loss(tensordict, self._next_value_v1(tensordict), "mean")

    def _value_key_error(self) -> KeyError:
        return KeyError(
            f"SACLoss: the value network writes {self._v.out_keys}, not {self.tensor_keys.value!r} "
            "(loss.tensor_keys.value); call loss.set_keys(value=<its output key>)."
        )

    def _value_terms(self, td, log_prob, min_q, alpha) -> torch.Tensor:
        value = self._v(td, self._missing).get(self.tensor_keys.value)
        if value is None:
            raise self._value_key_error()
        value = value.squeeze(-1) if value.shape[-1:] == (1,) else value
        target = (min_q - alpha * log_prob).detach()
        if value.shape != target.shape:
            raise self._shape_error("the state value and its target differ in shape", state_value=value,
                                    value_target=target)
        return distance_loss(value, target, self.loss_function)

    def value_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """SAC v1 value loss per element: ``distance(V(s), min_i Q_i(s, a) - alpha log pi(a|s))``."""
        if self.value_network is None:
            raise RuntimeError("SACLoss: value_loss needs a value_network (SAC v1).")
        alpha = self._alpha
        with torch.no_grad():
            _, log_prob, min_q = self._actor_terms(tensordict, alpha)
        return self._value_terms(tensordict, log_prob, min_q, alpha), {}

    # ------------------------------------------------------------------------------------ forward
    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes every loss term; writes the TD error at ``tensor_keys.priority``."""
        if self._warn_target:
            self._target_warning()
        alpha = self._alpha
        if self._version == 2:
            loss_q, meta = self._q_loss(tensordict, self._next_value_v2(tensordict, alpha), "sum")
        else:
            loss_q, meta = self._q_loss(tensordict, self._next_value_v1(tensordict), "mean")
        loss_actor, log_prob, min_q = self._actor_terms(tensordict, alpha)
        losses = {"loss_actor": loss_actor, "loss_qvalue": loss_q, "loss_alpha": self.alpha_loss(log_prob)}
        if self._version == 1:
            losses["loss_value"] = self._value_terms(tensordict, log_prob, min_q, alpha)
        fast_set(tensordict, self.tensor_keys.priority, meta["td_error"])
        weights = self._priority_weights(tensordict, self.tensor_keys.priority_weight)
        scalars = {"alpha": alpha, "entropy": -log_prob.detach().mean()}
        return self._finish(losses, scalars, tensordict, weights)


def _tuple(key) -> tuple:
    return (key,) if isinstance(key, str) else tuple(key)
