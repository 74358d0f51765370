"""Counting environments with several done groups: independent nested groups, heterogeneous agents.

Both keep one counter per done entry; a counter moves up by one when its action says so and its entry is
done once the counter exceeds ``max_steps``. Each group has its own ``"_reset"`` mask, so partial resets
of one group leave every other counter untouched.
"""
from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase

from torchrl.data.tensor_specs import Binary, Categorical, Composite, OneHot, TensorSpec, Unbounded
from torchrl.envs.common import EnvBase
from torchrl.testing._counting import reset_mask

__all__ = [
    "HeterogeneousCountingEnv",
    "HeterogeneousCountingEnvPolicy",
    "MultiKeyCountingEnv",
    "MultiKeyCountingEnvPolicy",
]


def _flag(shape, device) -> Categorical:
    return Categorical(2, shape, dtype=torch.bool, device=device)


def _restart(count: torch.Tensor, mask: torch.Tensor | None, start_val: int) -> None:
    if mask is None:
        count.fill_(start_val)
    else:
        count.masked_fill_(mask, start_val)


class MultiKeyCountingEnv(EnvBase):
    """A counting env with three independent done groups and differently named and typed actions.

    ========================  ===================================  ==========================================
    group (shape)             action                               done entries
    ========================  ===================================  ==========================================
    root ``(*B,)``            ``"action"``: ``OneHot(2)``,         ``done``, ``terminated``
                              index 1 counts
    ``"nested_1"`` ``(*B,3)`` ``("nested_1", "action")``:          ``done``, ``terminated``
                              ``Categorical(2)``, 1 counts
    ``"nested_2"`` ``(*B,2)`` ``("nested_2", "azione")``:          ``done``, ``terminated``, ``truncated``:
                              ``Binary(1)``, 1 counts              the end is a truncation
    ========================  ===================================  ==========================================

    Every group observes its counters (``"observation"``, ``float32``, trailing dim 1) and is rewarded with
    1.0 for each counting step (``"reward"``). A counter is done once it exceeds ``max_steps``; in
    ``"nested_2"`` this is reported as ``truncated`` (``terminated`` stays False). ``"_reset"``,
    ``("nested_1", "_reset")`` and ``("nested_2", "_reset")`` restart their own group only.

    Args:
        max_steps: counter value after which an entry is done.
        start_val: counter value after a reset.

    Examples:
        >>> from torchrl.testing import MultiKeyCountingEnv, MultiKeyCountingEnvPolicy
        >>> env = MultiKeyCountingEnv(batch_size=[2])
        >>> env.reset_keys
        ['_reset', ('nested_1', '_reset'), ('nested_2', '_reset')]
        >>> policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
        >>> env.rollout(10, policy)["next", "nested_2", "truncated"].shape
        torch.Size([2, 6, 2, 1])
    """

    nested_dim_1 = 3
    nested_dim_2 = 2

    def __init__(self, max_steps: int = 5, start_val: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        self.start_val = start_val
        self.make_specs()
        batch, device = self.batch_size, self.device
        self.register_buffer("count", torch.full((*batch, 1), start_val, dtype=torch.int64, device=device))
        self.register_buffer(
            "count_nested_1", torch.full((*batch, self.nested_dim_1, 1), start_val, dtype=torch.int64, device=device)
        )
        self.register_buffer(
            "count_nested_2", torch.full((*batch, self.nested_dim_2, 1), start_val, dtype=torch.int64, device=device)
        )

    def make_specs(self) -> None:
        """Builds the specs described in the class docstring."""
        batch, device = self.batch_size, self.device
        n1 = (*batch, self.nested_dim_1)
        n2 = (*batch, self.nested_dim_2)

        def obs(shape):
            return Unbounded((*shape, 1), dtype=torch.float32, device=device)

        self.observation_spec = Composite(
            observation=obs(batch),
            nested_1=Composite(observation=obs(n1), shape=n1, device=device),
            nested_2=Composite(observation=obs(n2), shape=n2, device=device),
            shape=batch,
            device=device,
        )
        self.action_spec = Composite(
            action=OneHot(2, shape=(*batch, 2), device=device),
            nested_1=Composite(action=Categorical(2, (*n1, 1), device=device), shape=n1, device=device),
            nested_2=Composite(azione=Binary(n=1, shape=(*n2, 1), device=device), shape=n2, device=device),
            shape=batch,
            device=device,
        )
        self.reward_spec = Composite(
            reward=obs(batch),
            nested_1=Composite(reward=obs(n1), shape=n1, device=device),
            nested_2=Composite(reward=obs(n2), shape=n2, device=device),
            shape=batch,
            device=device,
        )
        self.done_spec = Composite(
            done=_flag((*batch, 1), device),
            terminated=_flag((*batch, 1), device),
            nested_1=Composite(
                done=_flag((*n1, 1), device), terminated=_flag((*n1, 1), device), shape=n1, device=device
            ),
            nested_2=Composite(
                done=_flag((*n2, 1), device),
                terminated=_flag((*n2, 1), device),
                truncated=_flag((*n2, 1), device),
                shape=n2,
                device=device,
            ),
            shape=batch,
            device=device,
        )

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            torch.manual_seed(seed)

    def _output(self, rewards: tuple | None) -> TensorDictBase:
        batch, device = self.batch_size, self.device
        c0, c1, c2 = self.count, self.count_nested_1, self.count_nested_2
        d0, d1, d2 = c0 > self.max_steps, c1 > self.max_steps, c2 > self.max_steps
        root = {"observation": c0.float(), "done": d0, "terminated": d0.clone()}
        nested_1 = {"observation": c1.float(), "done": d1, "terminated": d1.clone()}
        nested_2 = {"observation": c2.float(), "done": d2, "terminated": torch.zeros_like(d2), "truncated": d2.clone()}
        if rewards is not None:
            root["reward"], nested_1["reward"], nested_2["reward"] = (r.float() for r in rewards)
        root["nested_1"] = TensorDict(nested_1, batch_size=(*batch, self.nested_dim_1), device=device)
        root["nested_2"] = TensorDict(nested_2, batch_size=(*batch, self.nested_dim_2), device=device)
        return TensorDict(root, batch_size=batch, device=device)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        partial = tensordict is not None and any(tensordict.get(k, None) is not None for k in self.reset_keys)
        groups = zip(self.reset_keys, (self.count, self.count_nested_1, self.count_nested_2))
        for key, count in groups:
            mask = reset_mask(tensordict, key, count.shape)
            if mask is None and partial:
                continue  # a partial reset that leaves this group alone
            _restart(count, mask, self.start_val)
        return self._output(None)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        inc0 = tensordict.get("action")[..., 1:2].to(torch.int64)
        inc1 = tensordict.get(("nested_1", "action")).to(torch.int64)
        inc2 = tensordict.get(("nested_2", "azione")).to(torch.int64)
        self.count += inc0
        self.count_nested_1 += inc1
        self.count_nested_2 += inc2
        return self._output((inc0, inc1, inc2))


def _count_actions(full_action_spec: TensorSpec, shape: torch.Size, count: bool, deterministic: bool) -> TensorDictBase:
    """Actions for every key of a counting env's action spec: 'count up' (1, or one-hot index 1) or 'stay'."""
    out = full_action_spec.zero(shape)
    for key, leaf in full_action_spec.items(include_nested=True, leaves_only=True):
        value = out.get(key)
        up_shape = value.shape[:-1] if isinstance(leaf, OneHot) else value.shape
        if count and not deterministic:
            up = torch.rand(up_shape, device=value.device) < 0.5
        else:
            up = torch.full(up_shape, bool(count), dtype=torch.bool, device=value.device)
        if isinstance(leaf, OneHot):
            value = torch.stack([~up, up], -1).to(value.dtype)
        else:
            value = up.to(value.dtype)
        out.set(key, value)
    return out


class MultiKeyCountingEnvPolicy(TensorDictModuleBase):
    """Writes an action for every action key of a :class:`MultiKeyCountingEnv`.

    Args:
        full_action_spec: the env's ``full_action_spec``.
        count: whether counters should move up (False: every action is 'stay').
        deterministic: with ``count``, count up at every step; otherwise each counter counts up or stays
            at random (probability 1/2 each), so entries finish at different times.

    Examples:
        >>> from torchrl.testing import MultiKeyCountingEnv
        >>> env = MultiKeyCountingEnv()
        >>> policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
        >>> policy(env.reset())["action"].tolist()
        [False, True]
    """

    def __init__(self, full_action_spec: TensorSpec, count: bool = True, deterministic: bool = False) -> None:
        super().__init__()
        self.full_action_spec = full_action_spec
        self.count = count
        self.deterministic = deterministic
        self.in_keys = []
        self.out_keys = list(full_action_spec.keys(True, True))

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        extra = td.batch_size[: td.batch_dims - self.full_action_spec.ndim]
        return td.update(_count_actions(self.full_action_spec, extra, self.count, self.deterministic))

    forward = __call__


class HeterogeneousCountingEnv(EnvBase):
    """A counting env with a group of heterogeneous agents, lazily stacked under ``"lazy"``.

    Agent ``i`` (of ``n_agents = 3``) observes its counter repeated ``i + 1`` times
    (``("lazy", "observation")``, ``float32``, shape ``(*batch, i + 1)``) and acts with ``i + 1`` bits
    (``("lazy", "action")``, ``Binary(n=i + 1)``): its counter moves up by one when any bit is set. The
    observation and action specs of the group are therefore :class:`~torchrl.data.StackedComposite`\\ s.
    Each agent has its own ``("lazy", "reward")`` (1.0 per counting step) and
    ``("lazy", "done")``/``("lazy", "terminated")`` (counter above ``max_steps``); the root ``done`` is set
    when every agent is done. ``("lazy", "_reset")`` restarts single agents, ``"_reset"`` whole
    sub-environments.

    Args:
        max_steps: counter value after which an agent is done.
        start_val: counter value after a reset.

    Examples:
        >>> from torchrl.testing import HeterogeneousCountingEnv
        >>> env = HeterogeneousCountingEnv()
        >>> data = env.reset()
        >>> [data["lazy"][i]["observation"].shape for i in range(3)]
        [torch.Size([1]), torch.Size([2]), torch.Size([3])]
    """

    n_agents = 3

    def __init__(self, max_steps: int = 5, start_val: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        self.start_val = start_val
        batch, device = self.batch_size, self.device
        dim = len(batch)
        agents = range(self.n_agents)
        group = (*batch, self.n_agents)
        self.observation_spec = Composite(
            lazy=torch.stack([self.get_agent_obs_spec(i) for i in agents], dim), shape=batch, device=device
        )
        self.action_spec = Composite(
            lazy=torch.stack([self.get_agent_action_spec(i) for i in agents], dim), shape=batch, device=device
        )
        self.reward_spec = Composite(
            lazy=Composite(reward=Unbounded((*group, 1), device=device), shape=group, device=device),
            shape=batch,
            device=device,
        )
        self.done_spec = Composite(
            done=_flag((*batch, 1), device),
            terminated=_flag((*batch, 1), device),
            lazy=Composite(
                done=_flag((*group, 1), device), terminated=_flag((*group, 1), device), shape=group, device=device
            ),
            shape=batch,
            device=device,
        )
        self.register_buffer("count", torch.full((*group, 1), start_val, dtype=torch.int64, device=device))

    def get_agent_obs_spec(self, i: int) -> Composite:
        """Agent ``i``'s observation spec: ``observation`` of shape ``(*batch, i + 1)``."""
        batch, device = self.batch_size, self.device
        return Composite(observation=Unbounded((*batch, i + 1), device=device), shape=batch, device=device)

    def get_agent_action_spec(self, i: int) -> Composite:
        """Agent ``i``'s action spec: ``action``, ``Binary(n=i + 1)``."""
        batch, device = self.batch_size, self.device
        return Composite(action=Binary(n=i + 1, shape=(*batch, i + 1), device=device), shape=batch, device=device)

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            torch.manual_seed(seed)

    def _output(self, increments: torch.Tensor | None) -> TensorDictBase:
        batch, device = self.batch_size, self.device
        dim = len(batch)
        done = self.count > self.max_steps
        agents = []
        for i in range(self.n_agents):
            count = self.count.select(dim, i)
            entries = {"observation": count.float().expand(*batch, i + 1).clone(), "done": done.select(dim, i)}
            entries["terminated"] = entries["done"].clone()
            if increments is not None:
                entries["reward"] = increments.select(dim, i).float()
            agents.append(TensorDict(entries, batch_size=batch, device=device))
        root_done = done.all(dim)
        return TensorDict(
            {"lazy": LazyStackedTensorDict(*agents, stack_dim=dim), "done": root_done, "terminated": root_done.clone()},
            batch_size=batch,
            device=device,
        )

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        shape = self.count.shape
        agent_mask = reset_mask(tensordict, ("lazy", "_reset"), shape)
        root_mask = reset_mask(tensordict, "_reset", (*self.batch_size, 1))
        if root_mask is not None:
            root_mask = root_mask.unsqueeze(-2).expand(shape)
        if agent_mask is None and root_mask is None:
            _restart(self.count, None, self.start_val)
        else:
            mask = agent_mask if root_mask is None else root_mask if agent_mask is None else agent_mask | root_mask
            _restart(self.count, mask, self.start_val)
        return self._output(None)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        dim = len(self.batch_size)
        lazy = tensordict.get("lazy")
        increments = torch.stack(
            [lazy[(slice(None),) * dim + (i,)].get("action").any(-1, keepdim=True) for i in range(self.n_agents)], dim
        ).to(self.count.dtype)
        self.count += increments
        return self._output(increments)


class HeterogeneousCountingEnvPolicy(TensorDictModuleBase):
    """Writes every agent's action in a :class:`HeterogeneousCountingEnv`: all bits set (``count``) or none.

    Args:
        full_action_spec: the env's ``full_action_spec``.
        count: whether agents should count up.

    Examples:
        >>> from torchrl.testing import HeterogeneousCountingEnv
        >>> env = HeterogeneousCountingEnv()
        >>> data = HeterogeneousCountingEnvPolicy(env.full_action_spec)(env.reset())
        >>> [data["lazy"][i]["action"].tolist() for i in range(3)]
        [[1], [1, 1], [1, 1, 1]]
    """

    def __init__(self, full_action_spec: TensorSpec, count: bool = True) -> None:
        super().__init__()
        self.full_action_spec = full_action_spec
        self.count = count
        self.in_keys = []
        self.out_keys = list(full_action_spec.keys(True, True))

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        extra = td.batch_size[: td.batch_dims - self.full_action_spec.ndim]
        spec = self.full_action_spec
        return td.update(spec.one(extra) if self.count else spec.zero(extra))

    forward = __call__
