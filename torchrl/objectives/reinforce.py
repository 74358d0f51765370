"""REINFORCE with a learned baseline (Williams, 1992): ``ReinforceLoss``."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase, unravel_key
from tensordict.nn import ProbabilisticTensorDictSequential, TensorDictModule, dispatch

from torchrl._fast import new_td
from torchrl.objectives._on_policy import ActorCriticBase, legacy_networks
from torchrl.objectives.utils import ValueEstimators, _reduce

__all__ = ["ReinforceLoss"]

_EMPTY = torch.Size([])


class ReinforceLoss(ActorCriticBase):
    r"""The REINFORCE losses: ``loss_actor = -log pi(a|s) * A`` (advantage detached) and ``loss_value =
    distance(V(s), value_target)``.

    The log-probability is that of the stored action under the current policy. The advantage and value
    target are read from the data, or computed by the loss's value estimator (GAE by default; with
    ``delay_value=True`` the next-state values come from a target copy of the critic). The critic is
    required (``TypeError`` without one, as in TorchRL).

    Key table (``loss.set_keys(...)``): ``advantage``, ``value_target``, ``value`` (``"state_value"``),
    ``action`` and ``sample_log_prob`` (default: the actor's keys), ``reward``, ``done``, ``terminated``.

    Args:
        actor_network: probabilistic actor (e.g. :class:`~torchrl.modules.ProbabilisticActor`).
        critic_network: value network writing ``"state_value"``.

    Keyword Args:
        delay_value: keep a target critic (``target_critic_network_params``) for the next-state values.
            Defaults to ``False``.
        loss_critic_type: ``"smooth_l1"`` (default), ``"l2"`` or ``"l1"``.
        gamma: deprecated; use ``make_value_estimator(gamma=...)``.
        advantage_key, value_target_key: deprecated; use :meth:`set_keys`.
        separate_losses: parameters shared by actor and critic are trained by the actor loss only.
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
        >>> from torchrl.objectives import ReinforceLoss
        >>> actor = ProbabilisticActor(TensorDictModule(MLP(in_features=3, out_features=2, num_cells=[8]),
        ...     ["observation"], ["logits"]), ["logits"], distribution_class=OneHotCategorical, return_log_prob=True)
        >>> critic = ValueOperator(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"])
        >>> loss = ReinforceLoss(actor, critic)
        >>> data = TensorDict({"observation": torch.randn(4, 3), "action": torch.eye(2)[[0, 1, 1, 0]].long(),
        ...     "next": {"observation": torch.randn(4, 3), "reward": torch.randn(4, 1),
        ...     "done": torch.zeros(4, 1, dtype=torch.bool)}}, [4])
        >>> sorted(loss(data).keys())
        ['loss_actor', 'loss_value']
    """

    def __init__(
        self,
        actor_network: ProbabilisticTensorDictSequential = None,
        critic_network: TensorDictModule | None = None,
        *,
        delay_value: bool = False,
        loss_critic_type: str = "smooth_l1",
        gamma: float | None = None,
        advantage_key: str | None = None,
        value_target_key: str | None = None,
        separate_losses: bool = False,
        functional: bool = True,
        actor: ProbabilisticTensorDictSequential = None,
        critic: ProbabilisticTensorDictSequential = None,
        reduction: str | None = None,
        clip_value: float | None = None,
    ) -> None:
        super().__init__()
        legacy, _ = self._take_kwargs(
            {"advantage_key": advantage_key, "value_target_key": value_target_key, "functional": functional}
        )
        actor_network, critic_network = legacy_networks("ReinforceLoss", actor_network, critic_network, actor, critic)
        self._deprecated_gamma(gamma)
        self._setup_networks(actor_network, critic_network, separate_losses=separate_losses,
                             delay_value=delay_value, critic_required=True)
        self.entropy_bonus = False
        self._setup_critic(1.0, loss_critic_type, clip_value, reduction, coeff_buffer=False)
        if legacy:
            self.set_keys(**legacy)
        self._keys_changed()

    @property
    def out_keys(self):
        """``["loss_actor", "loss_value"]``."""
        return ["loss_actor", "loss_value"]

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._OUT_KEYS = list(value)

    def _in_keys_list(self) -> list:
        k = self.tensor_keys
        return [key for key in super()._in_keys_list() if key not in _flat(k.sample_log_prob)]

    def _estimator_kwargs(self) -> dict:
        if self.delay_value:
            return {"target_params": self.target_critic_network_params}
        return {}

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator (GAE default; TD0, TD1, TDLambda, MAGAE and VTrace supported)."""
        return super().make_value_estimator(value_type, **hyperparams)

    def loss_critic(self, tensordict: TensorDictBase) -> torch.Tensor:
        """The per-element critic loss ``distance(V(s), value_target)``."""
        if self.critic_network is None:
            raise RuntimeError("ReinforceLoss was built without a critic_network.")
        return self._critic_terms(tensordict)[0]

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes ``loss_actor`` (and ``loss_value`` with a critic)."""
        if self._warn_target:
            self._target_warning()
        td, adv = self._advantage(tensordict)
        dist = self._head(td, self._missing)
        log_prob = self._log_prob(dist, self._action(td))
        adv = self._element(adv, log_prob, "advantage")
        losses = {"loss_actor": -(log_prob * adv.detach())}
        out = {}
        if self._has_critic:
            loss_value, fraction, _ = self._critic_terms(td)
            losses["loss_value"] = self._element(loss_value, log_prob, "critic loss")
            if fraction is not None:
                out["value_clip_fraction"] = fraction
        mask = self._loss_mask(td)
        out.update({name: _reduce(v, self.reduction, mask) for name, v in losses.items()})
        return new_td(out, _EMPTY)


def _flat(key) -> list:
    return [unravel_key(k) for k in (key if isinstance(key, list) else [key])]
