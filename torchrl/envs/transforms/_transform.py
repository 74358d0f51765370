"""``Transform``: a module that edits an environment's data and specs on the way in and out.

Where a transform acts:

- ``_step(tensordict, next_tensordict)`` after every env step, on the step's *next* data (by default
  ``_call(next_tensordict)``, which maps ``in_keys`` to ``out_keys`` through ``_apply_transform``);
- ``_reset(tensordict, tensordict_reset)`` after every reset (by default ``_call`` on the reset output);
- ``inv(tensordict)`` before every step, on the inputs (actions): ``out_keys_inv`` (the names the outside
  sees) are mapped back to ``in_keys_inv`` (the names the base env reads) through
  ``_inv_apply_transform``;
- ``transform_*_spec`` once, when the transformed env computes its specs;
- ``forward(tensordict)`` outside environments (replay buffers, plain modules): ``_call`` on the data.

``parent`` is the environment as this transform sees it: the base env plus every transform that comes
before this one; ``container`` is the ``Compose`` or ``TransformedEnv`` holding it.
"""
from __future__ import annotations

import copy
from typing import Any, Sequence

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from torchrl.data.tensor_specs import Composite, TensorSpec

__all__ = ["Transform", "ObservationTransform"]


def _key_list(keys: NestedKey | Sequence[NestedKey] | None) -> list[NestedKey]:
    if keys is None:
        return []
    if isinstance(keys, (str, tuple)):
        return [keys]
    return [k if isinstance(k, str) else tuple(k) for k in keys]


def _call_with_tensors(transform, fn, tensors: dict, out_keys: list):
    if not tensors:
        raise TypeError(f"{type(transform).__name__}: pass a TensorDict or tensors by name (e.g. observation=obs).")
    td = fn(TensorDict(tensors, batch_size=[]))
    values = tuple(td.get(k) for k in out_keys)
    return values[0] if len(values) == 1 else values


