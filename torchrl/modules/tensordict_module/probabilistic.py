"""``SafeProbabilisticModule`` and ``SafeProbabilisticTensorDictSequential``: tensordict's probabilistic
modules with output specs (and optional projection of samples into them).

Sampling follows tensordict's rules: the exploration type in force (``set_exploration_type``) picks
``rsample``/``sample`` (``RANDOM``), ``deterministic_sample`` (``DETERMINISTIC``), ``mode`` or ``mean``;
outside any context the module's ``default_interaction_type`` applies.
"""
from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.nn import (
    InteractionType,
    interaction_type,
    set_interaction_type,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
)
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import TensorSpec
from torchrl.modules.distributions.continuous import Delta
from torchrl._fast.calls import direct_input, plain_sampler, run_module, sample_direct
from torchrl.modules.tensordict_module.common import _SpecMixin
from torchrl.modules.tensordict_module.sequence import SafeSequential

__all__ = ["SafeProbabilisticModule", "SafeProbabilisticTensorDictSequential"]


class SafeProbabilisticModule(_SpecMixin, ProbabilisticTensorDictModule):
    """A :class:`~tensordict.nn.ProbabilisticTensorDictModule` with a spec for its samples.

    It reads distribution parameters at ``in_keys``, builds ``distribution_class(**params,
    **distribution_kwargs)`` and writes a value from it at ``out_keys`` (and its log-probability with
    ``return_log_prob=True``).

    Args:
        in_keys (NestedKey, list or dict): the parameter entries; a dict maps distribution keyword ->
            tensordict key.
        out_keys (NestedKey or list, optional): where samples are written.
        spec (TensorSpec, optional): the spec of the sample (a bare spec describes the first sample key).

    Keyword Args:
        safe (bool, optional): project samples that fall outside the spec back onto it. Defaults to
            ``False``.
        default_interaction_type (InteractionType, optional): how to draw when no exploration type is
            set. Defaults to ``DETERMINISTIC``.
        distribution_class (type, optional): the distribution. Defaults to :class:`~torchrl.modules.Delta`.
        distribution_kwargs (dict, optional): extra constructor arguments of the distribution.
        return_log_prob (bool, optional): also write the log-probability of the sample.
        log_prob_keys, log_prob_key, cache_dist, n_empirical_estimate, num_samples, generator: as in
            :class:`~tensordict.nn.ProbabilisticTensorDictModule`.

    Raises:
        RuntimeError: ``safe=True`` without a spec.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Bounded
        >>> from torchrl.modules import SafeProbabilisticModule, TanhNormal
        >>> module = SafeProbabilisticModule(["loc", "scale"], ["action"], spec=Bounded(-1.0, 1.0, (2,)),
        ...                                  distribution_class=TanhNormal, return_log_prob=True)
        >>> td = module(TensorDict(loc=torch.zeros(2), scale=torch.ones(2)))
        >>> td["action"].shape, td["action_log_prob"].shape
        (torch.Size([2]), torch.Size([]))
    """

    def __init__(
        self,
        in_keys: NestedKey | list[NestedKey] | dict[str, NestedKey],
        out_keys: NestedKey | list[NestedKey] | None = None,
        spec: TensorSpec | None = None,
        *,
        safe: bool = False,
        default_interaction_type: InteractionType = InteractionType.DETERMINISTIC,
        distribution_class: type = Delta,
        distribution_kwargs: dict | None = None,
        return_log_prob: bool = False,
        log_prob_keys: list[NestedKey] | None = None,
        log_prob_key: NestedKey | None = None,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        num_samples=None,
        generator=None,
    ) -> None:
        super().__init__(
            in_keys=in_keys,
            out_keys=out_keys,
            default_interaction_type=default_interaction_type,
            distribution_class=distribution_class,
            distribution_kwargs=distribution_kwargs,
            return_log_prob=return_log_prob,
            log_prob_keys=log_prob_keys,
            log_prob_key=log_prob_key,
            cache_dist=cache_dist,
            n_empirical_estimate=n_empirical_estimate,
            num_samples=num_samples,
            generator=generator,
        )
        self.register_spec(safe=safe, spec=spec)

    def _spec_keys(self) -> list[NestedKey]:
        return list(self.dist_sample_keys)


class SafeProbabilisticTensorDictSequential(ProbabilisticTensorDictSequential, SafeSequential):
    """A :class:`~tensordict.nn.ProbabilisticTensorDictSequential` with the merged spec of its modules.

    The last module must be probabilistic; the ones before it compute the distribution parameters.

    Args:
        *modules: the modules, run in order.

    Keyword Args:
        partial_tolerant (bool, optional): skip modules whose inputs are missing. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.modules import (NormalParamExtractor, SafeProbabilisticModule,
        ...     SafeProbabilisticTensorDictSequential, TanhNormal)
        >>> net = TensorDictModule(torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ...                        in_keys=["obs"], out_keys=["loc", "scale"])
        >>> policy = SafeProbabilisticTensorDictSequential(
        ...     net, SafeProbabilisticModule(["loc", "scale"], ["action"], distribution_class=TanhNormal))
        >>> policy(TensorDict(obs=torch.randn(5, 3), batch_size=[5]))["action"].shape
        torch.Size([5, 2])
    """

    def __init__(
        self,
        *modules: TensorDictModule | ProbabilisticTensorDictModule,
        partial_tolerant: bool = False,
        **kwargs,
    ) -> None:
        ProbabilisticTensorDictSequential.__init__(self, *modules, partial_tolerant=partial_tolerant, **kwargs)

    def forward(self, *args, **kwargs) -> TensorDictBase:
        if (
            self._requires_sample
            and not self.return_composite
            and direct_input(args, kwargs)
            and self._fast_sequence()
        ):
            modules = tuple(self.module._modules.values())
            last = modules[-1]
            if plain_sampler(last):
                tensordict = args[0]
                if interaction_type() is None:
                    with set_interaction_type(last.default_interaction_type):
                        for module in modules[:-1]:
                            tensordict = run_module(module, tensordict)
                else:
                    for module in modules[:-1]:
                        tensordict = run_module(module, tensordict)
                return sample_direct(last, tensordict)
        return ProbabilisticTensorDictSequential.forward(self, *args, **kwargs)
