"""Proximal policy optimisation (Schulman et al., 2017, https://arxiv.org/abs/1707.06347): ``PPOLoss``
(plain importance-weighted objective), ``ClipPPOLoss`` (clipped ratio) and ``KLPENPPOLoss`` (adaptive KL
penalty)."""
from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule, dispatch
from torch import distributions as D

from torchrl._fast import new_td
from torchrl.objectives._on_policy import ActorCriticBase, legacy_networks, standardize
from torchrl.objectives._tensor_calls import sum_features
from torchrl.objectives.common import _MissingEntryError
from torchrl.objectives.utils import ValueEstimators, _reduce

__all__ = ["PPOLoss", "ClipPPOLoss", "KLPENPPOLoss"]

_EMPTY = torch.Size([])


class PPOLoss(ActorCriticBase):
    r"""The PPO objective without regularisation: ``loss_objective = -r * A`` with the importance weight
    :math:`r = \pi_\theta(a|s) / \pi_{old}(a|s)` (prefer :class:`ClipPPOLoss` or :class:`KLPENPPOLoss`).

    The data holds the action, its log-probability under the collecting policy (``sample_log_prob``) and
    either the advantage and value target (e.g. written by :class:`~torchrl.objectives.value.GAE`) or what
    the loss's value estimator needs to compute them (rewards, done flags, next observations); the caller's
    tensordict is then left untouched (the estimator writes into a shallow copy).

    Outputs: ``loss_objective``, ``loss_critic`` (``critic_coeff * distance(V(s), value_target)``),
    ``loss_entropy`` (``-entropy_coeff * H``; Monte-Carlo when the distribution has no closed-form entropy),
    and, for logging, ``entropy``, ``kl_approx`` (mean of :math:`\log\pi_{old} - \log\pi_\theta`),
    ``explained_variance`` (along the first batch dim, as TorchRL: shape ``[1]`` for ``[B, 1]`` values) and
    ``value_clip_fraction`` (with ``clip_value``); :class:`ClipPPOLoss` adds ``clip_fraction``, ``ESS``
    (effective sample size of the importance weights along the first batch dim, divided by its size),
    ``max_ratio`` and ``mean_ratio``. Composite (multi-head) actions add ``composite_entropy`` (one entry
    per head). Sum the ``loss_*`` entries to train.

    Key table (``loss.set_keys(...)``): ``advantage``, ``value_target``, ``value`` (``"state_value"``),
    ``sample_log_prob`` and ``action`` (default: the actor's log-probability and sample keys, lists for a
    composite action), ``reward``, ``done``, ``terminated``.

    Args:
        actor_network: probabilistic actor (e.g. :class:`~torchrl.modules.ProbabilisticActor`).
        critic_network: value network writing ``"state_value"`` (``None``: no critic loss; the advantage must
            then be in the data).

    Keyword Args:
        entropy_bonus: add ``loss_entropy``. Defaults to ``True``.
        samples_mc_entropy: draws of the Monte-Carlo entropy estimate. Defaults to 1.
        entropy_coeff: a float (default 0.01), or a mapping ``{action head: coefficient}`` for composite
            actions (head names as sample keys, e.g. ``"cont"``, or entropy keys, ``"cont_entropy"``).
        log_explained_variance: report ``explained_variance``. Defaults to ``True``.
        critic_coeff: multiplier of the critic loss (default 1.0).
        loss_critic_type: ``"smooth_l1"`` (default), ``"l2"`` or ``"l1"``.
        normalize_advantage: standardise the advantage over the batch. Defaults to ``False``.
        normalize_advantage_exclude_dims: dims kept apart when standardising (e.g. ``(-2,)`` for agents).
        advantage_norm: a running normaliser with ``update(x)`` and ``scale()`` (a
            :class:`~torchrl.modules.ValueNorm`): the advantage is divided by its scale.
        gamma: deprecated; use ``make_value_estimator(gamma=...)``.
        separate_losses: parameters shared by actor and critic are trained by the actor loss only.
        advantage_key, value_target_key, value_key: deprecated; use :meth:`set_keys`.
        functional: kept for compatibility (the loss always runs the modules with their own parameters).
        actor, critic: deprecated names of ``actor_network`` / ``critic_network``.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        clip_value: clip the value prediction to ``old value ± clip_value`` (needs the stored values).
        delay_actor: keep a target copy of the actor (updated by
            :class:`~torchrl.objectives.SoftUpdate` / :class:`~torchrl.objectives.HardUpdate`) whose
            log-probability of the action replaces the stored one as :math:`\pi_{old}`.
        max_importance_ratio: cap on the importance weight :math:`r` (no gradient above it).
        device: device of the coefficient buffers.

    Value estimators: GAE (default), TD0, TD1, TDLambda, MAGAE, VTrace.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP, NormalParamExtractor, ProbabilisticActor, TanhNormal, ValueOperator
        >>> from torchrl.objectives import ClipPPOLoss
        >>> net = TensorDictModule(torch.nn.Sequential(MLP(in_features=3, out_features=2, num_cells=[8]),
        ...     NormalParamExtractor()), ["observation"], ["loc", "scale"])
        >>> actor = ProbabilisticActor(net, ["loc", "scale"], distribution_class=TanhNormal, return_log_prob=True)
        >>> critic = ValueOperator(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"])
        >>> loss = ClipPPOLoss(actor, critic)
        >>> data = TensorDict({"observation": torch.randn(6, 3), "action": torch.rand(6, 1) * 2 - 1,
        ...     "action_log_prob": torch.zeros(6), "advantage": torch.randn(6, 1),
        ...     "value_target": torch.randn(6, 1)}, [6])
        >>> out = loss(data)
        >>> sorted(k for k in out.keys() if k.startswith("loss"))
        ['loss_critic', 'loss_entropy', 'loss_objective']
    """

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential | None = None,
        critic_network: TensorDictModule | None = None,
        *,
        entropy_bonus: bool = True,
        samples_mc_entropy: int = 1,
        entropy_coeff: float | Mapping[NestedKey, float] | None = None,
        log_explained_variance: bool = True,
        critic_coeff: float | None = None,
        loss_critic_type: str = "smooth_l1",
        normalize_advantage: bool = False,
        normalize_advantage_exclude_dims: tuple[int] = (),
        advantage_norm=None,
        gamma: float | None = None,
        separate_losses: bool = False,
        advantage_key: str | None = None,
        value_target_key: str | None = None,
        value_key: str | None = None,
        functional: bool = True,
        actor: ProbabilisticTensorDictSequential = None,
        critic: ProbabilisticTensorDictSequential = None,
        reduction: str | None = None,
        clip_value: float | None = None,
        delay_actor: bool = False,
        max_importance_ratio: float | None = None,
        device: torch.device | None = None,
        **kwargs,
    ) -> None:
        super().__init__()
        kwargs.update(advantage_key=advantage_key, value_target_key=value_target_key, value_key=value_key,
                      functional=functional)
        legacy, coeffs = self._take_kwargs(kwargs)
        entropy_coeff = coeffs.get("entropy_coeff", entropy_coeff)
        critic_coeff = coeffs.get("critic_coeff", critic_coeff)
        actor_network, critic_network = legacy_networks(type(self).__name__, actor_network, critic_network,
                                                         actor, critic)
        self._deprecated_gamma(gamma)
        self._setup_networks(actor_network, critic_network, separate_losses=separate_losses,
                             delay_actor=delay_actor)
        self._setup_entropy(entropy_bonus, samples_mc_entropy, entropy_coeff)
        if critic_coeff is None:
            critic_coeff = 1.0
        self._setup_critic(critic_coeff, loss_critic_type, self._value_clip(clip_value), reduction)
        self.log_explained_variance = bool(log_explained_variance)
        self.normalize_advantage = bool(normalize_advantage)
        self.normalize_advantage_exclude_dims = tuple(normalize_advantage_exclude_dims)
        self.advantage_norm = advantage_norm
        if max_importance_ratio is not None and not max_importance_ratio > 0:
            raise ValueError(f"{type(self).__name__}: max_importance_ratio must be positive, got {max_importance_ratio}.")
        self.max_importance_ratio = max_importance_ratio
        self._log_ratio_cap = None if max_importance_ratio is None else math.log(max_importance_ratio)
        if device is not None:
            self.to(device)
        if legacy:
            self.set_keys(**legacy)
        self._keys_changed()

    def _value_clip(self, clip_value):
        return clip_value

    @property
    def out_keys(self):
        """The output entries TorchRL lists (they depend on the options; ``loss_critic`` is always listed)."""
        keys = ["loss_objective"] + self._extra_out_keys()
        if self.entropy_bonus:
            keys += ["entropy", "loss_entropy"]
        keys.append("loss_critic")
        if self._clip_bounds_value is not None:
            keys.append("value_clip_fraction")
        return keys + self._diagnostic_out_keys()

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._OUT_KEYS = list(value)

    def _extra_out_keys(self) -> list:
        return []

    def _diagnostic_out_keys(self) -> list:
        return []

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (GAE default; TD0, TD1, TDLambda, MAGAE and VTrace supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    def loss_critic(self, tensordict: TensorDictBase) -> tuple[torch.Tensor | TensorDict, ...]:
        """``(critic_coeff * per-element critic loss, value clip fraction or None, explained variance or None)``.

        The data must hold the value target (and, with ``clip_value``, the stored values).
        """
        if self.critic_network is None:
            raise RuntimeError(f"{type(self).__name__} was built without a critic_network.")
        return self._critic_terms(tensordict)

    def reset(self) -> None:
        """Nothing to reset for this loss."""

    # ---------------------------------------------------------------------------------- forward
    def _prepared_advantage(self, td: TensorDictBase):
        td, adv = self._advantage(td)
        if self.advantage_norm is not None:
            with torch.no_grad():
                self.advantage_norm.update(adv)
            adv = adv / self.advantage_norm.scale()
        if self.normalize_advantage and adv.numel() > 1:
            adv = standardize(adv, self.normalize_advantage_exclude_dims)
        return td, adv

    def _log_weight(self, td: TensorDictBase):
        """``(dist, log_weight, uncapped log_weight)`` for the stored action."""
        dist = self._head(td, self._missing)
        action = self._action(td)
        log_prob = self._log_prob(dist, action)
        if self._target_head is not None:
            with torch.no_grad():  # the target actor runs on its own (target) parameters
                prev = self._log_prob(self._target_head(td, self._missing), action)
        else:
            prev = self._stored_log_prob(td)
        if prev.shape != log_prob.shape:
            raise self._shape_error("the stored and the recomputed log-probabilities differ in shape",
                                    **{"sample_log_prob": prev, "log_prob": log_prob})
        raw = log_prob - prev
        log_weight = raw if self._log_ratio_cap is None else raw.clamp_max(self._log_ratio_cap)
        return dist, log_weight, raw

    def _objective(self, log_weight: torch.Tensor, adv: torch.Tensor, out: dict) -> torch.Tensor:
        """The per-element policy loss (``-r * A`` here)."""
        return -(log_weight.exp() * adv)

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes the loss terms (see the class docstring)."""
        if self._warn_target:
            self._target_warning()
        td, adv = self._prepared_advantage(tensordict)
        dist, log_weight, raw = self._log_weight(td)
        adv = self._element(adv, log_weight, "advantage")
        out = {}
        loss_objective = self._objective(log_weight, adv, out)
        return self._finish(td, dist, log_weight, raw, loss_objective, out)

    def _finish(self, td, dist, log_weight, raw_log_weight, loss_objective, out: dict) -> TensorDict:
        reduction, mask = self.reduction, self._loss_mask(td)
        losses = {"loss_objective": loss_objective}
        with torch.no_grad():
            out["kl_approx"] = -raw_log_weight.detach().mean()
        if self.entropy_bonus:
            losses["loss_entropy"] = self._entropy_terms(dist, log_weight, out)
        if self._has_critic:
            loss_critic, fraction, ev = self._critic_terms(td)
            losses["loss_critic"] = self._element(loss_critic, log_weight, "critic loss")
            if fraction is not None:
                out["value_clip_fraction"] = fraction
            if ev is not None:
                out["explained_variance"] = ev
        for name, value in losses.items():
            out[name] = _reduce(value, reduction, mask)
        return new_td(out, _EMPTY)


class ClipPPOLoss(PPOLoss):
    r"""Clipped PPO: ``loss_objective = -min(r A, clip(r, 1 - eps_low, 1 + eps_high) A)``.

    The clipping is applied to the log-weight (``log r`` clamped to ``[log(1 - eps_low), log(1 + eps_high)]``)
    and ``clip_fraction`` reports the share of clipped weights. ``clip_value=True`` clips the value
    prediction with the same epsilon(s). Everything else is as in :class:`PPOLoss`.

    Args:
        actor_network: probabilistic actor.
        critic_network: value network (``None``: no critic loss).

    Keyword Args:
        clip_epsilon: ``eps`` (default 0.2), or ``(eps_low, eps_high)``.
        clip_value: ``True`` (the clip epsilon), a float, or ``None``/``False``.
        entropy_bonus, samples_mc_entropy, entropy_coeff, critic_coeff, loss_critic_type,
        normalize_advantage, normalize_advantage_exclude_dims, advantage_norm, gamma, separate_losses,
        reduction, delay_actor, max_importance_ratio, device: see :class:`PPOLoss`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
        >>> from torchrl.objectives import ClipPPOLoss
        >>> actor = ProbabilisticActor(TensorDictModule(MLP(in_features=3, out_features=4, num_cells=[8]),
        ...     ["observation"], ["logits"]), ["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
        >>> critic = ValueOperator(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"])
        >>> loss = ClipPPOLoss(actor, critic, clip_epsilon=0.1)
        >>> data = TensorDict({"observation": torch.randn(5, 3), "action": torch.eye(4)[[0, 1, 2, 3, 0]].long(),
        ...     "action_log_prob": torch.full((5,), -1.4), "advantage": torch.randn(5, 1),
        ...     "value_target": torch.randn(5, 1)}, [5])
        >>> out = loss(data)
        >>> bool(0 <= out["clip_fraction"] <= 1)
        True
    """

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential | None = None,
        critic_network: TensorDictModule | None = None,
        *,
        clip_epsilon: float | tuple[float, float] = 0.2,
        entropy_bonus: bool = True,
        samples_mc_entropy: int = 1,
        entropy_coeff: float | Mapping[NestedKey, float] | None = None,
        critic_coeff: float | None = None,
        loss_critic_type: str = "smooth_l1",
        normalize_advantage: bool = False,
        normalize_advantage_exclude_dims: tuple[int] = (),
        advantage_norm=None,
        gamma: float | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        clip_value: bool | float | None = None,
        delay_actor: bool = False,
        max_importance_ratio: float | None = None,
        device: torch.device | None = None,
        **kwargs,
    ) -> None:
        lo, hi = (clip_epsilon, clip_epsilon) if not isinstance(clip_epsilon, (tuple, list)) else clip_epsilon
        lo, hi = float(lo), float(hi)
        if not (0 < lo < 1 and hi > 0):
            raise ValueError(
                f"ClipPPOLoss: clip_epsilon must be in (0, 1) (or a pair (low in (0, 1), high > 0)), got {clip_epsilon!r}."
            )
        self._eps = (lo, hi)
        super().__init__(
            actor_network, critic_network, entropy_bonus=entropy_bonus, samples_mc_entropy=samples_mc_entropy,
            entropy_coeff=entropy_coeff, critic_coeff=critic_coeff, loss_critic_type=loss_critic_type,
            normalize_advantage=normalize_advantage,
            normalize_advantage_exclude_dims=normalize_advantage_exclude_dims, advantage_norm=advantage_norm,
            gamma=gamma, separate_losses=separate_losses, reduction=reduction, clip_value=clip_value,
            delay_actor=delay_actor, max_importance_ratio=max_importance_ratio, device=device, **kwargs,
        )
        self.register_buffer("clip_epsilon", torch.tensor(hi if lo == hi else (lo, hi), device=device))
        self._clip_bounds = (math.log1p(-lo), math.log1p(hi))

    def _value_clip(self, clip_value):
        if clip_value is True:
            return self._eps
        return clip_value

    def _extra_out_keys(self) -> list:
        return ["clip_fraction"]

    def _diagnostic_out_keys(self) -> list:
        return ["ESS", "kl_approx", "max_ratio", "mean_ratio"]

    def _objective(self, log_weight: torch.Tensor, adv: torch.Tensor, out: dict) -> torch.Tensor:
        lo, hi = self._clip_bounds
        clipped = log_weight.clamp(lo, hi)
        ratio = log_weight.exp()
        with torch.no_grad():
            out["clip_fraction"] = (clipped != log_weight).to(log_weight.dtype).mean()
            # importance-sampling diagnostics, as TorchRL: ESS along the first (batch) dim, ratio max and mean
            lw = log_weight.detach()
            out["ESS"] = (2 * lw.logsumexp(0) - (2 * lw).logsumexp(0)).exp() / lw.shape[0]
            out["max_ratio"] = ratio.detach().max()
            out["mean_ratio"] = ratio.detach().mean()
        return -torch.minimum(ratio * adv, clipped.exp() * adv)



class KLPENPPOLoss(PPOLoss):
    r"""PPO with an adaptive KL penalty: ``loss_objective = -(r A - beta KL(pi_old || pi_theta))``.

    ``pi_old`` is rebuilt from the distribution parameters stored in the data (the actor's distribution
    inputs, e.g. ``"loc"``/``"scale"`` or ``"logits"``, recorded at collection time). The KL divergence is
    exact where PyTorch knows it, else a Monte-Carlo estimate with ``samples_mc_kl`` draws from ``pi_old``.
    After each call, ``beta`` is multiplied by ``increment`` if the mean KL exceeds ``1.5 * dtarg`` and by
    ``decrement`` if it is below ``dtarg / 1.5``; :meth:`reset` restores its initial value. Extra output:
    ``kl`` (the per-element KL, ``[*B, 1]``, as TorchRL). Everything else is as in :class:`PPOLoss`.

    Args:
        actor_network: probabilistic actor.
        critic_network: value network (``None``: no critic loss).

    Keyword Args:
        dtarg: target KL. Defaults to 0.01.
        beta: initial penalty coefficient. Defaults to 1.0.
        increment: factor applied to ``beta`` when the KL is too high. Defaults to 2.
        decrement: factor applied when it is too low. Defaults to 0.5.
        samples_mc_kl: draws of the Monte-Carlo KL estimate. Defaults to 1.
        entropy_bonus, samples_mc_entropy, entropy_coeff, critic_coeff, loss_critic_type,
        normalize_advantage, normalize_advantage_exclude_dims, advantage_norm, gamma, separate_losses,
        reduction, clip_value, delay_actor, max_importance_ratio, device: see :class:`PPOLoss`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor
        >>> from torchrl.objectives import KLPENPPOLoss
        >>> actor = ProbabilisticActor(TensorDictModule(MLP(in_features=3, out_features=4, num_cells=[8]),
        ...     ["observation"], ["logits"]), ["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
        >>> loss = KLPENPPOLoss(actor, dtarg=0.01)
        >>> data = TensorDict({"observation": torch.randn(5, 3), "logits": torch.zeros(5, 4),
        ...     "action": torch.eye(4)[[0, 1, 2, 3, 0]].long(), "action_log_prob": torch.full((5,), -1.4),
        ...     "advantage": torch.randn(5, 1)}, [5])
        >>> sorted(k for k in loss(data).keys() if k.startswith("loss"))
        ['loss_entropy', 'loss_objective']
    """

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential | None = None,
        critic_network: TensorDictModule | None = None,
        *,
        dtarg: float = 0.01,
        beta: float = 1.0,
        increment: float = 2,
        decrement: float = 0.5,
        samples_mc_kl: int = 1,
        entropy_bonus: bool = True,
        samples_mc_entropy: int = 1,
        entropy_coeff: float | Mapping[NestedKey, float] | None = None,
        critic_coeff: float | None = None,
        loss_critic_type: str = "smooth_l1",
        normalize_advantage: bool = False,
        normalize_advantage_exclude_dims: tuple[int] = (),
        advantage_norm=None,
        gamma: float | None = None,
        separate_losses: bool = False,
        reduction: str | None = None,
        clip_value: float | None = None,
        delay_actor: bool = False,
        max_importance_ratio: float | None = None,
        device: torch.device | None = None,
        **kwargs,
    ) -> None:
        super().__init__(
            actor_network, critic_network, entropy_bonus=entropy_bonus, samples_mc_entropy=samples_mc_entropy,
            entropy_coeff=entropy_coeff, critic_coeff=critic_coeff, loss_critic_type=loss_critic_type,
            normalize_advantage=normalize_advantage,
            normalize_advantage_exclude_dims=normalize_advantage_exclude_dims, advantage_norm=advantage_norm,
            gamma=gamma, separate_losses=separate_losses, reduction=reduction, clip_value=clip_value,
            delay_actor=delay_actor, max_importance_ratio=max_importance_ratio, device=device, **kwargs,
        )
        if not (increment >= 1 and 0 < decrement <= 1):
            raise ValueError(
                f"KLPENPPOLoss: increment must be >= 1 and decrement in (0, 1], got {increment} and {decrement}."
            )
        if not isinstance(samples_mc_kl, int) or samples_mc_kl < 1:
            raise ValueError(f"KLPENPPOLoss: samples_mc_kl must be a positive int, got {samples_mc_kl!r}.")
        self.dtarg = float(dtarg)
        self._beta_init = float(beta)
        self.register_buffer("beta", torch.tensor(float(beta), device=device))
        self.increment, self.decrement = float(increment), float(decrement)
        self.samples_mc_kl = samples_mc_kl

    def _extra_out_keys(self) -> list:
        return ["kl"]

    def reset(self) -> None:
        """Restores ``beta`` to its initial value."""
        self.beta.fill_(self._beta_init)

    def _kl(self, previous, current) -> torch.Tensor:
        try:
            kl = D.kl_divergence(previous, current)
        except NotImplementedError:
            x = previous.sample((self.samples_mc_kl,))
            kl = (self._log_prob(previous, x) - self._log_prob(current, x)).mean(0)
        return sum_features(kl)

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes the KL-penalised objective and the other terms (see :class:`PPOLoss`)."""
        if self._warn_target:
            self._target_warning()
        try:
            previous = self._head.from_params(tensordict, self._missing)
        except KeyError as err:
            raise _MissingEntryError(
                f"KLPENPPOLoss: the parameters of the collecting policy's distribution are needed to compute the "
                f"KL penalty. {err.args[0]}"
            ) from err
        td, adv = self._prepared_advantage(tensordict)
        dist, log_weight, raw = self._log_weight(td)
        adv = self._element(adv, log_weight, "advantage")
        kl = self._element(self._kl(previous, dist), log_weight, "KL divergence")
        beta = self.beta.clone()  # beta is updated in place below
        loss_objective = -(log_weight.exp() * adv - beta * kl)
        with torch.no_grad():
            kl_mean = kl.detach().mean()
            if kl_mean > self.dtarg * 1.5:
                self.beta.mul_(self.increment)
            elif kl_mean < self.dtarg / 1.5:
                self.beta.mul_(self.decrement)
        # TorchRL returns the per-element KL (with a trailing singleton dim), not reduced
        return self._finish(td, dist, log_weight, raw, loss_objective, {"kl": kl.detach().unsqueeze(-1)})

