"""``TensorDictPrimer``: adds entries (e.g. recurrent states) to an environment's data at every reset."""
from __future__ import annotations

from typing import Callable

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._groups import done_groups
from torchrl.envs.transforms._transform import Transform

__all__ = ["TensorDictPrimer"]


def _mask_like(mask: torch.Tensor, value: torch.Tensor, key: NestedKey) -> torch.Tensor:
    """``mask`` (a reset mask, possibly with a trailing singleton dim) shaped to broadcast over ``value``."""
    while mask.ndim and (mask.ndim > value.ndim or mask.shape != value.shape[: mask.ndim]) and mask.shape[-1] == 1:
        mask = mask.squeeze(-1)
    if mask.shape != value.shape[: mask.ndim]:
        raise RuntimeError(
            f"reset mask of shape {tuple(mask.shape)} does not match the leading dims of {key!r} "
            f"(shape {tuple(value.shape)})."
        )
    return mask.reshape(*mask.shape, *([1] * (value.ndim - mask.ndim)))


def _masked_update(mask: torch.Tensor | None, fresh: torch.Tensor, previous: torch.Tensor | None, key) -> torch.Tensor:
    """``fresh`` where ``mask`` is set, ``previous`` elsewhere (``fresh`` alone without mask or previous)."""
    if mask is None or previous is None:
        return fresh
    return torch.where(_mask_like(mask, fresh, key), fresh, previous)


