"""``VecNormV2``: standardizes entries with bias-corrected exponential moving averages of their moments."""
from __future__ import annotations

import multiprocessing as mp
import warnings
from collections import OrderedDict
from collections.abc import Sequence

import torch
from tensordict import TensorDict, TensorDictBase, unravel_key
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl.envs._done import as_tuple
from torchrl.envs.transforms._compose import Compose
from torchrl.envs.transforms._observation_norm import ObservationNorm
from torchrl.envs.transforms._running_stats import (
    ema_loc_scale,
    ema_normalize,
    ema_update_,
)
from torchrl.envs.transforms._transform import Transform

__all__ = ["VecNormV2"]

# separator of the flattened extra-state keys, as TorchRL: "loc.-|-.observation", "count.-|-.agents.-|-.obs"
_SEP = ".-|-."
_STATS = ("loc", "var", "count")
_PREFIX = "_vecnorm"


def _float_dtype(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype.is_floating_point else torch.get_default_dtype()


def _available(td: TensorDictBase) -> list[str]:
    return sorted(map(str, td.keys(include_nested=True, leaves_only=True)))


class VecNormV2(Transform):
    """Standardizes entries, ``(x - mean) / std``, with running statistics updated at every step.

    Per entry the transform keeps ``loc`` (first moment), ``var`` (second moment, ``E[x^2]``) and ``count``.
    Each update with ``n`` samples does ``count += n`` and moves both moments towards the samples'
    averages by ``w = 1 - decay ** n`` (``w = n / count`` when ``decay == 1``: the plain mean of every
    sample seen). Normalization uses the bias-corrected ``mean = loc / c`` and
    ``std = max(sqrt((var - loc^2) / c), eps)`` with ``c = 1 - decay ** count`` (``c = 1`` when
    ``decay == 1``), so the statistics include the current sample. The formulas live in
    :mod:`torchrl.envs.transforms._running_stats`.

    Without ``reduce_batch_dims`` each batch element (e.g. each env of a batched env) has its own
    statistics and a step counts once; with it, the batch is averaged first and counts as its number of
    elements. Observations are normalized at reset and after each step, rewards after each step.

    Stateful (default): the statistics live in the transform, travel in ``state_dict()`` (extra state with
    TorchRL's keys ``"loc.-|-.<key>"``, ``"var.-|-.<key>"``, ``"count.-|-.<key>"``) and stop updating when
    :meth:`freeze` is called. They are created when the transform is appended to an env (from its specs,
    so an unknown key fails there) or on the first data seen. To share them between processes (e.g. the
    workers of a :class:`~torchrl.envs.ParallelEnv`), pass the same ``shared_data`` (a TensorDict in shared
    memory, e.g. ``transform.state_dict()``'s statistics after ``share_memory_()``, or another instance's
    :meth:`get_extra_state` made shared) to every instance; loading a state dict whose tensors are in
    shared memory also binds them rather than copying.

    Stateless (``stateful=False``): the statistics travel with the data, as observations
    ``("_vecnorm_loc", key)``, ``("_vecnorm_var", key)`` and ``("_vecnorm_count", key)``: each step reads the
    previous ones from the step's input and writes the updated ones to its output; a reset starts them
    from zero. ``state_dict()`` is then empty.

    Args:
        in_keys: entries to normalize (observations and/or rewards).
        out_keys: where the results go (default: ``in_keys``).

    Keyword Args:
        lock: a multiprocessing lock taken around updates (default: a new one when ``shared_data`` is given).
        stateful: keep the statistics in the transform (see above).
        decay: decay per sample of the moving averages, in ``[0, 1]``; ``1`` weighs every sample equally.
        eps: lower bound of the standard deviation.
        shared_data: statistics to use (by reference when in shared memory): a TensorDict with entries
            ``("loc", key)``, ``("var", key)``, ``("count", key)``, or a flat mapping in the extra-state format.
        reduce_batch_dims: average the batch before updating (one set of statistics for all batch
            elements); stateful mode only.

    Raises:
        RuntimeError: ``reduce_batch_dims=True`` with ``stateful=False``.
        ValueError: ``decay`` outside ``[0, 1]``, ``eps`` not positive, or ``in_keys``/``out_keys`` lengths differ.

    Examples:
        >>> import torch
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms import VecNormV2
        >>> env = TransformedEnv(PendulumEnv(seed=0), VecNormV2(in_keys=["observation", "reward"], decay=1.0))
        >>> data = env.rollout(50)
        >>> int(env.transform.state_dict()["_extra_state"]["count.-|-.observation"])  # 1 reset + 50 steps
        51
        >>> env.transform.loc["observation"].shape, env.transform.scale["observation"].shape
        (torch.Size([3]), torch.Size([3]))
        >>> frozen = env.transform.frozen_copy()  # reads the same statistics, never updates them
    """

    _out_keys_default_to_in_keys = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        *,
        lock: mp.Lock = None,
        stateful: bool = True,
        decay: float = 0.9999,
        eps: float = 0.0001,
        shared_data: TensorDictBase | None = None,
        reduce_batch_dims: bool = False,
    ) -> None:
        self.__dict__["stateful"] = bool(stateful)  # read by the in_keys property during Transform.__init__
        super().__init__(in_keys=in_keys, out_keys=list(in_keys) if out_keys is None else out_keys)
        if len(self._in_keys) != len(self.out_keys):
            raise ValueError(f"VecNormV2: in_keys {self._in_keys} and out_keys {self.out_keys} differ in length.")
        if reduce_batch_dims and not stateful:
            raise RuntimeError("VecNormV2: reduce_batch_dims=True and stateful=False are not supported together.")
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"VecNormV2: decay must be in [0, 1], got {decay}.")
        if eps <= 0:
            raise ValueError(f"VecNormV2: eps must be positive, got {eps}.")
        if shared_data is not None and not stateful:
            raise ValueError("VecNormV2: shared_data needs stateful=True (stateless statistics travel with the data).")
        if lock is None and shared_data is not None:
            lock = mp.Lock()
        self.lock = lock
        self.decay = float(decay)
        self.eps = float(eps)
        self.reduce_batch_dims = bool(reduce_batch_dims)
        self.frozen = False
        self._cast_int_to_float = True
        self._pairs = tuple(zip(self._in_keys, self.out_keys))
        # stateful: {in_key: [loc, var, count]}; stateless: {in_key: (stats shape, dtype, device)}
        self._stats: dict = {}
        if self.stateful:
            self.register_buffer("initialized", torch.tensor(False))
            if shared_data is not None:
                self._load_stats(shared_data)

    # -- keys --------------------------------------------------------------------------------------------
    @property
    def in_keys(self) -> list[NestedKey]:
        """The normalized entries; stateless, followed by the statistics' entries read from the input."""
        keys = self._in_keys
        if self.stateful:
            return keys
        return keys + [f"{self.prefix}_count", f"{self.prefix}_loc", f"{self.prefix}_var"]

    @in_keys.setter
    def in_keys(self, value) -> None:
        Transform.in_keys.fset(self, value)

    @property
    def prefix(self) -> str:
        """Prefix of the statistics' entries in stateless mode (``"_vecnorm"``)."""
        return _PREFIX

    def _stat_key(self, stat: str, key: NestedKey) -> tuple:
        return (f"{self.prefix}_{stat}",) + as_tuple(key)

    # -- stateful statistics ------------------------------------------------------------------------------
    def _new_stats(self, key: NestedKey, shape: torch.Size, dtype: torch.dtype, device) -> list:
        dtype = _float_dtype(dtype)
        stats = [
            torch.zeros(shape, dtype=dtype, device=device),
            torch.zeros(shape, dtype=dtype, device=device),
            torch.zeros((), dtype=torch.int64, device=device),
        ]
        self._stats[key] = stats
        self.initialized.fill_(True)
        return stats

    def _load_stats(self, data) -> None:
        """Takes statistics from ``data`` (nested TensorDict or flat extra state): bound when shared, else copied."""
        if isinstance(data, TensorDictBase):
            flat = {(stat,) + as_tuple(key): data.get((stat,) + as_tuple(key)) for stat in _STATS for key in self._in_keys
                    if data.get((stat,) + as_tuple(key), None) is not None}
        else:
            flat = {tuple(name.split(_SEP)): value for name, value in data.items() if value is not None}
        for parts, value in flat.items():
            stat, key = parts[0], unravel_key(parts[1:] if len(parts) > 2 else parts[1])
            if stat not in _STATS:
                raise KeyError(f"VecNormV2: unknown statistic {stat!r} in the state; expected one of {_STATS}.")
            index = _STATS.index(stat)
            stats = self._stats.get(key)
            if stats is None:
                shape = value.shape if stat != "count" else None
                if shape is None:
                    continue  # created with its loc entry
                stats = self._new_stats(key, shape, value.dtype, value.device)
            current = stats[index]
            shared = value.is_shared() or (isinstance(data, TensorDictBase) and (data.is_shared() or data.is_memmap()))
            if stat == "count":
                value = value.reshape(())
            if current.shape != value.shape:
                raise RuntimeError(
                    f"VecNormV2: the state's {stat!r} of {key!r} has shape {tuple(value.shape)}, the transform's has "
                    f"{tuple(current.shape)}."
                )
            if shared and value.dtype == current.dtype and value.device == current.device:
                stats[index] = value  # by reference: updates are seen by every holder
            else:
                current.copy_(value)
        if flat:
            self.initialized.fill_(True)

    def _stats_for(self, key: NestedKey, value: torch.Tensor, batch_dims: int) -> list:
        stats = self._stats.get(key)
        if stats is None:
            shape = value.shape[batch_dims:] if self.reduce_batch_dims else value.shape
            stats = self._new_stats(key, shape, value.dtype, value.device)
        return stats

    # -- data ---------------------------------------------------------------------------------------------
    def _normalize(self, key: NestedKey, value: torch.Tensor, stats: list, batch_dims: int) -> torch.Tensor:
        loc, var, count = stats
        x = value if value.dtype == loc.dtype else value.to(loc.dtype)
        if not self.frozen:
            if self.reduce_batch_dims:
                lead = x.ndim - loc.ndim
                if lead < 0 or x.shape[lead:] != loc.shape:
                    raise RuntimeError(
                        f"VecNormV2: entry {key!r} has shape {tuple(value.shape)}, which does not end with the "
                        f"statistics' shape {tuple(loc.shape)}."
                    )
                dims = tuple(range(lead))
                n = x.shape[:lead].numel()
                ema_update_(loc, var, count, x.mean(dims), (x * x).mean(dims), n, self.decay)
            else:
                if x.shape != loc.shape:
                    raise RuntimeError(
                        f"VecNormV2: entry {key!r} has shape {tuple(value.shape)}, but its statistics have shape "
                        f"{tuple(loc.shape)} (one per batch element; use reduce_batch_dims=True to share them)."
                    )
                ema_update_(loc, var, count, x, x * x, 1, self.decay)
        return ema_normalize(x, loc, var, count, self.decay, self.eps, not self.frozen)

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        batch_dims = next_tensordict.batch_dims
        lock = self.lock
        if lock is not None:
            lock.acquire()
        try:
            for in_key, out_key in self._pairs:
                value = fast_get(next_tensordict, in_key)
                if value is None:
                    if strict:
                        raise KeyError(f"VecNormV2: key {in_key!r} not found; available keys: {_available(next_tensordict)}.")
                    continue
                stats = self._stats.get(in_key) or self._stats_for(in_key, value, batch_dims)
                fast_set(next_tensordict, out_key, self._normalize(in_key, value, stats, batch_dims))
        finally:
            if lock is not None:
                lock.release()
        return next_tensordict

    def _stateless_call(self, source: TensorDictBase | None, target: TensorDictBase, reset: bool) -> TensorDictBase:
        """Reads the previous statistics from ``source``, writes updated ones and the results to ``target``."""
        strict = not (reset or self._missing_tolerance)
        decay = self.decay
        for in_key, out_key in self._pairs:
            value = fast_get(target, in_key)
            layout = self._stats.get(in_key)
            if value is None:
                if strict:
                    raise KeyError(f"VecNormV2: key {in_key!r} not found; available keys: {_available(target)}.")
                if reset and layout is not None:  # e.g. a reward at reset: statistics start at zero
                    shape, dtype, device = layout
                    for stat, d in (("loc", dtype), ("var", dtype), ("count", torch.int64)):
                        target.set(self._stat_key(stat, in_key), torch.zeros(shape, dtype=d, device=device))
                continue
            x = value if value.is_floating_point() else value.to(torch.get_default_dtype())
            prev = None if source is None else [source.get(self._stat_key(s, in_key), None) for s in _STATS]
            if prev is None or any(p is None for p in prev):
                loc, var = torch.zeros_like(x), torch.zeros_like(x)
                count = torch.zeros_like(x, dtype=torch.int64)  # one count per element, as TorchRL
            else:
                loc, var, count = prev[0].to(x.dtype), prev[1].to(x.dtype), prev[2]
            if not self.frozen:
                count = count + 1
                weight = 1.0 / count.to(x.dtype) if decay == 1.0 else 1.0 - decay
                loc = torch.lerp(loc, x, weight)
                var = torch.lerp(var, x * x, weight)
            mean, spread = loc, torch.addcmul(var, loc, loc, value=-1)
            if decay != 1.0:
                correction = (1.0 - torch.pow(decay, count.to(x.dtype))).clamp_min_(torch.finfo(x.dtype).tiny)
                mean, spread = mean / correction, spread / correction
            target.set(out_key, (x - mean) / spread.clamp_min_(self.eps * self.eps).sqrt_())
            target.set(self._stat_key("loc", in_key), loc)
            target.set(self._stat_key("var", in_key), var)
            target.set(self._stat_key("count", in_key), count)
        return target

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Normalizes ``next_tensordict`` in place (updating the statistics unless frozen)."""
        if not self.stateful:
            return self._stateless_call(next_tensordict, next_tensordict, reset=False)
        return self._call(next_tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not self.stateful:
            return self._stateless_call(tensordict, next_tensordict, reset=False)
        return self._call(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if not self.stateful:
            return self._stateless_call(None, tensordict_reset, reset=True)
        return self._call(tensordict_reset, tolerant=True)  # rewards are absent after a reset

    # -- freezing, copies, export -------------------------------------------------------------------------
    def freeze(self) -> VecNormV2:
        """Stops updating the statistics (normalization goes on); returns ``self``."""
        self.frozen = True
        return self

    def unfreeze(self) -> VecNormV2:
        """Resumes updating the statistics; returns ``self``."""
        self.frozen = False
        return self

    def frozen_copy(self):
        """A frozen copy reading the *same* statistics tensors: it sees this transform's updates, never updates.

        Raises:
            RuntimeError: stateless, or no statistics exist yet (append the transform to an env first).
        """
        if not self.stateful:
            raise RuntimeError("VecNormV2.frozen_copy: a stateless VecNormV2 has no statistics to share.")
        if not self._stats:
            raise RuntimeError(
                "VecNormV2.frozen_copy: the statistics are not initialized yet; append the transform to an env (or "
                "run it on data) first."
            )
        copy = self.clone()
        copy._stats = {key: list(stats) for key, stats in self._stats.items()}  # the same tensors
        return copy.freeze()

    def clone(self) -> VecNormV2:
        """A detached deep copy (own statistics); the lock is shared with the copy."""
        lock = self.lock
        self.lock = None
        try:
            out = super().clone()
        finally:
            self.lock = lock
        out.lock = lock
        return out

    def _loc_scale(self, key: NestedKey) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.stateful:
            raise RuntimeError("VecNormV2: loc and scale cannot be computed by a stateless VecNormV2 (they travel with the data).")
        stats = self._stats.get(key)
        if stats is None:
            raise RuntimeError(f"VecNormV2: no statistics for {key!r} yet; append the transform to an env first.")
        return ema_loc_scale(*stats, self.decay, self.eps)

    @property
    def loc(self) -> TensorDictBase:
        """The bias-corrected running means, as a TensorDict keyed by ``in_keys``."""
        return self._export(0)

    @property
    def scale(self) -> TensorDictBase:
        """The running standard deviations (floored at ``eps``), as a TensorDict keyed by ``in_keys``."""
        return self._export(1)

    def _export(self, which: int) -> TensorDictBase:
        if not self.stateful:
            self._loc_scale(None)
        out = TensorDict(batch_size=[])
        for key in self._stats:
            out.set(key, self._loc_scale(key)[which])
        return out

    @property
    def standard_normal(self) -> bool:
        """Always True: the statistics standardize (``(x - loc) / scale``)."""
        return True

    def denorm(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Maps the normalized ``out_keys`` back to raw values at ``in_keys`` (statistics unchanged)."""
        for in_key, out_key in self._pairs:
            value = tensordict.get(out_key, None)
            if value is None:
                continue
            mean, std = self._loc_scale(in_key)
            tensordict.set(in_key, value * std + mean)
        return tensordict

    def to_observation_norm(self) -> Compose | ObservationNorm:
        """A static :class:`ObservationNorm` (or a ``Compose`` of one per key) with the current statistics."""
        norms = []
        for in_key, out_key in self._pairs:
            mean, std = self._loc_scale(in_key)
            norms.append(ObservationNorm(loc=mean.clone(), scale=std.clone(), in_keys=[in_key], out_keys=[out_key],
                                         standard_normal=True))
        return norms[0] if len(norms) == 1 else Compose(*norms)

    # -- state ----------------------------------------------------------------------------------------------
    def get_extra_state(self) -> OrderedDict:
        """TorchRL's layout: ``{"loc.-|-.<key>": ..., "var.-|-.<key>": ..., "count.-|-.<key>": ...}`` (the live
        tensors, as a state dict holds a module's buffers; empty when stateless)."""
        out = OrderedDict()
        if not self.stateful:
            return out
        if not self._stats:
            warnings.warn(
                "VecNormV2: state_dict() of a VecNormV2 with no statistics yet (append it to an env or run it on data "
                "first); the state holds no statistics.",
                stacklevel=3,
            )
        for index, stat in enumerate(_STATS):
            for key, stats in self._stats.items():
                out[_SEP.join((stat,) + as_tuple(key))] = stats[index].detach()
        return out

    def set_extra_state(self, state: OrderedDict) -> None:
        """Loads statistics in place (tensors in shared memory are bound, not copied); ignored when stateless."""
        if self.stateful and state:
            self._load_stats(state)

    def _apply(self, fn, recurse: bool = True):
        super()._apply(fn, recurse)
        if self.stateful:
            self._stats = {key: [fn(t) for t in stats] for key, stats in self._stats.items()}
        return self

    # -- specs ----------------------------------------------------------------------------------------------
    def set_container(self, container) -> None:
        """Attaches the transform; with a parent env, creates the statistics from its specs (unknown keys fail here)."""
        super().set_container(container)
        # a Compose attaches its children before listing them: their statistics come with the specs
        if self.stateful and not self._stats and not isinstance(container, Transform) and self.parent is not None:
            self._init_from_specs(self.parent.output_spec)

    def _init_from_specs(self, output_spec: Composite) -> None:
        obs, rew = output_spec["full_observation_spec"], output_spec["full_reward_spec"]
        for key in self._in_keys:
            leaf = obs.get(key, None) if key in obs else rew.get(key, None) if key in rew else None
            if leaf is None or isinstance(leaf, Composite):
                raise KeyError(
                    f"VecNormV2: in_key {key!r} is neither an observation nor a reward of the env; observations: "
                    f"{', '.join(map(str, _spec_keys(obs)))}, rewards: {', '.join(map(str, _spec_keys(rew)))}."
                )
            batch = len(obs.shape)
            if self.stateful:
                if key not in self._stats:
                    shape = leaf.shape[batch:] if self.reduce_batch_dims else leaf.shape
                    self._new_stats(key, shape, leaf.dtype, leaf.device)
            else:
                self._stats[key] = (leaf.shape, _float_dtype(leaf.dtype), leaf.device)

    def _normalized_leaf(self, spec: Composite, key: NestedKey, out_key: NestedKey) -> None:
        leaf: TensorSpec = spec[key]
        spec[out_key] = Unbounded(shape=leaf.shape, device=leaf.device, dtype=_float_dtype(leaf.dtype))

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._init_from_specs(output_spec)
        observation_spec = self.transform_observation_spec(output_spec["full_observation_spec"])
        output_spec["full_reward_spec"] = self.transform_reward_spec(output_spec["full_reward_spec"], observation_spec)
        output_spec["full_observation_spec"] = observation_spec
        return output_spec

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        for in_key, out_key in self._pairs:
            if in_key in observation_spec:
                self._normalized_leaf(observation_spec, in_key, out_key)
                self._stateless_specs(observation_spec, in_key)
        return observation_spec

    def transform_reward_spec(self, reward_spec: Composite, observation_spec=None) -> Composite:
        for in_key, out_key in self._pairs:
            if in_key in reward_spec:
                self._normalized_leaf(reward_spec, in_key, out_key)
                if observation_spec is not None:  # stateless: the reward's statistics are observations
                    self._stateless_specs(observation_spec, in_key, reward_spec[in_key])
        return reward_spec

    def _stateless_specs(self, observation_spec: Composite, key: NestedKey, leaf: TensorSpec | None = None) -> None:
        if self.stateful:
            return
        leaf = observation_spec[key] if leaf is None else leaf
        dtype, device = _float_dtype(leaf.dtype), leaf.device
        observation_spec[self._stat_key("loc", key)] = Unbounded(shape=leaf.shape, dtype=dtype, device=device)
        observation_spec[self._stat_key("var", key)] = Unbounded(shape=leaf.shape, dtype=dtype, device=device)
        observation_spec[self._stat_key("count", key)] = Unbounded(shape=leaf.shape, dtype=torch.int64, device=device)

    def __repr__(self) -> str:
        return (
            f"VecNormV2(keys={self.in_keys}, decay={self.decay}, eps={self.eps}, stateful={self.stateful}, "
            f"frozen={self.frozen})"
        )


def _spec_keys(spec: Composite) -> list[str]:
    return sorted(map(str, spec.keys(include_nested=True, leaves_only=True)))
