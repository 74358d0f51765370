"""Actors and critics: ``Actor``, ``ProbabilisticActor``, ``ValueOperator`` and the operators that share a
common trunk between a policy and a value head (``ActorValueOperator``, ``ActorCriticOperator``,
``ActorCriticWrapper``).

Q-value actors live in ``q_value.py`` and ``TanhModule`` in ``tanh.py``; both are re-exported here, at
TorchRL's module path.
"""
from __future__ import annotations

from typing import Sequence

from tensordict import TensorDictBase
from tensordict.nn import (
    CompositeDistribution,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictModuleBase,
)
from tensordict.utils import NestedKey
from torch import nn

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.modules.distributions.continuous import Delta
from torchrl.modules.tensordict_module.common import SafeModule
from torchrl.modules.tensordict_module.probabilistic import (
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
)
from torchrl.modules.tensordict_module._q_value import (  # TorchRL's import path for these names
    DistributionalQValueActor,
    DistributionalQValueHook,
    DistributionalQValueModule,
    QValueActor,
    QValueHook,
    QValueModule,
)
from torchrl.modules.tensordict_module.sequence import SafeSequential
from torchrl.modules.tensordict_module._tanh import TanhModule

__all__ = [
    "Actor",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "ActorValueOperator",
    "DistributionalQValueActor",
    "DistributionalQValueHook",
    "DistributionalQValueModule",
    "ProbabilisticActor",
    "QValueActor",
    "QValueHook",
    "QValueModule",
    "TanhModule",
    "ValueOperator",
]


def _key_list(keys: NestedKey | Sequence[NestedKey] | None, default: list[NestedKey]) -> list[NestedKey]:
    if keys is None:
        return list(default)
    if isinstance(keys, (str, tuple)):
        return [keys]
    return list(keys)


def _first_key_spec(spec: TensorSpec | None, out_keys: list[NestedKey]) -> TensorSpec | None:
    """A bare spec describes the first output (TorchRL's actor convention)."""
    if spec is not None and not isinstance(spec, Composite):
        return Composite({out_keys[0]: spec})
    return spec


