"""``NextStateReconstructor``: rebuilds ``("next", obs)`` in sampled batches from the following row's ``obs``."""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.envs._done import as_tuple
from torchrl.envs.transforms._transform import Transform

__all__ = ["NextStateReconstructor"]


class NextStateReconstructor(Transform):
    """Re-creates ``("next", k)`` entries of a flat sampled batch by shifting ``k`` one row up.

    A collector with ``compact_obs=True`` stores each observation once (at the root): ``("next", k)`` at step
    ``t`` is the root ``k`` at ``t + 1`` of the same trajectory. This replay-buffer transform puts it back:
    for each position ``i`` of a ``(B,)`` batch,

    - ``data["next", k][i] = data[k][i + 1]`` when row ``i + 1`` is the next step of the same trajectory;
    - ``data["next", k][i] = fill_value`` (``NaN`` by default) otherwise, and always for the last row.

    Row ``i + 1`` is the next step when every configured check passes: same trajectory id (``traj_key``),
    row ``i`` not done (``done_key``: a sampler may put two slices of one trajectory back to back), and,
    with ``step_count_key``, ``step_count[i + 1] == step_count[i] + 1``. A whole trajectory sampled in order
    is thus rebuilt exactly, a ``SliceSampler`` batch up to each slice end, and a uniform sample is mostly
    ``fill_value`` (the next observation genuinely is not in it). In an environment the transform does
    nothing.

    Args:
        keys: the root entries whose ``("next", k)`` counterparts are rebuilt.

    Keyword Args:
        traj_key: trajectory-id entry (``None``: the whole batch is one trajectory).
        done_key: entry whose ``True`` rows end a trajectory (``None``: no check). Trailing dimensions
            beyond the batch are reduced with ``any``.
        step_count_key: optional step-count entry checked for consecutive counts.
        fill_value: value written where the next observation is not available. Integer entries need an
            explicit finite value.
        strict: with ``True`` (default) a configured marker entry absent from the batch raises
            ``KeyError``; with ``False`` that check is dropped.

    Raises:
        ValueError: the batch is not one-dimensional.
        KeyError: an entry of ``keys`` (or, with ``strict``, a marker entry) is absent from the batch.
        TypeError: ``fill_value`` is ``NaN`` (or infinite) for an integer or boolean entry.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import NextStateReconstructor
        >>> data = TensorDict({
        ...     "observation": torch.arange(6.0).view(6, 1),
        ...     ("next", "done"): torch.tensor([False, True, False, False, False, False]).view(6, 1),
        ...     ("collector", "traj_ids"): torch.tensor([0, 0, 1, 1, 2, 2]),
        ... }, batch_size=[6])
        >>> NextStateReconstructor()(data)["next", "observation"].squeeze(-1).tolist()
        [1.0, nan, 3.0, nan, 5.0, nan]
    """

    def __init__(
        self,
        keys: Sequence[NestedKey] = ("observation",),
        *,
        traj_key: NestedKey | None = ("collector", "traj_ids"),
        done_key: NestedKey | None = ("next", "done"),
        step_count_key: NestedKey | None = None,
        fill_value: float = float("nan"),
        strict: bool = True,
    ) -> None:
        super().__init__()
        # a sequence of keys (the default is the tuple ("observation",)); a lone string is one key
        self.keys = [keys] if isinstance(keys, str) else [k if isinstance(k, str) else tuple(k) for k in keys]
        self.traj_key = traj_key
        self.done_key = done_key
        self.step_count_key = step_count_key
        self.fill_value = fill_value
        self.strict = bool(strict)

    # -- rows that have their next step in the batch ------------------------------------------------------
    def _marker(self, tensordict: TensorDictBase, key: NestedKey | None, what: str) -> torch.Tensor | None:
        if key is None:
            return None
        value = tensordict.get(key, None)
        if value is None and self.strict:
            raise KeyError(
                f"NextStateReconstructor: {what} key {key!r} is not present in the sampled batch. Pass the "
                f"corresponding constructor kwarg explicitly (or `None` to disable), or `strict=False` to drop "
                f"the check silently."
            )
        if value is None:
            return None
        return value.flatten(1) if value.ndim > 1 else value.unsqueeze(-1)

    def _has_next(self, tensordict: TensorDictBase) -> torch.Tensor:
        """``(B - 1,)`` booleans: row ``i + 1`` is the step after row ``i``."""
        n = tensordict.batch_size[0]
        valid = torch.ones(max(n - 1, 0), dtype=torch.bool, device=tensordict.device)
        traj = self._marker(tensordict, self.traj_key, "trajectory")
        if traj is not None:
            valid &= (traj[1:] == traj[:-1]).all(-1).to(valid.device)
        done = self._marker(tensordict, self.done_key, "done")
        if done is not None:
            valid &= ~done[:-1].bool().any(-1).to(valid.device)
        count = self._marker(tensordict, self.step_count_key, "step-count")
        if count is not None:
            valid &= (count[1:] == count[:-1] + 1).all(-1).to(valid.device)
        return valid

    def _check_fill(self, key: NestedKey, value: torch.Tensor) -> None:
        fill = self.fill_value
        if not value.is_floating_point() and not value.is_complex() and not math.isfinite(fill):
            raise TypeError(
                f"NextStateReconstructor: root key {key!r} has non-floating dtype {value.dtype}; pass an "
                f"explicit integer `fill_value` for this key ({fill} cannot be represented)."
            )

    # -- data ------------------------------------------------------------------------------------------
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims != 1:
            raise ValueError(
                f"NextStateReconstructor expects a flat (B,) sample, got batch_size={tuple(tensordict.batch_size)}. "
                f"Reshape it, or use a 1-d storage / sampler combination."
            )
        values = []
        for key in self.keys:
            value = tensordict.get(key, None)
            if value is None:
                raise KeyError(
                    f"NextStateReconstructor: key {key!r} not found in the sampled batch; available keys: "
                    f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
                )
            self._check_fill(key, value)
            values.append((key, value))
        valid = self._has_next(tensordict)
        for key, value in values:
            out = torch.full_like(value, self.fill_value)
            if value.shape[0] > 1:
                mask = valid.reshape(-1, *([1] * (value.ndim - 1))).to(value.device)
                out[:-1] = torch.where(mask, value[1:], out[:-1])
            tensordict.set(("next", *as_tuple(key)), out)
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    # in an environment the next observations are there: nothing to rebuild
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def __repr__(self) -> str:
        return (
            f"NextStateReconstructor(keys={self.keys}, traj_key={self.traj_key!r}, done_key={self.done_key!r}, "
            f"step_count_key={self.step_count_key!r}, fill_value={self.fill_value}, strict={self.strict})"
        )
