"""``DQNLoss`` (Mnih et al., 2015; double DQN: van Hasselt et al., 2016) and ``DistributionalDQNLoss`` (C51:
Bellemare et al., 2017)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key
from tensordict.nn import TensorDictModule, TensorDictModuleBase, dispatch
from torch import nn

from torchrl._utils._deprecation import warn_once
from torchrl._fast import _switch, fast_get, fast_set, new_td
from torchrl.data.tensor_specs import Binary, Categorical, Composite, MultiOneHot, OneHot, TensorSpec
from torchrl.envs.utils import step_mdp
from torchrl._fast.calls import plain_network
from torchrl.objectives._functional import find_producer, follow_path, read_inputs
from torchrl.objectives.common import LossModule
from torchrl.objectives.utils import ValueEstimators, _check_reduction, _reduce, distance_loss, mean_squared_error

__all__ = ["DQNLoss", "DistributionalDQNLoss"]

_EMPTY = torch.Size([])
_SPACES = {
    "one-hot": "one-hot", "one_hot": "one-hot", "onehot": "one-hot",
    "mult-one-hot": "mult-one-hot", "mult_one_hot": "mult-one-hot", "multi-one-hot": "mult-one-hot",
    "binary": "binary", "categorical": "categorical",
}


def _find_action_space(action_space) -> str:
    """Canonical action-space name (``"one-hot"``, ``"mult-one-hot"``, ``"binary"``, ``"categorical"``)."""
    if isinstance(action_space, Composite):
        if "action" not in action_space.keys():
            raise ValueError(f"the action spec is a Composite without an 'action' entry: {list(action_space.keys())}.")
        action_space = action_space["action"]
    if isinstance(action_space, TensorSpec):
        kinds = ((MultiOneHot, "mult-one-hot"), (OneHot, "one-hot"), (Binary, "binary"), (Categorical, "categorical"))
        for cls, name in kinds:
            if isinstance(action_space, cls):
                return name
        raise ValueError(
            f"unsupported action spec {type(action_space).__name__}; expected OneHot, MultiOneHot, Binary or "
            "Categorical."
        )
    if isinstance(action_space, str) and action_space in _SPACES:
        return _SPACES[action_space]
    raise ValueError(
        f"unknown action_space {action_space!r}; expected one of 'one-hot', 'mult-one-hot', 'binary', 'categorical' "
        "or a spec of those types."
    )


def _infer_action_space(value_network) -> str | None:
    for m in value_network.modules():
        space = getattr(m, "action_space", None)
        if space is not None:
            return _find_action_space(space)
        spec = getattr(m, "spec", None)
        if isinstance(spec, Composite) and "action" in spec.keys() and spec["action"] is not None:
            return _find_action_space(spec["action"])
        if isinstance(spec, (OneHot, Categorical)):
            return _find_action_space(spec)
    return None


def _as_td_module(network, out_key: str = "action_value") -> TensorDictModuleBase:
    if isinstance(network, TensorDictModuleBase):
        return network
    if isinstance(network, nn.Module):
        return TensorDictModule(network, in_keys=["observation"], out_keys=[out_key])
    raise TypeError(f"value_network must be an nn.Module or a TensorDictModule, got {type(network).__name__}.")


def _unmasked_qvalue_module(module, key) -> bool:
    """A Q-value module that rewrites ``key`` unchanged (no action mask, no distributional transform)."""
    return (
        getattr(module, "action_mask_key", "missing") is None
        and getattr(module, "action_value_key", None) == key
        and not isinstance(getattr(module, "support", None), torch.Tensor)
    )


class DQNLoss(LossModule):
    """The DQN loss: regress :math:`Q(s, a)` on a (target-network) bootstrapped value target.

    With the default TD(0) estimator: ``target = r + gamma * (1 - terminated) * max_a' Q_target(s', a')``
    (double DQN: ``Q_target(s', argmax_a' Q(s', a'))``), ``loss = distance(Q(s, a), target)``. The squared
    TD error is written to the input at ``tensor_keys.priority`` (for prioritized replay) and, when present,
    ``tensor_keys.priority_weight`` weights the elements.

    Key table (``loss.set_keys(...)``): ``action_value`` (Q-values, written by the network), ``action``,
    ``value`` (``"chosen_action_value"``), ``reward``, ``done``, ``terminated`` (under ``"next"``),
    ``priority`` (``"td_error"``), ``priority_weight``, ``advantage``, ``value_target``.

    Args:
        value_network: a :class:`~torchrl.modules.QValueActor`, any TensorDict module writing
            ``"action_value"``, or a plain ``nn.Module`` (wrapped to read ``"observation"``).

    Keyword Args:
        loss_function: ``"l2"`` (default), ``"l1"`` or ``"smooth_l1"``.
        delay_value: use a target network (``target_value_network_params``). Defaults to ``True``.
        double_dqn: double DQN target. Defaults to ``False``.
        gamma: deprecated; use ``make_value_estimator(gamma=...)``.
        action_space: ``"one-hot"``, ``"mult-one-hot"``, ``"binary"``, ``"categorical"`` or a spec; inferred
            from the network's spec when omitted (``ValueError`` if it has none).
        priority_key: deprecated; use ``set_keys(priority=...)``.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        use_prioritized_weights: ``"auto"`` (use ``priority_weight`` if present), ``True`` (required) or
            ``False``.

    Value estimators: TD0 (default), TD1, TDLambda.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.objectives import DQNLoss
        >>> qnet = TensorDictModule(torch.nn.Linear(4, 2), ["observation"], ["action_value"])
        >>> loss = DQNLoss(qnet, action_space="categorical")
        >>> batch = TensorDict({"observation": torch.randn(8, 4), "action": torch.randint(2, (8,)),
        ...     "next": {"observation": torch.randn(8, 4), "reward": torch.ones(8, 1),
        ...     "done": torch.zeros(8, 1, dtype=torch.bool)}}, [8])
        >>> loss(batch)["loss"].shape
        torch.Size([])
    """

    @dataclass
    class _AcceptedKeys:
        """DQN key table."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "chosen_action_value"
        action_value: NestedKey = "action_value"
        action: NestedKey = "action"
        priority: NestedKey = "td_error"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.TD0
    supported_value_estimators = (ValueEstimators.TD0, ValueEstimators.TD1, ValueEstimators.TDLambda)
    _OUT_KEYS = ["loss"]

    def __init__(
        self,
        value_network,
        *,
        loss_function: str | None = "l2",
        delay_value: bool = True,
        double_dqn: bool = False,
        gamma: float | None = None,
        action_space: str | TensorSpec = None,
        priority_key: str | None = None,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
    ) -> None:
        super().__init__()
        self._deprecated_gamma(gamma)
        value_network = _as_td_module(value_network)
        self.delay_value = bool(delay_value)
        self.double_dqn = bool(double_dqn)
        self.convert_to_functional(value_network, "value_network", create_target_params=self.delay_value)
        self.loss_function = "l2" if loss_function is None else loss_function
        distance_loss(torch.zeros(1), torch.zeros(1), self.loss_function)  # validates the name
        if action_space is None:
            action_space = _infer_action_space(value_network)
            if action_space is None:
                raise ValueError(
                    "DQNLoss: neither action_space nor a spec on the value network was given, so the action space "
                    "cannot be inferred; pass action_space='one-hot' (or 'categorical', 'mult-one-hot', 'binary', "
                    "or a spec), or build the network as QValueActor(..., spec=...)."
                )
        self.action_space = _find_action_space(action_space)
        self.reduction = _check_reduction("DQNLoss", reduction)
        if use_prioritized_weights not in ("auto", True, False):
            raise ValueError(
                f"DQNLoss: use_prioritized_weights must be 'auto', True or False, got {use_prioritized_weights!r}."
            )
        self.use_prioritized_weights = use_prioritized_weights
        if priority_key is not None:
            warn_once("DQNLoss: priority_key is deprecated; use loss.set_keys(priority=...).")
            self.set_keys(priority=priority_key)
        self._keys_changed()

    def _keys_changed(self) -> None:
        """Finds the plain module computing ``action_value`` (the hot path calls it on tensors)."""
        fast = None
        net = self.value_network
        key = self.tensor_keys.action_value
        path = find_producer(net, key, passthrough=lambda m: _unmasked_qvalue_module(m, key))
        if path is not None and self.action_space in ("one-hot", "categorical"):
            producer = follow_path(net, path)
            target = self._functionals["value_network"].target_module
            q = plain_network(producer)
            tq = plain_network(follow_path(target, path)) if target is not None else q
            in_keys = list(producer.in_keys)
            next_keys = [unravel_key(("next", k)) for k in in_keys]
            fast = (q, tq, in_keys, next_keys, list(producer.out_keys).index(self.tensor_keys.action_value))
        self._fast = fast

    def _in_keys_list(self) -> list:
        k = self.tensor_keys
        net_keys = list(self.value_network.in_keys)
        return [
            k.action, ("next", k.reward), ("next", k.done), ("next", k.terminated),
            *net_keys, *[("next", key) for key in net_keys],
        ]

    def _estimator_networks(self) -> dict:
        return {"value_network": self.value_network}

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        est = self._value_estimator
        if est is not None:
            k = self.tensor_keys
            est.set_keys(
                value=k.value, reward=k.reward, done=k.done, terminated=k.terminated,
                advantage=k.advantage, value_target=k.value_target,
            )

    # --------------------------------------------------------------------------------- forward
    def _q_values(self, tensordict: TensorDictBase):
        """(Q(s, .), bootstrap value of s' [.., 1] under no_grad)."""
        fast = self._fast
        if fast is not None and _switch.ON:
            q_fn, tq_fn, in_keys, next_keys, idx = fast
            if len(in_keys) == 1:
                x, nx = fast_get(tensordict, in_keys[0]), fast_get(tensordict, next_keys[0])
                if x is None or nx is None:
                    raise self._missing(in_keys[0] if x is None else next_keys[0])
                inputs, nxt = (x,), (nx,)
            else:
                inputs = read_inputs(tensordict, in_keys, self._missing)
                nxt = read_inputs(tensordict, next_keys, self._missing)
            q = q_fn(*inputs)
            if isinstance(q, tuple):
                q = q[idx]
            with torch.no_grad():
                tq = tq_fn(*nxt)
                if isinstance(tq, tuple):
                    tq = tq[idx]
                if self.double_dqn:
                    oq = q_fn(*nxt)
                    oq = oq[idx] if isinstance(oq, tuple) else oq
                    return q, tq.gather(-1, oq.argmax(-1, keepdim=True))
                return q, tq.max(-1, keepdim=True).values
        return self._q_values_generic(tensordict)

    def _run(self, module, data: TensorDictBase, key) -> TensorDictBase:
        out = module(data)
        return self._get(out, key)

    def _q_values_generic(self, tensordict: TensorDictBase):
        k = self.tensor_keys
        net = self.value_network
        target = self._functionals["value_network"].target_module or net
        q = self._run(net, tensordict.copy(), k.action_value)
        with torch.no_grad():
            nxt = step_mdp(tensordict, keep_other=True)
            t_out = target(nxt.copy())
            tq = self._get(t_out, k.action_value)
            chooser = net(nxt.copy()) if self.double_dqn else t_out
            if self.action_space in ("one-hot", "categorical"):
                idx = self._get(chooser, k.action_value).argmax(-1, keepdim=True)
                return q, tq.gather(-1, idx)
            greedy = self._get(chooser, k.action)
            return q, (tq * greedy).sum(-1, keepdim=True)

    def _chosen(self, q: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``Q(s, a)`` with a trailing singleton dim (``[*B, 1]``)."""
        k = self.tensor_keys
        if self.action_space == "categorical":
            if action.ndim == q.ndim - 1:
                action = action.unsqueeze(-1)
            if action.shape[:-1] != q.shape[:-1] or action.shape[-1] != 1:
                raise self._shape_error(
                    "a categorical action must be [*B] or [*B, 1] for Q-values [*B, n_actions]",
                    **{repr(k.action_value): q, repr(k.action): action},
                )
            return q.gather(-1, action.long())
        if action.shape != q.shape:
            raise self._shape_error(
                f"a {self.action_space} action must have the shape of the Q-values",
                **{repr(k.action_value): q, repr(k.action): action},
            )
        return (q * action).sum(-1, keepdim=True)

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes ``{"loss": ...}`` and writes the TD error at ``tensor_keys.priority``."""
        if self._warn_target:
            self._target_warning()
        k = self._tensor_keys
        action = self._get(tensordict, k.action)
        q, next_value = self._q_values(tensordict)
        pred = self._chosen(q, action)
        target = self._value_target(tensordict, next_value=next_value)
        if pred.shape != target.shape:
            reward = self._get(tensordict, ("next", k.reward))
            raise self._shape_error(
                "the chosen Q-value and the value target differ in shape",
                chosen_action_value=pred, value_target=target, **{repr(("next", k.reward)): reward},
            )
        weights = self._priority_weights(tensordict, k.priority_weight)
        mask = self._loss_mask(tensordict)
        reduction = self.reduction
        if reduction == "mean" and weights is None and mask is None and self.loss_function == "l2":
            # the common case: one fused mean squared error node in the graph; the TD error apart, without grad
            fast_set(tensordict, k.priority, distance_loss(pred.detach(), target, "l2"))
            return new_td({"loss": mean_squared_error(pred, target)}, _EMPTY)
        loss = distance_loss(pred, target, self.loss_function)  # [*B, 1]
        if self.loss_function == "l2":
            td_error = loss.detach()
        else:
            td_error = (pred.detach() - target.detach()).pow(2)
        fast_set(tensordict, k.priority, td_error)
        if reduction == "mean" and weights is None and mask is None:
            loss = loss.mean()
        else:
            loss = _reduce(loss, reduction, mask, weights)
            if reduction == "none":
                loss = loss.squeeze(-1)
        return new_td({"loss": loss}, _EMPTY)

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (TD0 default; TD1 and TDLambda supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    @property
    def in_keys(self):
        """Inputs: action, next reward/done/terminated, the network's inputs now and at ``"next"``."""
        return super().in_keys


class DistributionalDQNLoss(LossModule):
    """Categorical (C51) distributional DQN loss (Bellemare et al., 2017, https://arxiv.org/abs/1707.06887).

    The network outputs, per action, a distribution over the fixed ``support`` atoms (``action_value`` of
    shape ``[*B, n_atoms, n_actions]``, read as logits over the atoms). The target distribution of
    :math:`r + \\gamma (1 - \\text{terminated}) z` under the target network's greedy action is projected back
    on the support; the loss is the cross-entropy to it. The per-element loss is written at
    ``tensor_keys.priority``.

    Args:
        value_network: a :class:`~torchrl.modules.DistributionalQValueActor` (or a module writing
            ``"action_value"`` and carrying a ``support`` tensor).

    Keyword Args:
        gamma: discount (required).
        delay_value: use a target network. Defaults to ``True``.
        priority_key: deprecated; use ``set_keys(priority=...)``.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        use_prioritized_weights: ``"auto"``, ``True`` or ``False`` (see :class:`DQNLoss`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.objectives import DistributionalDQNLoss
        >>> class Net(torch.nn.Module):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.lin = torch.nn.Linear(4, 5 * 2)
        ...     def forward(self, obs):
        ...         return self.lin(obs).view(*obs.shape[:-1], 5, 2)
        >>> qnet = TensorDictModule(Net(), ["observation"], ["action_value"])
        >>> qnet.support = torch.linspace(-1, 1, 5)
        >>> loss = DistributionalDQNLoss(qnet, gamma=0.9)
        >>> batch = TensorDict({"observation": torch.randn(3, 4), "action": torch.nn.functional.one_hot(
        ...     torch.randint(2, (3,)), 2), "next": {"observation": torch.randn(3, 4), "reward": torch.ones(3, 1),
        ...     "done": torch.zeros(3, 1, dtype=torch.bool)}}, [3])
        >>> loss(batch)["loss"].shape
        torch.Size([])
    """

    @dataclass
    class _AcceptedKeys:
        """Distributional DQN key table."""

        action_value: NestedKey = "action_value"
        action: NestedKey = "action"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        steps_to_next_obs: NestedKey = "steps_to_next_obs"
        priority: NestedKey = "td_error"
        priority_weight: NestedKey = "priority_weight"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.TD0
    supported_value_estimators = (ValueEstimators.TD0,)
    _OUT_KEYS = ["loss"]

    def __init__(
        self,
        value_network,
        *,
        gamma: float,
        delay_value: bool = True,
        priority_key: str | None = None,
        reduction: str | None = None,
        use_prioritized_weights: str | bool = "auto",
    ):
        super().__init__()
        value_network = _as_td_module(value_network)
        owners = [m for m in value_network.modules() if isinstance(getattr(m, "support", None), torch.Tensor)]
        if not owners:
            raise ValueError(
                "DistributionalDQNLoss: the value network has no `support` tensor (the atoms of the value "
                "distribution); use a DistributionalQValueActor or set `value_network.support`."
            )
        # the atoms are read from the network (as TorchRL, the loss saves none of its own); gamma is a buffer
        object.__setattr__(self, "_support_owner", owners[0])  # a reference, not a submodule (state_dict as TorchRL)
        self.register_buffer("gamma", torch.tensor(float(gamma)))
        self.delay_value = bool(delay_value)
        self.convert_to_functional(value_network, "value_network", create_target_params=self.delay_value)
        self.reduction = _check_reduction("DistributionalDQNLoss", reduction)
        self.use_prioritized_weights = use_prioritized_weights
        if priority_key is not None:
            warn_once("DistributionalDQNLoss: priority_key is deprecated; use loss.set_keys(priority=...).")
            self.set_keys(priority=priority_key)

    @property
    def support(self) -> torch.Tensor:
        """The atoms of the value distribution (the value network's ``support``)."""
        return self._support_owner.support

    def _estimator_networks(self) -> dict:
        return {"value_network": self.value_network}

    def _in_keys_list(self) -> list:
        k = self.tensor_keys
        net_keys = list(self.value_network.in_keys)
        return [k.action, ("next", k.reward), ("next", k.done), ("next", k.terminated), *net_keys,
                *[("next", key) for key in net_keys]]

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Only TD(0) applies (the projection is one-step); ``gamma`` given here replaces the loss's."""
        super().make_value_estimator(value_type, **hyperparams)
        if "gamma" in hyperparams:
            self.gamma = float(hyperparams["gamma"])
        return self

    def _log_probs(self, module, data: TensorDictBase) -> torch.Tensor:
        logits = self._get(module(data), self.tensor_keys.action_value)
        if logits.ndim < 2 or logits.shape[-2] != self.support.numel():
            raise self._shape_error(
                f"action_value must be [*B, n_atoms={self.support.numel()}, n_actions]", action_value=logits,
                support=self.support,
            )
        return logits.log_softmax(-2)

    def _pick(self, logp: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        batch, n_actions = logp.shape[:-2], logp.shape[-1]
        if action.shape == batch + (n_actions,):
            return (logp * action.unsqueeze(-2).to(logp.dtype)).sum(-1)
        if action.shape == batch or action.shape == batch + (1,):
            idx = action.reshape(batch + (1, 1)).long().expand(*logp.shape[:-1], 1)
            return logp.gather(-1, idx).squeeze(-1)
        raise self._shape_error("the action matches neither a one-hot nor a categorical layout",
                                action_value=logp, action=action)

    def forward(self, input_tensordict: TensorDictBase) -> TensorDictBase:
        """Computes ``{"loss": ...}`` (cross-entropy to the projected target distribution)."""
        if self._warn_target:
            self._target_warning()
        td, k = input_tensordict, self.tensor_keys
        logp = self._pick(self._log_probs(self.value_network, td.copy()), self._get(td, k.action))
        support = self.support.to(logp.dtype)
        v_min, v_max, n = support[0], support[-1], support.numel()
        delta = (v_max - v_min) / (n - 1)
        with torch.no_grad():
            nxt = step_mdp(td, keep_other=True)
            target = self._functionals["value_network"].target_module or self.value_network
            probs = self._log_probs(target, nxt.copy()).exp()  # [*B, atoms, actions]
            best = (probs * support.unsqueeze(-1)).sum(-2).argmax(-1)
            p_next = probs.gather(-1, best[..., None, None].expand(*probs.shape[:-1], 1)).squeeze(-1)
            reward = self._get(td, ("next", k.reward)).to(logp.dtype)
            term = td.get(("next", k.terminated), None)
            term = self._get(td, ("next", k.done)) if term is None else term
            reward = reward.reshape(logp.shape[:-1] + (1,))
            not_term = (~term.bool()).reshape(reward.shape).to(logp.dtype)
            steps = td.get(k.steps_to_next_obs, None)
            gamma = self.gamma if steps is None else self.gamma ** steps.reshape(reward.shape).to(logp.dtype)
            tz = (reward + gamma * not_term * support).clamp(v_min, v_max)
            b = (tz - v_min) / delta
            low, up = b.floor().long().clamp(0, n - 1), b.ceil().long().clamp(0, n - 1)
            w_low = (up.to(b.dtype) - b) + (low == up).to(b.dtype)
            w_up = b - low.to(b.dtype)
            m = torch.zeros_like(p_next).scatter_add_(-1, low, p_next * w_low).scatter_add_(-1, up, p_next * w_up)
        loss = -(m * logp).sum(-1)
        fast_set(td, k.priority, loss.detach().unsqueeze(-1))
        weights = self._priority_weights(td, k.priority_weight)
        loss = _reduce(loss, self.reduction, self._loss_mask(td), weights)
        return new_td({"loss": loss}, _EMPTY)
