"""Small deterministic environments for tests: vector / image observations, discrete / continuous actions,
and counter envs that mimic batched containers (locked and unlocked batch sizes)."""
from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl.data.tensor_specs import Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.envs.common import EnvBase
from torchrl.testing._counting import reset_mask

__all__ = [
    "ContinuousActionVecMockEnv",
    "DiscreteActionConvMockEnv",
    "DiscreteActionVecMockEnv",
    "MockBatchedLockedEnv",
    "MockBatchedUnLockedEnv",
    "MockSerialEnv",
]


def _flag(shape, device) -> Categorical:
    return Categorical(2, shape, dtype=torch.bool, device=device)


class _MockEnv(EnvBase):
    """A point in observation space that each action pushes; episodes are truncated after ``max_steps``.

    Subclasses define ``obs_key``, ``obs_shape`` (event shape) and ``_make_action_spec`` /
    ``_delta(action)``. The initial observation is drawn uniformly in ``[0, 1)`` from the env's own
    generator (so ``set_seed`` makes resets reproducible); after a step the observation is the previous
    one plus ``_delta(action)`` and the reward is the observation's mean. After ``max_steps`` steps the
    episode ends truncated: ``done`` and ``truncated`` True, ``terminated`` False.
    """

    obs_key = "observation"
    obs_shape: tuple = (7,)

    def __init__(self, *, seed: int = 100, max_steps: int = 10, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        batch, device = self.batch_size, self.device
        self._generator = torch.Generator()
        self.observation_spec = Composite(
            {self.obs_key: Unbounded((*batch, *self.obs_shape), device=device)}, shape=batch, device=device
        )
        self.action_spec = self._make_action_spec()
        self.reward_spec = Unbounded((*batch, 1), device=device)
        self.done_spec = Composite(
            done=_flag((*batch, 1), device),
            terminated=_flag((*batch, 1), device),
            truncated=_flag((*batch, 1), device),
            shape=batch,
            device=device,
        )
        self.register_buffer("state", torch.zeros((*batch, *self.obs_shape), device=device))
        self.register_buffer("step_count", torch.zeros((*batch, 1), dtype=torch.int64, device=device))
        self._set_seed(seed)

    def _make_action_spec(self):
        raise NotImplementedError

    def _delta(self, action: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def _set_seed(self, seed: int | None) -> None:
        if seed is None:
            self._generator.seed()
        else:
            self._generator.manual_seed(int(seed))

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        fresh = torch.rand(self.state.shape, generator=self._generator).to(self.state.device)
        mask = reset_mask(tensordict, "_reset", self.step_count.shape)
        if mask is None:
            self.state.copy_(fresh)
            self.step_count.zero_()
        else:
            state_mask = mask.reshape(*mask.shape[:-1], *([1] * len(self.obs_shape))).expand(self.state.shape)
            self.state.copy_(torch.where(state_mask, fresh, self.state))
            self.step_count.masked_fill_(mask, 0)
        return TensorDict({self.obs_key: self.state.clone()}, batch_size=self.batch_size, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.state += self._delta(tensordict.get("action"))
        self.step_count += 1
        truncated = self.step_count >= self.max_steps
        reward = self.state.reshape(*self.batch_size, -1).mean(-1, keepdim=True)
        return TensorDict(
            {
                self.obs_key: self.state.clone(),
                "reward": reward,
                "done": truncated.clone(),
                "terminated": torch.zeros_like(truncated),
                "truncated": truncated,
            },
            batch_size=self.batch_size,
            device=self.device,
        )


class _DiscreteMixin:
    """Actions are one of 7 choices: one-hot by default, integer indices with ``categorical_action_encoding``."""

    n_actions = 7

    def __init__(self, *, categorical_action_encoding: bool = False, **kwargs) -> None:
        self.categorical_action_encoding = categorical_action_encoding
        super().__init__(**kwargs)

    def _make_action_spec(self):
        batch, device = self.batch_size, self.device
        if self.categorical_action_encoding:
            return Categorical(self.n_actions, (*batch,), device=device)
        return OneHot(self.n_actions, shape=(*batch, self.n_actions), device=device)

    def _one_hot(self, action: torch.Tensor) -> torch.Tensor:
        if self.categorical_action_encoding:
            return torch.nn.functional.one_hot(action.long(), self.n_actions).float()
        return action.float()


class ContinuousActionVecMockEnv(_MockEnv):
    """Vector observation ``"observation"`` (7 floats) and a continuous action in ``[-1, 1]^7`` added to it.

    Keyword Args:
        seed: seed of the env's generator (initial observations).
        max_steps: episode length; the last step is truncated (``done``, ``truncated``; not ``terminated``).
        **kwargs: ``EnvBase`` options (``batch_size``, ``device``, ...).

    Examples:
        >>> import torch
        >>> from torchrl.testing import ContinuousActionVecMockEnv
        >>> env = ContinuousActionVecMockEnv(max_steps=3)
        >>> td = env.reset()
        >>> obs = td["observation"].clone()
        >>> td["action"] = torch.full((7,), 0.5)
        >>> torch.allclose(env.step(td)["next", "observation"], obs + 0.5)
        True
        >>> env.rollout(10)["next", "truncated"].squeeze(-1).tolist()
        [False, False, True]
    """

    def _make_action_spec(self):
        return Bounded(-1.0, 1.0, shape=(*self.batch_size, 7), device=self.device)

    def _delta(self, action: torch.Tensor) -> torch.Tensor:
        return action


class DiscreteActionVecMockEnv(_DiscreteMixin, _MockEnv):
    """Vector observation ``"observation"`` (7 floats); action ``a`` in ``0..6`` adds 1 to entry ``a``.

    Keyword Args:
        categorical_action_encoding: integer actions (``Categorical(7)``) instead of one-hot (``OneHot(7)``).
        seed: seed of the env's generator (initial observations).
        max_steps: episode length; the last step is truncated.
        **kwargs: ``EnvBase`` options.

    Examples:
        >>> import torch
        >>> from torchrl.testing import DiscreteActionVecMockEnv
        >>> env = DiscreteActionVecMockEnv(categorical_action_encoding=True)
        >>> td = env.reset()
        >>> obs = td["observation"].clone()
        >>> td["action"] = torch.tensor(2)
        >>> (env.step(td)["next", "observation"] - obs).round().tolist()
        [0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    """

    def _delta(self, action: torch.Tensor) -> torch.Tensor:
        return self._one_hot(action)


class DiscreteActionConvMockEnv(DiscreteActionVecMockEnv):
    """Image observation ``"pixels"`` of shape ``(1, 7, 7)``; action ``a`` in ``0..6`` adds 1 to column ``a``.

    Keyword Args:
        categorical_action_encoding: integer actions instead of one-hot.
        seed: seed of the env's generator (initial observations).
        max_steps: episode length; the last step is truncated.
        **kwargs: ``EnvBase`` options.

    Examples:
        >>> from torchrl.testing import DiscreteActionConvMockEnv
        >>> env = DiscreteActionConvMockEnv(batch_size=[2])
        >>> env.rollout(4)["next", "pixels"].shape
        torch.Size([2, 4, 1, 7, 7])
    """

    obs_key = "pixels"
    obs_shape = (1, 7, 7)

    def _delta(self, action: torch.Tensor) -> torch.Tensor:
        one_hot = self._one_hot(action)
        return one_hot.unsqueeze(-2).unsqueeze(-3).expand(self.state.shape)


class _GlobalCounterEnv(EnvBase):
    """Each step raises one counter (never reset) and reports it as observation and reward.

    Each reset sets the episode's end to ``max(counter + 100, 2 * counter)``: the step on which the
    counter reaches that value is done. Outputs take the batch size of the input.
    """

    def __init__(self, device=None, **kwargs) -> None:
        super().__init__(device=device, **kwargs)
        batch, device = self.batch_size, self.device
        self.observation_spec = Composite(observation=Unbounded((*batch, 1), device=device), shape=batch, device=device)
        self.action_spec = Unbounded((*batch, 1), device=device)
        self.reward_spec = Unbounded((*batch, 1), device=device)
        self.counter = 0
        self.max_val = 100

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            torch.manual_seed(seed)

    def _values(self, batch: torch.Size) -> torch.Tensor:
        return torch.full((*batch, 1), float(self.counter), device=self.device)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        self.max_val = max(self.counter + 100, self.counter * 2)
        batch = self.batch_size if tensordict is None else tensordict.batch_size
        return TensorDict({"observation": self._values(batch)}, batch_size=batch, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.counter += 1
        batch = tensordict.batch_size
        value = self._values(batch)
        done = torch.full((*batch, 1), self.counter >= self.max_val, device=self.device)
        return TensorDict(
            {"observation": value, "reward": value.clone(), "done": done, "terminated": done.clone()},
            batch_size=batch,
            device=self.device,
        )

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """A step with a random action drawn for ``tensordict``'s batch size (resets first if ``None``)."""
        if tensordict is None:
            tensordict = self.reset()
        tensordict.set("action", self.action_spec_unbatched.rand(tensordict.batch_size))
        return self.step(tensordict)


class MockSerialEnv(_GlobalCounterEnv):
    """A counter env: each step raises a counter (never reset) and reports it as observation and reward.

    Each reset sets the episode's end to ``max(counter + 100, 2 * counter)``: the step on which the
    counter reaches that value is done. Useful to check that data from consecutive calls (or from several
    envs run one after another) is kept in order.

    Args:
        device: the env's device.

    Examples:
        >>> from torchrl.testing import MockSerialEnv
        >>> env = MockSerialEnv()
        >>> env.rollout(3)["next", "observation"].squeeze(-1).tolist()
        [1.0, 2.0, 3.0]
        >>> env.rollout(2)["next", "observation"].squeeze(-1).tolist()
        [4.0, 5.0]
    """


class MockBatchedLockedEnv(_GlobalCounterEnv):
    """A counter env (as :class:`MockSerialEnv`) with a batch size, whose outputs take the batch size of the input.

    The observation is ``counter`` everywhere in the batch; after a step, ``observation`` and ``reward``
    equal the new counter. The env is batch-locked: inputs must have exactly ``env.batch_size``.

    Args:
        device: the env's device.
        batch_size: the env's batch size.

    Examples:
        >>> from torchrl.testing import MockBatchedLockedEnv
        >>> env = MockBatchedLockedEnv(batch_size=[3])
        >>> env.rand_step()["next", "observation"].squeeze(-1).tolist()
        [1.0, 1.0, 1.0]
    """

    def __init__(self, device=None, batch_size=None, **kwargs) -> None:
        super().__init__(device=device, batch_size=batch_size, **kwargs)


class MockBatchedUnLockedEnv(MockBatchedLockedEnv):
    """A :class:`MockBatchedLockedEnv` that accepts inputs of any batch size (``batch_locked`` is False).

    Examples:
        >>> from tensordict import TensorDict
        >>> from torchrl.testing import MockBatchedUnLockedEnv
        >>> env = MockBatchedUnLockedEnv()
        >>> env.batch_locked
        False
        >>> env.rand_step(TensorDict(batch_size=[5]))["next", "reward"].shape
        torch.Size([5, 1])
    """

    _batch_locked = False
