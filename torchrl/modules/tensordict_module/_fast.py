"""The per-step fast path of TensorDict modules (policies run once per env step).

tensordict's generic ``forward`` handles dispatch by keyword, ``tensordict_out``, ``inplace`` modes, skip-
existing mode, lazy stacks and output selection; for the common case (a plain ``TensorDict`` in, outputs
written in place) those checks cost more than a small network. :func:`run_module` calls a plain
``TensorDictModule``'s network directly and writes the outputs with validated-once fast sets; anything
unusual takes the regular ``module(td)`` path, so behaviour is unchanged.
"""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import ProbabilisticTensorDictModule, TensorDictModule, skip_existing
from tensordict.nn.probabilistic import InteractionType, interaction_type
from torch.nn.modules import module as _torch_module

from torchrl._fast import fast_get, fast_set

__all__ = ["call_direct", "direct_ok", "fast_input", "plain", "prob_direct_ok", "run_module", "sample_direct"]

_TDM_FORWARD = TensorDictModule.forward
_TDM_CALL = TensorDictModule._call_module
_PTM_FORWARD = ProbabilisticTensorDictModule.forward


def _hooked(module) -> bool:
    return bool(
        module._forward_hooks
        or module._forward_pre_hooks
        or _torch_module._global_forward_hooks
        or _torch_module._global_forward_pre_hooks
    )


def fast_input(tensordict, kwargs: dict) -> bool:
    """A plain TensorDict, no extra arguments and no skip-existing mode."""
    return type(tensordict) is TensorDict and not kwargs and not skip_existing()


def plain(module) -> bool:
    """Does ``module`` behave as a default ``TensorDictModule`` (network called on its in_keys, outputs set)?"""
    if not isinstance(module, TensorDictModule):
        return False
    cls = type(module)
    return (
        getattr(cls.forward, "_fast_forward", cls.forward is _TDM_FORWARD)
        and cls._call_module is _TDM_CALL
        and module.method is None
        and module._kwargs is None
        and module.inplace is True
        and not module.method_kwargs
        and not module._get_kwargs
        and module.out_keys == module.out_keys_source
        and "_" not in module.out_keys
    )


def direct_ok(module) -> bool:
    """Can ``module``'s network be called directly, hooks included (none registered)?"""
    return plain(module) and not _hooked(module)


def _write(tensordict: TensorDict, keys, values) -> None:
    batch = tensordict.batch_size
    n = len(batch)
    for key, value in zip(keys, values):
        if type(value) is torch.Tensor and value.shape[:n] == batch:
            fast_set(tensordict, key, value)
        else:
            tensordict.set(key, value)


def call_direct(module: TensorDictModule, tensordict: TensorDict) -> TensorDict | None:
    """Runs ``module`` on ``tensordict`` bypassing its wrapper; ``None`` when an input is missing."""
    inputs = []
    for key in module.in_keys:
        value = fast_get(tensordict, key)
        if value is None:
            return None
        inputs.append(value)
    out = module.module(*inputs)
    if type(out) is not tuple:
        out = (out,)
    keys = module.out_keys
    if len(out) != len(keys):
        raise RuntimeError(
            f"{type(module).__name__}: the module returned {len(out)} tensor(s) for out_keys {keys}; make them match."
        )
    _write(tensordict, keys, out)
    return tensordict


def run_module(module, tensordict: TensorDict) -> TensorDictBase:
    """``module(tensordict)``, through the direct path when it applies."""
    if direct_ok(module):
        out = call_direct(module, tensordict)
        if out is not None:
            return out
    return module(tensordict)


def prob_direct_ok(module) -> bool:
    """Can a probabilistic module be sampled directly (one Tensor sample, no extras)?"""
    return (
        isinstance(module, ProbabilisticTensorDictModule)
        and type(module).forward is _PTM_FORWARD
        and module.num_samples is None
        and module._generator is None
        and module._generator_key is None
        and len(module._out_keys) == 1
        and not _hooked(module)
    )


def _dist(module: ProbabilisticTensorDictModule, tensordict: TensorDict):
    params = {}
    for dist_key, td_key in zip(module.dist_keys, module.in_keys):
        value = fast_get(tensordict, td_key)
        if value is None:
            return module.get_dist(tensordict)  # its error names the missing parameter
        params[dist_key if type(dist_key) is str else dist_key[-1]] = value
    return module.distribution_class(**params, **module.distribution_kwargs)


def _sample_keys(module: ProbabilisticTensorDictModule) -> tuple:
    """``(sample key, log-prob key)``, fixed once the module is built (cached on it)."""
    keys = module.__dict__.get("_torchrl_sample_keys")
    if keys is None:
        keys = (module.dist_sample_keys[0], module.log_prob_key)
        module.__dict__["_torchrl_sample_keys"] = keys
    return keys


def sample_direct(module: ProbabilisticTensorDictModule, tensordict: TensorDict) -> TensorDictBase:
    """``ProbabilisticTensorDictModule.forward`` for a single Tensor sample, without the wrapper costs."""
    dist = _dist(module, tensordict)
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
        _write(tensordict, (sample_key,), (sample,))
    else:
        if log_prob is None:
            log_prob = dist.log_prob(sample)
        _write(tensordict, (sample_key, log_prob_key), (sample, log_prob))
    return tensordict
