"""``Compose``: a list of transforms applied in order (inverses in reverse order)."""
from __future__ import annotations

from typing import Callable, Iterator

import torch
from tensordict import TensorDictBase
from torch import nn

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._transform import Transform

__all__ = ["Compose"]


class _CallableTransform(Transform):
    """Wraps a plain ``TensorDict -> TensorDict`` callable as a (forward-only) transform."""

    def __init__(self, fn: Callable[[TensorDictBase], TensorDictBase]) -> None:
        super().__init__()
        self.fn = fn

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        out = self.fn(next_tensordict)
        return next_tensordict if out is None else out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.fn!r})"


def _as_transform(t, where: str = "Compose") -> Transform:
    if isinstance(t, Transform):
        return t
    if callable(t):
        return _CallableTransform(t)
    raise ValueError(f"{where}: expected a Transform or a callable (TensorDict -> TensorDict), got {type(t).__name__}.")


class Compose(Transform):
    """Chains transforms: outputs flow through them in order, inputs (inverse) in reverse order.

    Behaves like a list: indexing, ``len``, iteration, ``append``, ``insert``, ``pop``.

    Examples:
        >>> from torchrl.envs import Compose, PendulumEnv, RewardSum, StepCounter, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), Compose(StepCounter(10), RewardSum()))
        >>> len(env.transform), type(env.transform[0]).__name__
        (2, 'StepCounter')
    """

    def __init__(self, *trsfs: Transform, **kwargs) -> None:
        if len(trsfs) == 1 and isinstance(trsfs[0], (list, tuple)):
            trsfs = tuple(trsfs[0])
        super().__init__(**kwargs)
        self.transforms = nn.ModuleList()
        # the transforms as a tuple (iterating a ModuleList costs more per step) and whether any has an inverse
        # (None: not known yet), both rebuilt after each change
        self._sequence: tuple[Transform, ...] = ()
        self._inverse_flag: bool | None = None
        for t in trsfs:
            self._attach(_as_transform(t))

    # -- list behaviour --------------------------------------------------------------------------------
    def _attach(self, t: Transform, index: int | None = None) -> None:
        t.set_container(self)
        if index is None:
            self.transforms.append(t)
        else:
            self.transforms.insert(index, t)
        self._changed()

    def _changed(self) -> None:
        self._inverse_flag = None
        self._sequence = tuple(self.transforms)
        for t in self._sequence:
            t.reset_parent()
        container = self._container
        if container is not None and hasattr(container, "_transforms_changed"):
            container._transforms_changed()

    def _transforms_changed(self) -> None:  # a nested Compose changed
        self._changed()

    def _transforms_before(self, child: Transform) -> list[Transform]:
        for i, t in enumerate(self.transforms):
            if t is child:
                return list(self.transforms[:i])
        raise ValueError(f"{type(child).__name__} is not in this Compose.")

    def __len__(self) -> int:
        return len(self.transforms)

    def __iter__(self) -> Iterator[Transform]:
        return iter(self.transforms)

    def __getitem__(self, item: int | slice):
        if isinstance(item, slice):
            return Compose(*[t.clone() for t in list(self.transforms)[item]])
        if not isinstance(item, int):
            raise TypeError(f"Compose indices must be integers or slices, got {type(item).__name__}.")
        return self.transforms[item]

    def __setitem__(self, index: int | slice | list, value) -> None:
        if not isinstance(index, int):
            raise TypeError("Compose.__setitem__: only integer indices are supported.")
        old = self.transforms[index]
        old._detach_container()
        t = _as_transform(value, "Compose.__setitem__")
        t.set_container(self)
        self.transforms[index] = t
        self._changed()

    def append(self, transform) -> None:
        """Adds ``transform`` at the end."""
        self._attach(_as_transform(transform, "Compose.append"))

    def insert(self, index: int, transform) -> None:
        """Inserts ``transform`` before position ``index`` (negative indices count from the end)."""
        n = len(self.transforms)
        if not -n <= index <= n:
            raise ValueError(f"Compose.insert: index {index} out of range: expected one in [{-n}, {n}] for {n} transforms.")
        transform = _as_transform(transform, "Compose.insert")
        self._attach(transform, index + n if index < 0 else index)

    def pop(self, index: int | None = None) -> Transform:
        """Removes and returns the transform at ``index`` (the last one by default)."""
        if not len(self.transforms):
            raise IndexError("Compose.pop: no transform to pop.")
        index = len(self.transforms) - 1 if index is None else index
        t = self.transforms[index]
        del self.transforms[index]
        t._detach_container()
        self._changed()
        return t

    # -- data path --------------------------------------------------------------------------------------
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            next_tensordict = t._call(next_tensordict)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            tensordict = t(tensordict)
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for t in self._sequence:
            next_tensordict = t._step(tensordict, next_tensordict)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        for t in self._sequence:
            tensordict_reset = t._reset(tensordict, tensordict_reset)
        return tensordict_reset

    def _reset_env_preprocess(self, tensordict):
        for t in reversed(self._sequence):
            tensordict = t._reset_env_preprocess(tensordict)
        return tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for t in reversed(self._sequence):
            tensordict = t._inv_call(tensordict)
        return tensordict

    def inv(self=None, tensordict=None, **kwargs):
        if tensordict is None:
            return super().inv(**kwargs)
        if not self._has_inverse:
            return tensordict
        return self._inv_call(tensordict.copy())

    @property
    def _has_inverse(self) -> bool:
        flag = self._inverse_flag
        if flag is None:
            flag = self._inverse_flag = any(t._has_inverse for t in self._sequence)
        return flag

    def init(self, tensordict) -> None:
        for t in self.transforms:
            t.init(tensordict)

    # -- specs -------------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for t in self.transforms:
            output_spec = t.transform_output_spec(output_spec)
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        for t in self.transforms:
            input_spec = t.transform_input_spec(input_spec)
        return input_spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        for t in self.transforms:
            observation_spec = t.transform_observation_spec(observation_spec)
        return observation_spec

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        for t in self.transforms:
            reward_spec = t.transform_reward_spec(reward_spec)
        return reward_spec

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        for t in self.transforms:
            done_spec = t.transform_done_spec(done_spec)
        return done_spec

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        for t in self.transforms:
            action_spec = t.transform_action_spec(action_spec)
        return action_spec

    def transform_state_spec(self, state_spec: TensorSpec) -> TensorSpec:
        for t in self.transforms:
            state_spec = t.transform_state_spec(state_spec)
        return state_spec

    def transform_env_device(self, device: torch.device) -> torch.device:
        for t in self.transforms:
            device = t.transform_env_device(device)
        return device

    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        for t in self.transforms:
            batch_size = t.transform_env_batch_size(batch_size)
        return batch_size

    def transform_fake_tensordict(self, fake_tensordict: TensorDictBase) -> TensorDictBase:
        for t in self.transforms:
            fake_tensordict = t.transform_fake_tensordict(fake_tensordict)
        return fake_tensordict

    # -- misc ----------------------------------------------------------------------------------------------
    def set_missing_tolerance(self, mode=False) -> None:
        super().set_missing_tolerance(mode)
        for t in self.transforms:
            t.set_missing_tolerance(mode)

    def reset_parent(self) -> None:
        super().reset_parent()
        for t in self.transforms:
            t.reset_parent()

    def set_container(self, container) -> None:
        super().set_container(container)
        for t in self.transforms:
            t.reset_parent()

    def clone(self) -> "Compose":
        return Compose(*[t.clone() for t in self.transforms])

    def close(self) -> None:
        for t in self.transforms:
            t.close()

    def empty_cache(self) -> None:
        super().empty_cache()
        for t in self.transforms:
            t.empty_cache()

    def dump(self, **kwargs) -> None:
        for t in self.transforms:
            t.dump(**kwargs)

    def to(self, *args, **kwargs) -> "Compose":
        for t in self.transforms:
            t.to(*args, **kwargs)
        return super().to(*args, **kwargs)

    def __repr__(self) -> str:
        inner = ",\n".join("    " + repr(t).replace("\n", "\n    ") for t in self.transforms)
        return f"Compose(\n{inner})" if inner else "Compose()"
