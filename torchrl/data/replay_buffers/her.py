"""Hindsight experience replay: goal relabelling at sample time (Andrychowicz et al., 2017)."""
from __future__ import annotations

import enum
from typing import Any, Callable

import torch
from tensordict import NestedKey, TensorDictBase

from torchrl.data.replay_buffers._buffer_ops import info_into_data
from torchrl.data.replay_buffers._utils import _under_next
from torchrl.data.replay_buffers.samplers._trajectories import position_lookup, storage_table
from torchrl.data.replay_buffers._tensordict_replay_buffer import TensorDictReplayBuffer

_StrEnum = getattr(enum, "StrEnum", None) or type("StrEnum", (str, enum.Enum), {})


class HindsightStrategy(_StrEnum):
    """Where a relabelled goal comes from (the achieved goal of which step).

    - ``FUTURE``: a step of the same episode at or after the sampled one (the paper's recommended choice);
    - ``FINAL``: the last step of the episode;
    - ``EPISODE``: any step of the episode;
    - ``RANDOM``: any stored step.

    Examples:
        >>> HindsightStrategy("future") is HindsightStrategy.FUTURE
        True
    """

    FUTURE = "future"
    FINAL = "final"
    EPISODE = "episode"
    RANDOM = "random"


def sparse_goal_reward(achieved: torch.Tensor, goal: torch.Tensor, distance_threshold: float = 0.05) -> torch.Tensor:
    """``0`` when ``achieved`` is within ``distance_threshold`` of ``goal`` (Euclidean), ``-1`` otherwise."""
    distance = torch.linalg.vector_norm(achieved.float() - goal.float(), dim=-1, keepdim=True)
    return -(distance > distance_threshold).float()


