"""``LossModule``: the base class of every loss.

What a loss gets from here:

* **Keys.** Each loss declares an ``_AcceptedKeys`` dataclass (its key table). ``loss.tensor_keys`` is the
  current table, ``loss.set_keys(name=key)`` renames entries (and forwards the shared ones to the value
  estimator); a missing entry raises a ``KeyError`` naming the key and the table.
* **Parameters.** :meth:`LossModule.convert_to_functional` registers a network. A single network stays the
  user's module (``loss.<name>``, its parameters are the user's, so an optimizer built on the policy
  trains the loss), and ``loss.<name>_params`` is a TensorDict over those very parameters. An ensemble
  (``expand_dim``) gets stacked parameters owned by the loss. ``create_target_params=True`` adds
  ``loss.target_<name>_params``: a frozen copy that :class:`~torchrl.objectives.SoftUpdate` /
  :class:`~torchrl.objectives.HardUpdate` update in place; the loss runs its target network on exactly
  those tensors.
* **Value estimators.** ``make_value_estimator(ValueEstimators.X, **hyperparams)`` builds any registered
  estimator the loss supports (``supported_value_estimators``) through the registry of
  :mod:`torchrl.objectives.utils`.

Writing a loss (see ``dqn.py`` for a small one, ``_td3_common.py`` for ensembles): declare
``_AcceptedKeys``, ``default_value_estimator``, ``supported_value_estimators`` and ``_OUT_KEYS``; register
networks in ``__init__``; return the estimator's networks from ``_estimator_networks`` and the inputs
from ``_in_keys_list``; map differently named keys in ``_estimator_key_map``; rebuild key-derived caches
in ``_keys_changed``. In ``forward`` read entries with ``self._get`` (errors name the key and the key table),
get targets with ``self._value_target`` and reduce with ``utils._reduce`` (``self._priority_weights`` and
``self._loss_mask`` give the optional weights and mask). ``test/objectives/loss_contract.py`` is the test
class every loss's tests subclass.
"""
from __future__ import annotations

import copy
import dataclasses
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase, unravel_key
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictParams
from torch import nn
from torch.nn import Parameter

from torchrl._fast import fast_get
from torchrl.objectives._functional import stack_module_params
from torchrl.objectives._lazy import PendingNetworks, adopt_placeholders, is_lazy
from torchrl.objectives.utils import (
    ValueEstimators,
    _has_random_module,
    dispatch_value_estimator,
)

__all__ = ["LossModule", "AUTO_LOSS_MASK_KEYS"]

#: Entries that ``loss.loss_mask_key = "auto"`` looks for (ANDing those present): the padding mask of
#: slice samplers and the validity mask written by shifted value estimation.
AUTO_LOSS_MASK_KEYS = (("collector", "mask"), "shifted_valid")


class _MissingEntryError(KeyError, AttributeError):
    """An entry missing from a loss's input: a ``KeyError`` naming the key, also the ``AttributeError`` TorchRL
    raises there."""


@dataclass
class _Functional:
    module: nn.Module
    expand_dim: int | None
    target_module: nn.Module | None


