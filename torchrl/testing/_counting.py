"""Counting environments: the observation is a counter that each step raises by the action (0 or 1).

They are deterministic and cheap, so tests can predict every value: after ``k`` steps with action 1 the
counter is ``start_val + k``, and an episode is done once the counter exceeds ``max_steps``.
"""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey
from torch import nn

from torchrl.data.tensor_specs import Binary, Categorical, Composite, TensorSpec, Unbounded
from torchrl.envs.common import EnvBase

__all__ = ["CountingEnv", "CountingEnvCountModule", "CountingEnvCountPolicy", "NestedCountingEnv", "reset_mask"]


def reset_mask(tensordict: TensorDictBase | None, key: NestedKey, shape: torch.Size) -> torch.Tensor | None:
    """The ``key`` reset mask of ``tensordict`` broadcast to ``shape`` (``None``: reset everything)."""
    if tensordict is None:
        return None
    mask = tensordict.get(key, None)
    if mask is None:
        return None
    if mask.shape != shape:
        mask = mask.reshape(*mask.shape, *([1] * (len(shape) - mask.ndim))).expand(shape)
    return mask


class CountingEnv(EnvBase):
    """An environment whose observation counts the steps taken with action 1.

    Specs: ``"observation"`` (``int32``, ``(*batch, 1)``), ``"action"`` (``Binary(n=1)``, ``int8``),
    ``"reward"`` (``float32``, ``(*batch, 1)``, always 0), ``"done"``/``"terminated"`` (``bool``). Each step
    adds the action to the counter; ``done`` and ``terminated`` are set once the counter exceeds
    ``max_steps``. ``"_reset"`` masks restart only the selected sub-environments.

    Args:
        max_steps: the counter value after which episodes end (done when ``count > max_steps``).
        start_val: the counter value after a reset.

    Keyword Args:
        **kwargs: ``EnvBase`` options (``batch_size``, ``device``, ...).

    Examples:
        >>> from torchrl.testing import CountingEnv, CountingEnvCountPolicy
        >>> env = CountingEnv(max_steps=3)
        >>> data = env.rollout(10, CountingEnvCountPolicy(env.action_spec))
        >>> data["next", "observation"].squeeze(-1).tolist()
        [1, 2, 3, 4]
        >>> data["next", "done"].squeeze(-1).tolist()
        [False, False, False, True]
    """

    def __init__(self, max_steps: int = 5, start_val: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        self.start_val = start_val
        batch, device = self.batch_size, self.device
        self.observation_spec = Composite(
            observation=Unbounded((*batch, 1), dtype=torch.int32, device=device), shape=batch, device=device
        )
        self.action_spec = Binary(n=1, shape=(*batch, 1), device=device)
        self.reward_spec = Unbounded((*batch, 1), device=device)
        self.done_spec = Categorical(2, (*batch, 1), dtype=torch.bool, device=device)
        self.register_buffer("count", torch.full((*batch, 1), start_val, dtype=torch.int32, device=device))

    def _set_seed(self, seed: int | None) -> None:
        # The dynamics are deterministic; seeding the global generator makes random policies reproducible.
        if seed is not None:
            torch.manual_seed(seed)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        mask = reset_mask(tensordict, "_reset", self.count.shape)
        if mask is None:
            self.count.fill_(self.start_val)
        else:
            self.count.masked_fill_(mask, self.start_val)
        done = self.count > self.max_steps
        return TensorDict(
            {"observation": self.count.clone(), "done": done, "terminated": done.clone()},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count += tensordict.get(self.action_key).to(self.count.dtype).reshape(self.count.shape)
        done = self.count > self.max_steps
        return TensorDict(
            {
                "observation": self.count.clone(),
                "reward": torch.zeros(self.count.shape, device=self.count.device),
                "done": done,
                "terminated": done.clone(),
            },
            batch_size=self.batch_size,
            device=self.device,
        )


class NestedCountingEnv(CountingEnv):
    """A :class:`CountingEnv` whose entries live in a nested ``"data"`` group of ``nested_dim`` counters.

    With the defaults every entry is nested: ``("data", "states")`` (observation), ``("data", "action")``,
    ``("data", "reward")``, ``("data", "done")``/``("data", "terminated")``, each of shape
    ``(*batch, nested_dim, 1)``; ``"data"`` is a Composite of shape ``(*batch, nested_dim)``. Each nested
    counter follows its own action, is done once it exceeds ``max_steps`` and is restarted by the
    ``("data", "_reset")`` mask. Entries that are not nested sit at the root with shape ``(*batch, 1)``: a
    root action drives every counter, a root observation shows the first counter, and a root done is set
    when every counter is done (a root ``"_reset"`` restarts all counters of that sub-environment).

    Args:
        max_steps: the counter value after which a counter is done.
        start_val: the counter value after a reset.
        nest_obs_action: put the observation and action under ``"data"``.
        nest_done: put done/terminated under ``"data"``.
        nest_reward: put the reward under ``"data"``.
        nested_dim: number of counters in the ``"data"`` group.
        has_root_done: with ``nest_done``, also report a root done (every counter done).

    Examples:
        >>> from torchrl.testing import NestedCountingEnv
        >>> env = NestedCountingEnv(nested_dim=2, batch_size=[4])
        >>> env.done_keys
        [('data', 'done'), ('data', 'terminated')]
        >>> env.rollout(3)["next", "data", "states"].shape
        torch.Size([4, 3, 2, 1])
    """

    def __init__(
        self,
        max_steps: int = 5,
        start_val: int = 0,
        nest_obs_action: bool = True,
        nest_done: bool = True,
        nest_reward: bool = True,
        nested_dim: int = 3,
        has_root_done: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(max_steps=max_steps, start_val=start_val, **kwargs)
        self.nested_dim = nested_dim
        self.nest_obs_action = nest_obs_action
        self.nest_done = nest_done
        self.nest_reward = nest_reward
        self.has_root_done = bool(has_root_done) and nest_done
        batch, device = self.batch_size, self.device
        nested = (*batch, nested_dim)
        self.count = torch.full((*nested, 1), start_val, dtype=torch.int32, device=device)

        def group(**entries) -> Composite:
            return Composite(data=Composite(entries, shape=nested, device=device), shape=batch, device=device)

        if nest_obs_action:
            self.observation_spec = group(states=Unbounded((*nested, 1), dtype=torch.int32, device=device))
            self.action_spec = group(action=Binary(n=1, shape=(*nested, 1), device=device))
        if nest_reward:
            self.reward_spec = group(reward=Unbounded((*nested, 1), device=device))
        if nest_done:
            flag = Categorical(2, (*nested, 1), dtype=torch.bool, device=device)
            done_spec = group(done=flag, terminated=flag.clone())
            if self.has_root_done:
                root_flag = Categorical(2, (*batch, 1), dtype=torch.bool, device=device)
                done_spec["done"] = root_flag
                done_spec["terminated"] = root_flag.clone()
            self.done_spec = done_spec

    def _counter_output(self, include_reward: bool) -> TensorDictBase:
        count = self.count
        batch = self.batch_size
        nested_done = count > self.max_steps
        root_done = nested_done.all(-2)
        out = TensorDict(batch_size=batch, device=self.device)
        if self.nest_obs_action:
            out.set(("data", "states"), count.clone())
        else:
            out.set("observation", count[..., 0, :].clone())
        if self.nest_done:
            out.set(("data", "done"), nested_done)
            out.set(("data", "terminated"), nested_done.clone())
        if not self.nest_done or self.has_root_done:
            out.set("done", root_done)
            out.set("terminated", root_done.clone())
        if include_reward:
            if self.nest_reward:
                out.set(("data", "reward"), torch.zeros(count.shape, device=count.device))
            else:
                out.set("reward", torch.zeros((*batch, 1), device=count.device))
        if "data" in out.keys():
            out.get("data").batch_size = (*batch, self.nested_dim)
        return out

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        shape = self.count.shape
        nested_mask = reset_mask(tensordict, ("data", "_reset"), shape) if self.nest_done else None
        root_mask = None
        if tensordict is not None and tensordict.get("_reset", None) is not None:
            root_mask = reset_mask(tensordict, "_reset", (*self.batch_size, 1)).unsqueeze(-2).expand(shape)
        if nested_mask is None and root_mask is None:
            self.count.fill_(self.start_val)
        else:
            mask = nested_mask if root_mask is None else root_mask if nested_mask is None else nested_mask | root_mask
            self.count.masked_fill_(mask, self.start_val)
        return self._counter_output(include_reward=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.nest_obs_action:
            action = tensordict.get(("data", "action"))
        else:
            action = tensordict.get("action").unsqueeze(-2)
        self.count += action.to(self.count.dtype).expand(self.count.shape)
        return self._counter_output(include_reward=True)


class CountingEnvCountPolicy(TensorDictModuleBase):
    """A policy that always plays 1 (``action_spec``'s ones): counting envs count up by one each step.

    Args:
        action_spec: the action spec (``env.action_spec``); its ``one()`` is the action.
        action_key: where to write the action.

    Examples:
        >>> from torchrl.testing import CountingEnv, CountingEnvCountPolicy
        >>> env = CountingEnv(batch_size=[2])
        >>> policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
        >>> policy(env.reset())["action"].tolist()
        [[1], [1]]
    """

    def __init__(self, action_spec: TensorSpec, action_key: NestedKey = "action") -> None:
        super().__init__()
        self.action_spec = action_spec
        self.action_key = action_key
        self.in_keys = []
        self.out_keys = [action_key]

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        action = self.action_spec.one()
        batch = td.batch_size
        if action.shape[: len(batch)] != batch:
            action = action.expand(*batch, *action.shape)
        return td.set(self.action_key, action.clone())

    forward = __call__


class CountingEnvCountModule(nn.Module):
    """The module form of :class:`CountingEnvCountPolicy`: returns ``action_spec``'s ones whatever the input.

    Examples:
        >>> from torchrl.testing import CountingEnv
        >>> module = CountingEnvCountModule(CountingEnv().action_spec)
        >>> module(torch.zeros(1)).tolist()
        [1]
    """

    def __init__(self, action_spec: TensorSpec) -> None:
        super().__init__()
        self.action_spec = action_spec

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.action_spec.one()
