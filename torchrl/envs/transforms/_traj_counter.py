"""``TrajCounter``: a global trajectory id, new at every (partial) reset."""
from __future__ import annotations

from typing import Any, Mapping

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Bounded, Composite
from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._groups import done_groups
from torchrl.envs.transforms._tensordict_primer import _mask_like
from torchrl.envs.transforms._transform import Transform

__all__ = ["TrajCounter"]


class TrajCounter(Transform):
    """Writes a trajectory id that is unique across resets: every episode start takes the next number.

    Ids are handed out in order: the first reset of a batch of 3 gives ``[0, 1, 2]``; if sub-environment
    1 is then reset alone it gets ``3`` while the others keep theirs. Steps carry the id over. The counter
    lives in a shared-memory tensor: clones of the transform (and processes that receive it) share it,
    and it is saved in ``state_dict()`` (load it back to resume numbering).

    The id sits next to the done entries of the group its key belongs to (``("agents", "traj_count")``
    counts the ``"agents"`` done group), with the shape of that group's ``done``.

    Args:
        out_key: where the id is written.

    Keyword Args:
        repeats: hand each id to ``repeats`` consecutive episode starts before moving to the next one
            (e.g. when every prompt of a batch is repeated ``repeats`` times and the copies form one
            group). Default: ``None`` (stored as ``repeats == 0``, as TorchRL: each id is used once).

    Examples:
        >>> from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv
        >>> from torchrl.envs.transforms._traj_counter import TrajCounter
        >>> env = TransformedEnv(PendulumEnv(), StepCounter(2)).append_transform(TrajCounter())
        >>> env.rollout(6, break_when_any_done=False)["next", "traj_count"].squeeze(-1).tolist()
        [0, 0, 1, 1, 2, 2]
    """

    def __init__(self, out_key: NestedKey = "traj_count", *, repeats: int | None = None) -> None:
        if not isinstance(out_key, (str, tuple)):
            raise ValueError(f"TrajCounter: out_key must be a string or a tuple of strings, got {out_key!r}.")
        if repeats is not None and (not isinstance(repeats, int) or repeats < 1):
            raise ValueError(f"TrajCounter: repeats must be a positive integer or None, got {repeats!r}.")
        super().__init__(in_keys=[], out_keys=[out_key])
        self.out_key = out_key
        self.repeats = 0 if repeats is None else repeats  # as TorchRL: 0 when not given (each id used once)
        # Number of episode starts so far (ids are ``starts // repeats``); shared between clones and processes.
        self._starts = torch.zeros((), dtype=torch.int64).share_memory_()
        self._keys: tuple | None = None  # (done key of the group, reset key of the group)
        # The ids of the episodes in progress, for step inputs that do not carry them (a ParallelEnv worker
        # receives only the env's inputs).
        self._current: torch.Tensor | None = None

    def set_container(self, container) -> None:
        super().set_container(container)
        self._keys = None

    # -- structure --------------------------------------------------------------------------------------
    def _group_keys(self, full_done_spec: Composite) -> tuple:
        prefix = as_tuple(self.out_key)[:-1]
        groups = done_groups(full_done_spec)
        if prefix not in groups:
            raise KeyError(
                f"TrajCounter: out_key {self.out_key!r} must sit in a done group (next to a 'done' entry); the env's "
                f"done groups are {sorted(str(from_tuple(p + ('done',))) if p else 'done' for p in groups)}."
            )
        return from_tuple(prefix + ("done",)), from_tuple(prefix + ("_reset",)), groups[prefix]

    def _get_keys(self) -> tuple:
        keys = self._keys
        if keys is None:
            parent = self.parent
            if parent is None:
                raise RuntimeError("TrajCounter must be used inside a TransformedEnv (it needs the env's done keys).")
            keys = self._keys = self._group_keys(parent.output_spec["full_done_spec"])
        return keys

    # -- ids ----------------------------------------------------------------------------------------------
    def _take(self, n: int, device) -> torch.Tensor:
        """``n`` new ids (advances the shared counter)."""
        start = int(self._starts)
        self._starts.fill_(start + n)
        return (torch.arange(start, start + n, device=device) // max(self.repeats, 1)).to(torch.int64)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        done_key, reset_key, _ = self._get_keys()
        done = fast_get(tensordict_reset, done_key)
        shape = done.shape
        mask = fast_get(tensordict, reset_key) if tensordict is not None else None
        previous = None
        if mask is not None:
            previous = fast_get(tensordict, self.out_key)
            if previous is None and self._current is not None and self._current.shape == shape:
                previous = self._current
        if mask is None or previous is None:
            value = self._take(done.numel(), done.device).reshape(shape)
        else:
            where = _mask_like(mask, done, reset_key).expand(shape)
            value = previous.clone()
            value[where] = self._take(int(where.sum()), done.device)
        fast_set(tensordict_reset, self.out_key, value)
        self._current = value
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        value = fast_get(tensordict, self.out_key)
        if value is None:
            value = self._current
        if value is None:
            raise KeyError(
                f"TrajCounter: {self.out_key!r} missing from the step input; reset the env before stepping it."
            )
        fast_set(next_tensordict, self.out_key, value)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError("TrajCounter numbers environment resets; it cannot be applied to stored data.")

    # -- specs ----------------------------------------------------------------------------------------
    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return observation_spec

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        full_done = output_spec["full_done_spec"]
        done_key, reset_key, shape = self._keys = self._group_keys(full_done)
        # as TorchRL: ids are non-negative, bounded by int64's range
        output_spec["full_observation_spec"][self.out_key] = Bounded(
            0, torch.iinfo(torch.int64).max, shape=shape, dtype=torch.int64, device=full_done.device
        )
        return output_spec

    # -- state ----------------------------------------------------------------------------------------
    def _apply(self, fn, *args, **kwargs):
        self._starts = fn(self._starts)  # (a no-op move keeps the shared counter shared)
        return super()._apply(fn, *args, **kwargs)

    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        out = super().state_dict(*args, destination=destination, prefix=prefix, keep_vars=keep_vars)
        out[prefix + "traj_count"] = self._starts.clone()
        return out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        key = prefix + "traj_count"
        if key in state_dict:
            self._starts.fill_(int(state_dict[key]))
        elif strict:
            missing_keys.append(key)
        super()._load_from_state_dict(
            {k: v for k, v in state_dict.items() if k != key}, prefix, local_metadata, strict, missing_keys,
            unexpected_keys, error_msgs,
        )

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False):
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def clone(self) -> "TrajCounter":
        """A detached copy that shares the trajectory counter with this transform."""
        out = super().clone()
        out._starts = self._starts
        return out

    def __repr__(self) -> str:
        return f"TrajCounter(out_key={self.out_key!r}, repeats={self.repeats}, count={int(self._starts)})"
