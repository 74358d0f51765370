"""Small test-only environments for the value/shape transform tests (dtype casts, norms, concatenation)."""
from __future__ import annotations

import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase


class DoubleEnv(EnvBase):
    """A float64 env: ``observation`` (3,), nested ``("agent", "pos")`` (2,), state ``x`` (1,), float64 actions.

    ``x' = x + action``; ``observation = tanh([x, 2x, 3x])``; ``("agent", "pos") = [x, -x]``; reward ``-x^2``.
    ``_step`` raises ``TypeError`` unless the action and the state arrive as float64, so tests see whether
    inverse casts happened. Never done.
    """

    _batch_locked = True

    def __init__(self, batch_size=(), seed: int = 0) -> None:
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        f64 = torch.float64
        self.observation_spec = Composite(
            observation=Bounded(-1.0, 1.0, shape=(*shape, 3), dtype=f64),
            x=Unbounded(shape=(*shape, 1), dtype=f64),
            agent=Composite(pos=Unbounded(shape=(*shape, 2), dtype=f64), shape=shape),
            shape=shape,
        )
        self.state_spec = Composite(x=Unbounded(shape=(*shape, 1), dtype=f64), shape=shape)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*shape, 1), dtype=f64)
        self.reward_spec = Unbounded(shape=(*shape, 1), dtype=f64)
        self._gen = torch.Generator().manual_seed(seed)

    def _obs(self, x: torch.Tensor) -> dict:
        scale = torch.tensor([1.0, 2.0, 3.0], dtype=x.dtype)
        return {
            "x": x,
            "observation": torch.tanh(x * scale),
            "agent": TensorDict(pos=torch.cat([x, -x], -1), batch_size=x.shape[:-1]),
        }

    def _reset(self, tensordict, **kwargs):
        batch = self.batch_size
        x = torch.rand((*batch, 1), generator=self._gen, dtype=torch.float64) * 2 - 1
        if tensordict is not None and "_reset" in tensordict.keys() and "x" in tensordict.keys():
            old = tensordict["x"]
            if old.dtype != torch.float64:
                raise TypeError(f"DoubleEnv: reset state x must be float64, got {old.dtype}")
            x = torch.where(tensordict["_reset"].reshape(*batch, 1), x, old)
        return TensorDict(self._obs(x), batch_size=batch)

    def _step(self, tensordict):
        action, x = tensordict["action"], tensordict["x"]
        if action.dtype != torch.float64 or x.dtype != torch.float64:
            raise TypeError(f"DoubleEnv: action and x must be float64, got {action.dtype} and {x.dtype}")
        x = x + action
        out = self._obs(x)
        out["reward"] = -(x * x)
        out["done"] = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return TensorDict(out, batch_size=self.batch_size)

    def _set_seed(self, seed):
        self._gen.manual_seed(0 if seed is None else int(seed))


class PosVelEnv(EnvBase):
    """Observations ``position`` (2,), ``velocity`` (1,) and nested ``("agent", "speed")`` (1,); no state.

    The dynamics live inside the env (like a simulator), so observations may be deleted or renamed by
    transforms without breaking the next step. ``position += velocity``, ``velocity = action``.
    """

    def __init__(self, batch_size=(), seed: int = 0) -> None:
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        self.observation_spec = Composite(
            position=Unbounded(shape=(*shape, 2)),
            velocity=Bounded(-1.0, 1.0, shape=(*shape, 1)),
            agent=Composite(speed=Bounded(0.0, 1.0, shape=(*shape, 1)), shape=shape),
            shape=shape,
        )
        self.action_spec = Bounded(-1.0, 1.0, shape=(*shape, 1))
        self.reward_spec = Unbounded(shape=(*shape, 1))
        self._gen = torch.Generator().manual_seed(seed)
        self._pos = torch.zeros((*shape, 2))
        self._vel = torch.zeros((*shape, 1))

    def _td(self, extra=None) -> TensorDict:
        out = {
            "position": self._pos.clone(),
            "velocity": self._vel.clone(),
            "agent": TensorDict(speed=self._vel.abs(), batch_size=self.batch_size),
        }
        out.update(extra or {})
        return TensorDict(out, batch_size=self.batch_size)

    def _reset(self, tensordict, **kwargs):
        shape = self.batch_size
        self._pos = torch.rand((*shape, 2), generator=self._gen)
        self._vel = torch.rand((*shape, 1), generator=self._gen) * 2 - 1
        return self._td()

    def _step(self, tensordict):
        self._vel = tensordict["action"].clamp(-1, 1)
        self._pos = self._pos + torch.cat([self._vel, -self._vel], -1)
        reward = -self._pos.norm(dim=-1, keepdim=True)
        return self._td({"reward": reward, "done": torch.zeros((*self.batch_size, 1), dtype=torch.bool)})

    def _set_seed(self, seed):
        self._gen.manual_seed(0 if seed is None else int(seed))
