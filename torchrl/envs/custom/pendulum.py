"""``PendulumEnv``: gymnasium's Pendulum-v1 dynamics in pure, differentiable, batched torch."""
from __future__ import annotations

import math
import operator

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._fast import entries, fast_get, new_td, scalar
from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs._done import mark_false, where_reset
from torchrl.envs.common import EnvBase
from torchrl.envs.utils import make_composite_from_td as _make_composite_from_td

__all__ = ["PendulumEnv"]

_DEFAULTS = {"max_speed": 8.0, "max_torque": 2.0, "dt": 0.05, "m": 1.0, "l": 1.0}
_PARAM_NAMES = ("g", "m", "l", "dt", "max_speed", "max_torque")
_VERSION = operator.attrgetter("_version")


def _first_value(t: torch.Tensor, name: str) -> float:
    """A parameter's first value, read once for the specs (the default on the meta device, which holds none)."""
    return _DEFAULTS[name] if t.is_meta else float(t.reshape(-1)[0])


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
        # (the meta device has no generator of its own: its draws hold no values anyway)
        on_host = self.device is None or self.device.type == "meta"
        self._generator = torch.Generator(device="cpu" if on_host else self.device)
        self._make_spec(td_params)
        self._constant_cache: tuple | None = None
        self._sin_memo: tuple | None = None
        self._done_templates: dict = {}
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
        max_speed = _first_value(td_params["params", "max_speed"], "max_speed")
        max_torque = _first_value(td_params["params", "max_torque"], "max_torque")
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
        params = fast_get(tensordict, "params") if tensordict is not None else None
        batch = tensordict.batch_size if tensordict is not None else self.batch_size
        if params is None:
            params = self.gen_params(batch_size=batch, device=self.device)["params"]
        device = params.device if params.device is not None else self.device
        gen = self._generator
        th = torch.rand(batch, generator=gen, device=device) * (2 * math.pi) - math.pi
        thdot = torch.rand(batch, generator=gen, device=device) * 2 - 1
        mask = fast_get(tensordict, "_reset") if tensordict is not None else None
        if mask is not None and (old_th := fast_get(tensordict, "th")) is not None:
            mask = mask.reshape(batch)
            th = where_reset(mask, th, old_th)
            thdot = where_reset(mask, thdot, fast_get(tensordict, "thdot"))
        observation = torch.stack([th.cos(), th.sin(), thdot], -1)
        return new_td({"th": th, "thdot": thdot, "params": params, "observation": observation}, batch, self.device)

    def _constants(self, params: TensorDictBase, like: torch.Tensor) -> tuple:
        """``(a dt, b dt, dt, -max_speed, max_speed, -max_torque, max_torque, pi, 2 pi)`` with ``a = 3g/(2l)``
        and ``b = 3/(m l^2)``, as tensors ready for the step's fused ops.

        Parameters shared by the whole batch (the usual case) become 0-dim tensors of the state's dtype
        (cheaper in every op than Python numbers); per-pendulum parameters stay batched tensors. Recomputed
        only when a parameter tensor is replaced or modified in place, and at every step for parameters that
        require grad (their products belong to the current graph).
        """
        # the check runs at every step: all of params' entries, compared by identity and version in C loops
        found = entries(params)  # None for other TensorDict types, or with the fast paths off: the public read
        leaves = tuple(found.values() if found is not None else params.values())
        cache = self._constant_cache
        if (
            cache is not None
            and len(leaves) == len(cache[0])
            and all(map(operator.is_, leaves, cache[0]))
            and tuple(map(_VERSION, leaves)) == cache[1]
            and cache[3] is like.dtype
        ):
            return cache[2]
        named = tuple(fast_get(params, k) for k in _PARAM_NAMES)
        differentiable = torch.is_grad_enabled() and any(t.requires_grad for t in named)
        # Whether the batch shares one set of parameters is read on the host, for CPU tensors only: on an
        # accelerator each read would wait for the device, so there the parameters stay tensors (batched ones
        # cost no more in the step's fused ops), and the step makes no host sync
        uniform = not differentiable and all(t.is_cpu for t in named) and all(
            not t.requires_grad and (t.ndim == 0 or bool((t == t.reshape(-1)[0]).all())) for t in named
        )
        if uniform:  # one set of parameters for the whole batch
            g, m, l, dt, max_speed, max_torque = (float(t.reshape(-1)[0]) for t in named)
            values = (3 * g / (2 * l) * dt, 3.0 / (m * l * l) * dt, dt, -max_speed, max_speed, -max_torque, max_torque)
            consts = tuple(scalar(v, like.dtype, like.device) for v in values)
        else:  # per-pendulum (or differentiable) parameters: batched tensors
            g, m, l, dt, max_speed, max_torque = named
            consts = (3 * g / (2 * l) * dt, 3.0 / (m * l * l) * dt, dt, -max_speed, max_speed, -max_torque, max_torque)
        consts += (scalar(math.pi, like.dtype, like.device), scalar(2 * math.pi, like.dtype, like.device))
        cacheable = not differentiable and all(type(t) is torch.Tensor for t in leaves)
        cache = (leaves, tuple(map(_VERSION, leaves)), consts, like.dtype) if cacheable else None
        self._constant_cache = cache
        return consts

    def _sin(self, th: torch.Tensor) -> torch.Tensor:
        """``sin(th)``, reusing the one the previous step computed for the observation when ``th`` is that
        step's new angle, untouched (same tensor, same version)."""
        memo = self._sin_memo
        if memo is not None and memo[0] is th and memo[1] == th._version:
            return memo[2]
        return th.sin()

    def _done_template(self, batch: torch.Size, like: torch.Tensor) -> torch.Tensor:
        """A ``[*batch, 1]`` bool tensor on ``like``'s device to copy the step's all-False ``done`` from
        (``zeros_like`` costs less than ``zeros`` with a shape, dtype and device)."""
        template = self._done_templates.get(batch)
        if template is None or template.device != like.device:
            if len(self._done_templates) >= 16:
                self._done_templates.clear()
            template = self._done_templates[batch] = torch.zeros((*batch, 1), dtype=torch.bool, device=like.device)
        return template

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        th = fast_get(tensordict, "th")
        thdot = fast_get(tensordict, "thdot")
        params = fast_get(tensordict, "params")
        a_dt, b_dt, dt, min_speed, max_speed, min_torque, max_torque, pi, two_pi = self._constants(params, th)
        u = fast_get(tensordict, "action").squeeze(-1).clamp(min_torque, max_torque)
        # thdot' = clip(thdot + (a sin th + b u) dt), th' = th + thdot' dt
        new_thdot = torch.addcmul(torch.addcmul(thdot, self._sin(th), a_dt), u, b_dt).clamp(min_speed, max_speed)
        new_th = torch.addcmul(th, new_thdot, dt)
        norm = torch.remainder(th + pi, two_pi) - pi
        cost = torch.addcmul(torch.addcmul(norm * norm, thdot, thdot, value=0.1), u, u, value=0.001)
        sin_new = new_th.sin()
        # (written through __dict__: nn.Module.__setattr__ costs more than the rest of this line)
        self.__dict__["_sin_memo"] = None if sin_new.requires_grad else (new_th, new_th._version, sin_new)
        batch = tensordict.batch_size
        done = torch.zeros_like(self._done_template(batch, th))
        if not done.is_cpu:  # never done: on an accelerator, the done test then reads nothing
            mark_false(done)
        return new_td(
            {
                "th": new_th,
                "thdot": new_thdot,
                "params": params,
                "observation": torch.stack([new_th.cos(), sin_new, new_thdot], -1),
                "reward": cost.neg().unsqueeze(-1),
                "done": done,
            },
            batch,
            self._device,
            convert_dicts=False,
        )
