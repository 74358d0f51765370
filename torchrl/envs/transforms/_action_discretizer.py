"""``ActionDiscretizer``: a discrete policy (DQN, ...) drives an env whose action is continuous and bounded."""
from __future__ import annotations

import enum

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import (
    Bounded,
    Composite,
    MultiCategorical,
    MultiOneHot,
)
from torchrl.envs.transforms._transform import Transform

__all__ = ["ActionDiscretizer"]


def _spec_path(root: str, key: NestedKey) -> tuple:
    return (root, *((key,) if isinstance(key, str) else key))


class ActionDiscretizer(Transform):
    """Discretizes a bounded continuous action: the env is seen from outside with a discrete action.

    Each action dimension ``i`` (the last dim of the env's ``Bounded`` action spec) is cut into
    ``num_intervals[i]`` equal intervals between its ``low`` and ``high`` bounds (in a batched env, those
    of the first sub-env, as TorchRL). The policy picks one
    interval per dimension, as a ``MultiCategorical`` index (``categorical=True``) or a ``MultiOneHot``
    vector (``categorical=False``), and the inverse transform writes the continuous value of that interval
    into ``action_key`` before the env steps: ``low + (high - low) * custom_arange(n)[index]``, where the
    position inside the interval is set by ``sampling``:

    * ``MEDIAN`` (default): the middle of the interval, ``(k + 0.5) / n``;
    * ``LOW``: its lower end, ``k / n``;
    * ``HIGH``: its upper end, ``(k + 1) / n``;
    * ``RANDOM``: a uniform draw inside the interval (its lower end plus ``U[0, 1)`` interval widths), one
      draw per action dimension at each inverse call, shared by the batch (as TorchRL).

    A subclass may override :meth:`custom_arange` for other positions (e.g. log-spaced). The forward
    transform leaves data unchanged. When ``out_action_key`` differs from ``action_key``, the discrete
    action is written there and the continuous one is moved from the action spec to the state spec (it is
    still recorded in rollouts, but not sampled by random policies).

    Args:
        num_intervals: the number of intervals of every action dimension (an ``int``) or of each of them
            (a tensor with as many elements as the last dim of the action).
        action_key: the continuous action of the parent env (default ``"action"``).
        out_action_key: where the policy writes the discrete action (default: ``action_key``).
        sampling: an ``ActionDiscretizer.SamplingStrategy`` (or its name or value); ``None`` for ``MEDIAN``.
        categorical: ``True`` for integer indices (``MultiCategorical``), ``False`` for one-hot vectors
            (``MultiOneHot``).

    Raises:
        ValueError: ``sampling`` is not a sampling strategy, an interval count is below 1, or (when the
            env's specs are built) ``num_intervals`` does not match the action's last dim.
        TypeError: (when the env's specs are built) the env's action spec is not ``Bounded``.
        KeyError: (when the env's specs are built) ``action_key`` is not in the env's action spec.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._action_discretizer import ActionDiscretizer
        >>> env = TransformedEnv(PendulumEnv(), ActionDiscretizer(5))
        >>> type(env.action_spec).__name__, env.action_spec.nvec
        ('MultiCategorical', tensor([5]))
        >>> env.transform.inv(TensorDict(action=torch.tensor([[0], [2], [4]]), batch_size=[3]))["action"]
        tensor([[-1.6000],
                [ 0.0000],
                [ 1.6000]])
    """

    class SamplingStrategy(enum.IntEnum):
        """Where the continuous action lies inside the chosen interval."""

        MEDIAN = 0
        LOW = 1
        HIGH = 2
        RANDOM = 3

    def __init__(
        self,
        num_intervals: int | torch.Tensor,
        action_key: NestedKey = "action",
        out_action_key: NestedKey = None,
        sampling=None,
        categorical: bool = True,
    ):
        if out_action_key is None:
            out_action_key = action_key
        super().__init__(in_keys_inv=[action_key], out_keys_inv=[out_action_key])
        counts = torch.as_tensor(num_intervals)
        if counts.is_floating_point() or counts.is_complex() or bool((counts < 1).any()):
            raise ValueError(
                f"ActionDiscretizer: num_intervals must be positive integers, got {num_intervals!r}."
            )
        self.num_intervals = num_intervals
        self.action_key = action_key
        self.out_action_key = out_action_key
        self.sampling = self._as_strategy(sampling)
        self.categorical = bool(categorical)
        # filled when the env's specs are built: (n_act, max_n) interval values, (n_act,) counts and widths
        self.register_buffer("intervals", None)
        self.register_buffer("nvec", None)
        self.register_buffer("jitters", None)
        self._last_value = None

    @classmethod
    def _as_strategy(cls, sampling) -> ActionDiscretizer.SamplingStrategy:
        if sampling is None:
            return cls.SamplingStrategy.MEDIAN
        try:
            if isinstance(sampling, str):
                return cls.SamplingStrategy[sampling.upper()]
            return cls.SamplingStrategy(sampling)
        except (KeyError, ValueError):
            names = [s.name for s in cls.SamplingStrategy]
            raise ValueError(
                f"ActionDiscretizer: unknown sampling {sampling!r}; expected one of ActionDiscretizer.SamplingStrategy "
                f"{names} (or None for MEDIAN)."
            ) from None

    def custom_arange(self, nint, device):
        """The positions, in ``[0, 1]`` of the action range, of the values of ``nint`` intervals
        (``MEDIAN``: ``(k + 0.5) / nint``; ``LOW`` and ``RANDOM``: ``k / nint``; ``HIGH``: ``(k + 1) / nint``).

        Override this in a subclass for a custom spacing; the result must have ``nint`` elements.
        """
        low_ends = torch.arange(nint, device=device, dtype=torch.get_default_dtype()) / nint
        if self.sampling in (self.SamplingStrategy.LOW, self.SamplingStrategy.RANDOM):
            return low_ends  # RANDOM adds a uniform draw of one interval width at each inverse call
        high_ends = (1 - low_ends).flip(0)  # the upper ends, mirrored from the lower ones (exact at 1.0)
        if self.sampling == self.SamplingStrategy.HIGH:
            return high_ends
        return (low_ends + high_ends) / 2

    # -- specs ---------------------------------------------------------------------------------------------
    def _counts(self, n_act: int) -> list[int]:
        counts = torch.as_tensor(self.num_intervals)
        if counts.ndim == 0:
            return [int(counts)] * n_act
        if counts.numel() != n_act:
            raise ValueError(
                f"ActionDiscretizer: num_intervals has {counts.numel()} elements but the action {self.action_key!r} "
                f"has {n_act} dimensions (its last dim); pass one count per dimension or a single int."
            )
        return [int(c) for c in counts.reshape(-1)]

    def _build_intervals(self, spec: Bounded, counts: list[int]) -> None:
        n_act = len(counts)
        device = spec.device
        dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
        low = spec.space.low.reshape(-1, n_act)[0].to(dtype)
        high = spec.space.high.reshape(-1, n_act)[0].to(dtype)
        width = high - low
        intervals = torch.zeros(n_act, max(counts), device=device, dtype=dtype)
        cache: dict[int, torch.Tensor] = {}
        for i, n in enumerate(counts):
            if n not in cache:
                positions = torch.as_tensor(self.custom_arange(n, device), device=device)
                if positions.numel() != n:
                    raise ValueError(
                        f"ActionDiscretizer.custom_arange({n}) returned {positions.numel()} values; expected {n}."
                    )
                cache[n] = positions.reshape(-1).to(intervals.dtype)
            intervals[i, :n] = low[i] + width[i] * cache[n]
        self.intervals = intervals
        self.nvec = torch.tensor(counts, device=device)
        self.jitters = width / self.nvec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        path = _spec_path("full_action_spec", self.action_key)
        spec = input_spec.get(path, None)
        if spec is None:
            available = list(input_spec["full_action_spec"].keys(True, True))
            raise KeyError(f"ActionDiscretizer: action key {self.action_key!r} not in the env's action spec {available}.")
        if not isinstance(spec, Bounded):
            raise TypeError(
                f"ActionDiscretizer: action {self.action_key!r} has spec {type(spec).__name__}; the action spec type "
                f"must be Bounded (finite low and high bounds to cut into intervals)."
            )
        if spec.ndim == 0:
            raise ValueError(f"ActionDiscretizer: action {self.action_key!r} must have at least one dim, got shape ().")
        counts = self._counts(spec.shape[-1])
        self._build_intervals(spec, counts)
        batch = [1 if s == -1 else s for s in spec.shape[:-1]]  # dynamic dims (e.g. a MultiAction chunk) stay so
        if self.categorical:
            nvec = torch.tensor(counts).expand(*batch, len(counts))
            new = MultiCategorical(
                nvec, shape=(*batch, len(counts)), device=spec.device, dtype=torch.int64, remove_singleton=False
            )
        else:
            new = MultiOneHot(counts, shape=(*batch, sum(counts)), device=spec.device, dtype=torch.bool)
        for d, size in enumerate(spec.shape[:-1]):
            if size == -1:
                new.make_neg_dim(d)
        out_path = _spec_path("full_action_spec", self.out_action_key)
        if out_path != path:
            del input_spec[path]
            input_spec[_spec_path("full_state_spec", self.action_key)] = spec
        input_spec[out_path] = new
        return input_spec

    # -- data ----------------------------------------------------------------------------------------------
    def _indices(self, action: torch.Tensor) -> torch.Tensor:
        counts = self.nvec.tolist()
        if self.categorical:
            index = action.long()
            if index.shape[-1:] != (len(counts),):
                raise ValueError(
                    f"ActionDiscretizer: action {self.out_action_key!r} has shape {tuple(action.shape)}; expected "
                    f"a last dim of {len(counts)} (one interval index per action dimension)."
                )
            if bool(((index < 0) | (index >= self.nvec)).any()):
                raise RuntimeError(
                    f"ActionDiscretizer: action {self.out_action_key!r} holds an index outside [0, num_intervals) "
                    f"(num_intervals={counts})."
                )
            return index
        if action.shape[-1:] != (sum(counts),):
            raise ValueError(
                f"ActionDiscretizer: one-hot action {self.out_action_key!r} has shape {tuple(action.shape)}; expected "
                f"a last dim of {sum(counts)} (the concatenated one-hot vectors of sizes {counts})."
            )
        return torch.stack([part.to(torch.uint8).argmax(-1) for part in action.split(counts, -1)], -1)

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        if self.intervals is None and self.parent is not None:
            spec = self.parent.full_action_spec.get(self.action_key, None)
            if isinstance(spec, Bounded) and spec.ndim:
                self._build_intervals(spec, self._counts(spec.shape[-1]))
        if self.intervals is None:
            raise RuntimeError(
                "ActionDiscretizer: the intervals are not known yet; append the transform to an env whose action "
                "spec is Bounded (they are computed from its bounds)."
            )
        index = self._indices(action)
        intervals = self.intervals.expand(*index.shape[:-1], *self.intervals.shape)
        value = intervals.gather(-1, index.unsqueeze(-1)).squeeze(-1)
        if self.sampling == self.SamplingStrategy.RANDOM:
            value = value + torch.rand(self.jitters.shape, device=value.device, dtype=value.dtype) * self.jitters
        if self.out_action_key != self.action_key:
            self._last_value = value  # recorded in the step's input by _step, as TorchRL
        return value

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # the discrete action lives in the step's input; nothing to map forward

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        # with a separate discrete key, the continuous action the env received is kept next to it (a state entry)
        value, self._last_value = self._last_value, None
        if value is not None and value.shape[: tensordict.batch_dims] == tensordict.batch_size:
            tensordict.set(self.action_key, value)
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs):
        # intervals not built yet (a fresh instance): take the saved ones as they are
        for name in ("intervals", "nvec", "jitters"):
            value = state_dict.get(prefix + name, None)
            if value is not None and getattr(self, name) is None:
                setattr(self, name, torch.empty_like(value))
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs)

    def __repr__(self) -> str:
        counts = self.num_intervals
        return (
            f"{type(self).__name__}(num_intervals={counts}, action_key={self.action_key}, "
            f"out_action_key={self.out_action_key}, sampling={self.sampling.name}, categorical={self.categorical})"
        )
