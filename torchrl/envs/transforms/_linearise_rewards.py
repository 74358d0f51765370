"""``LineariseRewards``: turns a vector of rewards (multi-objective) into one reward, a weighted sum."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Bounded, Composite, TensorSpec, Unbounded
from torchrl.envs.transforms._spec_edit import key_pairs, map_keys
from torchrl.envs.transforms._transform import Transform

__all__ = ["LineariseRewards"]


class LineariseRewards(Transform):
    """Replaces a multi-objective reward ``r`` of shape ``(..., n)`` by ``(r * weights).sum(-1, keepdim=True)``.

    Without ``weights`` every objective counts once (a plain sum). The result has shape ``(..., 1)``. The
    reward spec follows: a ``Bounded`` spec keeps exact bounds (each objective contributes its lower or
    upper bound depending on the sign of its weight), anything continuous becomes ``Unbounded``; the dtype
    is kept.

    Args:
        in_keys: the multi-objective reward entries (required).
        out_keys: where the linearised rewards go (default: ``in_keys``).

    Keyword Args:
        weights: one weight per objective (a sequence or a 1-d tensor); stored as the ``weights`` buffer.
            ``None`` (default) sums the objectives.

    Raises:
        ValueError: ``weights`` is not one-dimensional, or its length does not match the rewards' last
            dimension (checked on the spec and on the data).
        NotImplementedError: the reward spec is discrete (integer or categorical rewards).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._linearise_rewards import LineariseRewards
        >>> t = LineariseRewards(in_keys=["reward"], weights=[1.0, -1.0, 2.0])
        >>> t(TensorDict(reward=torch.tensor([[1.0, 2.0, 3.0]]), batch_size=[1]))["reward"].tolist()
        [[5.0]]
        >>> from torchrl.data import Bounded, Composite
        >>> spec = t.transform_reward_spec(Composite(reward=Bounded(-1.0, 1.0, shape=(3,))))["reward"]
        >>> spec.shape, spec.low.tolist(), spec.high.tolist()
        (torch.Size([1]), [-4.0], [4.0])
    """

    _out_keys_default_to_in_keys = True  # out_keys default to in_keys (in place)

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        *,
        weights: Sequence[float] | torch.Tensor | None = None,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._check_keys()
        if weights is not None:
            weights = weights if isinstance(weights, torch.Tensor) else torch.as_tensor(weights)
            if weights.ndim != 1:
                raise ValueError(
                    f"LineariseRewards: weights must be one-dimensional (one weight per objective), got a tensor "
                    f"with {weights.ndim} dimensions of shape {tuple(weights.shape)}."
                )
        self.register_buffer("weights", weights)

    def _check_count(self, n: int, where: str) -> None:
        if self.weights is not None and self.weights.numel() != n:
            raise ValueError(
                f"LineariseRewards: the number of rewards and weights should match: the {where} has {n} "
                f"objectives (last dimension), weights has {self.weights.numel()}."
            )

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        weights = self.weights
        if weights is None:
            return reward.sum(-1, keepdim=True)
        self._check_count(reward.shape[-1] if reward.ndim else 1, "reward")
        if weights.device != reward.device:
            weights = weights.to(reward.device)
        return (reward * weights).sum(-1, keepdim=True)

    def _call(self, next_tensordict: TensorDictBase, tolerant: bool = False) -> TensorDictBase:
        strict = not (tolerant or self._missing_tolerance)
        return map_keys(next_tensordict, key_pairs(self), self._apply_transform, strict=strict, owner="LineariseRewards")

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._call(tensordict_reset, tolerant=True)  # rewards are usually absent after a reset

    def _linear_leaf(self, spec: TensorSpec, key: NestedKey = "reward") -> TensorSpec:
        if spec.domain == "discrete" or not spec.dtype.is_floating_point:
            raise NotImplementedError(
                f"LineariseRewards: reward {key!r} takes discrete values ({type(spec).__name__}, {spec.dtype}); "
                "aggregating discrete rewards is not supported. Cast them first (DTypeCastTransform)."
            )
        n = spec.shape[-1] if spec.shape else 1
        self._check_count(n, f"reward spec of {key!r}")
        shape = (*spec.shape[:-1], 1)
        if isinstance(spec, Bounded):
            dtype = spec.dtype
            w = torch.ones(n, dtype=dtype) if self.weights is None else self.weights.to(dtype)
            w = w.to(spec.low.device)
            lows, highs = w * spec.low, w * spec.high
            low = torch.minimum(lows, highs).sum(-1, keepdim=True)
            high = torch.maximum(lows, highs).sum(-1, keepdim=True)
            return Bounded(low, high, shape=shape, device=spec.device, dtype=dtype)
        return Unbounded(shape=shape, device=spec.device, dtype=spec.dtype)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        if not isinstance(reward_spec, Composite):  # a lone reward leaf
            return self._linear_leaf(reward_spec)
        for in_key, out_key in key_pairs(self):
            if in_key not in reward_spec:
                raise KeyError(
                    f"LineariseRewards: in_key {in_key!r} is not a reward of the env; rewards: "
                    f"{sorted(map(str, reward_spec.keys(include_nested=True, leaves_only=True)))}."
                )
            reward_spec[out_key] = self._linear_leaf(reward_spec[in_key], in_key)
        return reward_spec
