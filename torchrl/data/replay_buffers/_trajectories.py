"""Trajectories of stored data: splitting ordered content into episodes and filtering them."""
from __future__ import annotations

import operator
from typing import Any, Callable, Iterator

import torch
from tensordict import NestedKey, TensorClass, TensorDictBase

from torchrl.data.replay_buffers._utils import _key_str


class Trajectory(TensorClass["nocast"]):
    """One episode of stored data (``data`` has the time steps along its first dim).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(obs=torch.arange(3), next=TensorDict(reward=torch.ones(3, 1), batch_size=[3]),
        ...                 batch_size=[3])
        >>> t = Trajectory(data=td, batch_size=[])
        >>> t.length, t.total_reward, t.get("obs").tolist()
        (3, 3.0, [0, 1, 2])
    """

    data: TensorDictBase | None = None

    @property
    def length(self) -> int:
        return self.data.shape[0]

    @property
    def total_reward(self) -> float:
        reward = self.data.get(("next", "reward"), None)
        if reward is None:
            reward = self.data.get("reward", None)
        if reward is None:
            raise KeyError("Trajectory.total_reward: the trajectory has no ('next', 'reward') or 'reward' entry.")
        return float(reward.sum())

    def get(self, key: NestedKey, default=None) -> torch.Tensor | None:
        return self.data.get(key, default)

    def keys(self, *args, **kwargs):
        return self.data.keys(*args, **kwargs)

    def __getitem__(self, index):
        if isinstance(index, (str, tuple)) and not isinstance(index, torch.Tensor):
            return self.data.get(index)
        return Trajectory(data=self.data[index], batch_size=[])

    def __len__(self) -> int:
        return self.length


class TrajectoryPredicate:
    """A named test on trajectories; combine with ``&``, ``|`` and ``~``.

    Args:
        fn (callable): ``trajectory -> bool``.
        description (str, optional): shown in ``repr``. Defaults to ``"predicate"``.
        keys (frozenset, optional): the entries ``fn`` reads (``None``: unknown).

    Examples:
        >>> from torchrl.data.replay_buffers import traj
        >>> long_and_good = (traj.length >= 10) & (traj.total_reward > 0)
        >>> long_and_good
        TrajectoryPredicate((length >= 10) & (total_reward > 0))
    """

    def __init__(self, fn: Callable[[Trajectory], bool], description: str = "predicate", keys: frozenset | None = None) -> None:
        self.fn = fn
        self.description = description
        self.keys = keys

    def __call__(self, trajectory: Trajectory) -> bool:
        return bool(self.fn(trajectory))

    def required_keys(self) -> frozenset | None:
        return self.keys

    def _merge_keys(self, other: TrajectoryPredicate) -> frozenset | None:
        if self.keys is None or other.keys is None:
            return None
        return self.keys | other.keys

    def __and__(self, other: TrajectoryPredicate) -> TrajectoryPredicate:
        return TrajectoryPredicate(
            lambda t: self(t) and other(t), f"({self.description}) & ({other.description})", self._merge_keys(other)
        )

    def __or__(self, other: TrajectoryPredicate) -> TrajectoryPredicate:
        return TrajectoryPredicate(
            lambda t: self(t) or other(t), f"({self.description}) | ({other.description})", self._merge_keys(other)
        )

    def __invert__(self) -> TrajectoryPredicate:
        return TrajectoryPredicate(lambda t: not self(t), f"~({self.description})", self.keys)

    def __repr__(self) -> str:
        return f"TrajectoryPredicate({self.description})"


