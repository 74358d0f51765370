"""``VecNorm``: normalizes entries with running (exponentially decayed) mean and variance statistics."""
from __future__ import annotations

import multiprocessing as mp
from collections import OrderedDict
from typing import Sequence

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl._utils._deprecation import warn_once
from torchrl.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._spec_edit import key_pairs
from torchrl.envs.transforms._compose import Compose
from torchrl.envs.transforms._observation_norm import ObservationNorm
from torchrl.envs.transforms._transform import Transform
from torchrl.envs.transforms._vecnorm_v2 import VecNormV2

__all__ = ["VecNorm", "VecNormV2"]  # VecNormV2 is importable from here, as in TorchRL

_SUFFIXES = ("_sum", "_ssq", "_count")
# VecNorm's arguments that VecNormV2 names differently or does not take: (what to do instead)
_NOT_IN_V2 = {
    "shared_td": "pass shared_data (statistics in shared memory) instead",
    "shapes": "VecNormV2 reads the shapes from the env's specs or the first data seen",
}
_DEFAULT_API_WARNING = (
    "VecNorm: without new_api, VecNorm builds the legacy VecNorm, which is to be replaced by VecNormV2 (as "
    "TorchRL announces); pass new_api=True to get a VecNormV2 (or import VecNormV2 from torchrl.envs), or "
    "new_api=False to keep the legacy class."
)
_LEGACY_WARNING = "VecNorm (legacy) is to be deprecated in favor of torchrl.envs.VecNormV2 (VecNorm(..., new_api=True))."


def _stat_key(key: NestedKey, suffix: str) -> NestedKey:
    parts = as_tuple(key)
    return from_tuple(parts[:-1] + (parts[-1] + suffix,))


def _zeros_stats(shape: torch.Size, dtype: torch.dtype, device) -> list[torch.Tensor]:
    dtype = dtype if dtype.is_floating_point else torch.get_default_dtype()
    return [torch.zeros(shape, dtype=dtype, device=device), torch.zeros(shape, dtype=dtype, device=device), torch.zeros((), dtype=dtype, device=device)]


