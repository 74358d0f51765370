"""Variants of ``AgentsEnv`` for the group tests of structural and env-level transforms
(``test_group_contract_structure.py``): per-agent images, one group per agent, per-agent done flags, empty
groups."""
from __future__ import annotations

import torch
from tensordict import TensorDict

from test.envs.transforms._group_env import AgentsEnv
from torchrl.data.tensor_specs import Categorical, Composite, Unbounded

__all__ = ["AgentDoneEnv", "EmptyInfoAgentsEnv", "PixelAgentsEnv", "SplitAgentsEnv", "SplitDoneEnv"]


class EmptyInfoAgentsEnv(AgentsEnv):
    """AgentsEnv whose group also declares an empty per-agent ``("agents", "info")`` and an empty root
    group ``"team"`` of shape (*batch, 3)."""

    def __init__(self, batch_size=(), **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        group = (*self.batch_size, self.n_agents)
        self.observation_spec["agents", "info"] = Composite(shape=group)
        self.observation_spec["team"] = Composite(shape=group)

    def _obs(self):
        out = super()._obs()
        group = (*self.batch_size, self.n_agents)
        out.set(("agents", "info"), TensorDict(batch_size=group))
        out.set("team", TensorDict(batch_size=group))
        return out


class PixelAgentsEnv(AgentsEnv):
    """AgentsEnv with a per-agent image ``("agents", "pixels")`` (2, 4) ``= x * [[0..3], [4..7]]``."""

    def __init__(self, batch_size=(), **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        group = (*self.batch_size, self.n_agents)
        self.observation_spec["agents", "pixels"] = Unbounded(shape=(*group, 2, 4))

    def _obs(self):
        out = super()._obs()
        out.set(("agents", "pixels"), self._x.unsqueeze(-1) * torch.arange(8.0).view(2, 4))
        return out


class SplitAgentsEnv(AgentsEnv):
    """AgentsEnv with one group per agent: ``"agent_i"`` holds agent i's observation, action and reward."""

    def __init__(self, batch_size=(), **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        shape, names = self.batch_size, [f"agent_{i}" for i in range(self.n_agents)]
        obs, act, rew = self.observation_spec, self.full_action_spec, self.full_reward_spec
        self.observation_spec = Composite(
            {n: Composite(observation=obs["agents", "observation"][..., i, :], shape=shape) for i, n in enumerate(names)},
            observation=obs["observation"], shape=shape)
        self.full_action_spec = Composite(
            {n: Composite(action=act["agents", "action"][..., i, :], shape=shape) for i, n in enumerate(names)}, shape=shape)
        self.full_reward_spec = Composite(
            {n: Composite(reward=rew["agents", "reward"][..., i, :], shape=shape) for i, n in enumerate(names)}, shape=shape)
        self.names = names

    def _split(self, out):
        group = out.pop("agents")
        for i, n in enumerate(self.names):
            out.set(n, group[..., i])
        return out

    def _reset(self, tensordict, **kwargs):
        return self._split(super()._reset(tensordict, **kwargs))

    def _step(self, tensordict):
        action = torch.stack([tensordict.get((n, "action")) for n in self.names], -2)
        return self._split(super()._step(tensordict.copy().set(("agents", "action"), action)))


class SplitDoneEnv(SplitAgentsEnv):
    """SplitAgentsEnv whose per-agent groups also hold done flags (all done with the env)."""

    def __init__(self, batch_size=(), **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        shape = self.batch_size
        flag = Categorical(2, shape=(*shape, 1), dtype=torch.bool)
        self.full_done_spec = Composite(
            done=flag.clone(), terminated=flag.clone(),
            **{n: Composite(done=flag.clone(), terminated=flag.clone(), shape=shape) for n in self.names}, shape=shape)

    def _flags(self, out):
        for n in self.names:
            out.set((n, "done"), out.get("done").clone())
            out.set((n, "terminated"), out.get("terminated").clone())
        return out

    def _reset(self, tensordict, **kwargs):
        return self._flags(super()._reset(tensordict, **kwargs))

    def _step(self, tensordict):
        return self._flags(super()._step(tensordict))


class AgentDoneEnv(AgentsEnv):
    """AgentsEnv with per-agent done flags ``("agents", "done" / "terminated")`` (1,): every agent is
    done with the env (after ``max_steps`` steps)."""

    def __init__(self, batch_size=(), **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        group = (*self.batch_size, self.n_agents)
        flag = Categorical(2, shape=(*group, 1), dtype=torch.bool)
        root = Categorical(2, shape=(*self.batch_size, 1), dtype=torch.bool)
        self.full_done_spec = Composite(
            done=root, terminated=root.clone(), agents=Composite(done=flag, terminated=flag.clone(), shape=group),
            shape=self.batch_size,
        )

    def _agent_done(self):
        return (self._count >= self.max_steps).unsqueeze(-2).expand(*self.batch_size, self.n_agents, 1).clone()

    def _reset(self, tensordict, **kwargs):
        out = super()._reset(tensordict, **kwargs)
        done = self._agent_done()
        out.set(("agents", "done"), done)
        out.set(("agents", "terminated"), done.clone())
        return out

    def _step(self, tensordict):
        out = super()._step(tensordict)
        done = self._agent_done()
        out.set(("agents", "done"), done)
        out.set(("agents", "terminated"), done.clone())
        return out