class Actor(SafeModule):
    """A deterministic actor: a module mapping observations to actions.

    Args:
        module (nn.Module): maps the ``in_keys`` values to the action (and any other outputs).
        in_keys (list of NestedKey, optional): defaults to ``["observation"]``.
        out_keys (list of NestedKey, optional): defaults to ``["action"]``.

    Keyword Args:
        spec (TensorSpec, optional): the spec of the first output (or a Composite keyed by out_key).
        safe (bool, optional): project outputs into the spec. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Bounded
        >>> from torchrl.modules import Actor
        >>> actor = Actor(torch.nn.Linear(3, 2), spec=Bounded(-1.0, 1.0, (2,)), safe=True)
        >>> action = actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))["action"]
        >>> action.shape, bool(action.abs().max() <= 1)
        (torch.Size([4, 2]), True)
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        *,
        spec: TensorSpec | None = None,
        **kwargs,
    ) -> None:
        in_keys = _key_list(in_keys, ["observation"])
        out_keys = _key_list(out_keys, ["action"])
        super().__init__(module, in_keys=in_keys, out_keys=out_keys, spec=_first_key_spec(spec, out_keys), **kwargs)

    def get_dist(self, tensordict: TensorDictBase) -> Delta:
        """A :class:`~torchrl.modules.Delta` distribution at the action the actor picks for ``tensordict``."""
        out = self(tensordict.copy())
        return Delta(out.get(self.out_keys[0]))


def _composite_out_keys(distribution_kwargs: dict | None) -> list[NestedKey]:
    kwargs = distribution_kwargs or {}
    name_map = kwargs.get("name_map")
    if name_map:
        return list(name_map.values())
    distribution_map = kwargs.get("distribution_map")
    if not distribution_map:
        raise ValueError(
            "ProbabilisticActor: a CompositeDistribution needs distribution_kwargs['distribution_map'] "
            "(sample key -> distribution class) to know where samples go; pass it or give out_keys."
        )
    return list(distribution_map.keys())


class ProbabilisticActor(SafeProbabilisticTensorDictSequential):
    """A stochastic actor: a module computing distribution parameters, then a sampling module.

    ``ProbabilisticActor(module, in_keys, ...)`` is ``module`` followed by
    :class:`SafeProbabilisticModule(in_keys, out_keys, spec=..., **kwargs)
    <torchrl.modules.SafeProbabilisticModule>`, so it *is* a
    :class:`~torchrl.modules.SafeProbabilisticTensorDictSequential`.

    Args:
        module (TensorDictModule): writes the distribution parameters.
        in_keys (NestedKey, list or dict): the parameter entries (names must match the distribution's
            keywords, e.g. ``"loc"``/``"scale"``; a dict maps keyword -> entry).
        out_keys (list of NestedKey, optional): where samples go. Defaults to ``["action"]`` (for a
            ``CompositeDistribution``, the keys of ``distribution_kwargs["distribution_map"]``, or the
            values of its ``name_map``).

    Keyword Args:
        spec (TensorSpec, optional): the spec of the (first) sample.
        safe (bool, optional): project samples into the spec.
        default_interaction_type, distribution_class, distribution_kwargs, return_log_prob,
        log_prob_key, cache_dist, n_empirical_estimate, ...: see :class:`SafeProbabilisticModule`.

    Raises:
        TypeError: ``module`` is not a TensorDict module.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import NormalParamExtractor, ProbabilisticActor, TanhNormal
        >>> params = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ...                           in_keys=["observation"], out_keys=["loc", "scale"])
        >>> actor = ProbabilisticActor(params, in_keys=["loc", "scale"], distribution_class=TanhNormal,
        ...                            distribution_kwargs={"low": -2.0, "high": 2.0}, return_log_prob=True)
        >>> td = actor(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))
        >>> td["action"].shape, td["action_log_prob"].shape
        (torch.Size([5, 2]), torch.Size([5]))
    """

    def __init__(
        self,
        module: TensorDictModule,
        in_keys: NestedKey | Sequence[NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        *,
        spec: TensorSpec | None = None,
        **kwargs,
    ) -> None:
        if not TensorDictModuleBase.is_tdmodule_compatible(module):
            raise TypeError(
                f"ProbabilisticActor: module must be a TensorDict module writing the distribution parameters "
                f"{in_keys!r}, got {type(module).__name__}; wrap it, e.g. TensorDictModule(net, "
                f"in_keys=['observation'], out_keys={in_keys!r})."
            )
        if out_keys is None:
            dist_cls = kwargs.get("distribution_class")
            if isinstance(dist_cls, type) and issubclass(dist_cls, CompositeDistribution):
                out_keys = _composite_out_keys(kwargs.get("distribution_kwargs"))
            else:
                out_keys = ["action"]
        out_keys = _key_list(out_keys, ["action"])
        spec = _first_key_spec(spec, out_keys)
        sampler = SafeProbabilisticModule(in_keys=in_keys, out_keys=out_keys, spec=spec, **kwargs)
        super().__init__(module, sampler)


class ValueOperator(TensorDictModule):
    """A value network: writes ``"state_value"`` (or ``"state_action_value"`` when it reads ``"action"``).

    Args:
        module (nn.Module): maps the ``in_keys`` values to the value.
        in_keys (list of NestedKey, optional): defaults to ``["observation"]``.
        out_keys (list of NestedKey, optional): defaults to ``["state_value"]``, or
            ``["state_action_value"]`` if ``"action"`` is among the ``in_keys``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import ValueOperator
        >>> from torchrl.modules import MLP
        >>> critic = ValueOperator(MLP(in_features=5, out_features=1, num_cells=[8]),
        ...                        in_keys=["observation", "action"])
        >>> critic.out_keys
        ['state_action_value']
        >>> td = TensorDict(observation=torch.randn(3, 4), action=torch.randn(3, 1), batch_size=[3])
        >>> critic(td)["state_action_value"].shape
        torch.Size([3, 1])
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        in_keys = _key_list(in_keys, ["observation"])
        default_out = ["state_action_value"] if "action" in in_keys else ["state_value"]
        out_keys = _key_list(out_keys, default_out)
        super().__init__(module, in_keys=in_keys, out_keys=out_keys)


def _probabilistic_policy(common: TensorDictModuleBase, policy: TensorDictModuleBase) -> SafeSequential:
    if isinstance(policy, ProbabilisticTensorDictSequential):
        return SafeProbabilisticTensorDictSequential(common, *policy.module)
    if isinstance(policy, ProbabilisticTensorDictModule):
        return SafeProbabilisticTensorDictSequential(common, policy)
    return SafeSequential(common, policy)


class ActorValueOperator(SafeSequential):
    """A policy head and a value head on a shared trunk: ``common -> policy`` and ``common -> value``.

    Calling it runs all three modules. :meth:`get_policy_operator` and :meth:`get_value_operator` return
    the two halves (sharing parameters with this module), e.g. to hand them to a collector and a loss.

    Args:
        common_operator (TensorDictModule): the shared trunk (e.g. writes ``"hidden"``).
        policy_operator (TensorDictModule): the policy head (reads the trunk's output).
        value_operator (TensorDictModule): the value head (reads the trunk's output).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import ActorValueOperator, ValueOperator
        >>> common = TensorDictModule(torch.nn.Linear(3, 4), in_keys=["observation"], out_keys=["hidden"])
        >>> policy = TensorDictModule(torch.nn.Linear(4, 2), in_keys=["hidden"], out_keys=["action"])
        >>> value = ValueOperator(torch.nn.Linear(4, 1), in_keys=["hidden"])
        >>> op = ActorValueOperator(common, policy, value)
        >>> td = TensorDict(observation=torch.randn(3), batch_size=[])
        >>> sorted(op.get_policy_operator()(td.clone()).keys())
        ['action', 'hidden', 'observation']
        >>> "state_value" in op.get_value_operator()(td.clone())
        True
    """

    def __init__(
        self,
        common_operator: TensorDictModule,
        policy_operator: TensorDictModule,
        value_operator: TensorDictModule,
    ) -> None:
        super().__init__(common_operator, policy_operator, value_operator)

    def get_policy_operator(self) -> SafeSequential:
        """``common -> policy`` (a probabilistic sequence when the policy head is probabilistic)."""
        return _probabilistic_policy(self.module[0], self.module[1])

    def get_value_operator(self) -> SafeSequential:
        """``common -> value``."""
        return SafeSequential(self.module[0], self.module[2])

    def get_policy_head(self) -> TensorDictModule:
        """The policy head alone."""
        return self.module[1]

    def get_value_head(self) -> TensorDictModule:
        """The value head alone."""
        return self.module[2]


