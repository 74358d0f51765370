"""``RewardSum``: the running return of the current episode."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, Unbounded
from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._groups import done_groups, reset_key_for, restart_where_reset
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["RewardSum"]


class RewardSum(Transform):
    """Accumulates rewards over an episode into ``episode_reward`` (reset to 0 at each episode start).

    Args:
        in_keys: reward entries to sum (default: every reward entry of the env).
        out_keys: where the sums go (default: ``episode_reward`` next to each reward entry).
        reset_keys: the reset entry governing each sum (default: the reset entry of its done group).

    Keyword Args:
        reward_spec: declare the sums in the reward spec instead of the observation spec.

    Used outside an env (``forward``), it computes the running return along the time dim of a stored
    trajectory (the batch dim named ``"time"``, else the last one), restarting after every done step; the
    sums are written next to the rewards (in ``"next"`` for ``env.rollout`` data). A TensorDict without
    batch dims raises ``ValueError``.

    Examples:
        >>> from torchrl.envs import PendulumEnv, RewardSum, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), RewardSum())
        >>> data = env.rollout(4)
        >>> bool((data["next", "episode_reward"][-1] - data["next", "reward"].sum(0)).abs().max() < 1e-4)
        True
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        reset_keys: Sequence[NestedKey] | None = None,
        *,
        reward_spec: bool = False,
    ) -> None:
        self._resolved: list[tuple[NestedKey, NestedKey, NestedKey]] | None = None  # (in, out, reset) keys
        super().__init__()
        self._given_in = _key_list(in_keys) or None
        self._given_out = _key_list(out_keys) or None
        self._given_reset = _key_list(reset_keys) or None
        if self._given_in and self._given_out and len(self._given_in) != len(self._given_out):
            raise ValueError(f"RewardSum: in_keys {self._given_in} and out_keys {self._given_out} differ in length.")
        self.reward_spec = reward_spec
        # the sums' shapes (without batch dims) and dtypes, from the reward spec
        self._shapes: dict = {}
        self._dtype_map: dict = {}

    # -- keys --------------------------------------------------------------------------------------------
    def _resolve(self, full_reward_spec=None, full_done_spec=None) -> list[tuple[NestedKey, NestedKey, NestedKey]]:
        if self._resolved is not None and full_reward_spec is None:
            return self._resolved
        if full_reward_spec is None:
            parent = self.parent
            if parent is None:
                in_keys = self._given_in or ["reward"]
                groups = {(): torch.Size([])}
            else:
                full_reward_spec = parent.output_spec["full_reward_spec"]
                full_done_spec = parent.output_spec["full_done_spec"]
        if full_reward_spec is not None:
            reward_keys = list(full_reward_spec.keys(include_nested=True, leaves_only=True))
            in_keys = self._given_in or reward_keys
            missing = [k for k in in_keys if k not in reward_keys]
            if missing:
                raise ValueError(
                    f"RewardSum: in_keys {missing} are not reward entries of the env (reward keys: {reward_keys})."
                )
            groups = done_groups(full_done_spec)
        out_keys = self._given_out or [from_tuple(as_tuple(k)[:-1] + ("episode_reward",)) for k in in_keys]
        if len(out_keys) != len(in_keys):
            raise ValueError(f"RewardSum: {len(in_keys)} reward keys {in_keys} but {len(out_keys)} out_keys {out_keys}.")
        reset = self._given_reset or [reset_key_for(k, groups) for k in in_keys]
        self._resolved = list(zip(in_keys, out_keys, reset))
        return self._resolved

    @property
    def in_keys(self):
        return [i for i, _, _ in self._resolve()]

    @in_keys.setter
    def in_keys(self, value) -> None:
        self._in_keys = _key_list(value)

    @property
    def out_keys(self):
        return [o for _, o, _ in self._resolve()]

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._out_keys = None if value is None else _key_list(value)

    @property
    def reset_keys(self):
        if self._given_reset is None and self.parent is None:
            raise TypeError(
                "RewardSum.reset_keys: no reset_keys were given and the transform has no parent env to read them "
                "from; pass reset_keys=[...] when the transform is used outside an env."
            )
        return [r for _, _, r in self._resolve()]

    # -- data ----------------------------------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        spec = self._shapes
        for in_key, out_key, reset_key in self._resolve():
            shape = tensordict_reset.batch_size + spec.get(out_key, torch.Size([1]))
            fresh = torch.zeros(shape, dtype=self._dtype_map.get(out_key, torch.float32), device=tensordict_reset.device)
            previous = fast_get(tensordict, out_key, None)
            fast_set(tensordict_reset, out_key, restart_where_reset(tensordict, reset_key, previous, fresh))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key, _ in self._resolved or self._resolve():
            reward = fast_get(next_tensordict, in_key)
            previous = fast_get(tensordict, out_key)
            fast_set(next_tensordict, out_key, reward if previous is None else previous.add(reward))
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        time_dim = _time_dim(tensordict)
        for in_key, out_key, _ in self._resolve():
            # the rewards of a stored trajectory sit in "next" (env.rollout) or at the root: the sums go next to them
            for level in (("next",), ()):
                reward = fast_get(tensordict, level + as_tuple(in_key), None)
                if reward is not None:
                    break
            else:
                raise KeyError(f"RewardSum: reward {in_key!r} found neither at the root nor in 'next'.")
            done = fast_get(tensordict, level + as_tuple(in_key)[:-1] + ("done",), None)
            if done is None and level:
                done = fast_get(tensordict, as_tuple(in_key)[:-1] + ("done",), None)
            tensordict.set(level + as_tuple(out_key), _episode_cumsum(reward, done, time_dim))
        return tensordict

    # -- specs -----------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        full_reward = output_spec["full_reward_spec"]
        self._resolve(full_reward, output_spec["full_done_spec"])
        obs = output_spec["full_observation_spec"]
        n = len(output_spec.shape)
        shapes, dtypes = {}, {}
        for in_key, out_key, _ in self._resolved:
            leaf = full_reward[in_key]
            sum_spec = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
            if self.reward_spec:  # a reward entry instead of an observation
                full_reward[out_key] = sum_spec
            else:
                obs[out_key] = sum_spec
            shapes[out_key] = leaf.shape[n:]
            dtypes[out_key] = leaf.dtype
        self._shapes, self._dtype_map = shapes, dtypes
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        state = input_spec["full_state_spec"]
        for in_key, out_key, _ in self._resolve():
            state[out_key] = Unbounded(
                shape=input_spec.shape + self._shapes.get(out_key, torch.Size([1])),
                dtype=self._dtype_map.get(out_key, torch.float32),
                device=state.device,
            )
        return input_spec

    def transform_observation_spec(self, observation_spec):
        return observation_spec

    def transform_reward_spec(self, reward_spec):
        return reward_spec

    def __repr__(self) -> str:
        if self._resolved is None:
            return "RewardSum()"
        return f"RewardSum(in_keys={[i for i, _, _ in self._resolved]}, out_keys={[o for _, o, _ in self._resolved]})"


def _time_dim(tensordict: TensorDictBase) -> int:
    """The batch dim named ``"time"``, else the last one (a trajectory needs one)."""
    if tensordict.batch_dims == 0:
        raise ValueError(
            "RewardSum: outside an env the transform sums the rewards of a trajectory along its time dim; this "
            "TensorDict has no batch dim (name one 'time', e.g. TensorDict(..., names=['time']))."
        )
    names = tensordict.names
    return names.index("time") if "time" in names else tensordict.batch_dims - 1


def _episode_cumsum(reward: torch.Tensor, done: torch.Tensor | None, time_dim: int) -> torch.Tensor:
    """Cumulative sum of ``reward`` along ``time_dim`` restarting after each done step."""
    if done is None:
        return reward.cumsum(time_dim)
    out = torch.empty_like(reward)
    running = torch.zeros_like(reward.select(time_dim, 0))
    for t in range(reward.shape[time_dim]):
        running = running + reward.select(time_dim, t)
        out.select(time_dim, t).copy_(running)
        running = torch.where(done.select(time_dim, t), torch.zeros_like(running), running)
    return out
