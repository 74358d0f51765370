"""What the on-policy losses (PPO, A2C, REINFORCE) share.

* registration of the actor (a probabilistic module) and the critic, with ``separate_losses`` (a trunk
  shared by both is trained by the actor loss only) and the deprecated ``actor=`` / ``critic=`` names;
* the key table: ``action`` and ``sample_log_prob`` default to the actor's sample and log-probability keys
  (lists of keys for a multi-head, composite action);
* the advantage: read from the data, or computed by the value estimator (GAE by default) on a shallow copy;
* the critic loss ``critic_coeff * distance(V(s), value_target)``, with optional PPO-style value clipping
  and the explained variance of the critic;
* the entropy bonus (closed form or Monte-Carlo), with one coefficient per action head if asked;
* log-probabilities of the taken action (summed over heads for composite actions).

Every per-element term is computed at the log-probability's shape ``E`` (``[*B]``, or ``[*B, agents]``);
advantages and values of shape ``E`` or ``[*E, 1]`` are accepted, anything else is an error naming each
tensor and its shape.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, is_tensor_collection, unravel_key

from torchrl._utils._deprecation import warn_once
from torchrl._fast import fast_get
from torchrl.objectives._tensor_calls import ModuleChain, PolicyHead, entropy, head_name, per_head, sum_features
from torchrl.objectives.common import LossModule
from torchrl.objectives.utils import ValueEstimators, _check_reduction, distance_loss

__all__ = []

ALL_ESTIMATORS = (
    ValueEstimators.TD0,
    ValueEstimators.TD1,
    ValueEstimators.TDLambda,
    ValueEstimators.GAE,
    ValueEstimators.MAGAE,
    ValueEstimators.VTrace,
)


def standardize(x: torch.Tensor, exclude_dims: tuple = ()) -> torch.Tensor:
    """``(x - mean) / std`` over every dim except ``exclude_dims`` (std unbiased, clamped at 1e-6)."""
    if not exclude_dims:
        return (x - x.mean()) / x.std().clamp_min(1e-6)
    excl = {d % x.ndim for d in exclude_dims}
    dims = tuple(d for d in range(x.ndim) if d not in excl)
    return (x - x.mean(dims, keepdim=True)) / x.std(dims, keepdim=True).clamp_min(1e-6)


def clip_value_loss(old_value, value, bounds: tuple[float, float], target, loss, loss_type: str):
    """PPO value clipping: the larger of the plain loss and the loss of ``old + clamp(value - old, lo, hi)``.

    Returns ``(loss, fraction of clipped values)``.
    """
    delta = value - old_value
    clipped = delta.clamp(-bounds[0], bounds[1])
    with torch.no_grad():
        fraction = (clipped != delta).to(value.dtype).mean()
    loss_clipped = distance_loss(target, old_value + clipped, loss_type)
    return torch.maximum(loss, loss_clipped), fraction


def explained_variance(target: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """``1 - Var[target - value] / Var[target]`` along the first (batch) dim, as TorchRL logs it (no gradient):
    shape ``target.shape[1:]``, e.g. ``[1]`` for ``[B, 1]`` values."""
    with torch.no_grad():
        resid = (target - value).var(0, unbiased=False)
        total = target.var(0, unbiased=False)
        return 1.0 - resid / total.clamp_min(torch.finfo(total.dtype).eps)


def key_list(key) -> list:
    return list(key) if isinstance(key, list) else [key]


class ActorCriticBase(LossModule):
    """Base of :class:`PPOLoss`, :class:`A2CLoss` and :class:`ReinforceLoss` (see the module docstring)."""

    @dataclass
    class _AcceptedKeys:
        """Key table of the on-policy losses.

        ``action`` and ``sample_log_prob`` default to the actor's sample key(s) and log-probability key(s).
        """

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "state_value"
        sample_log_prob: NestedKey | list = None
        action: NestedKey | list = None
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"

    default_keys = _AcceptedKeys
    default_value_estimator = ValueEstimators.GAE
    supported_value_estimators = ALL_ESTIMATORS

    # ------------------------------------------------------------------------------- construction
    def _take_kwargs(self, kwargs: dict) -> tuple[dict, dict]:
        """``(key renames, coefficients)`` from the deprecated keywords (``advantage_key``, ...,
        ``entropy_coef``, ``critic_coef``); rejects unknown keywords."""
        owner = type(self).__name__
        coeffs = {}
        for old, new in (("entropy_coef", "entropy_coeff"), ("critic_coef", "critic_coeff")):
            if old in kwargs:
                warn_once(f"{owner}: the keyword '{old}' is deprecated; use '{new}' instead.")
                coeffs[new] = kwargs.pop(old)
        legacy = {}
        for name in ("advantage_key", "value_target_key", "value_key"):
            if kwargs.get(name) is not None:
                warn_once(f"{owner}: the keyword '{name}' is deprecated; use loss.set_keys({name[:-4]}=...).")
                legacy[name[:-4]] = kwargs.pop(name)
            else:
                kwargs.pop(name, None)
        if kwargs.pop("functional", True) is not True:
            warn_once(f"{owner}: functional=False has no effect; the loss always uses the modules' own parameters.")
        if kwargs:
            raise TypeError(f"{owner}: unexpected keyword argument(s) {sorted(kwargs)}.")
        return legacy, coeffs

    def _setup_networks(self, actor_network, critic_network, *, separate_losses: bool, delay_actor: bool = False,
                        delay_value: bool = False, critic_required: bool = False) -> None:
        owner = type(self).__name__
        if actor_network is None:
            raise TypeError(f"{owner}: actor_network is required (a probabilistic actor, e.g. ProbabilisticActor).")
        head = PolicyHead(actor_network)  # raises a TypeError for an actor without a distribution
        if critic_required and critic_network is None:
            raise TypeError(f"{owner}: critic_network is required.")
        self.delay_actor = bool(delay_actor)
        self.convert_to_functional(actor_network, "actor_network", create_target_params=self.delay_actor)
        self.separate_losses = bool(separate_losses)
        shared = frozenset()
        if critic_network is not None:
            self.delay_value = bool(delay_value)
            self.convert_to_functional(critic_network, "critic_network", create_target_params=self.delay_value)
            actor_ids = {id(p) for p in actor_network.parameters()}
            shared = frozenset(id(p) for p in critic_network.parameters() if id(p) in actor_ids)
        else:
            self.critic_network = None
            self.delay_value = False
        self._shared_ids = shared if self.separate_losses else frozenset()
        k = self.tensor_keys
        if k.action is None:
            k.action = head.sample_keys[0] if len(head.sample_keys) == 1 else list(head.sample_keys)
        if k.sample_log_prob is None:
            lps = head.log_prob_keys
            k.sample_log_prob = lps[0] if len(lps) == 1 else list(lps)

    def _setup_entropy(self, entropy_bonus: bool, samples_mc_entropy: int, entropy_coeff) -> None:
        owner = type(self).__name__
        self.entropy_bonus = bool(entropy_bonus)
        if not isinstance(samples_mc_entropy, int) or samples_mc_entropy < 1:
            raise ValueError(f"{owner}: samples_mc_entropy must be a positive int, got {samples_mc_entropy!r}.")
        self.samples_mc_entropy = samples_mc_entropy
        coeff_map = None
        if entropy_coeff is None:
            entropy_coeff = 0.01
        elif isinstance(entropy_coeff, Mapping):
            coeff_map = {}
            for key, value in entropy_coeff.items():
                key = unravel_key(key)
                name = head_name(key) if isinstance(key, str) else key[:-1] + (head_name(key),)
                coeff_map[name] = float(value)
            entropy_coeff = None
        self._entropy_coeff_map = coeff_map
        self.register_coeff_buffer("entropy_coeff", entropy_coeff)

    def _setup_critic(self, critic_coeff, loss_critic_type: str, clip_value, reduction, *,
                      coeff_buffer: bool = True) -> None:
        """``coeff_buffer=False``: ``critic_coeff`` is a plain attribute, not saved in the state dict (REINFORCE,
        which has no such coefficient in TorchRL)."""
        owner = type(self).__name__
        if self.critic_network is None:
            critic_coeff = None
        if coeff_buffer:
            self.register_coeff_buffer("critic_coeff", critic_coeff)
        else:
            self.critic_coeff = critic_coeff
        distance_loss(torch.zeros(1), torch.zeros(1), loss_critic_type)  # validates the name
        self.loss_critic_type = loss_critic_type
        self.clip_value = clip_value
        self._clip_bounds_value = _value_bounds(owner, clip_value)
        self.reduction = _check_reduction(owner, reduction)

    @property
    def _has_critic(self) -> bool:
        return self.critic_network is not None and self.critic_coeff is not None

    def _keys_changed(self) -> None:
        self._head = PolicyHead(self.actor_network)
        target = self._functionals["actor_network"].target_module
        self._target_head = PolicyHead(target) if target is not None else None
        self._critic = (
            ModuleChain(self.critic_network, detach=self._shared_ids) if self.critic_network is not None else None
        )
        self._actions = key_list(self.tensor_keys.action)

    # ---------------------------------------------------------------------------------------- keys
    def _forward_value_estimator_keys(self, **kwargs) -> None:
        est = self._value_estimator
        if est is None:
            return
        saved = {}
        k = self.tensor_keys
        for name in ("action", "sample_log_prob"):
            if isinstance(getattr(k, name), list):  # composite actions: not an estimator key
                saved[name] = getattr(k, name)
                setattr(k, name, None)
        try:
            fields = {n for n in est.tensor_keys.__dataclass_fields__}
            table = {n: v for n, v in self._key_table().items() if n in fields and v is not None}
            if table:
                est.set_keys(**table)
        finally:
            for name, value in saved.items():
                setattr(k, name, value)

    def set_keys(self, **kwargs) -> None:
        """Renames entries of the key table (``action`` / ``sample_log_prob`` may be lists for composite
        actions)."""
        lists = {n: [unravel_key(x) for x in v] for n, v in kwargs.items() if isinstance(v, list)}
        rest = {n: v for n, v in kwargs.items() if n not in lists}
        for name, value in lists.items():
            if name not in ("action", "sample_log_prob"):
                raise ValueError(f"{type(self).__name__}.set_keys: only action and sample_log_prob may be lists.")
            setattr(self._tensor_keys, name, value)
        super().set_keys(**rest)
        if lists and not rest:
            self._cached_in_keys = None
            self._keys_changed()

    def _in_keys_list(self) -> list:
        k = self.tensor_keys
        keys = list(PolicyHead(self.actor_network).in_keys) + key_list(k.action) + key_list(k.sample_log_prob)
        if self.critic_network is not None:
            crit = list(self.critic_network.in_keys)
            keys += crit + [unravel_key(("next", c)) for c in crit]
        keys += [unravel_key(("next", x)) for x in (k.reward, k.done, k.terminated)]
        return keys

    def _estimator_networks(self) -> dict:
        return {"value_network": self.critic_network, "actor_network": self.actor_network}

    # ------------------------------------------------------------------------------------ advantage
    def _estimator_kwargs(self) -> dict:
        return {}

    def _advantage(self, td: TensorDictBase) -> tuple[TensorDictBase, torch.Tensor]:
        """``(data, advantage)``: read, or computed by the value estimator on a shallow copy of ``td``."""
        adv = fast_get(td, self.tensor_keys.advantage)
        if adv is not None:
            return td, adv
        td = td.copy()
        try:
            with torch.no_grad():
                self.value_estimator(td, **self._estimator_kwargs())
        except KeyError as err:
            key = getattr(err, "key", None)
            if key is None:
                raise
            raise self._missing(key) from err
        return td, self._get(td, self.tensor_keys.advantage)

    # ------------------------------------------------------------------------------ log-probabilities
    def _action(self, td: TensorDictBase):
        acts = self._actions
        if len(acts) == 1 and not self._head.composite:
            action = self._get(td, acts[0])
        else:
            action = TensorDict({}, batch_size=td.batch_size)
            for key in acts:
                action.set(key, self._get(td, key))
        if action.requires_grad:
            raise RuntimeError(
                f"{type(self).__name__}: the stored action {self.tensor_keys.action!r} requires grad; store it "
                "detached (collectors do)."
            )
        return action

    def _stored_log_prob(self, td: TensorDictBase) -> torch.Tensor:
        keys = key_list(self.tensor_keys.sample_log_prob)
        if len(keys) == 1:
            lp = self._get(td, keys[0])
        else:
            lp = sum_features(TensorDict({k: self._get(td, k) for k in keys}, batch_size=td.batch_size))
        if lp.requires_grad:
            raise RuntimeError(
                f"{type(self).__name__}: the stored log-probability {self.tensor_keys.sample_log_prob!r} requires "
                "grad; store it detached."
            )
        return lp

    def _log_prob(self, dist, action) -> torch.Tensor:
        lp = dist.log_prob(action)
        return sum_features(lp) if is_tensor_collection(lp) else lp

    def _element(self, x: torch.Tensor, like: torch.Tensor, name: str, **others) -> torch.Tensor:
        """``x`` at ``like``'s shape (dropping a trailing singleton), else an error naming the shapes."""
        if x.shape == like.shape:
            return x
        if x.shape[:-1] == like.shape and x.shape[-1:] == (1,):
            return x.squeeze(-1)
        raise self._shape_error(
            f"the {name} must have the log-probability's shape or that shape plus a trailing 1",
            **{name: x, "log_prob": like, **others},
        )

    # -------------------------------------------------------------------------------------- entropy
    def get_entropy_bonus(self, dist) -> torch.Tensor:
        """The entropy of ``dist`` summed over action heads (Monte-Carlo when there is no closed form)."""
        return sum_features(entropy(dist, self.samples_mc_entropy))

    def _entropy_terms(self, dist, like: torch.Tensor, out: dict) -> torch.Tensor:
        """Writes ``entropy`` (and ``composite_entropy``) into ``out``; returns the per-element entropy loss."""
        ent = entropy(dist, self.samples_mc_entropy)
        coeff_map = self._entropy_coeff_map
        if is_tensor_collection(ent):
            heads = per_head(ent)
            total = sum(heads.values())
            out["composite_entropy"] = TensorDict(
                {f"{h}_entropy" if isinstance(h, str) else h[:-1] + (f"{h[-1]}_entropy",): v.detach().mean()
                 for h, v in heads.items()}, batch_size=[]
            )
            if coeff_map is not None:
                missing = [h for h in heads if h not in coeff_map]
                if missing:
                    raise KeyError(
                        f"{type(self).__name__}: entropy_coeff has no coefficient for action head(s) {missing}; "
                        f"it has {sorted(map(str, coeff_map))}."
                    )
                loss = -sum(coeff_map[h] * v for h, v in heads.items())
            else:
                loss = -self.entropy_coeff * total
        else:
            if coeff_map is not None:
                if len(coeff_map) != 1:
                    raise KeyError(
                        f"{type(self).__name__}: entropy_coeff maps {len(coeff_map)} heads but the action has a "
                        "single head; pass a float."
                    )
                coeff = next(iter(coeff_map.values()))
            else:
                coeff = self.entropy_coeff
            total = ent
            loss = -coeff * ent
        out["entropy"] = total.detach().mean()
        return self._element(loss, like, "entropy")

    # ------------------------------------------------------------------------------------- critic
    def _value_prediction(self, td: TensorDictBase) -> torch.Tensor:
        k = self.tensor_keys
        out = self._critic(td, self._missing)
        value = out.get(k.value)
        if value is None:
            raise KeyError(
                f"{type(self).__name__}: the critic writes {self._critic.out_keys}, not {k.value!r} "
                f"(loss.tensor_keys.value); call loss.set_keys(value=<the critic's output key>)."
            )
        return value

    def _critic_terms(self, td: TensorDictBase) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """``(critic_coeff * per-element loss, value clip fraction or None, explained variance or None)``."""
        k = self.tensor_keys
        target = fast_get(td, k.value_target)
        if target is None:
            raise KeyError(
                f"{type(self).__name__}: key {k.value_target!r} (loss.tensor_keys.value_target) not found in the "
                "input tensordict. Run a value estimator (e.g. GAE) on the data first, or leave the advantage out "
                "so that the loss computes both."
            )
        old = None
        bounds = self._clip_bounds_value
        if bounds is not None:
            old = fast_get(td, k.value)
            if old is None:
                raise KeyError(
                    f"{type(self).__name__}: clip_value needs the values predicted when the data was collected at "
                    f"{k.value!r} (loss.tensor_keys.value); it is not in the input tensordict."
                )
        value = self._value_prediction(td)
        if value.shape != target.shape:
            raise self._shape_error("the critic's value and the value target differ in shape",
                                    state_value=value, value_target=target)
        loss = distance_loss(target, value, self.loss_critic_type)
        fraction = None
        if bounds is not None:
            if old.shape != value.shape:
                raise self._shape_error("the stored and the predicted values differ in shape",
                                        stored_value=old, state_value=value)
            loss, fraction = clip_value_loss(old, value, bounds, target, loss, self.loss_critic_type)
        ev = explained_variance(target, value) if getattr(self, "log_explained_variance", False) else None
        if loss.shape[-1:] == (1,):
            loss = loss.squeeze(-1)
        return self.critic_coeff * loss, fraction, ev


