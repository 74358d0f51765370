"""Networks with lazy layers (``nn.LazyLinear``, ``MLP`` without ``in_features``) given to a loss.

Their parameters have no shape until the first forward pass, so a loss cannot copy them into target networks
or stack them into an ensemble when it is built. :class:`PendingNetworks` keeps such registrations aside:
the loss's first call runs each pending network once on its input (under ``no_grad``), which materialises
the parameters, then completes the registration. Parameter objects keep their identity throughout, so an
optimizer built on ``loss.parameters()`` before that first call trains the right tensors:

* a single network's parameters are its own (materialised in place by torch);
* an ensemble's stacked parameters are ``UninitializedParameter`` placeholders registered on the loss at
  once, materialised in place with the stacked values.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

__all__ = ["PendingNetworks", "adopt_placeholders", "is_lazy"]


def is_lazy(module: nn.Module) -> bool:
    """Whether ``module`` still has uninitialised (lazy) parameters or buffers."""
    return any(isinstance(p, UninitializedParameter) for p in module.parameters()) or any(
        isinstance(b, UninitializedBuffer) for b in module.buffers()
    )


@dataclass
class _Pending:
    modules: list
    expand_dim: int | None
    create_target_params: bool
    compare_against: list | None
    placeholders: list = field(default_factory=list)  # ensemble: one per trainable parameter of modules[0]


class PendingNetworks:
    """The registrations a loss completes on its first call (see the module docstring)."""

    def __init__(self) -> None:
        self.entries: dict[str, _Pending] = {}
        self.hook = None

    def add(self, loss: nn.Module, name: str, modules: list, expand_dim: int | None, create_target_params: bool,
            compare_against: list | None) -> list:
        """Records a registration; returns the ensemble's placeholder parameters (empty for one network)."""
        entry = _Pending(modules, expand_dim, create_target_params, compare_against)
        if expand_dim is not None:
            shared = {id(p) for p in compare_against} if compare_against is not None else set()
            entry.placeholders = [UninitializedParameter() for p in modules[0].parameters() if id(p) not in shared]
        self.entries[name] = entry
        if self.hook is None:
            self.hook = loss.register_forward_pre_hook(_complete_on_first_call, with_kwargs=True)
        return entry.placeholders

    def complete(self, loss, tensordict) -> None:
        """Runs every pending network on ``tensordict`` and completes its registration."""
        for name, entry in list(self.entries.items()):
            for module in entry.modules:
                if is_lazy(module):
                    try:
                        with torch.no_grad():
                            module(tensordict.copy())
                    except Exception as err:  # noqa: BLE001 - re-raised with the remedy
                        raise RuntimeError(
                            f"{type(loss).__name__}: network {name!r} has lazy (uninitialised) parameters and running "
                            f"it on the loss input to initialise them failed ({type(err).__name__}: {err}). Run it "
                            f"once on a sample (e.g. env.fake_tensordict()) before building the loss."
                        ) from err
            del self.entries[name]
            loss._complete_registration(name, entry)
        if not self.entries and self.hook is not None:
            self.hook.remove()
            self.hook = None


def _complete_on_first_call(loss, args, kwargs):
    tensordict = args[0] if args else kwargs.get("tensordict", next(iter(kwargs.values()), None))
    loss._pending.complete(loss, tensordict)


def adopt_placeholders(params, placeholders: list) -> None:
    """Materialises ``placeholders`` in place with the trainable leaves of ``params`` (same order) and puts
    them in ``params`` instead, so that references taken earlier (an optimizer's) point at the real values."""
    leaves = [(k, v) for k, v in params.items(True, True) if isinstance(v, nn.Parameter)]
    for (key, value), holder in zip(leaves, placeholders):
        holder.materialize(value.shape, device=value.device, dtype=value.dtype)
        with torch.no_grad():
            holder.copy_(value)
        params.set(key, holder)  # TensorDictParams keeps the Parameter object as is
