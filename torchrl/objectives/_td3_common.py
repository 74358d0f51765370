"""What TD3 and TD3+BC share: a deterministic actor (with target), an ensemble of Q-networks (with targets),
target-policy smoothing and the clipped double-Q target (Fujimoto et al., 2018, https://arxiv.org/abs/1802.09477)."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import NestedKey, TensorDictBase

from torchrl.data.tensor_specs import Bounded, Composite
from torchrl.objectives._functional import EnsembleCall, ModuleRunner, gather_inputs
from torchrl.objectives.common import LossModule
from torchrl.objectives.utils import ValueEstimators, _check_reduction, _has_random_module, _reduce, distance_loss

__all__ = []


def _bounds(owner: str, action_spec, bounds, actor_network, action_key) -> tuple:
    if action_spec is not None and bounds is not None:
        raise ValueError(f"{owner}: pass either action_spec or bounds, not both.")
    if bounds is not None:
        low, high = bounds
    else:
        spec = action_spec
        if spec is None:
            spec = getattr(actor_network, "spec", None)
            if spec is None:
                raise ValueError(
                    f"{owner}: the action bounds are unknown; pass action_spec (a Bounded spec) or "
                    "bounds=(low, high)."
                )
        if isinstance(spec, Composite):
            if action_key not in spec.keys(True, True):
                raise ValueError(
                    f"{owner}: the action spec has no {action_key!r} entry: {list(spec.keys(True, True))}."
                )
            spec = spec[action_key]
        space = getattr(spec, "space", None)
        low, high = getattr(space, "low", None), getattr(space, "high", None)
        if (
            not isinstance(spec, Bounded)  # as TorchRL: an Unbounded spec's box is not a bound
            or not isinstance(low, torch.Tensor)
            or not (torch.isfinite(low).all() and torch.isfinite(high).all())
        ):
            raise ValueError(f"{owner}: the action spec must be bounded (got {type(spec).__name__}); or pass bounds.")
    low, high = torch.as_tensor(low), torch.as_tensor(high)
    if (low >= high).any():
        raise ValueError(f"{owner}: every lower bound must be below its upper bound, got low={low}, high={high}.")
    return low.float(), high.float()


class _TwinDelayedBase(LossModule):
    """Networks, targets and the clipped double-Q target of TD3-style losses."""

    @dataclass
    class _AcceptedKeys:
        """TD3 key table."""

        action: NestedKey = "action"
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

    def _setup(
        self, actor_network, qvalue_network, *, action_spec, bounds, num_qvalue_nets, policy_noise, noise_clip,
        loss_function, delay_actor, delay_qvalue, priority_key, separate_losses, reduction, deactivate_vmap,
        use_prioritized_weights,
    ) -> None:
        owner = type(self).__name__
        self.delay_actor, self.delay_qvalue = bool(delay_actor), bool(delay_qvalue)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=self.delay_actor)
        nets = list(qvalue_network) if isinstance(qvalue_network, (list, tuple)) else [qvalue_network]
        if len(nets) > 1:
            num_qvalue_nets = len(nets)
        self.num_qvalue_nets = num_qvalue_nets
        shared = list(actor_network.parameters()) if separate_losses else None
        self.convert_to_functional(
            nets if len(nets) > 1 else nets[0], "qvalue_network", num_qvalue_nets,
            create_target_params=self.delay_qvalue, compare_against=shared,
        )
        self.separate_losses = bool(separate_losses)
        low, high = _bounds(owner, action_spec, bounds, actor_network, self.tensor_keys.action)
        self.register_buffer("min_action", low)
        self.register_buffer("max_action", high)
        self.policy_noise, self.noise_clip = float(policy_noise), float(noise_clip)
        distance_loss(torch.zeros(1), torch.zeros(1), loss_function)  # validates the name
        self.loss_function = loss_function
        self.reduction = _check_reduction(owner, reduction)
        self.deactivate_vmap = bool(deactivate_vmap)
        self.use_prioritized_weights = use_prioritized_weights
        if priority_key is not None:
            self.set_keys(priority=priority_key)
        self._keys_changed()

    def _keys_changed(self) -> None:
        target_actor = self._functionals["actor_network"].target_module
        self._actor = ModuleRunner(self.actor_network)
        self._t_actor = ModuleRunner(target_actor or self.actor_network)
        randomness = "different" if _has_random_module(self.qvalue_network) else "error"
        self._default_randomness = randomness
        self._ens = EnsembleCall(self.qvalue_network, self.tensor_keys.state_action_value,
                                 vmap=not self.deactivate_vmap, randomness=randomness)

    def _in_keys_list(self) -> list:
        k = self.tensor_keys
        actor_keys = list(self.actor_network.in_keys)
        q_keys = list(self.qvalue_network.in_keys)
        return [k.action, ("next", k.reward), ("next", k.done), ("next", k.terminated), *actor_keys,
                *[("next", key) for key in actor_keys], *q_keys]

    def _estimator_networks(self) -> dict:
        return {"value_network": None}

    def _ensemble(self, params, inputs: dict, batch_size, detach: bool = False) -> torch.Tensor:
        ens = self._ens
        ens.randomness = self._vmap_randomness or self._default_randomness
        q = ens(params, inputs, batch_size, detach=detach)
        return q.squeeze(-1) if q.shape[-1:] == (1,) else q

    def _policy_action(self, tensordict: TensorDictBase) -> dict:
        actor = self._actor
        out = actor(gather_inputs(tensordict, actor.in_keys, self._missing), tensordict.batch_size)
        if self.tensor_keys.action not in out:
            raise self._missing(self.tensor_keys.action)
        return out

    def _actor_q(self, tensordict: TensorDictBase, every_net: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(policy action, ``Q_0(s, pi(s))``) with the Q parameters detached; ``every_net``: the Q-values of
        every network (``[num_qvalue_nets, *B]``, the actor loss reads the first)."""
        out = self._policy_action(tensordict)
        inputs = gather_inputs(tensordict, self._ens.in_keys, self._missing, extra=out)
        params = self.qvalue_network_params if every_net else self.qvalue_network_params[:1]
        q = self._ensemble(params, inputs, tensordict.batch_size, detach=True)
        return out[self.tensor_keys.action], (q if every_net else q[0])

    def _q_loss(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, dict]:
        k = self.tensor_keys
        bs = tensordict.batch_size
        with torch.no_grad():
            t_actor = self._t_actor
            nxt = t_actor(gather_inputs(tensordict, t_actor.in_keys, self._missing, nxt=True), bs)
            next_action = nxt[k.action]
            if self.policy_noise > 0:
                noise = (torch.randn_like(next_action) * self.policy_noise).clamp(-self.noise_clip, self.noise_clip)
                next_action = next_action + noise
            low, high = self.min_action.to(next_action), self.max_action.to(next_action)
            nxt[k.action] = torch.maximum(torch.minimum(next_action, high), low)
            inputs = gather_inputs(tensordict, self._ens.in_keys, self._missing, extra=nxt, nxt=True)
            next_value = self._ensemble(self.target_qvalue_network_params, inputs, bs).min(0).values
        target = self._value_target(tensordict, next_value=next_value.unsqueeze(-1)).squeeze(-1)
        inputs = gather_inputs(tensordict, self._ens.in_keys, self._missing)
        current = self._ensemble(self.qvalue_network_params, inputs, bs)
        if current.shape[1:] != target.shape:
            raise self._shape_error("the Q-values and the value target differ in shape",
                                    state_action_value=current, value_target=target)
        td_error = (current - target).detach().pow(2).max(0).values
        loss = distance_loss(current, target.expand_as(current), self.loss_function).sum(0)
        weights = self._priority_weights(tensordict, k.priority_weight)
        loss = _reduce(loss, self.reduction, self._loss_mask(tensordict), weights)
        meta = {"td_error": td_error, "next_state_value": next_value, "pred_value": current.detach(),
                "target_value": target.detach()}
        return loss, meta

