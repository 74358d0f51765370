"""Running actors and critics on tensors inside losses (PPO, A2C, REINFORCE, SAC).

* :class:`ModuleChain` runs a plain :class:`~tensordict.nn.TensorDictModule`, or a
  :class:`~tensordict.nn.TensorDictSequential` of plain ones (e.g. an ``ActorValueOperator`` branch), by
  calling the wrapped ``nn.Module`` objects on tensors: inputs come from a dict of overrides, then the
  tensordict; intermediate outputs stay in a dict. Anything else runs the module on a shallow copy of the
  tensordict (the caller's data is never written).
* :class:`PolicyHead` turns a probabilistic actor into its distribution the same way, building
  ``distribution_class(**params, **distribution_kwargs)`` itself.
* :func:`sum_features`, :func:`head_name` and :func:`entropy` handle multi-head (composite) actions, whose
  log-probabilities and entropies are TensorDicts of one entry per head.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDict, TensorDictBase, is_tensor_collection
from tensordict.nn import (
    CompositeDistribution,
    ProbabilisticTensorDictModule,
    TensorDictModuleBase,
    TensorDictSequential,
)
from torch.func import functional_call

from torchrl._fast import _switch, fast_get
from torchrl._fast.calls import plain_network

__all__ = ["ModuleChain", "PolicyHead", "entropy", "head_name", "per_head", "sum_features"]


def _leaves(module) -> list:
    if isinstance(module, TensorDictSequential):
        out = []
        for child in module.module:
            out.extend(_leaves(child))
        return out
    return [module]


def _next(td: TensorDictBase, missing):
    nxt = fast_get(td, "next")
    if nxt is None:
        raise missing("next")
    return nxt


class ModuleChain:
    """Runs ``module`` (or a list of TensorDict modules, in order) on tensors; returns ``{out_key: tensor}``.

    ``detach`` is a set of parameter ids: those parameters are read detached (``separate_losses``: a trunk
    shared with another network is trained by the other loss only).
    """

    def __init__(self, module, *, detach: frozenset = frozenset()):
        leaves = _leaves(module) if not isinstance(module, list) else [m for x in module for m in _leaves(x)]
        self.module = module
        self.detach = detach
        steps = []
        for leaf in leaves:
            inner = plain_network(leaf)
            if inner is None:
                steps = None
                break
            shared = bool(detach) and any(id(p) in detach for p in inner.parameters())
            steps.append((inner, list(leaf.in_keys), list(leaf.out_keys), shared))
        self.steps = steps
        if isinstance(module, list):
            written, ins = set(), []
            for leaf in leaves:
                ins += [k for k in leaf.in_keys if k not in written and k not in ins]
                written.update(leaf.out_keys)
            self.in_keys = ins
            self.out_keys = [k for leaf in leaves for k in leaf.out_keys]
        else:
            self.in_keys = list(module.in_keys)
            self.out_keys = list(module.out_keys)

    def _call(self, inner, args, shared):
        if not shared:
            return inner(*args)
        params = {n: (p.detach() if id(p) in self.detach else p) for n, p in inner.named_parameters()}
        return functional_call(inner, params, tuple(args))

    def __call__(self, td: TensorDictBase, missing: Callable, *, extra: dict | None = None, nxt: bool = False) -> dict:
        """Outputs of the chain; inputs from ``extra`` first, then ``td`` (``td["next"]`` when ``nxt``)."""
        source = _next(td, missing) if nxt else td
        if self.steps is None or not _switch.ON:
            return self._slow(source, missing, extra, nxt)
        values = dict(extra) if extra else {}
        for inner, in_keys, out_keys, shared in self.steps:
            args = []
            for k in in_keys:
                v = values.get(k)
                if v is None:
                    v = fast_get(source, k)
                    if v is None:
                        raise missing(("next", *((k,) if isinstance(k, str) else k)) if nxt else k)
                args.append(v)
            out = self._call(inner, args, shared)
            if type(out) is not tuple:
                out = (out,)
            values.update(zip(out_keys, out))
        return values

    def _slow(self, source, missing, extra, nxt) -> dict:
        data = source.copy()
        for k, v in (extra or {}).items():
            data.set(k, v)
        for k in self.in_keys:
            if k not in data.keys(True, True):
                raise missing(("next", *((k,) if isinstance(k, str) else k)) if nxt else k)
        modules = self.module if isinstance(self.module, list) else [self.module]
        for m in modules:
            if self.detach:
                params = {n: (p.detach() if id(p) in self.detach else p) for n, p in m.named_parameters()}
                data = functional_call(m, params, (data,))
            else:
                data = m(data)
        keys = set(data.keys(True, True))
        out = dict(extra) if extra else {}
        out.update({k: data.get(k) for k in self.out_keys if k in keys})
        return out


def _last_probabilistic(actor):
    leaves = _leaves(actor)
    last = leaves[-1]
    if not isinstance(last, ProbabilisticTensorDictModule):
        return None, leaves
    return last, leaves[:-1]


class PolicyHead:
    """The distribution of a probabilistic actor for a batch, computed on tensors when the actor allows it.

    The direct route applies to a chain of plain modules ending in a
    :class:`~tensordict.nn.ProbabilisticTensorDictModule` with a single-tensor distribution; anything
    else (composite distributions, custom modules) calls ``actor.get_dist`` on a shallow copy.
    """

    def __init__(self, actor: TensorDictModuleBase):
        if not hasattr(actor, "get_dist"):
            raise TypeError(
                f"the actor must be a probabilistic module with get_dist (e.g. a ProbabilisticActor), got "
                f"{type(actor).__name__}."
            )
        self.actor = actor
        last, body = _last_probabilistic(actor)
        self.last = last
        self.composite = last is not None and isinstance(last.distribution_class, type) and issubclass(
            last.distribution_class, CompositeDistribution
        )
        self.chain = ModuleChain(body) if body else None
        self.direct = last is not None and not self.composite and (self.chain is None or self.chain.steps is not None)
        if last is not None:
            self.param_keys = [(dk if isinstance(dk, str) else dk[-1], tk) for dk, tk in zip(last.dist_keys, last.in_keys)]
            self.sample_keys = list(last.dist_sample_keys)
            self.log_prob_keys = list(getattr(last, "log_prob_keys", None) or [last.log_prob_key])
        else:
            self.param_keys, self.sample_keys = [], list(getattr(actor, "dist_sample_keys", ["action"]))
            self.log_prob_keys = list(getattr(actor, "log_prob_keys", ["action_log_prob"]))
        # a key counts as an input unless an earlier module writes it or entries under it (nested parameters)
        written = [k if isinstance(k, tuple) else (k,) for m in _leaves(actor) for k in getattr(m, "out_keys", ())]
        self.in_keys = [
            k for k in actor.in_keys
            if not any(w[: len(kt)] == kt for kt in [k if isinstance(k, tuple) else (k,)] for w in written)
        ]

    def build(self, params: dict):
        last = self.last
        return last.distribution_class(**params, **last.distribution_kwargs)

    def __call__(self, td: TensorDictBase, missing: Callable, *, nxt: bool = False, extra: dict | None = None):
        """The actor's distribution for ``td`` (or ``td["next"]``)."""
        if self.direct and _switch.ON:
            values = self.chain(td, missing, nxt=nxt, extra=extra) if self.chain is not None else {}
            source = None
            params = {}
            for name, key in self.param_keys:
                v = values.get(key)
                if v is None:
                    if source is None:
                        source = _next(td, missing) if nxt else td
                    v = fast_get(source, key)
                    if v is None:
                        raise missing(("next", *((key,) if isinstance(key, str) else key)) if nxt else key)
                params[name] = v
            return self.build(params)
        source = _next(td, missing) if nxt else td
        data = source.copy()
        for k, v in (extra or {}).items():
            data.set(k, v)
        for k in self.in_keys:
            if fast_get(data, k) is None:
                raise missing(("next", *((k,) if isinstance(k, str) else k)) if nxt else k)
        return self.actor.get_dist(data)

    def from_params(self, td: TensorDictBase, missing: Callable):
        """The distribution from parameters stored in ``td`` (e.g. ``"loc"``/``"scale"`` recorded when the
        data was collected), without running the actor's network."""
        if self.last is None:
            raise RuntimeError("the actor has no probabilistic module to build a distribution from.")
        if not self.composite:
            params = {}
            for name, key in self.param_keys:
                v = fast_get(td, key)
                if v is None:
                    raise missing(key)
                params[name] = v
            return self.build(params)
        for key in self.last.in_keys:
            if fast_get(td, key) is None:
                raise missing(key)
        return self.last.get_dist(td)


