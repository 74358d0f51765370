"""The one "plain module" rule, and the direct calls built on it.

``TensorDictModule.__call__`` goes through ``nn.Module``'s hook machinery, keyword dispatch, skip-existing
checks, ``tensordict_out`` handling and output selection before it reaches the wrapped network; for a small
network run once per env step (or once per loss term) that wrapper costs as much as the network. For a
*plain* module the whole call is exactly "read the in_keys, call the network, write the out_keys in place",
and the functions here do just that.

The rule (:func:`plain`), applied to a ``tensordict.nn.TensorDictModule`` ``m``:

- its class keeps ``TensorDictModule``'s ``forward`` and ``_call_module``, or marks its own ``forward`` with
  ``forward._fast_forward = True`` to vouch that it behaves the same (torchrl's ``SafeModule`` family does;
  ``SafeSequential`` marks ``False``);
- its options are the defaults: ``inplace=True``, no ``in_keys`` given as a keyword mapping, no ``method``
  or ``method_kwargs``, no ``get_kwargs``, ``out_keys`` not narrowed by ``select_out_keys``, no ``"_"`` out key;
- the fast paths are on (:func:`torchrl._fast.set_fast_paths`).

A direct call that replaces ``m(td)`` (rather than ``m.forward(td)``) also needs ``not hooked(m)``: no forward
or backward hook on ``m`` nor a global one, i.e. ``nn.Module.__call__`` would go straight to ``forward``.
:func:`plain_parts` is that pair of conditions, checked once. A plain ``ProbabilisticTensorDictModule``
(:func:`plain_sampler`) keeps its class's ``forward``, draws one sample (no ``num_samples``, no generator),
writes one sample key and has no hook. Callers that run the network on tensors they gathered themselves
(losses, value estimators) use :func:`plain_network`, which also asks for an ``nn.Module`` network that is not
itself a TensorDict module.

Every direct call falls back to the public call, per call, for anything else: a tensordict that is not a
plain ``TensorDict``, a missing input (the public call raises the informative error), skip-existing mode,
a hook registered since, or the fast paths turned off.

Users: ``EnvBase.rollout`` and the collectors (:func:`direct_module_call`), the gym column loop
(:func:`plain_parts`), torchrl's ``SafeModule`` / ``SafeSequential`` / ``SafeProbabilisticTensorDictSequential``
forwards (:func:`forward_direct`, :func:`run_module`, :func:`sample_direct`) and the losses and value
estimators (:func:`plain_network`, which call the network on tensors they gathered themselves).
"""
from __future__ import annotations

from typing import Callable
from weakref import WeakKeyDictionary

import torch
from tensordict import TensorDict, TensorDictBase, unravel_key_list
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    TensorDictModule,
    TensorDictModuleBase,
    interaction_type,
    skip_existing,
)
from torch import nn
from torch.nn.modules import module as _torch_module

from torchrl._fast import _switch
from torchrl._fast.tensordicts import fast_get, fast_set

__all__ = [
    "direct_input",
    "direct_module_call",
    "forward_direct",
    "hooked",
    "plain",
    "plain_network",
    "plain_parts",
    "plain_sampler",
    "run_module",
    "sample_direct",
]

_TDM_FORWARD = TensorDictModule.forward
_TDM_CALL = TensorDictModule._call_module
_PTM_FORWARD = ProbabilisticTensorDictModule.forward


# ----------------------------------------------------------------------------------------------- the rule
def hooked(module) -> bool:
    """Whether ``module(...)`` would do more than ``module.forward(...)``: a forward, forward-pre, backward or
    backward-pre hook on ``module``, or a global one (the test ``nn.Module.__call__`` makes itself)."""
    return bool(
        module._forward_hooks
        or module._forward_pre_hooks
        or module._backward_hooks
        or module._backward_pre_hooks
        or _torch_module._global_forward_hooks
        or _torch_module._global_forward_pre_hooks
        or _torch_module._global_backward_hooks
        or _torch_module._global_backward_pre_hooks
    )


