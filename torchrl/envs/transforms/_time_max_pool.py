"""``TimeMaxPool``: the element-wise maximum of each observation over the last ``T`` env steps."""
from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._groups import restart_where_reset, only_reset_key
from torchrl.envs.transforms._spec_edit import key_pairs
from torchrl.envs.transforms._transform import Transform

__all__ = ["TimeMaxPool"]


class TimeMaxPool(Transform):
    """Replaces each ``in_key`` by its element-wise maximum over the last ``T`` steps of the episode.

    The transform keeps, per key, a window of the last ``T`` values (one ``torch.cat`` per step). As in
    TorchRL, a reset fills the window of the reset rows with zeros before the first observation enters it, so
    until ``T`` steps have passed the maximum also covers zeros (negative observations read 0). Rows not
    selected by a partial reset (``"_reset"``) keep their window. Specs are unchanged (an ``out_key`` other than
    its ``in_key`` gets a copy of its spec).

    Args:
        in_keys: observations to pool (default ``["observation"]``).
        out_keys: where the maxima go (default: ``in_keys``).
        T: number of steps in the window (at least 1).
        reset_key: the reset mask entry (default: the env's only reset key, ``"_reset"`` when standalone).

    Raises:
        ValueError: ``T < 1``.
        NotImplementedError: when called on stored data (it needs the env's step order).

    Examples:
        >>> import torch
        >>> from torchrl.envs import TimeMaxPool, TransformedEnv
        >>> from torchrl.testing import CountingEnv
        >>> env = TransformedEnv(CountingEnv(start_val=-5), TimeMaxPool(in_keys=["observation"], out_keys=["max"], T=2))
        >>> data = env.rollout(3, lambda td: td.set("action", torch.ones(1, dtype=torch.int8)))
        >>> data["next", "observation"].squeeze(-1).tolist(), data["next", "max"].squeeze(-1).tolist()
        ([-4, -3, -2], [-4, -3, -2])
        >>> data["max"].squeeze(-1).tolist()  # the reset step pools with the zeros that fill a new window
        [0, -4, -3]
    """

    _out_keys_default_to_in_keys = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        T: int = 1,
        reset_key: NestedKey | None = None,
    ) -> None:
        if in_keys is None:
            in_keys = ["observation"]
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        if int(T) < 1:
            raise ValueError(f"TimeMaxPool: T (the number of pooled steps) must be at least 1, got T={T}.")
        self._check_keys()
        self.T = int(T)
        self._reset_key = reset_key
        # one window per in_key (values stacked on a new last dim): per-episode state, rebuilt at each reset and
        # kept out of the state dict; a plain list that each step updates without nn.Module's attribute hooks
        self._windows: list[torch.Tensor | None] = [None] * len(self.in_keys)

    @property
    def reset_key(self) -> NestedKey:
        """The reset mask entry: ``reset_key`` when given, else the env's only reset key (``"_reset"``)."""
        return only_reset_key(self, self._reset_key, "the windows")

    @reset_key.setter
    def reset_key(self, value: NestedKey) -> None:
        self._reset_key = value

    def _missing(self, key: NestedKey, tensordict: TensorDictBase) -> None:
        if not self._missing_tolerance:
            raise KeyError(
                f"TimeMaxPool: key {key!r} not found; available keys: "
                f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
            )

    def _state(self, pairs: tuple) -> list:
        """The windows list, resized (emptied) when the key lists changed length."""
        if len(self._windows) != len(pairs):
            self._windows = [None] * len(pairs)
        return self._windows

    def _fresh(self, value: torch.Tensor) -> torch.Tensor:
        """The window of a new episode: ``T - 1`` zeros, then ``value``."""
        zeros = torch.zeros((*value.shape, self.T - 1), dtype=value.dtype, device=value.device)
        return torch.cat((zeros, value.unsqueeze(-1)), -1)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """One env step: each window drops its oldest value and takes the new one; writes the maxima."""
        windows = self._state(pairs := key_pairs(self))
        for i, (in_key, out_key) in enumerate(pairs):
            value = fast_get(next_tensordict, in_key)
            if value is None:
                self._missing(in_key, next_tensordict)
                continue
            window = windows[i]
            if window is None or window.shape[:-1] != value.shape or window.device != value.device:
                window = self._fresh(value)  # no reset seen for this shape: the episode starts here
            else:
                window = torch.cat((window[..., 1:], value.unsqueeze(-1)), -1)
            windows[i] = window
            fast_set(next_tensordict, out_key, window.amax(-1))
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        """Restarts the windows of the reset rows; the other rows keep theirs."""
        reset_key = self.reset_key
        windows = self._state(pairs := key_pairs(self))
        for i, (in_key, out_key) in enumerate(pairs):
            value = fast_get(tensordict_reset, in_key)
            if value is None:
                self._missing(in_key, tensordict_reset)
                continue
            fresh = self._fresh(value)
            previous = windows[i]
            if previous is not None and (previous.shape != fresh.shape or previous.device != fresh.device):
                previous = None
            window = windows[i] = restart_where_reset(tensordict, reset_key, previous, fresh)
            fast_set(tensordict_reset, out_key, window.amax(-1))
        return tensordict_reset

    def forward(self=None, tensordict=None, **kwargs):
        raise NotImplementedError(
            "TimeMaxPool pools over the steps of a running env; it cannot be applied to stored data (a replay "
            "buffer or dataset does not give it the steps in order). Use it inside a TransformedEnv."
        )

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not isinstance(observation_spec, Composite):
            return observation_spec
        leaves = set(observation_spec.keys(include_nested=True, leaves_only=True))
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in leaves and out_key != in_key:
                observation_spec[out_key] = observation_spec[in_key].clone()
        return observation_spec

    def __repr__(self) -> str:
        keys = f"keys={self.in_keys}" if self.in_keys == self.out_keys else f"in_keys={self.in_keys}, out_keys={self.out_keys}"
        return f"TimeMaxPool(T={self.T}, {keys})"