class _Field:
    def __init__(self, name: str, getter: Callable[[Trajectory], Any], keys: frozenset | None):
        self.name = name
        self.getter = getter
        self.keys = keys

    def _compare(self, symbol: str, op, value) -> TrajectoryPredicate:
        return TrajectoryPredicate(lambda t: op(self.getter(t), value), f"{self.name} {symbol} {value}", self.keys)

    def __lt__(self, value):
        return self._compare("<", operator.lt, value)

    def __le__(self, value):
        return self._compare("<=", operator.le, value)

    def __gt__(self, value):
        return self._compare(">", operator.gt, value)

    def __ge__(self, value):
        return self._compare(">=", operator.ge, value)

    def __eq__(self, value):  # noqa: D105 - builds a predicate
        return self._compare("==", operator.eq, value)

    def __ne__(self, value):  # noqa: D105 - builds a predicate
        return self._compare("!=", operator.ne, value)

    __hash__ = None


class _TrajectoryRef:
    """``traj``: builds predicates such as ``traj.length > 100`` or ``traj.sum("reward") > 0``."""

    @property
    def length(self) -> _Field:
        return _Field("length", lambda t: t.length, frozenset())

    @property
    def total_reward(self) -> _Field:
        return _Field("total_reward", lambda t: t.total_reward, frozenset({("next", "reward")}))

    def sum(self, key: NestedKey) -> _Field:
        return _Field(f"sum({_key_str(key)})", lambda t: float(t.get(key).sum()), frozenset({key}))

    def last(self, key: NestedKey) -> _Field:
        return _Field(f"last({_key_str(key)})", lambda t: t.get(key)[-1].item(), frozenset({key}))

    def __repr__(self) -> str:
        return "traj"


traj = _TrajectoryRef()

_DEFAULT_TRAJECTORY_KEYS = (("collector", "traj_ids"), "episode", "traj_ids")


def iter_trajectories(data: TensorDictBase, trajectory_key: NestedKey | None = None) -> Iterator[Trajectory]:
    """Yields the trajectories of time-ordered ``data`` (batch ``[N]``).

    Trajectories are runs of equal ``trajectory_key`` values; without a key, the first of
    ``("collector", "traj_ids")``, ``"episode"``, ``"traj_ids"`` present is used, else ``("next", "done")``
    ends them.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict(episode=torch.tensor([0, 0, 1, 1, 1]), batch_size=[5])
        >>> [t.length for t in iter_trajectories(data)]
        [2, 3]
    """
    if data.ndim != 1:
        raise ValueError(f"iter_trajectories expects data with one batch dim, got batch size {tuple(data.shape)}.")
    n = data.shape[0]
    if n == 0:
        return
    keys = set(data.keys(True, True))
    key = trajectory_key
    if key is None:
        key = next((k for k in _DEFAULT_TRAJECTORY_KEYS if k in keys), None)
    if key is not None:
        ids = data.get(key).reshape(n, -1)[:, 0]
        ends = torch.ones(n, dtype=torch.bool)
        ends[:-1] = ids[1:] != ids[:-1]
    elif ("next", "done") in keys:
        ends = data.get(("next", "done")).reshape(n, -1).any(-1).clone()
        ends[-1] = True
    else:
        raise KeyError(
            "iter_trajectories: no trajectory boundaries found; pass trajectory_key= or store ('next', 'done') "
            f"(available keys: {[_key_str(k) for k in keys]})."
        )
    stops = (ends.nonzero().squeeze(-1) + 1).tolist()
    start = 0
    for stop in stops:
        yield Trajectory(data=data[start:stop], batch_size=[])
        start = stop


def filter_trajectories(
    data: TensorDictBase,
    predicate: Callable[[Trajectory], bool] | None = None,
    *,
    trajectory_key: NestedKey | None = None,
) -> list[Trajectory]:
    """The trajectories of ``data`` (see :func:`iter_trajectories`) for which ``predicate`` holds.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict(episode=torch.tensor([0, 1, 1, 2, 2, 2]), batch_size=[6])
        >>> [t.length for t in filter_trajectories(data, traj.length >= 2)]
        [2, 3]
    """
    return [t for t in iter_trajectories(data, trajectory_key) if predicate is None or predicate(t)]