def _value_bounds(owner: str, clip_value) -> tuple[float, float] | None:
    if clip_value is None or clip_value is False:
        return None
    if isinstance(clip_value, tuple):
        lo, hi = (float(v) for v in clip_value)
    elif isinstance(clip_value, (int, float)) or (isinstance(clip_value, torch.Tensor) and clip_value.numel() == 1):
        lo = hi = float(clip_value)
    else:
        raise ValueError(f"{owner}: clip_value must be a positive float, got {clip_value!r}.")
    if not (lo > 0 and hi > 0) or math.isinf(lo) or math.isinf(hi):
        raise ValueError(f"{owner}: clip_value must be a positive float, got {clip_value!r}.")
    return lo, hi


def legacy_networks(owner: str, actor_network, critic_network, actor, critic) -> tuple:
    """Resolves the deprecated ``actor=`` / ``critic=`` keywords."""
    if actor is not None:
        if actor_network is not None:
            raise TypeError(f"{owner}: got both actor_network and the deprecated actor; pass actor_network only.")
        warn_once(f"{owner}: the keyword 'actor' is deprecated; use 'actor_network' instead.")
        actor_network = actor
    if critic is not None:
        if critic_network is not None:
            raise TypeError(f"{owner}: got both critic_network and the deprecated critic; pass critic_network only.")
        warn_once(f"{owner}: the keyword 'critic' is deprecated; use 'critic_network' instead.")
        critic_network = critic
    return actor_network, critic_network