class VecNorm(Transform):
    """Standardizes entries with running statistics: ``(x - mean) / std``, updated at every step.

    For each entry the transform keeps ``sum``, ``ssq`` (sum of squares) and ``count``, decayed by
    ``decay`` before each update: ``sum <- decay * sum + sum_b(x)``, ``count <- decay * count + N``
    (``N`` values summed over the leading batch dims). Then ``mean = sum / count``,
    ``std = max(sqrt(ssq / count - mean^2), eps)``. The statistics include the current step.

    ``VecNorm(..., new_api=True)`` returns a :class:`~torchrl.envs.transforms.VecNormV2` built with the other
    arguments (bias-corrected exponential moving averages, TorchRL's replacement of this class); without
    ``new_api`` a ``FutureWarning`` says so. ``new_api=False`` builds this class (still with a
    ``FutureWarning`` that it is to be deprecated). Each warning is given once per process.

    Statistics stop updating when the transform is frozen (:meth:`freeze`) or in ``eval()`` mode.
    Several envs (e.g. in worker processes) can share one set of statistics through ``shared_td``, a
    TensorDict in shared memory (see :meth:`build_td_for_shared_vecnorm`); updates then take ``lock``.
    The statistics travel in ``state_dict()`` (as extra state) and are restored in place.

    Args:
        in_keys: entries to normalize (default ``["observation", "reward"]``; absent ones are skipped at
            reset).
        out_keys: where the results go (default: ``in_keys``).
        shared_td: statistics shared with other instances (entries ``<key>_sum``, ``<key>_ssq``,
            ``<key>_count``); must be in shared memory or memory-mapped.
        lock: a multiprocessing lock guarding updates (default: a new one when ``shared_td`` is given).
        decay: decay of the running statistics (``1``: plain cumulative statistics).
        eps: lower bound of the running standard deviation.
        shapes: feature shape of each entry (default: read from the env's specs or the first data seen).
        new_api: ``True``: return a :class:`~torchrl.envs.transforms.VecNormV2` (``in_keys`` required;
            ``shared_td`` and ``shapes`` are not accepted); ``False`` or ``None`` (default, warns): this class.

    Raises:
        TypeError: ``new_api=True`` with ``shared_td`` or ``shapes`` (VecNormV2 does not take them).

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms.vecnorm import VecNorm
        >>> env = TransformedEnv(PendulumEnv(seed=0), VecNorm(in_keys=["observation"], decay=0.99))
        >>> data = env.rollout(50)
        >>> env.transform.loc["observation"].shape
        torch.Size([3])
        >>> frozen = env.transform.to_observation_norm()  # a static ObservationNorm with these stats
        >>> type(VecNorm(in_keys=["observation"], new_api=True)).__name__
        'VecNormV2'
    """

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __new__(cls, *args, **kwargs):
        if not kwargs.get("new_api"):
            return super().__new__(cls)
        kwargs = {k: v for k, v in kwargs.items() if k != "new_api"}
        for name, remedy in _NOT_IN_V2.items():
            if name in kwargs:
                raise TypeError(f"VecNorm(new_api=True) builds a VecNormV2, which takes no {name!r}: {remedy}.")
        return VecNormV2(*args, **kwargs)  # not a VecNorm: __init__ below is not called

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        shared_td: TensorDictBase | None = None,
        lock=None,
        decay: float = 0.9999,
        eps: float = 1e-4,
        shapes: Sequence[torch.Size] | None = None,
        new_api: bool | None = None,
    ) -> None:
        warn_once(_DEFAULT_API_WARNING if new_api is None else _LEGACY_WARNING, category=FutureWarning)
        super().__init__(in_keys=["observation", "reward"] if in_keys is None else in_keys, out_keys=out_keys)
        self._check_keys()
        if not 0.0 < decay <= 1.0:
            raise ValueError(f"VecNorm: decay must be in (0, 1], got {decay}.")
        if eps <= 0:
            raise ValueError(f"VecNorm: eps must be positive, got {eps}.")
        if shapes is not None and len(shapes) != len(self.in_keys):
            raise ValueError(f"VecNorm: {len(shapes)} shapes given for {len(self.in_keys)} in_keys {self.in_keys}.")
        if shared_td is not None and not (shared_td.is_shared() or shared_td.is_memmap()):
            raise RuntimeError(
                "VecNorm: shared_td must be in shared memory or memory-mapped (call shared_td.share_memory_(), or "
                "build it with VecNorm.build_td_for_shared_vecnorm)."
            )
        if lock is None and shared_td is not None:
            lock = mp.Lock()
        self.lock = lock
        self.decay = float(decay)
        self.eps = float(eps)
        self.shapes = None if shapes is None else [torch.Size(s) for s in shapes]
        self.frozen = False
        self._td: TensorDictBase | None = shared_td
        self._stats = None  # {in_key: (sum, ssq, count)}: views of self._td, rebuilt on demand

    # -- statistics storage ---------------------------------------------------------------------------
    def _stats_map(self) -> dict:
        stats = self._stats
        if stats is None:
            stats = {}
            td = self._td
            if td is not None:
                for key in self.in_keys:
                    found = [td.get(_stat_key(key, s), None) for s in _SUFFIXES]
                    if all(t is not None for t in found):
                        stats[key] = tuple(found)
            self._stats = stats
        return stats

    def _ensure_stats(self, key: NestedKey, shape: torch.Size, dtype: torch.dtype, device) -> tuple:
        stats = self._stats_map()
        entry = stats.get(key)
        if entry is None:
            if self._td is None:
                self._td = TensorDict(batch_size=[])
            tensors = _zeros_stats(shape, dtype, device)
            for suffix, tensor in zip(_SUFFIXES, tensors):
                self._td.set(_stat_key(key, suffix), tensor)
            # read back: a shared/memmapped td stores its own copies
            entry = stats[key] = tuple(self._td.get(_stat_key(key, s)) for s in _SUFFIXES)
        return entry

    def _shape_for(self, key: NestedKey, value: torch.Tensor, batch_dims: int) -> torch.Size:
        if self.shapes is not None:
            return self.shapes[self.in_keys.index(key)]
        return value.shape[batch_dims:]

    # -- data ------------------------------------------------------------------------------------------
    def _normalize(self, key: NestedKey, value: torch.Tensor, batch_dims: int) -> torch.Tensor:
        stats = self._stats_map().get(key)
        if stats is None:
            stats = self._ensure_stats(key, self._shape_for(key, value, batch_dims), value.dtype, value.device)
        total, ssq, count = stats
        if not self.frozen and self.training:
            lead = value.ndim - total.ndim
            if lead < 0 or value.shape[lead:] != total.shape:
                raise RuntimeError(
                    f"VecNorm: entry {key!r} has shape {tuple(value.shape)}, which does not end with the feature "
                    f"shape {tuple(total.shape)} of its statistics."
                )
            x = value if value.dtype == total.dtype else value.to(total.dtype)
            square = x * x
            if lead:
                dims = tuple(range(lead))
                x, square = x.sum(dims), square.sum(dims)
            decay = self.decay
            # stat <- decay * stat + new, one fused kernel each, in place (shared statistics see it)
            torch.add(x, total, alpha=decay, out=total)
            torch.add(square, ssq, alpha=decay, out=ssq)
            count.mul_(decay).add_(value.shape[:lead].numel())
        mean, std = self._mean_std(total, ssq, count)
        out = (value - mean) / std
        return out if out.dtype == value.dtype else out.to(value.dtype)

    def _mean_std(self, total: torch.Tensor, ssq: torch.Tensor, count: torch.Tensor):
        count = count.clamp_min(torch.finfo(count.dtype).tiny)
        mean = total / count
        # std = max(sqrt(max(ssq / count - mean^2, 0)), eps) = sqrt(max(ssq / count - mean^2, eps^2))
        var = torch.addcmul(ssq / count, mean, mean, value=-1)
        return mean, var.clamp_min_(self.eps * self.eps).sqrt_()

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        batch_dims = next_tensordict.batch_dims
        strict = not (tolerant or self._missing_tolerance)
        lock = self.lock
        if lock is not None:
            lock.acquire()
        try:
            for in_key, out_key in key_pairs(self):
                value = fast_get(next_tensordict, in_key)
                if value is None:
                    if strict:
                        raise KeyError(
                            f"VecNorm: key {in_key!r} not found; available keys: "
                            f"{sorted(map(str, next_tensordict.keys(include_nested=True, leaves_only=True)))}."
                        )
                    continue
                fast_set(next_tensordict, out_key, self._normalize(in_key, value, batch_dims))
        finally:
            if lock is not None:
                lock.release()
        return next_tensordict

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Normalizes ``next_tensordict`` (updating the statistics unless frozen)."""
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)

    def denorm(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Maps normalized ``out_keys`` back to raw values at ``in_keys`` (statistics unchanged)."""
        stats = self._stats_map()
        for in_key, out_key in key_pairs(self):
            value = tensordict.get(out_key, None)
            if value is None or in_key not in stats:
                continue
            mean, std = self._mean_std(*stats[in_key])
            tensordict.set(in_key, (value * std + mean).to(value.dtype))
        return tensordict

    # -- freezing, copies, export ----------------------------------------------------------------------
    def freeze(self) -> "VecNorm":
        """Stops updating the statistics (normalization goes on); returns ``self``."""
        self.frozen = True
        return self

    def unfreeze(self) -> "VecNorm":
        """Resumes updating the statistics; returns ``self``."""
        self.frozen = False
        return self

    def frozen_copy(self) -> "VecNorm":
        """A frozen copy reading the *same* statistics: it follows this transform's updates, never updates.

        Raises:
            RuntimeError: no statistics exist yet (use the transform in an env or on data first).
        """
        if self._td is None:
            raise RuntimeError(
                "VecNorm.frozen_copy: the statistics are not initialized yet; put the transform in an env (or run "
                "it on data) first."
            )
        copy = self.clone()
        copy._td = self._td
        copy._stats = None
        return copy.freeze()

    def clone(self) -> "VecNorm":
        lock = self.lock  # shared with the copy, not deep-copied
        self.lock = None
        try:
            out = super().clone()
        finally:
            self.lock = lock
        out.lock = lock
        out._stats = None
        return out

    def to_observation_norm(self) -> Compose | ObservationNorm:
        """A static :class:`ObservationNorm` (or a ``Compose`` of one per key) with the current statistics."""
        stats = self._stats_map()
        norms = []
        for in_key, out_key in key_pairs(self):
            if in_key not in stats:
                raise RuntimeError(f"VecNorm.to_observation_norm: no statistics for {in_key!r} yet.")
            mean, std = self._mean_std(*stats[in_key])
            norms.append(
                ObservationNorm(loc=mean.clone(), scale=std.clone(), in_keys=[in_key], out_keys=[out_key], standard_normal=True)
            )
        return norms[0] if len(norms) == 1 else Compose(*norms)

    @property
    def loc(self) -> TensorDictBase:
        """The running means, as a TensorDict keyed by ``in_keys``."""
        return self._export(0)

    @property
    def scale(self) -> TensorDictBase:
        """The running standard deviations, as a TensorDict keyed by ``in_keys``."""
        return self._export(1)

    def _export(self, which: int) -> TensorDictBase:
        out = TensorDict(batch_size=[])
        for key, stats in self._stats_map().items():
            out.set(key, self._mean_std(*stats)[which])
        return out

    @property
    def standard_normal(self) -> bool:
        """Always True: the statistics standardize (``(x - loc) / scale``)."""
        return True

    # -- state -----------------------------------------------------------------------------------------
    def _apply(self, fn, *args, **kwargs):
        if self._td is not None:  # (a no-op move keeps statistics shared with other instances shared)
            self._td = self._td.apply(fn)
            self._stats = None
        return super()._apply(fn, *args, **kwargs)

    def get_extra_state(self) -> OrderedDict:
        """As TorchRL: ``{"<key>_sum": ..., "<key>_ssq": ..., "<key>_count": ...}`` (nested keys joined by
        ``"."``; counts of shape ``(1,)``)."""
        out = OrderedDict()
        if self._td is not None:
            for key, value in self._td.items(include_nested=True, leaves_only=True):
                name = key if isinstance(key, str) else ".".join(key)
                out[name] = value.reshape(1).clone() if name.endswith("_count") and value.ndim == 0 else value.clone()
        return out

    def set_extra_state(self, state) -> None:
        """Loads statistics: copied in place, or adopted by reference when every tensor is in shared memory
        (e.g. the shared state of an :class:`~torchrl.envs.EnvCreator`), so that updates are seen by every holder."""
        if "td" in state or "frozen" in state:  # the format of earlier versions of this class
            td = state.get("td")
            self.frozen = bool(state.get("frozen", self.frozen))
        else:
            td = TensorDict(
                {tuple(k.split(".")): v.reshape(()) if k.endswith("_count") and v.shape == (1,) else v for k, v in state.items()},
                batch_size=[],
            ) if len(state) else None
        if td is None:
            return
        shared = td.is_shared() or all(v.is_shared() for v in td.values(include_nested=True, leaves_only=True))
        if self._td is None:
            self._td = td if shared else td.clone()
        elif shared and not self._td.is_locked:  # adopt the shared tensors (reshape above keeps their storage)
            for key, value in td.items(include_nested=True, leaves_only=True):
                self._td.set(key, value)
        else:
            self._td.update_(td)
        self._stats = None

    def __getstate__(self):
        state = super().__getstate__()
        state["_stats"] = None
        return state

    @staticmethod
    def build_td_for_shared_vecnorm(env, keys: Sequence[str] | None = None, memmap: bool = False) -> TensorDictBase:
        """Zero statistics for ``keys`` of ``env`` (observations or rewards), in shared memory.

        Pass the result as ``shared_td`` to every ``VecNorm`` that should share statistics (e.g. one per
        worker process).

        Args:
            env: the (base) env whose specs give the entries' shapes.
            keys: entries to normalize (default ``["observation", "reward"]``).
            memmap: memory-map the statistics instead of placing them in shared memory.

        Raises:
            KeyError: a key is neither an observation nor a reward of ``env``.
        """
        keys = ["observation", "reward"] if keys is None else list(keys)
        n = len(env.batch_size)
        td = TensorDict(batch_size=[])
        for key in keys:
            leaf = env.full_observation_spec.get(key, None)
            if leaf is None:
                leaf = env.full_reward_spec.get(key, None)
            if leaf is None:
                raise KeyError(
                    f"VecNorm.build_td_for_shared_vecnorm: {key!r} is neither an observation nor a reward of "
                    f"{type(env).__name__}; observations: {list(env.full_observation_spec.keys(True, True))}, "
                    f"rewards: {list(env.full_reward_spec.keys(True, True))}."
                )
            for suffix, tensor in zip(_SUFFIXES, _zeros_stats(leaf.shape[n:], leaf.dtype, leaf.device)):
                td.set(_stat_key(key, suffix), tensor)
        return td.memmap_() if memmap else td.share_memory_()

    # -- specs -----------------------------------------------------------------------------------------
    def _spec_entries(self, spec: Composite, batch_shape: torch.Size) -> None:
        for i, (in_key, out_key) in enumerate(key_pairs(self)):
            if in_key not in spec:
                continue
            leaf: TensorSpec = spec[in_key]
            shape = leaf.shape[len(batch_shape) :] if self.shapes is None else self.shapes[i]
            self._ensure_stats(in_key, shape, leaf.dtype, leaf.device)
            dtype = leaf.dtype if leaf.dtype.is_floating_point else torch.get_default_dtype()
            spec[out_key] = Unbounded(shape=leaf.shape, device=leaf.device, dtype=dtype)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        self._spec_entries(observation_spec, observation_spec.shape)
        return observation_spec

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        self._spec_entries(reward_spec, reward_spec.shape)
        return reward_spec

    def __repr__(self) -> str:
        return f"VecNorm(keys={self.in_keys}, decay={self.decay}, eps={self.eps}, frozen={self.frozen})"
