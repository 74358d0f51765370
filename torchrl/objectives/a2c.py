"""Advantage actor-critic (Mnih et al., 2016, https://arxiv.org/abs/1602.01783): ``A2CLoss``."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule, dispatch

from torchrl._fast import new_td
from torchrl.objectives._on_policy import ActorCriticBase, key_list, legacy_networks
from torchrl.objectives.utils import ValueEstimators, _reduce

__all__ = ["A2CLoss"]

_EMPTY = torch.Size([])


class A2CLoss(ActorCriticBase):
    r"""The A2C losses: ``loss_objective = -log pi(a|s) * A``, ``loss_critic = critic_coeff * distance(V(s),
    value_target)`` and ``loss_entropy = -entropy_coeff * H(pi(.|s))``.

    The advantage and value target are read from the data, or computed by the loss's value estimator (GAE
    by default) on a shallow copy of it. ``entropy`` is reported for logging, and ``value_clip_fraction``
    with ``clip_value``. Sum the ``loss_*`` entries to train.

    Key table (``loss.set_keys(...)``): ``advantage``, ``value_target``, ``value`` (``"state_value"``),
    ``action`` and ``sample_log_prob`` (default: the actor's keys), ``reward``, ``done``, ``terminated``.

    Args:
        actor_network: probabilistic actor (e.g. :class:`~torchrl.modules.ProbabilisticActor`).
        critic_network: value network writing ``"state_value"``.

    Keyword Args:
        entropy_bonus: add ``loss_entropy``. Defaults to ``True``.
        samples_mc_entropy: draws of the Monte-Carlo entropy estimate. Defaults to 1.
        entropy_coeff: entropy multiplier (default 0.01; a mapping gives one per action head).
        critic_coeff: critic loss multiplier (default 1.0); ``None`` leaves the critic loss out.
        loss_critic_type: ``"smooth_l1"`` (default), ``"l2"`` or ``"l1"``.
        advantage_norm: a running normaliser with ``update(x)`` and ``scale()``: the advantage is divided by
            its scale.
        gamma: deprecated; use ``make_value_estimator(gamma=...)``.
        separate_losses: parameters shared by actor and critic are trained by the actor loss only.
        advantage_key, value_target_key: deprecated; use :meth:`set_keys`.
        functional: kept for compatibility.
        actor, critic: deprecated names of ``actor_network`` / ``critic_network``.
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"``.
        clip_value: clip the value prediction to ``old value ± clip_value`` (needs the stored values).

    Value estimators: GAE (default), TD0, TD1, TDLambda, MAGAE, VTrace.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import MLP, OneHotCategorical, ProbabilisticActor, ValueOperator
        >>> from torchrl.objectives import A2CLoss
        >>> actor = ProbabilisticActor(TensorDictModule(MLP(in_features=3, out_features=2, num_cells=[8]),
        ...     ["observation"], ["logits"]), ["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
        >>> critic = ValueOperator(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"])
        >>> loss = A2CLoss(actor, critic)
        >>> data = TensorDict({"observation": torch.randn(4, 3), "action": torch.eye(2)[[0, 1, 1, 0]].long(),
        ...     "next": {"observation": torch.randn(4, 3), "reward": torch.randn(4, 1),
        ...     "done": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
        >>> sorted(k for k in loss(data).keys() if k.startswith("loss"))
        ['loss_critic', 'loss_entropy', 'loss_objective']
    """

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential = None,
        critic_network: TensorDictModule = None,
        *,
        entropy_bonus: bool = True,
        samples_mc_entropy: int = 1,
        entropy_coeff: float | None = None,
        critic_coeff: float = 1.0,
        loss_critic_type: str = "smooth_l1",
        advantage_norm=None,
        gamma: float | None = None,
        separate_losses: bool = False,
        advantage_key: str | None = None,
        value_target_key: str | None = None,
        functional: bool = True,
        actor: ProbabilisticTensorDictSequential = None,
        critic: ProbabilisticTensorDictSequential = None,
        reduction: str | None = None,
        clip_value: float | None = None,
        **kwargs,
    ) -> None:
        super().__init__()
        kwargs.update(advantage_key=advantage_key, value_target_key=value_target_key, functional=functional)
        legacy, coeffs = self._take_kwargs(kwargs)
        entropy_coeff = coeffs.get("entropy_coeff", entropy_coeff)
        critic_coeff = coeffs.get("critic_coeff", critic_coeff)
        actor_network, critic_network = legacy_networks("A2CLoss", actor_network, critic_network, actor, critic)
        self._deprecated_gamma(gamma)
        self._setup_networks(actor_network, critic_network, separate_losses=separate_losses, critic_required=True)
        self._setup_entropy(entropy_bonus, samples_mc_entropy, entropy_coeff)
        self._setup_critic(critic_coeff, loss_critic_type, clip_value, reduction)
        self.advantage_norm = advantage_norm
        if legacy:
            self.set_keys(**legacy)
        self._keys_changed()

    @property
    def out_keys(self):
        """The output entries TorchRL lists: ``loss_objective``, ``loss_critic`` (unless ``critic_coeff=None``)
        and the entropy terms."""
        keys = ["loss_objective"] + (["loss_critic"] if self._has_critic else [])
        if self.entropy_bonus:
            keys += ["entropy", "loss_entropy"]
        return keys

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._OUT_KEYS = list(value)

    def _in_keys_list(self) -> list:
        # A2C does not read the collection log-probability (TorchRL leaves it out too)
        lps = {unravel_key(k) for k in key_list(self.tensor_keys.sample_log_prob)}
        return [key for key in super()._in_keys_list() if unravel_key(key) not in lps]

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (GAE default; TD0, TD1, TDLambda, MAGAE and VTrace supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    def loss_critic(self, tensordict: TensorDictBase) -> tuple[torch.Tensor, float]:
        """``(critic_coeff * per-element critic loss, value clip fraction or None)``."""
        if self.critic_network is None:
            raise RuntimeError("A2CLoss was built without a critic_network.")
        loss, fraction, _ = self._critic_terms(tensordict)
        return loss, fraction

    def reset(self) -> None:
        """Nothing to reset for this loss."""

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes ``loss_objective``, ``loss_entropy``, ``loss_critic`` and ``entropy``."""
        td, adv = self._advantage(tensordict)
        if self.advantage_norm is not None:
            with torch.no_grad():
                self.advantage_norm.update(adv)
            adv = adv / self.advantage_norm.scale()
        dist = self._head(td, self._missing)
        log_prob = self._log_prob(dist, self._action(td))
        adv = self._element(adv, log_prob, "advantage")
        losses = {"loss_objective": -(log_prob * adv.detach())}
        out = {}
        if self.entropy_bonus:
            losses["loss_entropy"] = self._entropy_terms(dist, log_prob, out)
        if self._has_critic:
            loss_critic, fraction, _ = self._critic_terms(td)
            losses["loss_critic"] = self._element(loss_critic, log_prob, "critic loss")
            if fraction is not None:
                out["value_clip_fraction"] = fraction
        mask = self._loss_mask(td)
        for name, value in losses.items():
            out[name] = _reduce(value, self.reduction, mask)
        return new_td(out, _EMPTY)
