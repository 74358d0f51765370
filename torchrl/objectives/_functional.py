"""Running TensorDict modules cheaply inside losses.

* Plain modules are recognised by :func:`torchrl._fast.calls.plain_network` (the one "plain module" rule): a
  loss can then call the wrapped ``nn.Module`` on tensors directly, skipping TensorDict bookkeeping on its hot
  path. The callers below check :func:`torchrl._fast.fast_paths_enabled` per call and take the public route
  when the fast paths are off.
* :func:`find_producer` finds, inside a :class:`~tensordict.nn.TensorDictSequential`, the plain module that
  computes a given key straight from the input tensordict.
* :func:`stack_module_params` builds the stacked parameters of an ensemble (TD3's twin Q-networks, ...) and
  :class:`EnsembleCall` evaluates a module once per member, with :func:`torch.vmap` or a loop.
"""
from __future__ import annotations

import copy

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictParams, TensorDictSequential
from tensordict.utils import Buffer
from torch import nn
from torch.func import functional_call

from torchrl._fast import _switch, fast_get
from torchrl._fast.calls import plain_network

__all__ = [
    "find_producer", "follow_path", "stack_module_params", "EnsembleCall", "ModuleRunner",
    "gather_inputs", "read_inputs",
]

def _leaves(module, path=()):
    if isinstance(module, TensorDictSequential):
        for i, child in enumerate(module.module):
            yield from _leaves(child, path + (i,))
    else:
        yield path, module


def find_producer(module, key, passthrough=None) -> tuple[int, ...] | None:
    """Path (child indices) to the plain module writing ``key`` from the input tensordict alone.

    ``()`` when ``module`` itself is that plain module. ``None`` (the caller then runs the whole module)
    when there is none, or when a later module rewrites ``key`` and ``passthrough(later_module)`` does not
    vouch that it leaves the values unchanged.
    """
    written: set = set()
    found = None
    for path, leaf in _leaves(module):
        out_keys = getattr(leaf, "out_keys", ())
        if key in out_keys:
            if found is None:
                if plain_network(leaf) is None or any(k in written for k in leaf.in_keys):
                    return None
                found = path
            elif passthrough is None or not passthrough(leaf):
                return None
        written.update(out_keys)
    return found


def follow_path(module, path: tuple[int, ...]):
    for i in path:
        module = module.module[i]
    return module


def read_inputs(td: TensorDictBase, keys, missing) -> list[torch.Tensor]:
    """``[td[k] for k in keys]`` through the fast accessor; ``missing(key)`` builds the error to raise."""
    out = []
    for k in keys:
        v = fast_get(td, k)
        if v is None:
            raise missing(k)
        out.append(v)
    return out


# ------------------------------------------------------------------------------------------- ensembles
def _reinit(module: nn.Module) -> None:
    """New random values: ``reset_parameters`` where a layer has it, else uniform in the old range."""
    done = set()
    for m in module.modules():
        reset = getattr(m, "reset_parameters", None)
        if callable(reset):
            reset()
            done.update(id(p) for p in m.parameters(recurse=False))
    with torch.no_grad():
        for p in module.parameters():
            if id(p) not in done and p.numel() > 1:
                lo, hi = p.min().item(), p.max().item()
                if hi > lo:
                    p.uniform_(lo, hi)


def stack_module_params(modules: list[nn.Module], n: int, compare_against=None) -> TensorDictParams:
    """Stacked parameters ``[n, ...]`` of an ensemble, as trainable ``TensorDictParams``.

    One module: member 0 keeps its values, the others are re-initialised copies. Several modules (same
    structure): their values are stacked. Parameters found in ``compare_against`` (shared with another
    network) are not copied: every member reads the original through an expanded view, kept as a buffer.
    """
    shared = {id(p) for p in compare_against} if compare_against is not None else set()
    base = TensorDict.from_module(modules[0])
    if len(modules) == 1:
        members = [base.data.clone()]
        for _ in range(n - 1):
            twin = copy.deepcopy(modules[0])
            _reinit(twin)
            members.append(TensorDict.from_module(twin).data)
    else:
        if len(modules) != n:
            raise ValueError(f"got {len(modules)} networks for an ensemble of {n}.")
        members = [TensorDict.from_module(m).data.clone() for m in modules]
    stacked = torch.stack(members, 0)
    if not isinstance(stacked, TensorDict):
        stacked = stacked.to_tensordict()
    for key, leaf in base.items(True, True):
        if id(leaf) in shared:
            stacked.set(key, Buffer(leaf.data.expand(n, *leaf.shape)))
        elif not isinstance(leaf, nn.Parameter):
            stacked.set(key, Buffer(stacked.get(key)))
        else:
            stacked.set(key, nn.Parameter(stacked.get(key)))
    return TensorDictParams(stacked)