class ActorCriticOperator(ActorValueOperator):
    """A trunk, a policy head, and a critic that scores the policy's action: ``common -> policy -> value``.

    Unlike :class:`ActorValueOperator`, the value head reads the action, so the critic is the whole
    chain: :meth:`get_critic_operator` (alias :meth:`get_value_operator`) returns this module.

    Args:
        common_operator (TensorDictModule): the shared trunk.
        policy_operator (TensorDictModule): the policy head.
        value_operator (TensorDictModule): the critic head; it must write ``"state_action_value"``.

    Raises:
        RuntimeError: the critic head writes ``"state_value"`` (use :class:`ActorValueOperator` then).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import ActorCriticOperator, ValueOperator
        >>> common = TensorDictModule(torch.nn.Linear(3, 4), in_keys=["observation"], out_keys=["hidden"])
        >>> policy = TensorDictModule(torch.nn.Linear(4, 2), in_keys=["hidden"], out_keys=["action"])
        >>> from torchrl.modules import MLP
        >>> critic = ValueOperator(MLP(in_features=6, out_features=1, num_cells=[]), in_keys=["hidden", "action"])
        >>> op = ActorCriticOperator(common, policy, critic)
        >>> op.get_critic_operator()(TensorDict(observation=torch.randn(3)))["state_action_value"].shape
        torch.Size([1])
    """

    def __init__(
        self,
        common_operator: TensorDictModule,
        policy_operator: TensorDictModule,
        value_operator: TensorDictModule,
    ) -> None:
        super().__init__(common_operator, policy_operator, value_operator)
        if value_operator.out_keys and value_operator.out_keys[0] == "state_value":
            raise RuntimeError(
                "ActorCriticOperator: the value head writes 'state_value', but this operator's critic scores "
                "the policy's action: make the value head read 'action' and write 'state_action_value' "
                "(ValueOperator does this when 'action' is in its in_keys), or use ActorValueOperator for a "
                "state-value head."
            )

    def get_critic_operator(self) -> ActorCriticOperator:
        """The critic: the whole ``common -> policy -> value`` chain (this module)."""
        return self

    def get_value_operator(self):
        """Not available here (as in TorchRL): this operator's value head scores state-action pairs, so it is
        a critic; use :meth:`get_critic_operator`.

        Raises:
            RuntimeError: always.
        """
        raise RuntimeError(
            "ActorCriticOperator.get_value_operator(): 'value operator' names a network giving the value of a "
            "state; this operator computes the value of a state-action pair. Use get_critic_operator() to get "
            "the network computing it."
        )

    def get_policy_head(self) -> TensorDictModule:
        return self.module[1]

    def get_value_head(self) -> TensorDictModule:
        return self.module[2]


class ActorCriticWrapper(SafeSequential):
    """A policy and a value network without shared trunk, runnable together or apart.

    Args:
        policy_operator (TensorDictModule): the policy.
        value_operator (TensorDictModule): the value network.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import ActorCriticWrapper, ValueOperator
        >>> policy = TensorDictModule(torch.nn.Linear(3, 2), in_keys=["observation"], out_keys=["action"])
        >>> value = ValueOperator(torch.nn.Linear(3, 1))
        >>> both = ActorCriticWrapper(policy, value)
        >>> sorted(both(TensorDict(observation=torch.randn(3))).keys())
        ['action', 'observation', 'state_value']
        >>> both.get_policy_operator() is policy
        True
    """

    def __init__(self, policy_operator: TensorDictModule, value_operator: TensorDictModule) -> None:
        super().__init__(policy_operator, value_operator)

    def get_policy_operator(self) -> TensorDictModule:
        return self.module[0]

    def get_value_operator(self) -> TensorDictModule:
        return self.module[1]

    def get_policy_head(self) -> TensorDictModule:
        return self.module[0]

    def get_value_head(self) -> TensorDictModule:
        return self.module[1]
