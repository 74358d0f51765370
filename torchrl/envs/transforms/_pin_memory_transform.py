"""``PinMemoryTransform``: puts data in page-locked (pinned) host memory for fast copies to an accelerator."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl.envs.transforms._transform import Transform

__all__ = ["PinMemoryTransform"]


def _accelerator_available() -> bool:
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and hasattr(accelerator, "is_available"):
        return bool(accelerator.is_available())
    return torch.cuda.is_available()


class PinMemoryTransform(Transform):
    """Calls ``pin_memory()`` on the data, so that later copies to a CUDA (or other accelerator) device are
    faster and can be asynchronous (``.to(device, non_blocking=True)``).

    In an env it pins every step and reset output; in a replay buffer it pins sampled batches. Pinned
    memory needs an accelerator: on a machine without one (``torch.accelerator.is_available()``, or
    ``torch.cuda.is_available()`` on older torch, is ``False``) the transform returns the data
    unchanged. Whether pinning happens is decided once, at construction.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms import PinMemoryTransform
        >>> t = PinMemoryTransform()
        >>> out = t(TensorDict(obs=torch.zeros(3)))
        >>> bool(out["obs"].is_pinned()) == t.pins
        True
    """

    def __init__(self) -> None:
        super().__init__()
        self.pins = _accelerator_available()

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not self.pins:
            return next_tensordict
        return next_tensordict.pin_memory()

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._call(next_tensordict)

    def __repr__(self) -> str:
        return f"PinMemoryTransform(pins={self.pins})"
