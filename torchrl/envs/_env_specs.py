"""Spec bookkeeping for :class:`~torchrl.envs.EnvBase`: the input/output spec tree, its views and keys.

An environment holds two Composites shaped like its batch:

- ``output_spec``: ``full_observation_spec``, ``full_reward_spec``, ``full_done_spec``;
- ``input_spec``: ``full_action_spec``, ``full_state_spec``.

Everything else (``action_spec``, ``done_keys``, ``reset_keys``, ...) is a view derived from them. While the
specs are locked (the default once ``__init__`` returns) the derived views are computed once and cached;
unlocked, they are recomputed on every access so that in-place edits are always seen. As in TorchRL, locking
forbids in-place edits of the spec Composites, not the setters (``env.action_spec = ...`` unlocks, sets and
locks again, dropping the cached views).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import torch
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Categorical, Composite, TensorSpec, Unbounded
from torchrl.envs._done import DoneStructure, sort_keys

__all__ = ["EnvSpecsMixin"]

_MISSING = object()


class _NoKeyError(KeyError, IndexError):
    """No key of the asked kind: TorchRL raises IndexError (the first of an empty list), ours says why."""
_OUTPUT_PARTS = ("full_observation_spec", "full_reward_spec", "full_done_spec")
_INPUT_PARTS = ("full_action_spec", "full_state_spec")


def _leaf_keys(spec: Composite) -> list[NestedKey]:
    return sort_keys(spec.keys(include_nested=True, leaves_only=True))


class EnvSpecsMixin:
    """Spec storage, setters with validation, and cached derived views. Mixed into ``EnvBase`` only."""

    _specs_locked: bool = False  # set by _init_specs and set_spec_lock_

    # -- storage ---------------------------------------------------------------------------------
    def _init_specs(self) -> None:
        shape, device = self.batch_size, self.device
        self._output_spec = Composite(
            full_observation_spec=Composite(shape=shape, device=device),
            full_reward_spec=Composite(shape=shape, device=device),
            full_done_spec=Composite(shape=shape, device=device),
            shape=shape,
            device=device,
        )
        self._input_spec = Composite(
            full_action_spec=Composite(shape=shape, device=device),
            full_state_spec=Composite(shape=shape, device=device),
            shape=shape,
            device=device,
        )
        self._spec_cache = {}
        self._specs_locked = False

    def _cached(self, name: str, compute) -> Any:
        if not self._specs_locked:
            return compute()
        cache = self._spec_cache
        value = cache.get(name, _MISSING)
        if value is _MISSING:
            value = cache[name] = compute()
        return value

    def _invalidate_spec_cache(self) -> None:
        self._spec_cache = {}

    @contextmanager
    def _editing_specs(self) -> Iterator[None]:
        """Unlocks the specs for a setter and locks them again afterwards (cached views are dropped)."""
        locked = self._specs_locked
        if locked:
            self.set_spec_lock_(False)
        try:
            yield
        finally:
            self._invalidate_spec_cache()
            if locked:
                self.set_spec_lock_(True)

    # -- locking ---------------------------------------------------------------------------------
    @property
    def is_spec_locked(self) -> bool:
        return self._specs_locked

    def set_spec_lock_(self, mode: bool = True):
        """Locks (or unlocks) the input and output specs; returns the env."""
        for spec in (self._input_spec, self._output_spec):
            if mode:
                spec.lock_(recurse=True)
            else:
                spec.unlock_(recurse=True)
        self._specs_locked = bool(mode)
        self._invalidate_spec_cache()
        return self

    # -- the two roots ---------------------------------------------------------------------------
    @property
    def output_spec(self) -> Composite:
        return self._output_spec

    @output_spec.setter
    def output_spec(self, value: Composite) -> None:
        value = self._conform(value, "output_spec")
        with self._editing_specs():
            self._output_spec = value

    @property
    def input_spec(self) -> Composite:
        return self._input_spec

    @input_spec.setter
    def input_spec(self, value: Composite) -> None:
        value = self._conform(value, "input_spec")
        with self._editing_specs():
            self._input_spec = value

    @property
    def specs(self) -> Composite:
        """``Composite(output_spec=..., input_spec=...)`` (a fresh container around the live specs)."""
        return Composite(output_spec=self.output_spec, input_spec=self.input_spec, shape=self.batch_size, device=self.device)

    def _conform(self, spec: TensorSpec, what: str) -> TensorSpec:
        """Checks that ``spec`` leads with the env's batch size and casts it to the env's device."""
        batch = self.batch_size
        if tuple(spec.shape[: len(batch)]) != tuple(batch):
            raise ValueError(
                f"{type(self).__name__}: {what} has shape {spec.shape}, which does not start with the env's "
                f"batch_size {batch}. Build it with shape=(*env.batch_size, ...)."
            )
        device = self.device
        if device is not None and spec.device != device:
            spec = spec.to(device)
        return spec

    def _set_part(self, root: str, part: str, value: TensorSpec, wrap_key: str | None) -> None:
        if not isinstance(value, Composite):
            if wrap_key is None:
                raise TypeError(f"{type(self).__name__}: {part} must be a Composite, got {type(value).__name__}.")
            value = self._conform(value, f"{wrap_key}_spec")
            value = Composite({wrap_key: value}, shape=self.batch_size, device=self.device)
        value = self._conform(value, part)
        if tuple(value.shape) != tuple(self.batch_size):
            # A Composite longer than the batch (e.g. shape (*batch, n_agents)) is re-rooted at the batch
            # shape; its entries keep their own, longer shapes.
            value = Composite(dict(value.items()), shape=self.batch_size, device=self.device)
        with self._editing_specs():
            getattr(self, root)[part] = value

    # -- full specs --------------------------------------------------------------------------------
    @property
    def full_observation_spec(self) -> Composite:
        return self._cached("full_observation_spec", lambda: self.output_spec["full_observation_spec"])

    @full_observation_spec.setter
    def full_observation_spec(self, value: Composite) -> None:
        self._set_part("_output_spec", "full_observation_spec", value, "observation")

    @property
    def full_reward_spec(self) -> Composite:
        return self._cached("full_reward_spec", lambda: self.output_spec["full_reward_spec"])

    @full_reward_spec.setter
    def full_reward_spec(self, value: Composite) -> None:
        self._set_part("_output_spec", "full_reward_spec", value, "reward")

    @property
    def full_done_spec(self) -> Composite:
        return self._cached("full_done_spec", lambda: self.output_spec["full_done_spec"])

    @full_done_spec.setter
    def full_done_spec(self, value: Composite) -> None:
        self._set_part("_output_spec", "full_done_spec", value, "done")

    @property
    def full_action_spec(self) -> Composite:
        return self._cached("full_action_spec", lambda: self.input_spec["full_action_spec"])

    @full_action_spec.setter
    def full_action_spec(self, value: Composite) -> None:
        self._set_part("_input_spec", "full_action_spec", value, "action")

    @property
    def full_state_spec(self) -> Composite:
        return self._cached("full_state_spec", lambda: self.input_spec["full_state_spec"])

    @full_state_spec.setter
    def full_state_spec(self, value: Composite) -> None:
        self._set_part("_input_spec", "full_state_spec", value, None)

    # -- convenience views: the leaf when it is the only one and has the default name, else the Composite ----
    @staticmethod
    def _single_or_full(full: Composite, name: str) -> TensorSpec:
        keys = _leaf_keys(full)
        return full[name] if len(keys) == 1 and keys[0] == name else full

    @property
    def observation_spec(self) -> Composite:
        return self.full_observation_spec

    @observation_spec.setter
    def observation_spec(self, value: TensorSpec) -> None:
        self.full_observation_spec = value

    @property
    def state_spec(self) -> Composite:
        return self.full_state_spec

    @state_spec.setter
    def state_spec(self, value: Composite) -> None:
        self.full_state_spec = value

    @property
    def action_spec(self) -> TensorSpec:
        return self._cached("action_spec", lambda: self._single_or_full(self.full_action_spec, "action"))

    @action_spec.setter
    def action_spec(self, value: TensorSpec) -> None:
        self.full_action_spec = value

    @property
    def reward_spec(self) -> TensorSpec:
        return self._cached("reward_spec", lambda: self._single_or_full(self.full_reward_spec, "reward"))

    @reward_spec.setter
    def reward_spec(self, value: TensorSpec) -> None:
        self.full_reward_spec = value

    @property
    def done_spec(self) -> TensorSpec:
        return self._cached("done_spec", lambda: self._single_or_full(self.full_done_spec, "done"))

    @done_spec.setter
    def done_spec(self, value: TensorSpec) -> None:
        self.full_done_spec = value
        with self._editing_specs():
            self._complete_done_spec()

    # -- unbatched views ------------------------------------------------------------------------------
    def _unbatched(self, spec: TensorSpec) -> TensorSpec:
        n = len(self.batch_size)
        return spec[(0,) * n] if n else spec

    @property
    def output_spec_unbatched(self) -> Composite:
        return self._unbatched(self.output_spec)

    @property
    def input_spec_unbatched(self) -> Composite:
        return self._unbatched(self.input_spec)

    @property
    def full_observation_spec_unbatched(self) -> Composite:
        return self._unbatched(self.full_observation_spec)

    @property
    def full_reward_spec_unbatched(self) -> Composite:
        return self._unbatched(self.full_reward_spec)

    @property
    def full_done_spec_unbatched(self) -> Composite:
        return self._unbatched(self.full_done_spec)

    @property
    def full_action_spec_unbatched(self) -> Composite:
        return self._unbatched(self.full_action_spec)

    @property
    def full_state_spec_unbatched(self) -> Composite:
        return self._unbatched(self.full_state_spec)

    @property
    def observation_spec_unbatched(self) -> Composite:
        return self._unbatched(self.observation_spec)

    @property
    def state_spec_unbatched(self) -> Composite:
        return self._unbatched(self.state_spec)

    @property
    def action_spec_unbatched(self) -> TensorSpec:
        return self._unbatched(self.action_spec)

    @property
    def reward_spec_unbatched(self) -> TensorSpec:
        return self._unbatched(self.reward_spec)

    @property
    def done_spec_unbatched(self) -> TensorSpec:
        return self._unbatched(self.done_spec)

    # -- keys ------------------------------------------------------------------------------------------
    @property
    def action_keys(self) -> list[NestedKey]:
        return self._cached("action_keys", lambda: _leaf_keys(self.full_action_spec))

    @property
    def reward_keys(self) -> list[NestedKey]:
        return self._cached("reward_keys", lambda: _leaf_keys(self.full_reward_spec))

    @property
    def observation_keys(self) -> list[NestedKey]:
        return self._cached("observation_keys", lambda: _leaf_keys(self.full_observation_spec))

    @property
    def state_keys(self) -> list[NestedKey]:
        return self._cached("state_keys", lambda: _leaf_keys(self.full_state_spec))

    @property
    def done_structure(self) -> DoneStructure:
        """Done keys grouped by parent, with their reset keys (see :class:`~torchrl.envs._done.DoneStructure`)."""
        return self._cached("done_structure", lambda: DoneStructure(self.full_done_spec))

    @property
    def done_keys(self) -> list[NestedKey]:
        return self.done_structure.done_keys

    @property
    def done_keys_groups(self) -> list[list[NestedKey]]:
        return self.done_structure.done_keys_groups

    @property
    def reset_keys(self) -> list[NestedKey]:
        return self.done_structure.reset_keys

    def _single_key(self, keys: list[NestedKey], what: str) -> NestedKey:
        if len(keys) != 1:
            raise (_NoKeyError if not keys else KeyError)(
                f"{type(self).__name__}.{what}_key: the env has {len(keys)} {what} keys ({keys}); use "
                f"env.{what}_keys instead."
            )
        return keys[0]

    @property
    def action_key(self) -> NestedKey:
        return self._single_key(self.action_keys, "action")

    @property
    def reward_key(self) -> NestedKey:
        return self._single_key(self.reward_keys, "reward")

    @property
    def done_key(self) -> NestedKey:
        """The only done key (``KeyError`` when there are several, e.g. ``done`` and ``terminated``, as TorchRL)."""
        return self._single_key(self.done_keys, "done")

    # -- defaults filled after the subclass's __init__ ------------------------------------------------------
    def _default_bool_spec(self, shape: torch.Size) -> Categorical:
        return Categorical(2, shape=shape, dtype=torch.bool, device=self.device)

    def _complete_done_spec(self) -> None:
        """Pairs ``done`` and ``terminated`` (TorchRL's invariant): a group with one of them gets the other; an
        empty done spec gets both. Groups with neither (only ``truncated``, or custom names) are kept as given."""
        full = self._output_spec["full_done_spec"]
        if not _leaf_keys(full):
            shape = (*self.batch_size, 1)
            full["done"] = self._default_bool_spec(shape)
            full["terminated"] = self._default_bool_spec(shape)
        else:
            for group in DoneStructure(full).groups:
                prefix = group.prefix
                if group.done is None and group.terminated is not None:
                    full[prefix + ("done",) if prefix else "done"] = full[group.terminated].clone()
                elif group.terminated is None and group.done is not None:
                    full[prefix + ("terminated",) if prefix else "terminated"] = full[group.done].clone()
        self._invalidate_spec_cache()

    def _complete_specs(self) -> None:
        out = self._output_spec
        if not _leaf_keys(out["full_reward_spec"]):
            out["full_reward_spec"]["reward"] = Unbounded(shape=(*self.batch_size, 1), device=self.device)
        self._complete_done_spec()

    def add_truncated_keys(self):
        """Adds a ``truncated`` entry next to every ``done`` entry of the done spec; returns the env."""
        locked = self.is_spec_locked
        if locked:
            self.set_spec_lock_(False)
        full = self._output_spec["full_done_spec"]
        for group in DoneStructure(full).groups:
            if group.truncated is None:
                prefix = group.prefix
                full[prefix + ("truncated",) if prefix else "truncated"] = full[group.keys[0]].clone()
        self._invalidate_spec_cache()
        if locked:
            self.set_spec_lock_(True)
        return self