def head_name(key) -> str:
    """``"cont_log_prob"`` / ``"cont_entropy"`` / ``("agent", "cont")`` -> the head's name (``"cont"``)."""
    name = key if isinstance(key, str) else key[-1]
    for suffix in ("_log_prob", "_entropy"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def sum_features(x, ndim: int | None = None) -> torch.Tensor:
    """A tensor unchanged; a TensorDict of per-head values summed over each leaf's feature dims (the dims past
    the TensorDict's batch dims, or past ``ndim``) and over heads."""
    if not is_tensor_collection(x):
        return x
    nb = x.batch_dims if ndim is None else ndim
    total = None
    for leaf in x.values(True, True):
        if leaf.ndim > nb:
            leaf = leaf.sum(tuple(range(nb, leaf.ndim)))
        total = leaf if total is None else total + leaf
    return total


def per_head(x: TensorDictBase) -> dict:
    """``{head name: feature-summed value}`` of a composite log-probability / entropy TensorDict."""
    nb = x.batch_dims
    out = {}
    for key, leaf in x.items(True, True):
        if leaf.ndim > nb:
            leaf = leaf.sum(tuple(range(nb, leaf.ndim)))
        out[head_name(key) if isinstance(key, str) else key[:-1] + (head_name(key),)] = leaf
    return out


def entropy(dist, samples_mc: int = 1):
    """The distribution's entropy: closed form when it has one, else ``-mean log p(x)`` over ``samples_mc``
    reparameterised draws. Composite distributions give a TensorDict of one entry per head."""
    if isinstance(dist, CompositeDistribution):
        try:
            return dist.entropy()
        except NotImplementedError:
            x = dist.rsample((samples_mc,)) if dist.has_rsample else dist.sample((samples_mc,))
            lp = dist.log_prob(x)
            out = TensorDict({}, batch_size=lp.batch_size[1:])
            for key, leaf in lp.items(True, True):
                name = key if isinstance(key, str) else key[-1]
                new = name[: -len("_log_prob")] + "_entropy" if name.endswith("_log_prob") else name + "_entropy"
                out.set(new if isinstance(key, str) else key[:-1] + (new,), -leaf.mean(0))
            return out
    try:
        return dist.entropy()
    except NotImplementedError:
        pass
    shape = torch.Size((samples_mc,))
    joint = getattr(dist, "rsample_and_log_prob", None) if dist.has_rsample else None
    if joint is not None:
        _, lp = joint(shape)
    else:
        x = dist.rsample(shape) if dist.has_rsample else dist.sample(shape)
        lp = dist.log_prob(x)
    return -lp.mean(0)

