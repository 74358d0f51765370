"""``PendulumEnv``: gymnasium's Pendulum-v1 dynamics in pure, differentiable, batched torch."""
from __future__ import annotations

import math

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._td import fast_get, new_td
from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs.common import EnvBase
from torchrl.envs.utils import make_composite_from_td as _make_composite_from_td

__all__ = ["PendulumEnv"]

_DEFAULTS = {"max_speed": 8.0, "max_torque": 2.0, "dt": 0.05, "m": 1.0, "l": 1.0}


class PendulumEnv(EnvBase):
    """A stateless pendulum: the state (``th``, ``thdot``) and physical ``params`` travel in the TensorDict.

    Dynamics, reward and initial-state distribution are gymnasium's ``Pendulum-v1``:
    ``thdot' = clip(thdot + (3g/(2l) sin th + 3/(m l^2) u) dt, ±max_speed)``, ``th' = th + thdot' dt``,
    reward ``-(norm(th)^2 + 0.1 thdot^2 + 0.001 u^2)`` with ``u`` clipped to ``±max_torque``.
    Besides ``th``/``thdot``/``params`` it observes ``"observation" = (cos th, sin th, thdot)`` like
    gymnasium. The env never terminates by itself: add ``StepCounter(200)`` for gymnasium's time limit.

    Batching works both ways: ``PendulumEnv(batch_size=[N])``, or a batch-less env reset with
    ``env.gen_params(batch_size=[N])`` (the env is not batch-locked). Every operation is differentiable
    with respect to actions, state and params.

    Keyword Args:
        td_params: parameters as returned by :meth:`gen_params` (default ``g=10``).
        seed: seed for the env's own generator (initial states).
        device: the env's device.
        batch_size: batch of independent pendulums.

    Examples:
        >>> from torchrl.envs import PendulumEnv
        >>> env = PendulumEnv(batch_size=[4])
        >>> env.rollout(5)["next", "observation"].shape
        torch.Size([4, 5, 3])
        >>> env = PendulumEnv()
        >>> env.rollout(3, tensordict=env.reset(env.gen_params(batch_size=[10]))).shape
        torch.Size([10, 3])
    """

    _batch_locked = False

    def __init__(
        self,
        td_params: TensorDictBase | None = None,
        seed: int | None = None,
        device: torch.device | str | None = None,
        batch_size=None,
        **kwargs,
    ) -> None:
        super().__init__(device=device, batch_size=batch_size, **kwargs)
        if td_params is None:
            td_params = self.gen_params(batch_size=self.batch_size, device=self.device)
        self.td_params = td_params
        self._generator = torch.Generator(device=self.device if self.device is not None else "cpu")
        self._make_spec(td_params)
        self._constant_cache: tuple | None = None
        if seed is None:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        self._set_seed(seed)

    # -- parameters ----------------------------------------------------------------------------------
    @staticmethod
    def gen_params(g=10.0, batch_size=None, device=None) -> TensorDictBase:
        """Physical parameters under a ``"params"`` entry, expanded to ``batch_size``."""
        params = TensorDict({"g": g, **_DEFAULTS}, batch_size=[], device=device)
        td = TensorDict({"params": params}, batch_size=[], device=device)
        if batch_size:
            td = td.expand(batch_size).contiguous()
        return td

    @staticmethod
    def angle_normalize(x):
        """Wraps angles to ``[-pi, pi)``."""
        return ((x + math.pi) % (2 * math.pi)) - math.pi

    @staticmethod
    def make_composite_from_td(td):
        """``Composite`` of ``Unbounded`` leaves shaped like ``td`` (scalar leaves keep their shape)."""
        return _make_composite_from_td(td, unsqueeze_null_shapes=False)

    def _make_spec(self, td_params: TensorDictBase) -> None:
        shape, device = self.batch_size, self.device
        max_speed = float(td_params["params", "max_speed"].reshape(-1)[0])
        max_torque = float(td_params["params", "max_torque"].reshape(-1)[0])
        self.observation_spec = Composite(
            # th is not wrapped (as in gymnasium): the pendulum may turn several times
            th=Unbounded(shape=shape, dtype=torch.float32, device=device),
            thdot=Bounded(low=-max_speed, high=max_speed, shape=shape, dtype=torch.float32, device=device),
            observation=Bounded(
                low=torch.tensor([-1.0, -1.0, -max_speed], device=device).expand(*shape, 3),
                high=torch.tensor([1.0, 1.0, max_speed], device=device).expand(*shape, 3),
                shape=(*shape, 3),
                dtype=torch.float32,
                device=device,
            ),
            params=self.make_composite_from_td(td_params["params"]),
            shape=shape,
            device=device,
        )
        self.state_spec = self.observation_spec.exclude("observation").clone()
        self.action_spec = Bounded(low=-max_torque, high=max_torque, shape=(*shape, 1), dtype=torch.float32, device=device)
        self.reward_spec = Unbounded(shape=(*shape, 1), dtype=torch.float32, device=device)

    # -- env contract ----------------------------------------------------------------------------------
    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(int(seed))

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        params = tensordict.get("params", None) if tensordict is not None else None
        batch = tensordict.batch_size if tensordict is not None else self.batch_size
        if params is None:
            params = self.gen_params(batch_size=batch, device=self.device)["params"]
        device = params.device if params.device is not None else self.device
        gen = self._generator
        th = torch.rand(batch, generator=gen, device=device) * (2 * math.pi) - math.pi
        thdot = torch.rand(batch, generator=gen, device=device) * 2 - 1
        mask = tensordict.get("_reset", None) if tensordict is not None else None
        if mask is not None and tensordict.get("th", None) is not None:
            keep = ~mask.reshape(batch)
            th = torch.where(keep, tensordict.get("th"), th)
            thdot = torch.where(keep, tensordict.get("thdot"), thdot)
        return TensorDict(
            {"th": th, "thdot": thdot, "params": params, "observation": torch.stack([th.cos(), th.sin(), thdot], -1)},
            batch_size=batch,
            device=self.device,
        )

    def _constants(self, params: TensorDictBase) -> tuple:
        """``(a, b, dt, max_speed, max_torque)`` with ``a = 3g/(2l)`` and ``b = 3/(m l^2)``.

        Recomputed only when a parameter tensor is replaced or modified in place. Parameters shared by the
        whole batch become Python floats (cheapest kernels); per-pendulum or differentiable parameters stay
        tensors, with ``a`` and ``b`` then premultiplied by ``dt``.
        """
        leaves = tuple(fast_get(params, k) for k in ("g", "m", "l", "dt", "max_speed", "max_torque"))
        versions = tuple(t._version for t in leaves)
        cache = self._constant_cache
        if cache is not None and cache[1] == versions and all(a is b for a, b in zip(cache[0], leaves)):
            return cache[2]
        uniform = all(
            not t.requires_grad and (t.ndim == 0 or bool((t == t.reshape(-1)[0]).all())) for t in leaves
        )
        if uniform:  # one set of parameters for the whole batch (the usual case): plain floats
            g, m, l, dt, max_speed, max_torque = (float(t.reshape(-1)[0]) for t in leaves)
            consts = (3 * g / (2 * l), 3.0 / (m * l * l), dt, max_speed, max_torque)
        else:  # per-pendulum parameters (or differentiable ones): tensors, with the products precomputed
            g, m, l, dt, max_speed, max_torque = leaves
            consts = (3 * g / (2 * l) * dt, 3.0 / (m * l * l) * dt, dt, max_speed, max_torque)
        self._constant_cache = (leaves, versions, consts)
        return consts

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        th = fast_get(tensordict, "th")
        thdot = fast_get(tensordict, "thdot")
        params = fast_get(tensordict, "params")
        a, b, dt, max_speed, max_torque = self._constants(params)
        u = fast_get(tensordict, "action").squeeze(-1)
        if isinstance(max_torque, float):
            u = u.clamp(-max_torque, max_torque)
            # thdot' = clip(thdot + (a sin th + b u) dt), written with fused ops
            new_thdot = (thdot + torch.add(th.sin() * (a * dt), u, alpha=b * dt)).clamp(-max_speed, max_speed)
            new_th = torch.add(th, new_thdot, alpha=dt)
        else:  # tensor parameters: a and b already include dt
            u = torch.clamp(u, min=-max_torque, max=max_torque)
            new_thdot = torch.addcmul(torch.addcmul(thdot, th.sin(), a), u, b)
            new_thdot = torch.clamp(new_thdot, min=-max_speed, max=max_speed)
            new_th = torch.addcmul(th, new_thdot, dt)
        norm = self.angle_normalize(th)
        cost = torch.addcmul(torch.addcmul(norm * norm, thdot, thdot, value=0.1), u, u, value=0.001)
        batch = tensordict.batch_size
        return new_td(
            {
                "th": new_th,
                "thdot": new_thdot,
                "params": params,
                "observation": torch.stack([new_th.cos(), new_th.sin(), new_thdot], -1),
                "reward": cost.neg().unsqueeze(-1),
                "done": torch.zeros((*batch, 1), dtype=torch.bool, device=th.device),
            },
            batch,
            self.device,
        )