def plain(module) -> bool:
    """Whether ``module.forward(td)`` is exactly "read the in_keys, call the network, write the out_keys in
    place" (the rule in this module's docstring; hooks are not part of it, see :func:`plain_parts`).
    ``False`` with the fast paths off."""
    if not _switch.ON:
        return False
    cls = type(module)
    if cls is not TensorDictModule:
        if not isinstance(module, TensorDictModule) or cls._call_module is not _TDM_CALL:
            return False
        if not getattr(cls.forward, "_fast_forward", cls.forward is _TDM_FORWARD):
            return False
    return (
        module.inplace is True
        and module._kwargs is None
        and module.method is None
        and not module.method_kwargs
        and not module._get_kwargs
        and module.out_keys == module.out_keys_source
        and "_" not in module.out_keys
    )


def plain_parts(policy) -> tuple[Callable, list, list] | None:
    """``(network, in_keys, out_keys)`` of a plain module without hooks (so that ``policy(td)`` itself is
    "read, call, write"); ``None`` otherwise, and with the fast paths off."""
    if not plain(policy) or hooked(policy):
        return None
    in_keys = [k if isinstance(k, str) else tuple(k) for k in policy.in_keys]
    out_keys = [k if isinstance(k, str) else tuple(k) for k in policy.out_keys]
    return policy.module, in_keys, out_keys


def plain_network(module) -> nn.Module | None:
    """The wrapped ``nn.Module`` of a plain module without hooks, for callers (losses, value estimators) that
    gather the input tensors themselves and may need the network's parameters; ``None`` when there is none,
    or when the network is itself a TensorDict module."""
    parts = plain_parts(module)
    if parts is None or not isinstance(parts[0], nn.Module) or isinstance(parts[0], TensorDictModuleBase):
        return None
    return parts[0]


def plain_sampler(module) -> bool:
    """Whether ``module`` is a ``ProbabilisticTensorDictModule`` that :func:`sample_direct` may replace: its
    class's ``forward``, one sample key, no ``num_samples``, no generator, no hook; ``False`` with the fast
    paths off."""
    return (
        _switch.ON
        and isinstance(module, ProbabilisticTensorDictModule)
        and type(module).forward is _PTM_FORWARD
        and module.num_samples is None
        and module._generator is None
        and module._generator_key is None
        and len(module._out_keys) == 1
        and not hooked(module)
    )


# ------------------------------------------------------------------------------------------ the writer
def _write(module, td: TensorDict, keys, out) -> TensorDict:
    """Writes the network's output ``out`` under ``keys`` as ``TensorDictModule.forward`` does."""
    if type(out) is not tuple:
        if type(out) is not torch.Tensor and isinstance(out, (dict, TensorDictBase)) and all(
            k in out for k in module.out_keys_source
        ):  # a mapping of outputs: pick the out_keys from it, as TensorDictModule does
            if isinstance(out, dict):
                out = dict(zip(unravel_key_list(list(out.keys())), out.values()))
            out = tuple(out.get(k) for k in module.out_keys_source)
        else:
            out = (out,)
    if len(out) != len(keys):
        raise RuntimeError(
            f"{type(module.module).__name__} returned {len(out)} output(s) for the {len(keys)} out_keys {list(keys)} "
            f"of its {type(module).__name__}; make them match."
        )
    batch = td.batch_size
    n = len(batch)
    if all(type(o) is torch.Tensor and o.shape[:n] == batch for o in out):
        for key, value in zip(keys, out):
            fast_set(td, key, value)
        return td
    return module._write_to_tensordict(td, out)  # tensordict's own writer: conversions and shape errors


# ------------------------------------------------------------------------------------ the direct calls
def direct_input(args: tuple, kwargs: dict) -> bool:
    """Whether a module's ``forward(*args, **kwargs)`` may take a direct route: one plain ``TensorDict``, no
    keyword, not in skip-existing mode, fast paths on."""
    return len(args) == 1 and not kwargs and type(args[0]) is TensorDict and _switch.ON and not skip_existing()


def forward_direct(module: TensorDictModule, td: TensorDictBase) -> TensorDictBase | None:
    """``module.forward(td)`` for a :func:`plain` module; ``None`` (the caller then runs the public forward)
    when ``td`` is not a plain ``TensorDict``, an input is missing, in skip-existing mode or with the fast
    paths off. Hooks are the caller's business (this replaces ``forward``, not ``__call__``)."""
    if type(td) is not TensorDict or not _switch.ON or skip_existing():
        return None
    inputs = []
    for key in module.in_keys:
        value = fast_get(td, key)
        if value is None:
            return None
        inputs.append(value)
    return _write(module, td, module.out_keys, module.module(*inputs))


