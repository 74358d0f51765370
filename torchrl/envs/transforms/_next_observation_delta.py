"""``NextObservationDelta``: stores ``("next", obs)`` as a low-precision delta, rebuilt on replay-buffer samples."""
from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl.envs._done import as_tuple
from torchrl.envs.transforms._transform import Transform

__all__ = ["NextObservationDelta"]

_INT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.bool)


def _delta_key(key: NestedKey) -> tuple:
    return ("next", "delta", *as_tuple(key))


def _set_grouped(tensordict: TensorDictBase, key: tuple, value: torch.Tensor, source: TensorDictBase, skip: int) -> None:
    """Sets ``tensordict[key] = value``, first creating the sub-TensorDicts along ``key`` that are missing
    with the batch size of their counterpart in ``source`` (``key[skip:]`` prefixes: a group ``"agents"``
    keeps its agent dim under ``("next", "delta")``)."""
    for i in range(skip + 1, len(key)):
        if tensordict.get(key[:i], None) is None:
            like = source.get(key[skip:i], None)
            if isinstance(like, TensorDictBase):
                tensordict.set(key[:i], TensorDict(batch_size=like.batch_size, device=like.device))
    tensordict.set(key, value)


class NextObservationDelta(Transform):
    """Writes ``("next", "delta", k) = (next_obs - obs)`` in ``delta_dtype``; rebuilds ``("next", k)`` from it.

    One instance serves both sides of the compression:

    - **in an env** (after each step): for each in-key ``k``, ``("next", "delta", k)`` receives
      ``(next[k] - root[k]).to(delta_dtype)``;
    - **on a replay buffer** (``forward``, on samples): ``("next", k) = root[k] + ("next", "delta", k)``,
      cast to the root's dtype (``restore_dtype="root"``) or to ``restore_dtype``; the delta entry is then
      removed (``drop_delta``). Unlike :class:`NextStateReconstructor`, a trajectory's last transition is
      rebuilt too (within ``delta_dtype``'s precision), as the delta encodes the actual transition.

    The compression is lossy: ``delta_dtype`` loses precision, and large observations can overflow it.

    Args:
        in_keys: the observation entries to compress. Default ``None``: in an env, every floating-point
            observation leaf whose dtype is not in ``excluded_dtypes`` (read from the env's specs on first
            use); on a replay buffer (no env), pass them explicitly (with none, samples pass unchanged).

    Keyword Args:
        delta_dtype: floating dtype of the stored deltas (default ``torch.float16``).
        restore_dtype: dtype of the rebuilt ``("next", k)``; ``"root"`` (default) uses the root entry's.
        drop_delta: remove the delta entries from samples after rebuilding (default ``True``).
        excluded_dtypes: dtypes skipped when ``in_keys`` are inferred (default: integers and bool).

    Raises:
        ValueError: ``delta_dtype`` is not a floating dtype, or ``restore_dtype`` is neither a dtype nor
            ``"root"``.

    Examples:
        >>> import torch
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms import NextObservationDelta
        >>> t = NextObservationDelta(["observation"])
        >>> data = TransformedEnv(PendulumEnv(seed=0), t).rollout(3)
        >>> data["next", "delta", "observation"].dtype
        torch.float16
        >>> rebuilt = t(data.exclude(("next", "observation")))
        >>> bool(torch.allclose(rebuilt["next", "observation"], data["next", "observation"], atol=1e-2))
        True
        >>> ("next", "delta", "observation") in rebuilt.keys(True, True)
        False

    .. note:: TorchRL also drops the full ``("next", k)`` from the env's steps once ``step_mdp`` has moved
        it to the root, so that collected data holds only the delta. This implementation keeps it (the env's
        step loop has no post-``step_mdp`` hook for transforms); the replay-buffer side is unchanged.
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        *,
        delta_dtype: torch.dtype = torch.float16,
        restore_dtype: torch.dtype | Literal["root"] = "root",
        drop_delta: bool = True,
        excluded_dtypes: tuple[torch.dtype, ...] = _INT_DTYPES,
    ) -> None:
        if not isinstance(delta_dtype, torch.dtype) or not delta_dtype.is_floating_point:
            raise ValueError(f"NextObservationDelta: delta_dtype must be a floating-point dtype, got {delta_dtype}.")
        if restore_dtype != "root" and not isinstance(restore_dtype, torch.dtype):
            raise ValueError(
                f"NextObservationDelta: restore_dtype must be a torch.dtype or 'root', got {restore_dtype!r}."
            )
        super().__init__()
        self._given_keys = None if in_keys is None else ([in_keys] if isinstance(in_keys, (str, tuple)) else list(in_keys))
        self.delta_dtype = delta_dtype
        self.restore_dtype = restore_dtype
        self.drop_delta = bool(drop_delta)
        self.excluded_dtypes = tuple(excluded_dtypes)
        self._inferred: list = []
        self._stale = True  # the inferred keys are to be read again from the (new) parent env

    # -- keys ------------------------------------------------------------------------------------------
    @property
    def in_keys(self) -> list[NestedKey]:
        if self._given_keys is not None:
            return self._given_keys
        if self._stale:
            parent = self.parent
            if parent is None:  # no env (e.g. a clone on a replay buffer): the keys inferred last, if any
                return self._inferred
            spec = parent.output_spec["full_observation_spec"]
            self._inferred = [
                key for key, leaf in spec.items(include_nested=True, leaves_only=True)
                if leaf.dtype is not None and leaf.dtype.is_floating_point and leaf.dtype not in self.excluded_dtypes
            ]
            self._stale = False
        return self._inferred

    @in_keys.setter
    def in_keys(self, value) -> None:
        # Transform.__init__ sets the base keys; the given keys live in _given_keys
        if value:
            self._given_keys = [value] if isinstance(value, (str, tuple)) else list(value)

    @property
    def out_keys(self) -> list[NestedKey]:
        return self.in_keys

    @out_keys.setter
    def out_keys(self, value) -> None:
        pass

    def reset_parent(self) -> None:
        super().reset_parent()
        self.__dict__["_stale"] = True  # a new env may have other observations

    # -- env side --------------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.in_keys:
            new, old = next_tensordict.get(key, None), tensordict.get(key, None)
            if new is None or old is None:
                continue
            _set_grouped(next_tensordict, ("delta", *as_tuple(key)), (new - old).to(self.delta_dtype), next_tensordict, 1)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    # -- replay-buffer side ----------------------------------------------------------------------------
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.in_keys:
            root, delta = tensordict.get(key, None), tensordict.get(_delta_key(key), None)
            if root is None or delta is None:
                continue
            dtype = root.dtype if self.restore_dtype == "root" else self.restore_dtype
            _set_grouped(tensordict, ("next", *as_tuple(key)), (root.to(dtype) + delta.to(dtype)).to(dtype), tensordict, 1)
            if self.drop_delta:
                tensordict.del_(_delta_key(key))
        if self.drop_delta:
            _drop_empty(tensordict, ("next", "delta"))
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    # -- specs -----------------------------------------------------------------------------------------
    def transform_fake_tensordict(self, fake_tensordict: TensorDictBase) -> TensorDictBase:
        """Adds the ``("next", "delta", k)`` entries a step writes (they are not observations: no spec)."""
        for key in self.in_keys:
            value = fake_tensordict.get(("next", *as_tuple(key)), None)
            if value is not None:
                _set_grouped(fake_tensordict, _delta_key(key), torch.zeros_like(value, dtype=self.delta_dtype),
                             fake_tensordict.get("next"), 2)
        return fake_tensordict

    def __repr__(self) -> str:
        return (
            f"NextObservationDelta(in_keys={self._given_keys}, delta_dtype={self.delta_dtype}, "
            f"restore_dtype={self.restore_dtype}, drop_delta={self.drop_delta})"
        )


def _drop_empty(tensordict: TensorDictBase, key: tuple) -> None:
    """Removes the sub-TensorDict at ``key`` (and then its parents) when it holds no leaf."""
    while len(key) > 1:
        sub = tensordict.get(key, None)
        if not isinstance(sub, TensorDictBase) or any(True for _ in sub.keys(include_nested=True, leaves_only=True)):
            return
        tensordict.del_(key)
        key = key[:-1]