class Transform(nn.Module):
    """Base class of environment transforms.

    Args:
        in_keys: entries read on the output side (observations, rewards, ...).
        out_keys: where results are written. Default: ``[]`` on this base class (as in TorchRL: a subclass
            mapping ``in_keys`` in place passes ``out_keys=in_keys``); the built-in in-place transforms
            default them to ``in_keys``.
        in_keys_inv: entries written for the base env on the input side (e.g. its ``"action"``).
        out_keys_inv: entries read from the outside on the input side (default as for ``out_keys``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import Transform
        >>> class Double(Transform):
        ...     def _apply_transform(self, x):
        ...         return x * 2
        >>> Double(in_keys=["obs"], out_keys=["obs"])(TensorDict(obs=torch.ones(2)))["obs"].tolist()
        [2.0, 2.0]
    """

    invertible = False
    # TorchRL's base class leaves unset ``out_keys``/``out_keys_inv`` empty; transforms that work in place
    # (most of them) default them to ``in_keys``/``in_keys_inv`` by setting this flag
    _out_keys_default_to_in_keys = False

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        in_keys_inv: Sequence[NestedKey] | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__()
        self.in_keys = in_keys
        self.out_keys = out_keys
        self.in_keys_inv = in_keys_inv
        self.out_keys_inv = out_keys_inv
        self._missing_tolerance = False
        # ((in_keys, out_keys) as stored, their pairs) for _spec_edit.key_pairs; the same for the inverse keys
        self._pairs_cache: tuple | None = None
        self._pairs_inv_cache: tuple | None = None
        # container and parent are modules (a Compose, an env): written to the instance dict, as nn.Module's
        # __setattr__ would register them as children of this transform
        self.__dict__["_container"] = None
        self.__dict__["_parent"] = None

    # -- keys ------------------------------------------------------------------------------------------
    @property
    def in_keys(self) -> list[NestedKey]:
        return self._in_keys

    @in_keys.setter
    def in_keys(self, value) -> None:
        self._in_keys = _key_list(value)

    @property
    def out_keys(self) -> list[NestedKey]:
        out = self._out_keys
        if out is not None:
            return out
        return list(self.in_keys) if self._out_keys_default_to_in_keys else []

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._out_keys = None if value is None else _key_list(value)

    @property
    def in_keys_inv(self) -> list[NestedKey]:
        return self._in_keys_inv

    @in_keys_inv.setter
    def in_keys_inv(self, value) -> None:
        self._in_keys_inv = _key_list(value)

    @property
    def out_keys_inv(self) -> list[NestedKey]:
        out = self._out_keys_inv
        if out is not None:
            return out
        return list(self.in_keys_inv) if self._out_keys_default_to_in_keys else []

    @out_keys_inv.setter
    def out_keys_inv(self, value) -> None:
        self._out_keys_inv = None if value is None else _key_list(value)

    @property
    def missing_tolerance(self) -> bool:
        return self._missing_tolerance

    def set_missing_tolerance(self, mode=False) -> None:
        """When True, absent ``in_keys`` are skipped instead of raising ``KeyError``."""
        self._missing_tolerance = bool(mode)

    def _check_keys(self) -> None:
        if len(self.in_keys) != len(self.out_keys):
            raise ValueError(
                f"{type(self).__name__}: in_keys {self.in_keys} and out_keys {self.out_keys} differ in length."
            )

    # -- data path -------------------------------------------------------------------------------------------
    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} maps in_keys to out_keys but defines no _apply_transform; override "
            f"_apply_transform, or _call/_step for transforms that need more than one entry."
        )

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} has in_keys_inv but defines no _inv_apply_transform.")

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Applies ``_apply_transform`` to each ``in_key`` of ``next_tensordict`` (in place)."""
        for in_key, out_key in self._key_pairs(self.in_keys, self.out_keys, ""):
            value = next_tensordict.get(in_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"{type(self).__name__}: key {in_key!r} not found; available keys: "
                    f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            next_tensordict.set(out_key, self._apply_transform(value))
        return next_tensordict

    def forward(self=None, tensordict=None, **kwargs):
        """Applies the transform to ``tensordict`` outside an env (e.g. on replay-buffer samples).

        Tensors may also be passed by name, ``transform(observation=obs)``; the transformed ``out_keys``
        are then returned (one tensor, or a tuple).
        """
        if tensordict is None:
            return _call_with_tensors(self, self._call, kwargs, self.out_keys)
        return self._call(tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Called after each env step with the step's input and its ``next`` output; returns ``next``."""
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        """Called after each reset with the reset input and output; returns the (edited) output."""
        return self._call(tensordict_reset)

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """Edits the reset *input* before the base env sees it (default: unchanged)."""
        return tensordict

    def _key_pairs(self, in_keys: list, out_keys: list, suffix: str) -> zip:
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"{type(self).__name__}: in_keys{suffix} {in_keys} and out_keys{suffix} {out_keys} differ in length "
                f"(out_keys{suffix} default to [] on a Transform subclass: pass them)."
            )
        return zip(in_keys, out_keys)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in self._key_pairs(self.in_keys_inv, self.out_keys_inv, "_inv"):
            value = tensordict.get(out_key, None)
            if value is None:
                if self._missing_tolerance:
                    continue
                raise KeyError(
                    f"{type(self).__name__} (inverse): key {out_key!r} not found; available keys: "
                    f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            tensordict.set(in_key, self._inv_apply_transform(value))
        return tensordict

    def inv(self=None, tensordict=None, **kwargs):
        """Applies the inverse transform to a shallow copy of ``tensordict`` (the input is not modified).

        Tensors may also be passed by name (``transform.inv(action=a)``), returning the ``in_keys_inv``.
        """
        if tensordict is None:
            return _call_with_tensors(self, self._inv_call, kwargs, self.in_keys_inv)
        if not self._has_inverse:
            return tensordict
        return self._inv_call(tensordict.copy())

    @property
    def _has_inverse(self) -> bool:
        """Whether ``inv`` may change data: inverse keys are set, or a subclass defines its own inverse."""
        return bool(self.in_keys_inv) or type(self)._inv_call is not Transform._inv_call

    def init(self, tensordict) -> None:
        """Hook run when the transformed env is built (default: nothing)."""

    # -- specs ---------------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        output_spec["full_observation_spec"] = self.transform_observation_spec(output_spec["full_observation_spec"])
        output_spec["full_reward_spec"] = self.transform_reward_spec(output_spec["full_reward_spec"])
        output_spec["full_done_spec"] = self.transform_done_spec(output_spec["full_done_spec"])
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        input_spec["full_action_spec"] = self.transform_action_spec(input_spec["full_action_spec"])
        input_spec["full_state_spec"] = self.transform_state_spec(input_spec["full_state_spec"])
        return input_spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return observation_spec

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return reward_spec

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        return done_spec

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        return action_spec

    def transform_state_spec(self, state_spec: TensorSpec) -> TensorSpec:
        return state_spec

    def transform_env_device(self, device: torch.device) -> torch.device:
        return device

    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        return batch_size

    def transform_fake_tensordict(self, fake_tensordict: TensorDictBase) -> TensorDictBase:
        return fake_tensordict

    # -- placement -----------------------------------------------------------------------------------------
    @property
    def container(self):
        """The ``Compose`` or ``TransformedEnv`` holding this transform (``None`` when standalone)."""
        return self._container

    def set_container(self, container) -> None:
        current = self._container
        # as TorchRL: a transform that already has a parent env (through its container) cannot be moved; one
        # held by a standalone Compose can
        if current is not None and current is not container and self._chain()[0] is not None:
            raise AttributeError(
                f"{type(self).__name__} already belongs to {type(current).__name__}; "
                f"use transform.clone() to put a copy elsewhere."
            )
        self.__dict__["_container"] = container
        self.reset_parent()

    def _detach_container(self) -> None:
        self.__dict__["_container"] = None
        self.reset_parent()

    def reset_parent(self) -> None:
        """Forgets the cached ``parent`` (recomputed on next access)."""
        self.__dict__["_parent"] = None

    def _chain(self) -> tuple[Any, list["Transform"]]:
        """``(root env or None, transforms applied before this one)``."""
        container = self._container
        if container is None:
            return None, []
        if isinstance(container, Transform):
            root, before = container._chain()
            return root, before + container._transforms_before(self)
        return container, []

    @property
    def parent(self):
        """The env as seen by this transform: base env + the transforms before it (``None`` if standalone)."""
        cached = self._parent
        if cached is None:
            root, before = self._chain()
            if root is None:
                return None
            cached = self.__dict__["_parent"] = root._build_parent(before)
        return cached

    @property
    def collector(self):
        parent = self.parent
        return None if parent is None else parent.collector

    # -- misc ----------------------------------------------------------------------------------------------
    def clone(self):
        """A deep copy not attached to any container."""
        container, parent = self._container, self._parent
        self.__dict__["_container"] = self.__dict__["_parent"] = None
        try:
            out = copy.deepcopy(self)
        finally:
            self.__dict__["_container"], self.__dict__["_parent"] = container, parent
        return out

    def close(self) -> None:
        """Releases resources held by the transform (default: nothing)."""

    def empty_cache(self) -> None:
        self.reset_parent()

    def dump(self, **kwargs) -> None:
        """Writes the transform's state to disk when it has one (default: nothing)."""

    def to(self, *args, **kwargs) -> "Transform":
        super().to(*args, **kwargs)
        return self

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_container"] = None
        state["_parent"] = None
        return state

    def __repr__(self) -> str:
        keys = f"keys={self.in_keys}" if self.in_keys == self.out_keys else f"in_keys={self.in_keys}, out_keys={self.out_keys}"
        return f"{type(self).__name__}({keys})"


class ObservationTransform(Transform):
    """A transform of observations: defaults ``in_keys`` to the observation entries.

    Subclasses implement ``_apply_transform`` and, when shapes or dtypes change,
    ``transform_observation_spec``.
    """

    def __init__(self, in_keys=None, out_keys=None, in_keys_inv=None, out_keys_inv=None) -> None:
        if in_keys is None:
            in_keys = ["observation", "pixels"]
        super().__init__(in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv)