class HERReplayBuffer(TensorDictReplayBuffer):
    """A :class:`TensorDictReplayBuffer` that relabels goals of sampled transitions with achieved goals.

    Each sampled transition is relabelled with probability ``her_ratio``: its goal (``goal_key``, and
    ``("next", goal_key)`` when stored) is replaced by the achieved goal (``achieved_goal_key``) of another
    step chosen by ``strategy``, and its reward (``reward_key``) is recomputed with
    ``reward_fn(achieved_goal, new_goal)``. Episode boundaries come from the stored ``end_key`` flag (or
    ``traj_key`` ids). The stored data is never modified; the batch reports relabelled rows under
    ``"her_relabelled"``.

    Keyword Args:
        strategy (HindsightStrategy or str, optional): the goal selection strategy. Defaults to ``"future"``.
        her_ratio (float, optional): the fraction of relabelled transitions. Defaults to ``0.8`` (the
            paper's k=4 future goals per real one).
        goal_key (NestedKey, optional): the desired goal. Defaults to ``"desired_goal"``.
        achieved_goal_key (NestedKey, optional): the goal achieved after the step. Defaults to
            ``("next", "achieved_goal")``.
        reward_key (NestedKey, optional): the reward to recompute. Defaults to ``("next", "reward")``.
        reward_fn (callable, optional): ``(achieved_goal, goal) -> reward`` (shape ``[..., 1]``). Defaults to
            :func:`sparse_goal_reward` with ``distance_threshold``.
        distance_threshold (float, optional): success radius of the default reward. Defaults to ``0.05``.
        end_key (NestedKey, optional): the stored end-of-episode flag. Defaults to ``("next", "done")``.
        traj_key (NestedKey, optional): stored episode ids, used instead of ``end_key``.
        other keyword arguments: as :class:`TensorDictReplayBuffer`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import HERReplayBuffer, LazyTensorStorage
        >>> n = 5
        >>> achieved = torch.arange(n, dtype=torch.float32).unsqueeze(-1)
        >>> data = TensorDict(desired_goal=torch.full((n, 1), 100.0), next=TensorDict(
        ...     achieved_goal=achieved, reward=-torch.ones(n, 1), done=(torch.arange(n) == n - 1).unsqueeze(-1),
        ...     batch_size=[n]), batch_size=[n])
        >>> rb = HERReplayBuffer(storage=LazyTensorStorage(10), strategy="final", her_ratio=1.0, batch_size=4)
        >>> _ = rb.extend(data)
        >>> batch = rb.sample()
        >>> batch["desired_goal"].squeeze(-1).tolist()
        [4.0, 4.0, 4.0, 4.0]
        >>> (batch["next", "reward"].squeeze(-1) == torch.where(batch["index"] == 4, 0.0, -1.0)).all()
        tensor(True)
    """

    def __init__(
        self,
        *,
        strategy: HindsightStrategy | str = HindsightStrategy.FUTURE,
        her_ratio: float = 0.8,
        goal_key: NestedKey = "desired_goal",
        achieved_goal_key: NestedKey = ("next", "achieved_goal"),
        reward_key: NestedKey = ("next", "reward"),
        reward_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
        distance_threshold: float = 0.05,
        end_key: NestedKey = ("next", "done"),
        traj_key: NestedKey | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if not 0.0 <= her_ratio <= 1.0:
            raise ValueError(f"HERReplayBuffer: her_ratio must lie in [0, 1], got {her_ratio}.")
        try:
            self.strategy = HindsightStrategy(strategy)
        except ValueError as err:
            raise ValueError(
                f"HERReplayBuffer: unknown strategy {strategy!r}; expected one of {[s.value for s in HindsightStrategy]}."
            ) from err
        self.her_ratio = her_ratio
        self.goal_key = goal_key
        self.achieved_goal_key = achieved_goal_key
        self.reward_key = reward_key
        self.distance_threshold = distance_threshold
        self.reward_fn = reward_fn if reward_fn is not None else self._default_reward
        self._boundary = ("traj", [traj_key]) if traj_key is not None else ("end", [end_key])
        self._table_cache: tuple[Any, Any] | None = None

    def _default_reward(self, achieved: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        return sparse_goal_reward(achieved, goal, self.distance_threshold)

    def _tables(self):
        storage = self._storage
        key = (storage._version, len(storage))
        if self._table_cache is None or self._table_cache[0] != key:
            kind, keys = self._boundary
            table = storage_table(storage, keys, kind, "HERReplayBuffer")
            self._table_cache = (key, (table, *position_lookup(table)))
        return self._table_cache[1]

    def _goal_positions(self, flat: torch.Tensor) -> torch.Tensor:
        """Flat storage positions whose achieved goal relabels the transitions at ``flat``."""
        if self.strategy is HindsightStrategy.RANDOM:
            return torch.randint(0, len(self._storage), flat.shape, generator=self._sampler._rng)
        table, traj_of, offset_of = self._tables()
        traj = traj_of[flat]
        offset = offset_of[flat]
        length = table.length[traj]
        if self.strategy is HindsightStrategy.FINAL:
            goal_offset = length - 1
        else:
            low = offset if self.strategy is HindsightStrategy.FUTURE else torch.zeros_like(offset)
            u = torch.rand(flat.shape, generator=self._sampler._rng)
            goal_offset = low + (u * (length - low)).long()
        time = table.start[traj] + goal_offset
        if table.wrap:
            time = time % table.rows
        columns = max(1, len(self._storage) // max(table.rows, 1))
        return time * columns + table.column[traj]

    def _relabel(self, data: TensorDictBase, info: dict) -> TensorDictBase:
        index = info["index"]
        columns = getattr(self._storage, "_inner", 1)
        flat = index if not isinstance(index, tuple) else index[0] * columns + index[1].reshape(index[0].shape)
        flat = flat.reshape(-1)
        chosen = torch.rand(flat.shape, generator=self._sampler._rng) < self.her_ratio
        data.set("her_relabelled", chosen.reshape(data.shape))
        if not chosen.any():
            return data
        source = self._goal_positions(flat[chosen])
        achieved_store = self._storage._storage.get(self.achieved_goal_key)
        achieved_store = achieved_store.reshape(-1, *achieved_store.shape[self._storage.ndim :])
        new_goal = achieved_store[source].to(data.get(self.goal_key).dtype)
        rows = chosen.reshape(data.shape)
        for key in (self.goal_key, _under_next(self.goal_key)):
            value = data.get(key, None)
            if value is not None:
                value = value.clone()
                value[rows] = new_goal
                data.set(key, value)
        reward = data.get(self.reward_key).clone()
        reward[rows] = self.reward_fn(data.get(self.achieved_goal_key)[rows], new_goal).to(reward.dtype).reshape(
            reward[rows].shape
        )
        data.set(self.reward_key, reward)
        return data

    def sample(self, batch_size: int | None = None, return_info: bool = False, include_info: bool | None = None) -> TensorDictBase:
        data, info = self._sample_maybe_prefetched(batch_size)
        data = self._relabel(data, info)
        if include_info is not False:
            info_into_data(data, info)
        return (data, info) if return_info else data

    def empty(self, empty_write_count: bool = True) -> None:
        super().empty(empty_write_count)
        self._table_cache = None

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["_her"] = {"strategy": self.strategy.value, "her_ratio": self.her_ratio}
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        her = state_dict.get("_her", {})
        super().load_state_dict({k: v for k, v in state_dict.items() if k != "_her"})
        if her:
            self.strategy = HindsightStrategy(her["strategy"])
            self.her_ratio = her["her_ratio"]
        self._table_cache = None