def gather_inputs(td: TensorDictBase, keys, missing, *, extra: dict | None = None, nxt: bool = False) -> dict:
    """``{key: tensor}`` for ``keys``: from ``extra`` first, else ``td`` (``td["next"]`` when ``nxt``);
    ``missing(full_key)`` builds the error for an absent entry."""
    out = {}
    for k in keys:
        v = extra.get(k) if extra else None
        if v is None:
            full = (("next", k) if isinstance(k, str) else ("next", *k)) if nxt else k
            v = fast_get(td, full)
            if v is None:
                raise missing(full)
        out[k] = v
    return out


class ModuleRunner:
    """Runs a TensorDict module on a dict of input tensors, returning ``{out_key: tensor}``.

    Plain modules (see :func:`~torchrl._fast.calls.plain_network`) are called on the tensors directly; others on a TensorDict
    built from them (``batch_size`` required).
    """

    def __init__(self, module):
        self.module = module
        self.inner = plain_network(module)
        self.in_keys = list(module.in_keys)
        self.out_keys = list(module.out_keys)

    def __call__(self, inputs: dict, batch_size, *, detached: bool | frozenset = False) -> dict:
        """``detached``: ``True`` (every parameter) or the ids of the parameters to read detached, through
        :func:`~torch.func.functional_call` (which, unlike ``hold_out_params``, traces under ``torch.compile``)."""
        if self.inner is not None and _switch.ON:
            args = [inputs[k] for k in self.in_keys]
            out = self.inner(*args) if detached is False else functional_call(
                self.inner, _detached(self.inner, detached), tuple(args))
            if not isinstance(out, tuple):
                out = (out,)
            return dict(zip(self.out_keys, out))
        data = TensorDict(dict(inputs), batch_size=batch_size)
        if detached is False:
            data = self.module(data)
        else:
            data = functional_call(self.module, _detached(self.module, detached), (data,))
        return {k: data.get(k) for k in self.out_keys if k in data.keys(True, True)}


def _detached(module: nn.Module, which: bool | frozenset) -> dict:
    return {n: p.detach() for n, p in module.named_parameters() if which is True or id(p) in which}


#: Plain-module ensembles this small are evaluated with a loop even when vmap is allowed: for TD3's two
#: Q-networks (MLP 2x256 class, batch 256) the loop is ~30% faster than ``torch.vmap``; results are identical.
_LOOP_MAX_MEMBERS = 4


class EnsembleCall:
    """Evaluates ``module`` once per member of stacked ``params``; returns ``out_key`` stacked ``[n, ...]``.

    Plain modules are called on tensors through :func:`torch.func.functional_call` (small ensembles in a
    loop, larger ones vmapped); others through ``params.to_module`` and :func:`torch.vmap`. ``vmap=False``
    always uses a Python loop over the members. Inputs are shared by all members.
    """

    def __init__(self, module, out_key, *, vmap: bool = True, randomness: str = "error"):
        self.module = module
        self.out_key = out_key
        self.inner = plain_network(module)
        self.in_keys = list(module.in_keys)
        self.vmap = vmap
        self.randomness = randomness
        self.out_index = list(module.out_keys).index(out_key) if out_key in module.out_keys else None
        if self.out_index is None:
            self.inner = None

    def __call__(self, params: TensorDictBase, inputs: dict, batch_size, *, detach: bool = False) -> torch.Tensor:
        n = params.batch_size[0]
        if self.inner is not None and _switch.ON:
            xs = [inputs[k] for k in self.in_keys]
            names = [".".join(k[1:]) for k in params.keys(True, True)]
            leaves = [v.detach() if detach else v for v in params.values(True, True)]
            pdict = dict(zip(names, leaves))
            idx = self.out_index

            def one(p, *x):
                out = functional_call(self.inner, p, x)
                return out[idx] if isinstance(out, tuple) else out

            if self.vmap and n > _LOOP_MAX_MEMBERS:
                return torch.vmap(one, (0,) + (None,) * len(xs), randomness=self.randomness)(pdict, *xs)
            return torch.stack([one({k: v[i] for k, v in pdict.items()}, *xs) for i in range(n)])
        # the general route: the TensorDict module on a TensorDict, its parameters swapped in by functional_call
        # (params.to_module inside a compiled function fails dynamo's guards on a first call)
        names = [".".join(k) for k in params.keys(True, True)]
        pdict = dict(zip(names, [v.detach() if detach else v for v in params.values(True, True)]))
        data = TensorDict(dict(inputs), batch_size=batch_size)
        module, key = self.module, self.out_key

        def one_td(p, d):
            return functional_call(module, p, (d.copy(),)).get(key)

        if self.vmap:
            return torch.vmap(one_td, (0, None), randomness=self.randomness)(pdict, data)
        return torch.stack([one_td({k: v[i] for k, v in pdict.items()}, data) for i in range(n)])