def run_module(module, td: TensorDictBase) -> TensorDictBase:
    """``module(td)``, through :func:`forward_direct` when ``module`` is plain and has no hook."""
    if plain(module) and not hooked(module):
        out = forward_direct(module, td)
        if out is not None:
            return out
    return module(td)


def direct_module_call(policy) -> Callable[[TensorDictBase], TensorDictBase] | None:
    """``call(td) -> td`` equivalent to ``policy(td)``, or ``None`` when ``policy`` needs its full call (not
    plain, hooked, or the fast paths off). The rule is checked once; per call, the returned function falls
    back to ``policy(td)`` as :func:`forward_direct` does, and when a hook was registered since."""
    parts = plain_parts(policy)
    if parts is None:
        return None
    inner, in_keys, out_keys = parts
    single = out_keys[0] if len(out_keys) == 1 else None

    def call(td: TensorDictBase) -> TensorDictBase:
        if type(td) is not TensorDict or not _switch.ON or skip_existing() or hooked(policy):
            return policy(td)
        inputs = [fast_get(td, k) for k in in_keys]
        if any(x is None for x in inputs):
            return policy(td)  # the public call raises the informative KeyError
        out = inner(*inputs)
        if type(out) is torch.Tensor and single is not None and out.shape[: td.batch_dims] == td.batch_size:
            fast_set(td, single, out)
            return td
        return _write(policy, td, out_keys, out)

    return call


# ------------------------------------------------------------------------------------ probabilistic
#: ``{module: (sample key, log-prob key)}``: fixed once a module is built, and ``log_prob_key`` costs a few
#: attribute reads and a global lookup per call (about 5% of a one-observation actor call)
_SAMPLE_KEYS: WeakKeyDictionary = WeakKeyDictionary()


def _sample_keys(module: ProbabilisticTensorDictModule) -> tuple:
    keys = _SAMPLE_KEYS.get(module)
    if keys is None:
        keys = _SAMPLE_KEYS[module] = (module.dist_sample_keys[0], module.log_prob_key)
    return keys


def _dist(module: ProbabilisticTensorDictModule, td: TensorDict):
    params = {}
    for dist_key, td_key in zip(module.dist_keys, module.in_keys):
        value = fast_get(td, td_key)
        if value is None:
            return module.get_dist(td)  # its error names the missing parameter
        params[dist_key if type(dist_key) is str else dist_key[-1]] = value
    return module.distribution_class(**params, **module.distribution_kwargs)


def sample_direct(module: ProbabilisticTensorDictModule, td: TensorDictBase) -> TensorDictBase:
    """``module(td)`` for a :func:`plain_sampler` module: builds the distribution from the parameters in
    ``td``, draws one sample (with its log-probability when ``return_log_prob``) and writes them in place.
    Other tensordicts, and the fast paths off, go through the public call."""
    if type(td) is not TensorDict or not _switch.ON:
        return module(td)
    dist = _dist(module, td)
    itype = interaction_type()
    sample_key, log_prob_key = _sample_keys(module)
    if not module.return_log_prob:
        log_prob_key = None
    log_prob = None
    if log_prob_key is not None and (itype or module.default_interaction_type) is InteractionType.RANDOM:
        name = "rsample_and_log_prob" if dist.has_rsample else "sample_and_log_prob"
        joint = getattr(dist, name, None) if callable(getattr(type(dist), name, None)) else None
        if joint is not None:
            sample, log_prob = joint(torch.Size(()))
        else:
            sample = module._dist_sample(dist, interaction_type=itype)
    else:
        sample = module._dist_sample(dist, interaction_type=itype)
    if log_prob_key is None:
        keys, values = (sample_key,), (sample,)
    else:
        if log_prob is None:
            log_prob = dist.log_prob(sample)
        keys, values = (sample_key, log_prob_key), (sample, log_prob)
    batch = td.batch_size
    n = len(batch)
    for key, value in zip(keys, values):
        if type(value) is torch.Tensor and value.shape[:n] == batch:
            fast_set(td, key, value)
        else:
            td.set(key, value)
    return td