class LossModule(TensorDictModuleBase):
    """Base class of the losses: reads a TensorDict, returns a TensorDict of ``"loss_*"`` entries.

    Subclasses define ``_AcceptedKeys`` (their key table), ``default_value_estimator`` and
    ``supported_value_estimators``, register their networks with :meth:`convert_to_functional`, and
    implement ``forward``. The output entries whose names start with ``"loss"`` are the terms to sum.

    Examples:
        >>> import torch
        >>> from dataclasses import dataclass
        >>> from tensordict import TensorDict
        >>> from torchrl.objectives import LossModule
        >>> class SquaredAction(LossModule):
        ...     @dataclass
        ...     class _AcceptedKeys:
        ...         action: str = "action"
        ...     def forward(self, tensordict):
        ...         return TensorDict(loss=tensordict[self.tensor_keys.action].pow(2).mean())
        >>> loss = SquaredAction()
        >>> loss.set_keys(action="act")
        >>> loss(TensorDict(act=torch.ones(3), batch_size=[3]))["loss"]
        tensor(1.)
    """

    @dataclass
    class _AcceptedKeys:
        pass

    default_keys = _AcceptedKeys
    default_value_estimator: ValueEstimators | None = None
    supported_value_estimators: tuple = ()
    #: estimator key name -> loss key name, for keys forwarded under another name (see set_keys).
    _estimator_key_map: dict = {}
    TARGET_NET_WARNING = (
        "No target network updater is associated with this loss although it has target parameters: the "
        "targets will never change. Create one, e.g. SoftUpdate(loss, tau=0.005) or "
        "HardUpdate(loss, value_network_update_interval=1000), and call its step() after each optimizer step."
    )

    def __init__(self) -> None:
        super().__init__()
        self._functionals = {}
        self._has_update_associated = {}
        self._value_estimator = None
        self.value_type = None
        self._tensor_keys = self._AcceptedKeys()
        self._cached_in_keys = None
        self._vmap_randomness = None
        self._estimator_defaults = {}
        self._loss_mask_key = None
        self._warn_target = False
        self._pending_networks = None  # lazy networks waiting for their first call (see _lazy.py)
        # state dicts use TorchRL's names for the networks (see _state_renames)
        self.register_state_dict_post_hook(LossModule._save_hook)
        self.register_load_state_dict_pre_hook(LossModule._load_hook)

    # ------------------------------------------------------------------------------------ attributes
    def __setattr__(self, name: str, value) -> None:
        if name in ("_value_estimator", "value_estimator"):
            object.__setattr__(self, "_value_estimator", value)  # not a submodule: its networks are the loss's own
            if value is not None and name == "value_estimator":
                self._forward_value_estimator_keys()
            return
        buffers = getattr(self, "_buffers", None)  # None before nn.Module.__init__ (a subclass's early setting)
        if buffers is not None and name in buffers and isinstance(value, (int, float)) and buffers[name] is not None:
            buffers[name].fill_(value)  # scalar assignment to a coefficient buffer
            return
        super().__setattr__(name, value)

    # ------------------------------------------------------------------------------------------- keys
    @property
    def tensor_keys(self) -> _AcceptedKeys:
        """The loss's key table: one attribute per configurable entry (see :meth:`set_keys`)."""
        return self._tensor_keys

    def _key_table(self) -> dict:
        return {f.name: getattr(self._tensor_keys, f.name) for f in dataclasses.fields(self._tensor_keys)}

    def set_keys(self, **kwargs) -> None:
        """Renames entries of the key table, e.g. ``loss.set_keys(reward="r", done=("next_done",))``.

        A ``None`` key leaves that entry unchanged (as in TorchRL).

        Raises:
            ValueError: for a name that is not in the table.
        """
        table = self._key_table()
        for name in kwargs:
            if name not in table:
                raise ValueError(
                    f"{type(self).__name__}.set_keys: {name!r} is not a key of this loss; its keys are "
                    f"{sorted(table)}."
                )
        kwargs = {name: key for name, key in kwargs.items() if key is not None}
        for name, key in kwargs.items():
            setattr(self._tensor_keys, name, unravel_key(key))
        self._forward_value_estimator_keys(**kwargs)
        self._cached_in_keys = None
        self._keys_changed()

    def _keys_changed(self) -> None:
        """Hook for subclasses caching key-derived data."""

    def _forward_value_estimator_keys(self, **kwargs) -> None:
        """Sends the loss's keys shared with the value estimator (same name, or ``_estimator_key_map``)."""
        est = self._value_estimator
        if est is None:
            return
        est_fields = {f.name for f in dataclasses.fields(est.tensor_keys)}
        table = self._key_table()
        mapping = {name: name for name in table if name in est_fields}
        mapping.update({e: l for e, l in self._estimator_key_map.items() if e in est_fields and l in table})
        keys = {e: table[l] for e, l in mapping.items()}
        if keys:
            est.set_keys(**keys)

    @property
    def in_keys(self):
        """Every entry the loss reads (computed once, reset by :meth:`set_keys`)."""
        keys = self._cached_in_keys
        if keys is None:
            keys = []
            for k in self._in_keys_list():
                k = unravel_key(k)
                if k not in keys:
                    keys.append(k)
            self._cached_in_keys = keys
        return keys

    @in_keys.setter
    def in_keys(self, value) -> None:
        self._cached_in_keys = [unravel_key(k) for k in value]

    def _in_keys_list(self) -> list:
        return list(self._key_table().values())

    @property
    def out_keys(self):
        """The entries of the output TensorDict."""
        return list(getattr(self, "_OUT_KEYS", ()))

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._OUT_KEYS = list(value)

    def _missing(self, key) -> KeyError:
        """The error for an entry absent from the input: names it, the key table and the remedy."""
        table = self._key_table()
        tail = key[1:] if isinstance(key, tuple) and len(key) > 1 and key[0] == "next" else None
        tail = None if tail is None else (tail[0] if len(tail) == 1 else tail)
        names = [n for n, k in table.items() if k == key] or [n for n, k in table.items() if k == tail]
        hint = f" (loss.tensor_keys.{names[0]})" if names else ""
        remedy = f"loss.set_keys({names[0]}=<your key>)" if names else "loss.set_keys(...)"
        return _MissingEntryError(
            f"{type(self).__name__}: key {key!r}{hint} not found in the input tensordict. The loss reads "
            f"{self.in_keys}; its key table is {table}. If your data uses another name, call {remedy}."
        )

    def _get(self, td: TensorDictBase, key):
        value = fast_get(td, key)
        if value is None:
            raise self._missing(key)
        return value

    def _value_target(self, td: TensorDictBase, **kwargs) -> torch.Tensor:
        """``value_estimator.value_estimate(td, **kwargs)``; a missing entry is reported with the loss's keys."""
        try:
            return self.value_estimator.value_estimate(td, **kwargs)
        except KeyError as err:
            key = getattr(err, "key", None)
            if key is None:
                raise
            raise self._missing(key) from err

    def _shape_error(self, what: str, **tensors: torch.Tensor) -> RuntimeError:
        listing = ", ".join(f"{name} {tuple(t.shape)}" for name, t in tensors.items())
        return RuntimeError(f"{type(self).__name__}: {what}: {listing}.")

    # ----------------------------------------------------------------------------- reduction, masks
    @property
    def loss_mask_key(self):
        """Entry of a boolean mask of the elements that count (``None``: all; ``"auto"``: see
        :data:`AUTO_LOSS_MASK_KEYS`)."""
        return self._loss_mask_key

    @loss_mask_key.setter
    def loss_mask_key(self, value) -> None:
        self._loss_mask_key = value if value in (None, "auto") else unravel_key(value)

    def _loss_mask(self, td: TensorDictBase):
        key = self._loss_mask_key
        if key is None:
            return None
        if key == "auto":
            mask = None
            for k in AUTO_LOSS_MASK_KEYS:
                m = fast_get(td, k)
                if m is not None:
                    mask = m if mask is None else mask & m
            return mask
        return self._get(td, key)

    def _priority_weights(self, td: TensorDictBase, key):
        mode = getattr(self, "use_prioritized_weights", "auto")
        if mode is False:
            return None
        weights = fast_get(td, key)
        if weights is None and mode is True:
            raise self._missing(key)
        return weights

    # -------------------------------------------------------------------------------- parameters
    def convert_to_functional(
        self,
        module: TensorDictModule,
        module_name: str,
        expand_dim: int | None = None,
        create_target_params: bool = False,
        compare_against: list[Parameter] | None = None,
        **kwargs,
    ) -> None:
        """Registers a network as ``self.<module_name>`` with ``<module_name>_params`` (and targets).

        Args:
            module: the network, or (with ``expand_dim``) a list of networks of identical structure.
            module_name: attribute name, e.g. ``"value_network"``.
            expand_dim: if set, an ensemble of this many members with stacked parameters
                ``[expand_dim, ...]`` (one given network: member 0 keeps its values, the others are
                re-initialised copies).
            create_target_params: if ``True``, a frozen copy ``target_<module_name>_params`` for the target
                updaters; else ``target_<module_name>_params`` is a detached view of the parameters.
            compare_against: parameters shared with another network: in an ensemble they are not
                copied but read through an expanded view (and trained by the other network's loss).
        """
        if module_name in self._functionals:
            raise RuntimeError(f"{type(self).__name__}: a network named {module_name!r} is already registered.")
        modules = list(module) if isinstance(module, (list, tuple, nn.ModuleList)) else [module]
        if any(is_lazy(m) for m in modules):  # completed on the first call (see _lazy.py)
            self._defer(module, modules, module_name, expand_dim, create_target_params, compare_against)
            return
        if expand_dim is None:
            if isinstance(module, (list, tuple, nn.ModuleList)):
                raise ValueError(f"{type(self).__name__}: pass expand_dim to register a list of networks.")
            nn.Module.__setattr__(self, module_name, module)
            target = None
            if create_target_params:
                target = _frozen_copy(module)
                nn.Module.__setattr__(self, f"_target_{module_name}", target)
            self._functionals[module_name] = _Functional(module, None, target)
        else:
            modules = list(module) if isinstance(module, (list, tuple, nn.ModuleList)) else [module]
            params = stack_module_params(modules, expand_dim, compare_against)
            nn.Module.__setattr__(self, f"{module_name}_params", params)
            object.__setattr__(self, module_name, modules[0])  # not a submodule: the template run with the stacked parameters
            if create_target_params:
                target = TensorDictParams(params.data.clone(), no_convert=True)
                nn.Module.__setattr__(self, f"target_{module_name}_params", target)
            self._functionals[module_name] = _Functional(modules[0], expand_dim, None)
        if create_target_params:
            self._has_update_associated[module_name] = False
            self._warn_target = True
        self._link(module_name, create_target_params)

    def _defer(self, module, modules: list, name: str, expand_dim, create_target_params: bool, compare_against) -> None:
        """Registers a network whose lazy parameters do not exist yet; its first use completes it."""
        if expand_dim is None:
            if len(modules) != 1:
                raise ValueError(f"{type(self).__name__}: pass expand_dim to register a list of networks.")
            nn.Module.__setattr__(self, name, module)
        else:
            object.__setattr__(self, name, modules[0])  # not a submodule (see convert_to_functional)
        holders = self._pending.add(self, name, modules, expand_dim, create_target_params, compare_against)
        if holders:  # the ensemble's trainable parameters, materialised in place later
            nn.Module.__setattr__(self, f"_lazy_{name}_params", nn.ParameterList(holders))
        self._functionals[name] = _Functional(modules[0], expand_dim, None)
        if create_target_params:
            self._has_update_associated[name] = False
            self._warn_target = True

    def _complete_registration(self, name: str, entry) -> None:
        """Registers a deferred network now that its parameters exist, then refreshes what depends on it."""
        del self._functionals[name]
        updated = self._has_update_associated.pop(name, False)  # an updater may already be attached
        warn = self._warn_target
        modules = entry.modules
        module = modules[0] if entry.expand_dim is None else modules
        self.convert_to_functional(module, name, expand_dim=entry.expand_dim,
                                   create_target_params=entry.create_target_params,
                                   compare_against=entry.compare_against)
        if entry.create_target_params:
            self._has_update_associated[name] = updated
            self._warn_target = warn
        if entry.placeholders:
            adopt_placeholders(getattr(self, f"{name}_params"), entry.placeholders)
            delattr(self, f"_lazy_{name}_params")
            self._link(name)
        self._cached_in_keys = None
        self._keys_changed()

    @property
    def _pending(self) -> PendingNetworks:
        if self._pending_networks is None:
            self._pending_networks = PendingNetworks()
        return self._pending_networks

    def _link(self, name: str, has_target: bool | None = None) -> None:
        """(Re)builds the TensorDict views of a network's parameters (after construction or ``.to()``)."""
        info = self._functionals[name]
        # views, not submodules: object.__setattr__ keeps nn.Module from registering them a second time
        if has_target is None:
            has_target = name in self._has_update_associated
        if info.expand_dim is None:
            object.__setattr__(self, f"{name}_params", TensorDict.from_module(info.module, as_module=True))
            if info.target_module is not None:
                object.__setattr__(
                    self, f"target_{name}_params", TensorDict.from_module(info.target_module, as_module=True)
                )
        params = getattr(self, f"{name}_params")
        if not has_target:
            object.__setattr__(self, f"target_{name}_params", params.detach())

    def _target_pairs(self) -> list[tuple[str, TensorDictBase | None, TensorDictBase | None]]:
        """``(name, params, target params)`` of the networks with targets (``None``s while a lazy network
        waits for its first call)."""
        pending = self._pending_networks
        return [
            (name, None, None) if pending is not None and name in pending.entries
            else (name, getattr(self, f"{name}_params"), getattr(self, f"target_{name}_params"))
            for name in self._has_update_associated
        ]

    def _target_warning(self) -> None:
        if torch.compiler.is_compiling():  # warned by the first eager call (a warning would break the graph)
            return
        self._warn_target = False
        if not all(self._has_update_associated.values()):
            warnings.warn(self.TARGET_NET_WARNING, UserWarning, stacklevel=3)

    def _apply(self, fn, recurse: bool = True):
        out = super()._apply(fn, recurse)
        for name in self._functionals:
            self._link(name)
        est = self._value_estimator
        if est is not None:
            est._apply(fn, recurse)
        return out

    # ------------------------------------------------------------------------ TorchRL's state names
    #: ``(our buffer name, TorchRL's)`` pairs of a loss whose state names differ from its attributes'.
    _BUFFER_RENAMES: tuple = ()

    def _state_renames(self) -> list[tuple[str, str]]:
        """``(our name, TorchRL's name)``: prefixes (ending with ``.``) of the single networks, whose
        ``value_network.`` is saved as ``value_network_params.`` and frozen target ``_target_value_network.`` as
        ``target_value_network_params.`` (ensembles already live under those names), then whole buffer names
        (``_BUFFER_RENAMES``)."""
        renames = list(self._BUFFER_RENAMES)
        for name, info in self._functionals.items():
            if info.expand_dim is None:
                renames.append((f"{name}.", f"{name}_params."))
                if info.target_module is not None:
                    renames.append((f"_target_{name}.", f"target_{name}_params."))
        return renames

    @staticmethod
    def _rename(name: str, renames, reverse: bool = False) -> str:
        for ours, theirs in renames:
            src, dst = (theirs, ours) if reverse else (ours, theirs)
            if name == src or (src.endswith(".") and name.startswith(src)):
                return dst + name[len(src):]
        return name

    def _named(self, items, prefix: str):
        renames = self._state_renames()
        cut = len(prefix) + 1 if prefix else 0
        for name, value in items:
            yield (name[:cut] + self._rename(name[cut:], renames) if renames else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """The trainable parameters (the targets are buffers), under TorchRL's names
        (``<network>_params.<path>``)."""
        return self._named(super().named_parameters(prefix=prefix, recurse=recurse,
                                                    remove_duplicate=remove_duplicate), prefix)

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        """The buffers (coefficients, target parameters ``target_<network>_params.<path>``), under TorchRL's
        names."""
        return self._named(super().named_buffers(prefix=prefix, recurse=recurse,
                                                 remove_duplicate=remove_duplicate), prefix)

    @staticmethod
    def _save_hook(module, state_dict, prefix, local_metadata) -> None:
        renames = module._state_renames()
        if renames:
            items = list(state_dict.items())
            state_dict.clear()
            for key, value in items:
                if key.startswith(prefix):
                    key = prefix + module._rename(key[len(prefix):], renames)
                state_dict[key] = value
        est = module._value_estimator
        if est is not None:  # the estimator's coefficients (gamma, lmbda, ...), as TorchRL saves them
            for name, buf in est._buffers.items():
                if buf is not None:
                    state_dict[f"{prefix}_value_estimator.{name}"] = buf.detach()

    @staticmethod
    def _load_hook(module, state_dict, prefix, *args) -> None:
        renames = module._state_renames()
        for key in [k for k in state_dict if k.startswith(prefix)]:
            ours = prefix + module._rename(key[len(prefix):], renames, reverse=True)
            if ours != key:
                state_dict[ours] = state_dict.pop(key)
        est_prefix = f"{prefix}_value_estimator."
        est = module._value_estimator
        for key in [k for k in state_dict if k.startswith(est_prefix)]:
            value = state_dict.pop(key)
            name = key[len(est_prefix):]
            old = est._buffers.get(name) if est is not None else None
            if old is not None:  # a coefficient of the current estimator (others are ignored)
                est.register_buffer(name, value.detach().clone().to(old.device))

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The trainable parameters (target networks excluded)."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    @property
    def functional(self) -> bool:
        """Always ``True``: parameters are reachable as TensorDicts (``<name>_params``)."""
        return True

    def get_stateful_net(self, network_name: str, copy: bool | None = None):
        """The network with the loss's current parameters (``copy=True``: an independent deep copy).

        Raises:
            RuntimeError: for an ensemble (its members live in ``<name>_params[i]``).
        """
        info = self._functionals[network_name]
        if info.expand_dim is not None:
            raise RuntimeError(
                f"{type(self).__name__}: {network_name!r} is an ensemble of {info.expand_dim} networks; run "
                f"member i with `with loss.{network_name}_params[i].to_module(loss.{network_name}): ...`."
            )
        return _deepcopy(info.module) if copy else info.module

    def from_stateful_net(self, network_name: str, stateful_net: nn.Module):
        """Copies the values of ``stateful_net`` (same structure) into the loss's parameters."""
        params = getattr(self, f"{network_name}_params")
        source = TensorDict.from_module(stateful_net).data
        with torch.no_grad():
            if self._functionals[network_name].expand_dim is not None:
                source = source.expand(params.batch_size)
            params.data.update_(source)

    def reset_parameters_recursive(self):
        """Re-initialises every registered network (``reset_parameters`` of its layers); targets follow."""
        for name, info in self._functionals.items():
            if info.expand_dim is None:
                for m in info.module.modules():
                    if callable(getattr(m, "reset_parameters", None)):
                        m.reset_parameters()
            else:
                fresh = stack_module_params([info.module], info.expand_dim)
                with torch.no_grad():
                    getattr(self, f"{name}_params").data.update_(fresh.data)
            if name in self._has_update_associated:
                with torch.no_grad():
                    getattr(self, f"target_{name}_params").data.update_(getattr(self, f"{name}_params").data)

    def reset(self) -> None:
        """Resets per-run state (nothing by default)."""

    def register_coeff_buffer(
        self,
        name: str,
        value: float | int | torch.Tensor | None,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        """Registers a coefficient as a buffer (moves with the loss; ``loss.<name> = 0.1`` updates it)."""
        if value is None:
            self.register_buffer(name, None)
            return
        tensor = torch.as_tensor(value, device=device, dtype=dtype or torch.get_default_dtype())
        self.register_buffer(name, tensor.clone())

    # ---------------------------------------------------------------------------------------- vmap
    @property
    def vmap_randomness(self) -> str:
        """``"different"`` if a network holds a random module (dropout, ...), else ``"error"``."""
        if self._vmap_randomness is None:
            mods = [info.module for info in self._functionals.values()]
            return "different" if _has_random_module(self, *mods) else "error"
        return self._vmap_randomness

    def set_vmap_randomness(self, value):
        """Sets the ``randomness`` of the vmapped ensemble calls (``"error"``, ``"same"``, ``"different"``)."""
        if value not in ("error", "same", "different"):
            raise ValueError(f"vmap randomness must be 'error', 'same' or 'different', got {value!r}.")
        self._vmap_randomness = value

    # ---------------------------------------------------------------------------- value estimators
    @property
    def value_estimator(self):
        """The value estimator (the default one is built on first access)."""
        if self._value_estimator is None:
            self.make_value_estimator()
        return self._value_estimator

    @value_estimator.setter
    def value_estimator(self, value) -> None:
        self.__setattr__("value_estimator", value)

    def _estimator_networks(self) -> dict:
        """Networks handed to ``Estimator.for_loss``: ``value_network`` (and ``actor_network`` if any)."""
        return {"value_network": None}

    def make_value_estimator(self, value_type: ValueEstimators = None, **hyperparams):
        """Builds the value estimator of type ``value_type`` (default: ``default_value_estimator``).

        Hyperparameters not given take the registry defaults (``gamma=0.99``, ``lmbda=0.95``, ...), or the
        deprecated values passed to the loss constructor.

        Raises:
            NotImplementedError: if this loss does not support ``value_type``.
        """
        if value_type is None:
            value_type = self.default_value_estimator
        hyperparams = {**self._estimator_defaults, **hyperparams}
        dispatch_value_estimator(self, value_type, supported=self.supported_value_estimators, **hyperparams)
        self._forward_value_estimator_keys()
        return self

    def _deprecated_gamma(self, gamma) -> None:
        """TorchRL 0.14 refuses ``gamma`` in the constructors that still list it (``TypeError``)."""
        if gamma is not None:
            raise TypeError(
                f"{type(self).__name__}: passing gamma / lambda parameters through the loss constructor is no "
                f"longer supported (got gamma={gamma!r}). Build the value estimator instead: "
                f"loss.make_value_estimator(ValueEstimators.<type>, gamma={gamma!r})."
            )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Computes the loss terms; implemented by every loss."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward().")


def _deepcopy(module: nn.Module) -> nn.Module:
    return copy.deepcopy(module)


def _frozen_copy(module: nn.Module) -> nn.Module:
    """A copy of ``module`` whose parameters are buffers (target networks: not trained, saved as buffers)."""
    target = copy.deepcopy(module)
    for m in target.modules():
        for name, p in list(m._parameters.items()):
            if p is not None:
                del m._parameters[name]
                m.register_buffer(name, p.detach().requires_grad_(False))
    return target


