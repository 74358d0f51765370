"""``ValueEstimatorBase``: reads rewards, done flags and values from a TensorDict, runs the value network
where values are missing, and hands tensors to the pure functions of :mod:`.functional`.

Value-network evaluation options shared by every estimator:

* **chunked forwards** (``value_chunk_size`` / ``num_chunks`` along ``value_chunk_dim``): the network is
  run on pieces of the batch and the outputs concatenated, bounding peak memory;
* **compact shifted evaluation** (``shifted=True``): one network call on the current observations plus
  the few next observations that differ from the following step's observation (the last step of the
  batch and the steps where an episode ended) instead of two calls on ``[obs_t]`` and ``[obs_{t+1}]``;
* **vmapped pair** (``params`` and ``target_params`` given): current and next values in one
  :func:`torch.vmap` call over the two parameter sets (``deactivate_vmap=True``: two calls).
"""
from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, unravel_key
from tensordict.nn import TensorDictModuleBase, skip_existing as skip_existing_mode

from torchrl._utils._deprecation import warn_once
from torchrl._fast import entries, fast_get
from torchrl._fast.calls import plain_network
from torchrl.objectives.utils import _has_random_module

__all__ = ["ValueEstimatorBase"]


class _MissingEntryError(KeyError, AttributeError):
    """A missing input entry: a ``KeyError`` naming the key, also an ``AttributeError`` as TorchRL raises there."""


class _MissingValueError(ValueError, KeyError):
    """A value entry missing while there is no value network to compute it (TorchRL raises ``ValueError``)."""