class TensorDictPrimer(Transform):
    """Writes entries described by specs at every reset: recurrent states, counters, any extra input.

    At reset the entries are filled with ``default_value`` (0 by default) or, with ``random=True``, drawn
    from their specs; with partial resets (a ``"_reset"`` mask) only the reset sub-environments are
    re-primed, the others keep their values. After a step the entries are carried over to ``"next"``:
    the value a policy wrote under ``("next", key)`` wins, else the current value is kept. The primed
    entries are added to the observation spec and to the state spec (they are inputs of the next step).
    Used standalone (``forward``), missing entries are filled in.

    Args:
        primers: ``{key: spec}`` (or a ``Composite``) of the entries to write. Specs may omit the env's
            batch dims (see ``expand_specs``). Alternatively pass them as keyword arguments.
        random: draw values from the specs (unbounded specs: standard normal) instead of a fixed value.
        default_value: the fixed value: a number, a callable returning a tensor (called once per entry and
            reset), or a dict ``{key: number or callable}`` covering every primer key.
        reset_key: the reset mask to read (default: the env's only reset key).
        expand_specs: specs of a ``primers`` dict (or of a Composite of shape ``()``) describe one
            sub-environment and get the env's batch dims prepended, unless ``expand_specs=False``: then they
            must already lead with the batch dims. A Composite built with the env's batch shape is used as is.
        single_default_value: a callable ``default_value`` is called once per reset and returns a
            dict/TensorDict of every entry.
        call_before_env_reset: write the entries into the reset *input*, so the base env sees them.

    Raises:
        ValueError: ``random`` together with ``default_value``, a ``default_value`` dict whose keys differ
            from the primers, or specs that do not fit the env's batch size.

    Examples:
        >>> from torchrl.data import Unbounded
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._tensordict_primer import TensorDictPrimer
        >>> env = TransformedEnv(PendulumEnv(batch_size=[2]), TensorDictPrimer(hidden=Unbounded((4,))))
        >>> env.reset()["hidden"].shape
        torch.Size([2, 4])
        >>> env.state_spec["hidden"].shape
        torch.Size([2, 4])
    """

    def __init__(
        self,
        primers: dict | Composite | None = None,
        random: bool | None = None,
        default_value: float | Callable | dict[NestedKey, float] | dict[NestedKey, Callable] | None = None,
        reset_key: NestedKey | None = None,
        expand_specs: bool | None = None,
        single_default_value: bool = False,
        call_before_env_reset: bool = False,
        **kwargs,
    ) -> None:
        if primers is not None and kwargs:
            raise ValueError(
                f"TensorDictPrimer: pass the primers either as `primers` or as keyword arguments, not both "
                f"(got primers and {sorted(kwargs)})."
            )
        if primers is None:
            primers = kwargs
        if isinstance(primers, dict):
            primers = Composite(primers)
        if not isinstance(primers, Composite):
            raise TypeError(f"TensorDictPrimer: primers must be a dict or a Composite, got {type(primers).__name__}.")
        if random and default_value is not None:
            raise ValueError(
                "TensorDictPrimer: random=True and default_value are mutually exclusive; random values are drawn "
                "from the specs."
            )
        keys = [from_tuple(as_tuple(k)) for k in primers.keys(True, True)]
        if isinstance(default_value, dict):
            default_value = {from_tuple(as_tuple(k)): v for k, v in default_value.items()}
            if set(default_value) != set(keys):
                raise ValueError(
                    f"TensorDictPrimer: the default_value dict must have exactly the primer keys {sorted(map(str, keys))}; "
                    f"got {sorted(map(str, default_value))}."
                )
        if single_default_value and not callable(default_value):
            raise ValueError("TensorDictPrimer: single_default_value=True needs a callable default_value.")
        super().__init__(in_keys=[], out_keys=[])  # as TorchRL: the primed keys are not out_keys
        self.primers = primers
        self.random = random  # as given (None when not given); read as a bool
        if random:
            self.default_value = default_value
        elif default_value is None or single_default_value or isinstance(default_value, dict):
            self.default_value = {k: 0.0 for k in keys} if default_value is None else default_value
        else:  # as TorchRL: one value per primer key
            self.default_value = {k: default_value for k in keys}
        self.expand_specs = expand_specs
        self.single_default_value = bool(single_default_value)
        self.call_before_env_reset = bool(call_before_env_reset)
        self._given_reset_key = reset_key
        self._reset_key: NestedKey | None = reset_key
        self._leaves: list[tuple[NestedKey, TensorSpec]] | None = None
        self._observation_groups: dict = {}  # shapes of the primers' groups in the env's observation spec
        self._batch_ndim = 0
        self._pre_values: dict | None = None

    # -- configuration ----------------------------------------------------------------------------------
    @property
    def reset_key(self) -> NestedKey:
        """The reset mask the primer reads for partial resets."""
        key = self._reset_key
        if key is None:
            parent = self.parent
            if parent is None:
                return "_reset"
            key = self._reset_key = self._pick_reset_key(parent.reset_keys)
        return key

    @reset_key.setter
    def reset_key(self, value: NestedKey | None) -> None:
        self._given_reset_key = self._reset_key = value

    def _pick_reset_key(self, reset_keys: list) -> NestedKey:
        if self._given_reset_key is not None:
            return self._given_reset_key
        if len(reset_keys) == 1:
            return reset_keys[0]
        if not reset_keys:
            return "_reset"
        raise ValueError(
            f"TensorDictPrimer: the env has several reset keys {reset_keys}; pass reset_key= to say which one "
            f"decides when the primed entries are reset."
        )

    @property
    def device(self) -> torch.device | None:
        return self.primers.device

    def set_container(self, container) -> None:
        super().set_container(container)
        self._leaves = None
        self._observation_groups = {}
        self._reset_key = self._given_reset_key

    def to(self, *args, **kwargs) -> "TensorDictPrimer":
        dest = args[0] if args else kwargs.get("device", kwargs.get("dtype"))
        if dest is not None:
            self.primers = self.primers.to(dest)
            if self._leaves is not None:
                self._leaves = [(k, s.to(dest)) for k, s in self._leaves]
        return super().to(*args, **kwargs)

    # -- specs ------------------------------------------------------------------------------------------
    def _batched(self, key: NestedKey, leaf: TensorSpec, batch: torch.Size) -> TensorSpec:
        own = self.primers.shape
        if own == batch or not batch:
            return leaf
        if own:
            raise ValueError(
                f"TensorDictPrimer: the primers Composite has batch shape {tuple(own)} but the env's batch size is "
                f"{tuple(batch)}; build it with shape=() (its specs are then expanded) or with the env's batch size."
            )
        if self.expand_specs is False:
            if leaf.shape[: len(batch)] != batch:
                raise ValueError(
                    f"TensorDictPrimer: primer {key!r} has shape {tuple(leaf.shape)}, which does not start with the "
                    f"env's batch size {tuple(batch)}; pass expand_specs=True (or None) to expand it."
                )
            return leaf
        return leaf.expand(*batch, *leaf.shape)

    def _build_leaves(self, batch: torch.Size) -> list[tuple[NestedKey, TensorSpec]]:
        leaves = [
            (from_tuple(as_tuple(k)), self._batched(k, leaf, batch)) for k, leaf in self.primers.items(True, True)
        ]
        self._leaves, self._batch_ndim = leaves, len(batch)
        return leaves

    def _get_leaves(self) -> list[tuple[NestedKey, TensorSpec]]:
        leaves = self._leaves
        if leaves is None:
            parent = self.parent
            if parent is None:
                raise RuntimeError("TensorDictPrimer: no env to take the batch size from; use it in a TransformedEnv.")
            leaves = self._build_leaves(parent.batch_size)
        return leaves

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        groups = done_groups(output_spec["full_done_spec"])
        self._reset_key = self._pick_reset_key([from_tuple(p + ("_reset",)) for p in groups])
        return super().transform_output_spec(output_spec)

    def _group_keys(self) -> list[NestedKey]:
        return [key for key, sub in self.primers.items(True, False) if isinstance(sub, Composite)]

    def _add_groups(self, spec: Composite, batch: torch.Size, known: dict) -> None:
        """Creates the primers' sub-``Composite`` entries (e.g. a group ``"agents"`` of shape ``(n_agents,)``)
        absent from ``spec``: with the shape ``known`` for that group elsewhere in the env's specs when the
        primers do not give one, else with their own shape after the batch dims."""
        for key in self._group_keys():
            if as_tuple(key) in spec.keys(True):
                continue
            sub = self.primers[key]
            shape = sub.shape
            if not shape and as_tuple(key) in known:
                shape = known[as_tuple(key)]
            elif batch and shape[: len(batch)] != batch and not (self.primers.shape == batch or self.expand_specs is False):
                shape = torch.Size((*batch, *shape))
            spec[from_tuple(as_tuple(key))] = Composite(shape=shape, device=sub.device)

    @staticmethod
    def _shapes(spec: Composite | None, keys) -> dict:
        found = {} if spec is None else {as_tuple(k): spec.get(k, None) for k in keys}
        return {k: v.shape for k, v in found.items() if isinstance(v, Composite)}

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        leaves = self._build_leaves(observation_spec.shape)
        self._add_groups(observation_spec, observation_spec.shape, {})
        for key, leaf in leaves:
            observation_spec[key] = leaf
        self._observation_groups = self._shapes(observation_spec, self._group_keys())
        return observation_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        leaves = self._leaves if self._leaves is not None else self._build_leaves(input_spec.shape)
        state = input_spec["full_state_spec"]
        known = {**self._shapes(input_spec.get("full_action_spec", None), self._group_keys()), **self._observation_groups}
        self._add_groups(state, input_spec.shape, known)
        for key, leaf in leaves:
            state[key] = leaf.clone()
        return input_spec

    # -- values -----------------------------------------------------------------------------------------
    def _defaults_once(self):
        if self.single_default_value:
            values = self.default_value()
            return {from_tuple(as_tuple(k)): v for k, v in values.items(True, True)} if isinstance(values, TensorDictBase) else {
                from_tuple(as_tuple(k)): v for k, v in values.items()
            }
        return None

    def _fresh(self, key: NestedKey, leaf: TensorSpec, batch: torch.Size, spec_ndim: int, once) -> torch.Tensor:
        extra = batch[: len(batch) - spec_ndim]
        if self.random:
            return leaf.rand(extra) if extra else leaf.rand()
        shape = torch.Size((*extra, *leaf.shape))
        default = once[key] if once is not None else self.default_value
        if isinstance(default, dict):
            default = default[key]
        if callable(default):
            value = torch.as_tensor(default(), device=leaf.device).to(leaf.dtype)
            if value.shape != shape:
                try:
                    value = value.expand(shape).clone()
                except RuntimeError:
                    raise ValueError(
                        f"TensorDictPrimer: default_value for {key!r} returned shape {tuple(value.shape)}, which does "
                        f"not broadcast to {tuple(shape)}."
                    ) from None
            return value
        if isinstance(default, torch.Tensor):
            return default.to(device=leaf.device, dtype=leaf.dtype).expand(shape).clone()
        return torch.full(shape, default, dtype=leaf.dtype, device=leaf.device)

    def _primed(self, tensordict: TensorDictBase | None, batch: torch.Size) -> dict:
        """``{key: value}`` for a reset of ``batch``: fresh where the reset mask is set, kept elsewhere."""
        leaves = self._get_leaves()
        mask = fast_get(tensordict, self.reset_key) if tensordict is not None else None
        once = self._defaults_once()
        out = {}
        for key, leaf in leaves:
            fresh = self._fresh(key, leaf, batch, self._batch_ndim, once)
            previous = fast_get(tensordict, key) if mask is not None else None
            out[key] = _masked_update(mask, fresh, previous, key)
        return out

    # -- env hooks ----------------------------------------------------------------------------------------
    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        if not self.call_before_env_reset:
            return tensordict
        if tensordict is None:
            parent = self.parent
            tensordict = TensorDict(batch_size=parent.batch_size, device=parent.device)
        values = self._pre_values = self._primed(tensordict, tensordict.batch_size)
        for key, value in values.items():
            tensordict.set(key, value)
        return tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        values, self._pre_values = self._pre_values, None
        if values is None:
            values = self._primed(tensordict, tensordict_reset.batch_size)
        for key, value in values.items():
            fast_set(tensordict_reset, key, value)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        leaves = self._leaves if self._leaves is not None else self._get_leaves()
        preset = fast_get(tensordict, "next")
        for key, leaf in leaves:
            if fast_get(next_tensordict, key) is not None:
                continue
            value = fast_get(preset, key) if preset is not None else None
            if value is None:
                value = fast_get(tensordict, key)
            if value is None:
                value = self._fresh(key, leaf, next_tensordict.batch_size, self._batch_ndim, self._defaults_once())
            fast_set(next_tensordict, key, value)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Fills the primer entries missing from ``tensordict`` (shape: its batch size + the spec's shape, so that
        replay-buffer samples of any batch size are filled; TorchRL requires specs leading with the batch size)."""
        once = self._defaults_once()
        ndim = len(self.primers.shape)
        for key, leaf in self.primers.items(True, True):
            key = from_tuple(as_tuple(key))
            if fast_get(tensordict, key) is None:
                tensordict.set(key, self._fresh(key, leaf, tensordict.batch_size, ndim, once))
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    def __repr__(self) -> str:
        keys = [str(k) for k in self.primers.keys(True, True)]
        mode = "random=True" if self.random else f"default_value={self.default_value!r}"
        return f"TensorDictPrimer(primers={keys}, {mode}, reset_key={self._reset_key!r})"
