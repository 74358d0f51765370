"""``FiniteTensorDictCheck``: fails loudly on NaN or infinite values in an env's outputs."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl.envs.transforms._transform import Transform

__all__ = ["FiniteTensorDictCheck"]


def _first_non_finite(tensordict: TensorDictBase):
    """``(key, number of non-finite values)`` of the first floating/complex leaf holding one, or ``None``."""
    for key, value in tensordict.items(include_nested=True, leaves_only=True):
        if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
            continue  # integers and booleans are always finite; non-tensor data is not checked
        bad = ~torch.isfinite(value)
        if bool(bad.any()):
            return key, int(bad.sum())
    return None


class FiniteTensorDictCheck(Transform):
    """Raises ``ValueError`` when an env's step or reset output holds a NaN or an infinite value.

    Every floating-point (or complex) entry of the output, nested ones included, is checked; integer and
    boolean entries are finite by construction. Specs are unchanged. This is a debugging aid: each check
    reads the data on the host.

    Raises:
        ValueError: ``Encountered a non-finite tensor`` (TorchRL's message), naming the entry and how many
            values are not finite.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import FiniteTensorDictCheck
        >>> t = FiniteTensorDictCheck()
        >>> t(TensorDict(obs=torch.ones(2)))["obs"].tolist()
        [1.0, 1.0]
        >>> try:
        ...     t(TensorDict(obs=torch.tensor([0.0, float("nan")])))
        ... except ValueError as err:
        ...     print(err)
        Encountered a non-finite tensor: entry 'obs' holds 1 NaN or infinite value(s).
    """

    def __init__(self) -> None:
        super().__init__(in_keys=[])

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        found = _first_non_finite(next_tensordict)
        if found is not None:
            key, count = found
            raise ValueError(
                f"Encountered a non-finite tensor: entry {key!r} holds {count} NaN or infinite value(s)."
            )
        return next_tensordict

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Checks ``next_tensordict`` and returns it unchanged."""
        return self._call(next_tensordict)

    def __repr__(self) -> str:
        return "FiniteTensorDictCheck()"
