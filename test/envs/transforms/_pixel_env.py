"""A tiny image env for the pixel transform tests: uint8 ``"pixels"`` of shape ``(*batch, H, W, 3)``."""
from __future__ import annotations

import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase


class PixelEnv(EnvBase):
    """Observations: ``"pixels"`` (uint8 ``(H, W, 3)`` in ``[0, 255]``) and ``"observation"`` (float ``(2,)``).

    The image is random at reset; each step adds ``round(action * 10)`` (mod 256) to every pixel.
    Never done.
    """

    def __init__(self, batch_size=(), seed: int = 0, h: int = 8, w: int = 6) -> None:
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.h, self.w = h, w
        self.observation_spec = Composite(
            pixels=Bounded(0, 255, shape=(*shape, h, w, 3), dtype=torch.uint8),
            observation=Unbounded(shape=(*shape, 2)),
            shape=shape,
        )
        self.action_spec = Bounded(-1.0, 1.0, shape=(*shape, 1))
        self.reward_spec = Unbounded(shape=(*shape, 1))
        self._gen = torch.Generator().manual_seed(seed)
        self._img = torch.zeros((*shape, h, w, 3), dtype=torch.int64)

    def _td(self, extra=None) -> TensorDict:
        out = {"pixels": self._img.to(torch.uint8), "observation": self._img.float().mean((-3, -2))[..., :2] / 255}
        out.update(extra or {})
        return TensorDict(out, batch_size=self.batch_size)

    def _reset(self, tensordict, **kwargs):
        self._img = torch.randint(0, 256, (*self.batch_size, self.h, self.w, 3), generator=self._gen)
        return self._td()

    def _step(self, tensordict):
        delta = (tensordict["action"] * 10).round().long()
        self._img = (self._img + delta.reshape(*self.batch_size, 1, 1, 1)) % 256
        reward = self._img.float().mean((-3, -2, -1)).unsqueeze(-1) / 255
        return self._td({"reward": reward, "done": torch.zeros((*self.batch_size, 1), dtype=torch.bool)})

    def _set_seed(self, seed):
        self._gen.manual_seed(0 if seed is None else int(seed))


def chw_pixel_env(batch_size=(), seed: int = 0):
    """``PixelEnv`` behind ``ToTensorImage``: float ``"pixels"`` of shape ``(*batch, 3, 8, 6)`` in ``[0, 1]``."""
    from torchrl.envs import ToTensorImage, TransformedEnv

    return TransformedEnv(PixelEnv(batch_size=batch_size, seed=seed), ToTensorImage())
