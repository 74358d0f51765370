"""A multi-agent test env: a group ``"agents"`` with an agent dimension next to root entries."""
from __future__ import annotations

import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase


class AgentsEnv(EnvBase):
    """``n_agents`` agents on a line; the group ``"agents"`` has batch shape ``(*batch, n_agents)``.

    Per agent: ``("agents", "observation")`` (3,) ``= tanh([x, 2x, 3x])``, ``("agents", "action")`` (1,) in
    [-1, 1], ``("agents", "reward")`` (1,) ``= -x^2``. At the root: ``"observation"`` (2,) ``= [mean x, max x]``
    and the done flags (done after ``max_steps`` steps). The positions live in the env (no state entries).
    """

    def __init__(self, batch_size=(), n_agents: int = 3, max_steps: int = 4, seed: int = 0) -> None:
        super().__init__(batch_size=batch_size)
        shape, self.n_agents, self.max_steps = self.batch_size, n_agents, max_steps
        group = (*shape, n_agents)
        self.observation_spec = Composite(
            agents=Composite(observation=Bounded(-1.0, 1.0, shape=(*group, 3)), shape=group),
            observation=Unbounded(shape=(*shape, 2)),
            shape=shape,
        )
        self.full_action_spec = Composite(
            agents=Composite(action=Bounded(-1.0, 1.0, shape=(*group, 1)), shape=group), shape=shape
        )
        self.full_reward_spec = Composite(agents=Composite(reward=Unbounded(shape=(*group, 1)), shape=group), shape=shape)
        self._gen = torch.Generator().manual_seed(seed)
        self._x = torch.zeros(*group, 1)
        self._count = torch.zeros(*shape, 1, dtype=torch.int64)

    def _obs(self) -> TensorDict:
        x, shape = self._x, self.batch_size
        group = TensorDict(observation=torch.tanh(x * torch.tensor([1.0, 2.0, 3.0])), batch_size=(*shape, self.n_agents))
        root = torch.cat([x.mean(-2), x.amax(-2)], -1)
        return TensorDict(agents=group, observation=root, batch_size=shape)

    def _reset(self, tensordict, **kwargs):
        fresh = torch.rand(self._x.shape, generator=self._gen) * 2 - 1
        reset = tensordict.get("_reset", None) if tensordict is not None else None
        if reset is None:
            self._x, self._count = fresh, torch.zeros_like(self._count)
        else:
            self._x = torch.where(reset.reshape(*self.batch_size, 1, 1), fresh, self._x)
            self._count = torch.where(reset.reshape(self._count.shape), 0, self._count)
        out = self._obs()
        out.set("done", torch.zeros(*self.batch_size, 1, dtype=torch.bool))
        out.set("terminated", torch.zeros(*self.batch_size, 1, dtype=torch.bool))
        return out

    def _step(self, tensordict):
        self._x = (self._x + tensordict.get(("agents", "action"))).clamp(-3.0, 3.0)
        self._count = self._count + 1
        out = self._obs()
        out.set(("agents", "reward"), -(self._x * self._x))
        done = self._count >= self.max_steps
        out.set("done", done)
        out.set("terminated", done.clone())
        return out

    def _set_seed(self, seed):
        self._gen.manual_seed(0 if seed is None else int(seed))
