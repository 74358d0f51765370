"""``FlattenObservation``: flattens dims ``first_dim..last_dim`` of observations."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, TensorSpec
from torchrl.envs.transforms._spec_edit import check_feature_dims, key_pairs
from torchrl.envs.transforms._to_tensor_image import _ImageTransform

__all__ = ["FlattenObservation"]


class FlattenObservation(_ImageTransform):
    """Flattens the dims ``first_dim`` to ``last_dim`` (inclusive) of each ``in_key``, as ``torch.flatten``.

    Negative dims count from the end and work for any batch size (e.g. ``-3, -1`` turns ``(..., C, H, W)``
    images into ``(..., C * H * W)`` vectors). Non-negative dims are only accepted with
    ``allow_positive_dim`` and are then absolute dims of the entries, batch dims included.

    Args:
        first_dim: first dim to flatten.
        last_dim: last dim to flatten.
        in_keys: entries to flatten (default ``["pixels"]``).
        out_keys: where the results go (default: ``in_keys``).
        allow_positive_dim: accept non-negative dims.

    Raises:
        ValueError: a non-negative dim without ``allow_positive_dim``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._flatten_observation import FlattenObservation
        >>> FlattenObservation(-3, -1)(TensorDict(pixels=torch.zeros(2, 3, 4, 5)))["pixels"].shape
        torch.Size([2, 60])
    """

    def __init__(
        self,
        first_dim: int,
        last_dim: int,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        allow_positive_dim: bool = False,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        if not allow_positive_dim:
            for name, dim in (("first_dim", first_dim), ("last_dim", last_dim)):
                if dim >= 0:
                    raise ValueError(
                        f"FlattenObservation: {name}={dim} is not negative; negative dims count from the end and "
                        f"work for envs of any batch size (pass allow_positive_dim=True for absolute dims)."
                    )
        self._first_dim = int(first_dim)
        self._last_dim = int(last_dim)
        self.allow_positive_dim = bool(allow_positive_dim)

    @property
    def first_dim(self) -> int:
        return self._first_dim

    @property
    def last_dim(self) -> int:
        return self._last_dim

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        return torch.flatten(observation, self._first_dim, self._last_dim)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if isinstance(observation_spec, Composite) and self._first_dim < 0:
            check_feature_dims(observation_spec, key_pairs(self), -self._first_dim, "FlattenObservation", "flattening")
        return super().transform_observation_spec(observation_spec)

    def forward(self, next_tensordict):
        return self._call(next_tensordict)

    def __repr__(self) -> str:
        return (
            f"FlattenObservation(first_dim={self._first_dim}, last_dim={self._last_dim}, in_keys={self.in_keys}, "
            f"out_keys={self.out_keys})"
        )