def _trailing(t: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """Adds the trailing singleton dim a ``[*B]`` reward/done lacks against a ``[*B, 1]`` value."""
    return t.unsqueeze(-1) if t.ndim == like.ndim - 1 and like.shape[-1] == 1 else t


class ValueEstimatorBase(TensorDictModuleBase):
    """Base class of the value estimators (TD(0), TD(1), TD(:math:`\\lambda`), GAE, V-trace).

    ``estimator(tensordict)`` computes the values it needs with ``value_network`` (``state_value`` at the
    current and at the next step), then writes ``"advantage"`` and ``"value_target"`` (and the values) into
    ``tensordict``, which must have shape ``[*B, T]``. :meth:`value_estimate` returns the value target only.

    Keyword Args:
        value_network: computes ``tensor_keys.value`` from observations. ``None``: the values must be in
            the tensordict already.
        shifted: evaluate current and next values in one compact network call (see the module doc).
            Valid for time-contiguous data and identical current/next parameters.
        differentiable: if ``False`` (default), the computation runs under ``torch.no_grad()``.
        skip_existing: if ``True``, values already in the tensordict are reused; ``None`` follows
            ``tensordict.nn.skip_existing()``.
        advantage_key, value_target_key, value_key: deprecated, use :meth:`set_keys`.
        device: device of the coefficient buffers (``gamma``, ...).
        deactivate_vmap: replace the vmapped evaluation of two parameter sets by two calls.
        value_chunk_size: run the value network on chunks of this many elements along ``value_chunk_dim``.
        num_chunks: run it on this many chunks (exclusive with ``value_chunk_size``); ``num_chunk`` is an
            alias.
        value_chunk_dim: the batch dimension chunked. Defaults to 0.
        shifted_budget: TorchRL's number of extra time slots for ``shifted``; here the compact evaluation
            is exact for any number of truncations, so this only has to be a positive integer.
        group_key: for estimators that standardise advantages, an integer entry (one id per batch element,
            e.g. a task id) within whose groups standardisation is done.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.objectives.value import TD0Estimator
        >>> critic = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
        >>> est = TD0Estimator(gamma=0.9, value_network=critic)
        >>> td = TensorDict({"observation": torch.randn(5, 3), "next": {"observation": torch.randn(5, 3),
        ...     "reward": torch.ones(5, 1), "done": torch.zeros(5, 1, dtype=torch.bool)}}, [5])
        >>> sorted(k for k in est(td).keys() if k != "next")
        ['advantage', 'observation', 'state_value', 'value_target']
    """

    @dataclass
    class _AcceptedKeys:
        """Key table of the estimators (``estimator.set_keys(name=key)``)."""

        advantage: NestedKey = "advantage"
        value_target: NestedKey = "value_target"
        value: NestedKey = "state_value"
        reward: NestedKey = "reward"
        done: NestedKey = "done"
        terminated: NestedKey = "terminated"
        steps_to_next_obs: NestedKey = "steps_to_next_obs"
        sample_log_prob: NestedKey = "action_log_prob"

    default_keys = _AcceptedKeys

    def __init__(
        self,
        *,
        value_network: TensorDictModuleBase | None,
        shifted: bool = False,
        differentiable: bool = False,
        skip_existing: bool | None = None,
        advantage_key: NestedKey = None,
        value_target_key: NestedKey = None,
        value_key: NestedKey = None,
        device: torch.device | None = None,
        deactivate_vmap: bool = False,
        value_chunk_size: int | None = None,
        num_chunks: int | None = None,
        num_chunk: int | None = None,
        value_chunk_dim: int = 0,
        shifted_budget: int = 1,
        group_key: NestedKey | None = None,
    ):
        super().__init__()
        name = type(self).__name__
        self._next_keys_cache = None  # ("next", reward), ("next", done), ("next", terminated); see _next_keys
        self._host_scalars = {}  # see _host_scalar
        self._tensor_keys = self._AcceptedKeys()
        self.value_network = value_network
        self.shifted = bool(shifted)
        self.differentiable = bool(differentiable)
        self.skip_existing = skip_existing
        self.deactivate_vmap = bool(deactivate_vmap)
        self.device = device
        if num_chunk is not None:
            if num_chunks is not None and num_chunks != num_chunk:
                raise ValueError(f"{name}: num_chunk ({num_chunk}) and num_chunks ({num_chunks}) differ.")
            num_chunks = num_chunk
        if value_chunk_size is not None and num_chunks is not None:
            raise ValueError(f"{name}: pass value_chunk_size or num_chunks, not both.")
        for label, n in (("value_chunk_size", value_chunk_size), ("num_chunks", num_chunks)):
            if n is not None and (not isinstance(n, int) or n < 1):
                raise ValueError(f"{name}: {label} must be a positive int, got {n!r}.")
        if not isinstance(shifted_budget, int) or shifted_budget < 1:
            raise ValueError(f"{name}: shifted_budget must be a positive int, got {shifted_budget!r}.")
        self.value_chunk_size, self.num_chunks, self.value_chunk_dim = value_chunk_size, num_chunks, value_chunk_dim
        self.shifted_budget = shifted_budget
        self.group_key = None if group_key is None else unravel_key(group_key)
        self.average_rewards = False
        self._vmap_randomness = None
        legacy = {"advantage": advantage_key, "value_target": value_target_key, "value": value_key}
        legacy = {k: v for k, v in legacy.items() if v is not None}
        if legacy:
            warn_once(f"{name}: the *_key constructor arguments are deprecated; use estimator.set_keys(...).")
            self.set_keys(**legacy)

    def _coef_buffer(self, name: str, value) -> None:
        t = value.to(self.device) if isinstance(value, torch.Tensor) else torch.tensor(value, device=self.device)
        self.register_buffer(name, t)

    # ------------------------------------------------------------------------------------------ keys
    @property
    def tensor_keys(self) -> _AcceptedKeys:
        """The key table."""
        return self._tensor_keys

    def set_keys(self, **kwargs) -> None:
        """Renames entries of the key table (``advantage``, ``value_target``, ``value``, ``reward``, ...).

        Raises:
            KeyError: for an unknown name.
            ValueError: for a ``None`` key.
        """
        fields = {f.name for f in dataclasses.fields(self._tensor_keys)}
        for name, key in kwargs.items():
            if name not in fields:
                raise KeyError(
                    f"{type(self).__name__}.set_keys: {name!r} is not a key of this estimator; its keys are "
                    f"{sorted(fields)}."
                )
            if key is None:
                raise ValueError(f"{type(self).__name__}.set_keys: the key for {name!r} cannot be None.")
            setattr(self._tensor_keys, name, unravel_key(key))
        self._next_keys_cache = None

    advantage_key = property(lambda self: self._tensor_keys.advantage, doc="Key of the advantage output.")
    value_target_key = property(lambda self: self._tensor_keys.value_target, doc="Key of the value target.")
    value_key = property(lambda self: self._tensor_keys.value, doc="Key of the state value.")
    reward_key = property(lambda self: self._tensor_keys.reward, doc="Key of the reward (under 'next').")
    done_key = property(lambda self: self._tensor_keys.done, doc="Key of the done flag (under 'next').")
    terminated_key = property(lambda self: self._tensor_keys.terminated, doc="Key of the terminated flag.")
    steps_to_next_obs_key = property(lambda self: self._tensor_keys.steps_to_next_obs, doc="Multi-step key.")
    sample_log_prob_key = property(lambda self: self._tensor_keys.sample_log_prob, doc="Behaviour log-prob key.")

    @property
    def in_keys(self):
        """The value network's inputs, the next reward / done / terminated and the value network's inputs at
        ``"next"``, in TorchRL's order; empty without a value network (as TorchRL)."""
        if self.value_network is None:
            return []
        net_keys = list(self.value_network.in_keys)
        keys = net_keys + [unravel_key(("next", k)) for k in (self.reward_key, self.done_key, self.terminated_key)]
        keys += [unravel_key(("next", k)) for k in net_keys]
        return list(dict.fromkeys(keys))

    @property
    def out_keys(self):
        """``[advantage, value_target]``."""
        return [self.advantage_key, self.value_target_key]

    @property
    def is_stateless(self) -> bool:
        """Whether the value network's parameters are placeholders (on the ``meta`` device)."""
        net = self.value_network
        return net is not None and any(p.device.type == "meta" for p in net.parameters())

    @property
    def is_functional(self) -> bool:
        """Same as :attr:`is_stateless` (kept for TorchRL compatibility)."""
        return self.is_stateless

    @property
    def vmap_randomness(self) -> str:
        """``"different"`` if the value network holds a random module, else ``"error"``."""
        if self._vmap_randomness is None:
            return "different" if _has_random_module(self.value_network) else "error"
        return self._vmap_randomness

    def set_vmap_randomness(self, value):
        """Sets the ``randomness`` argument of the vmapped calls."""
        if value not in ("error", "same", "different"):
            raise ValueError(f"vmap randomness must be 'error', 'same' or 'different', got {value!r}.")
        self._vmap_randomness = value

    @classmethod
    def for_loss(cls, loss_module, **hyperparams):
        """An estimator wired to ``loss_module``'s networks (used by the value-estimator registry)."""
        kwargs = {"value_network": loss_module._estimator_networks().get("value_network")}
        kwargs.update(hyperparams)
        return cls(**kwargs)

    # ------------------------------------------------------------------------------- reading data
    def _grad_ctx(self):
        return contextlib.nullcontext() if self.differentiable else torch.no_grad()

    def _missing(self, key) -> KeyError:
        table = {f.name: getattr(self._tensor_keys, f.name) for f in dataclasses.fields(self._tensor_keys)}
        err = _MissingEntryError(
            f"{type(self).__name__}: key {key!r} not found in the input tensordict; the estimator's key table "
            f"is {table} (rename entries with estimator.set_keys(...))."
        )
        err.key = key
        return err

    def _get(self, td: TensorDictBase, key, default=None, required: bool = True):
        value = fast_get(td, key)
        if value is None:
            if not required:
                return default
            raise self._missing(key)
        return value

    def _time_dim(self, td: TensorDictBase, time_dim: int | None) -> int:
        ndim = td.batch_dims
        if ndim < 1:
            raise RuntimeError(
                f"{type(self).__name__}: the tensordict must have at least one batch dimension (time), got "
                f"batch_size {tuple(td.batch_size)}."
            )
        if time_dim is None:
            time_dim = getattr(self, "time_dim", None)
        if time_dim is None:
            if td._has_names() and "time" in td.names:
                return td.names.index("time")
            return ndim - 1
        if not -ndim <= time_dim < ndim:
            raise ValueError(
                f"{type(self).__name__}: time_dim={time_dim} is out of range for batch_size {tuple(td.batch_size)}."
            )
        return time_dim % ndim

    def _next_keys(self) -> tuple:
        """``("next", reward)``, ``("next", done)``, ``("next", terminated)``, cached until :meth:`set_keys`."""
        keys = self._next_keys_cache
        if keys is None:
            k = self._tensor_keys
            keys = tuple(("next",) + _as_tuple(key) for key in (k.reward, k.done, k.terminated))
            self._next_keys_cache = keys
        return keys

    def _signals(self, td: TensorDictBase, like: torch.Tensor):
        """``(reward, done, terminated)`` from ``"next"``, shaped like ``like`` (``average_rewards`` applied)."""
        keys = self._next_keys()
        root = entries(td)
        sub = entries(root.get("next")) if root is not None and len(keys[0]) == len(keys[1]) == len(keys[2]) == 2 else None
        if sub is not None:  # the usual layout: three plain names under "next"
            reward, done, terminated = sub.get(keys[0][1]), sub.get(keys[1][1]), sub.get(keys[2][1])
        else:
            reward, done, terminated = fast_get(td, keys[0]), fast_get(td, keys[1]), fast_get(td, keys[2])
        if reward is None or done is None:
            raise self._missing(keys[0] if reward is None else keys[1])
        if terminated is None:
            terminated = done
        if self.average_rewards:
            reward = reward - reward.mean()
            reward = reward / reward.std().clamp_min(1e-5)
            td.set(keys[0], reward)
        return self._align_signals(like, reward, done, terminated)

    def _host_scalar(self, name: str, dtype: torch.dtype) -> float | None:
        """The coefficient buffer ``name`` as a Python float when it is a 0-dim CPU tensor of ``dtype`` without
        gradient (a host scalar fuses into one op and needs no device read), else ``None``. Cached until the
        buffer is replaced or changed in place."""
        if torch.compiler.is_compiling():
            return None
        t = self._buffers[name]
        hit = self._host_scalars.get(name)
        if hit is not None and hit[0] is t and hit[1] == t._version and hit[2] == dtype and not t.requires_grad:
            return hit[3]
        value = None
        if t.ndim == 0 and t.dtype == dtype and t.device.type == "cpu" and not t.requires_grad:
            value = t.item()
        self._host_scalars[name] = (t, t._version, dtype, value)
        return value

    def _align_signals(self, like, reward, done, terminated):
        shape = like.shape
        if reward.shape == shape and done.shape == shape and terminated.shape == shape:
            return reward, done, terminated
        return _trailing(reward, like), _trailing(done, like), _trailing(terminated, like)

    def _check(self, value, next_value, reward, done, terminated, **extra) -> None:
        """Raises a ``RuntimeError`` naming every entry and its shape if the shapes differ."""
        shape = next_value.shape
        if (
            reward.shape == shape
            and done.shape == shape
            and terminated.shape == shape
            and (value is None or value.shape == shape)
            and (not extra or all(t.shape == shape for t in extra.values()))
        ):
            return
        vk = self.value_key
        named = {} if value is None else {repr(vk): value}
        named[repr(("next",) + _as_tuple(vk))] = next_value
        for key, t in zip(self._next_keys(), (reward, done, terminated)):
            named[repr(key)] = t
        named.update(extra)
        listing = ", ".join(f"{name} {tuple(t.shape)}" for name, t in named.items())
        raise RuntimeError(f"{type(self).__name__}: shapes differ: {listing}.")

    def _check_value(self, value, target) -> None:
        if value.shape != target.shape:
            raise RuntimeError(
                f"{type(self).__name__}: shapes differ: {self.value_key!r} {tuple(value.shape)}, value target "
                f"{tuple(target.shape)} (the value must be shaped like the reward, e.g. [*B, T, 1])."
            )

    # ----------------------------------------------------------------------------- value network
    def _net_inputs(self, td: TensorDictBase, nxt: bool) -> TensorDictBase:
        """A tensordict holding the value network's inputs (read under ``"next"`` when ``nxt``)."""
        inputs = {}
        for key in self.value_network.in_keys:
            full = ("next",) + _as_tuple(key) if nxt else key
            v = fast_get(td, full)
            if v is None:
                raise self._missing(full)
            inputs[key] = v
        return TensorDict(inputs, batch_size=td.batch_size, device=td.device)

    def _chunks(self, data: TensorDictBase) -> list[TensorDictBase]:
        dim = self.value_chunk_dim % max(data.batch_dims, 1)
        if self.value_chunk_size is not None:
            return list(data.split(self.value_chunk_size, dim))
        if self.num_chunks is not None:
            return list(data.chunk(self.num_chunks, dim))
        return [data]

    def _run(self, data: TensorDictBase, params: TensorDictBase | None) -> torch.Tensor:
        """The value network's output on ``data`` (chunked if asked), with ``params`` if given."""
        net, vk = self.value_network, self.value_key
        inner = plain_network(net) if params is None and vk in net.out_keys else None
        outs = []
        for piece in self._chunks(data):
            if inner is not None:
                out = inner(*[fast_get(piece, k) for k in net.in_keys])
                if isinstance(out, tuple):
                    out = out[list(net.out_keys).index(vk)]
            elif params is not None:
                with params.to_module(net):
                    out = net(piece.copy()).get(vk)
            else:
                out = net(piece.copy()).get(vk)
            outs.append(out)
        if len(outs) == 1:
            return outs[0]
        return torch.cat(outs, self.value_chunk_dim % max(data.batch_dims, 1))

    def _run_pair(self, cur: TensorDictBase, nxt: TensorDictBase, params, target_params):
        net, vk = self.value_network, self.value_key
        if self.deactivate_vmap or params is None or target_params is None or target_params is params:
            p_next = params if target_params is None else target_params
            return self._run(cur, params), self._run(nxt, p_next)

        def call(p, data):
            with p.to_module(net):
                return net(data.copy()).get(vk)

        both = torch.vmap(call, (0, 0), randomness=self.vmap_randomness)(
            torch.stack([params, target_params]), torch.stack([cur, nxt])
        )
        return both[0], both[1]

    def _run_shifted(self, td: TensorDictBase, params, time_dim: int):
        """Current and next values from one network call (see the module docstring)."""
        cur, nxt = self._net_inputs(td, False), self._net_inputs(td, True)
        _, done_key, term_key = self._next_keys()
        done = self._get(td, done_key)
        term = self._get(td, term_key, default=done, required=False)
        batch = td.batch_size
        need = done.reshape(batch).bool() | term.reshape(batch).bool()  # s_{t+1} is not the next row's obs
        T = batch[time_dim]
        need.narrow(time_dim, T - 1, 1).fill_(True)
        n = cur.numel()
        values = self._run(torch.cat([cur.reshape(-1), nxt[need]], 0), params)
        value = values[:n].reshape(*batch, *values.shape[1:])
        following = value.narrow(time_dim, 1, T - 1)
        next_value = torch.cat([following, value.narrow(time_dim, T - 1, 1)], time_dim)
        return value, next_value.index_put((need,), values[n:])

    def _values(self, td, params=None, target_params=None, *, time_dim: int = -1, need_value: bool = True):
        """``(value, next_value)``: read from ``td`` (if ``skip_existing``) or computed, then written."""
        vk = self.value_key
        next_vk = ("next",) + _as_tuple(vk)
        skip = self.skip_existing if self.skip_existing is not None else skip_existing_mode()
        net = self.value_network
        value = fast_get(td, vk) if (skip or net is None) and need_value else None
        next_value = fast_get(td, next_vk) if skip or net is None else None
        if net is None:
            missing = vk if need_value and value is None else next_vk if next_value is None else None
            if missing is not None:
                raise _MissingValueError(
                    f"{type(self).__name__}: the entry {missing!r} is missing and there is no value network to "
                    f"compute it (value_network=None): write the values into the tensordict first, or build the "
                    f"estimator with a value network."
                )
            return value, next_value
        if (value is None or not need_value) and next_value is None:
            same = target_params is None or target_params is params
            if self.shifted and same and need_value:
                value, next_value = self._run_shifted(td, params, time_dim)
            elif need_value:
                value, next_value = self._run_pair(
                    self._net_inputs(td, False), self._net_inputs(td, True), params, target_params
                )
            else:
                p = target_params if target_params is not None else params
                next_value = self._run(self._net_inputs(td, True), p)
        else:
            if need_value and value is None:
                value = self._run(self._net_inputs(td, False), params)
            if next_value is None:
                p = target_params if target_params is not None else params
                next_value = self._run(self._net_inputs(td, True), p)
        if need_value:
            td.set(vk, value)
        td.set(next_vk, next_value)
        return value, next_value

    # ------------------------------------------------------------------------------------- public
    def forward(
        self,
        tensordict: TensorDictBase,
        *,
        params: TensorDictBase | None = None,
        target_params: TensorDictBase | None = None,
        time_dim: int | None = None,
    ) -> TensorDictBase:
        """Writes ``advantage`` and ``value_target`` (and the values) into ``tensordict`` and returns it.

        Args:
            tensordict: data of shape ``[*B, T]`` with the value network's inputs, ``("next", ...)``
                observations, reward, done and terminated.

        Keyword Args:
            params: parameters to run the value network with (e.g. ``loss.critic_network_params``).
            target_params: parameters for the next-step values (default: ``params``).
            time_dim: the time dimension of ``tensordict`` (default: the one named ``"time"``, else the last).
        """
        tdim = self._time_dim(tensordict, time_dim)
        with self._grad_ctx():
            value, next_value = self._values(tensordict, params, target_params, time_dim=tdim)
            advantage, target = self._estimate(tensordict, value, next_value, tdim)
        tensordict.set(self.advantage_key, advantage)
        tensordict.set(self.value_target_key, target)
        return tensordict

    def _estimate(self, td, value, next_value, time_dim):
        """``(advantage, value_target)`` from the values; implemented by each estimator."""
        raise NotImplementedError(f"{type(self).__name__} must implement _estimate().")

    def value_estimate(
        self,
        tensordict,
        target_params: TensorDictBase | None = None,
        next_value: torch.Tensor | None = None,
        **kwargs,
    ):
        """The value target only; ``next_value`` (shape ``[*B, T, 1]``) skips the next-value evaluation."""
        tdim = self._time_dim(tensordict, kwargs.get("time_dim"))
        with self._grad_ctx():
            if next_value is None:
                _, next_value = self._values(tensordict, None, target_params, time_dim=tdim, need_value=False)
            return self._target(tensordict, next_value, tdim)

    def _target(self, td, next_value, time_dim):
        raise NotImplementedError(f"{type(self).__name__} must implement _target().")


def _as_tuple(key) -> tuple:
    return (key,) if isinstance(key, str) else tuple(key)


def _standardize(x: torch.Tensor, groups: torch.Tensor | None = None) -> torch.Tensor:
    """``(x - mean) / std`` over all elements, or within each group id of ``groups`` (leading-dim ids)."""
    if groups is None:
        return (x - x.mean()) / x.std().clamp_min(1e-6)
    while groups.ndim > x.ndim or (groups.ndim == x.ndim and groups.shape[-1] == 1 and x.shape[-1] != 1):
        groups = groups.squeeze(-1)
    while groups.ndim < x.ndim:
        groups = groups.unsqueeze(-1)
    ids = groups.expand_as(x).reshape(-1)
    flat = x.reshape(-1)
    uniq, inv = torch.unique(ids, return_inverse=True)
    count = torch.zeros(len(uniq), dtype=x.dtype, device=x.device).index_add_(0, inv, torch.ones_like(flat))
    mean = torch.zeros_like(count).index_add_(0, inv, flat) / count
    centred = flat - mean[inv]
    var = torch.zeros_like(count).index_add_(0, inv, centred * centred) / (count - 1).clamp_min(1)
    return (centred / var.sqrt().clamp_min(1e-6)[inv]).reshape(x.shape)
