"""``RandomTruncationTransform``: random episode horizons that decorrelate synchronised batched envs."""
from __future__ import annotations

from typing import NamedTuple

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite
from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._groups import done_groups, reset_key_for
from torchrl.envs.transforms._transform import Transform

__all__ = ["RandomTruncationTransform"]


class _Counter(NamedTuple):
    count: NestedKey
    truncated: NestedKey
    done: NestedKey
    reset: NestedKey


def _next_to(count_key: NestedKey, key: NestedKey) -> NestedKey:
    """A string ``key`` goes next to the step counter (last component replaced); a tuple is used as is."""
    if isinstance(key, str):
        return from_tuple(as_tuple(count_key)[:-1] + (key,))
    return key


class RandomTruncationTransform(Transform):
    """Truncates episodes at random horizons so that batched envs do not all restart at the same step.

    Every sub-env gets a horizon; a step whose step count reaches it is marked ``truncated`` (and ``done``).
    At the first reset the horizons are drawn from ``Uniform{1, ..., max_horizon}``, which spreads the
    sub-envs over the phases of an episode. At each later reset of a sub-env, its new horizon is drawn from
    ``Uniform{min_horizon, ..., max_horizon}`` with probability ``prob`` (``first_episode_prob`` for its first
    episode after the initial spread), and is ``max_horizon`` otherwise.

    The transform reads the counter of a :class:`~torchrl.envs.StepCounter` placed before it; it writes the
    truncation and done flags next to that counter (``("agent", "step_count")`` gives ``("agent",
    "truncated")`` and ``("agent", "done")``), adding the ``truncated`` entry to the done spec when the env
    has none. It only works in an environment: calling it on data raises ``NotImplementedError``.

    Args:
        min_horizon (int): the shortest random horizon (inclusive, >= 1).
        max_horizon (int): the longest horizon (inclusive), also the horizon without random truncation;
            usually the env's ``max_episode_steps``.
        prob (float): the probability of a random horizon at each later reset. Defaults to ``0.0`` (only the
            initial spread).
        first_episode_prob (float, optional): the same for each sub-env's first episode after the initial
            spread. Defaults to ``prob``.

    Keyword Args:
        step_count_key (NestedKey): the counter of the StepCounter: a string matches the last component of
            any key (``"step_count"`` finds ``("agent", "step_count")``), a tuple is an exact key. Defaults to
            ``"step_count"``.
        truncated_key (NestedKey): where the truncation flags go (a string: next to each counter). Defaults
            to ``"truncated"``.
        done_key (NestedKey): the done flags OR-ed with the truncation (a string: next to each counter).
            Defaults to ``"done"``.

    Raises:
        ValueError: a horizon below 1, ``min_horizon > max_horizon``, or a probability outside ``[0, 1]``.
        RuntimeError: the env has no step counter before this transform (raised when the transformed env
            builds its specs or resets).
        NotImplementedError: called outside an env (on stored data).

    Examples:
        >>> import torch
        >>> from torchrl.envs import Compose, StepCounter, TransformedEnv
        >>> from torchrl.envs.transforms import RandomTruncationTransform
        >>> from torchrl.testing.mocking_classes import CountingEnv
        >>> env = TransformedEnv(CountingEnv(batch_size=(4,), max_steps=1000),
        ...     Compose(StepCounter(), RandomTruncationTransform(min_horizon=3, max_horizon=6)))
        >>> _ = torch.manual_seed(0)
        >>> data = env.rollout(14, break_when_any_done=False)
        >>> data["next", "truncated"].squeeze(-1).int()[0].tolist()  # first horizon 3, then max_horizon
        [0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    """

    def __init__(
        self,
        min_horizon: int,
        max_horizon: int,
        prob: float = 0.0,
        first_episode_prob: float | None = None,
        *,
        step_count_key: NestedKey = "step_count",
        truncated_key: NestedKey = "truncated",
        done_key: NestedKey = "done",
    ) -> None:
        for name, value in (("min_horizon", min_horizon), ("max_horizon", max_horizon)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"RandomTruncationTransform: {name} must be an int, got {value!r}.")
        if min_horizon < 1:
            raise ValueError(f"RandomTruncationTransform: min_horizon must be >= 1, got {min_horizon}.")
        if min_horizon > max_horizon:
            raise ValueError(
                f"RandomTruncationTransform: min_horizon ({min_horizon}) must be <= max_horizon ({max_horizon})."
            )
        if first_episode_prob is None:
            first_episode_prob = prob
        for name, value in (("prob", prob), ("first_episode_prob", first_episode_prob)):
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"RandomTruncationTransform: {name} must be in [0, 1], got {value}.")
        super().__init__()
        self.min_horizon = min_horizon
        self.max_horizon = max_horizon
        self.prob = prob
        self.first_episode_prob = first_episode_prob
        self.step_count_key = step_count_key
        self.truncated_key = truncated_key
        self.done_key = done_key
        self._counters: list[_Counter] | None = None
        # per counter: the horizon of each sub-env and how many resets it has seen
        self._horizons: dict = {}
        self._episodes: dict = {}

    # -- keys ------------------------------------------------------------------------------------------
    def _find_counters(self, output_spec: Composite) -> list[_Counter]:
        obs_keys = list(output_spec["full_observation_spec"].keys(include_nested=True, leaves_only=True))
        wanted = self.step_count_key
        if isinstance(wanted, str):
            found = [k for k in obs_keys if as_tuple(k)[-1] == wanted]
        else:
            found = [k for k in obs_keys if as_tuple(k) == as_tuple(wanted)]
        if not found:
            raise RuntimeError(
                f"RandomTruncationTransform requires a StepCounter earlier in the transform chain that writes the "
                f"{wanted!r} step-count key. Use Compose(StepCounter(), RandomTruncationTransform(...)), or add "
                f"StepCounter() before it; if the StepCounter uses a custom step_count_key, pass the same key here."
            )
        groups = done_groups(output_spec["full_done_spec"])
        return [
            _Counter(k, _next_to(k, self.truncated_key), _next_to(k, self.done_key), reset_key_for(k, groups))
            for k in found
        ]

    def _get_counters(self) -> list[_Counter]:
        if self._counters is None:
            parent = self.parent
            if parent is None:
                self._refuse_data()
            self._counters = self._find_counters(parent.output_spec)
        return self._counters

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._counters = counters = self._find_counters(output_spec)
        full_done = output_spec["full_done_spec"]
        for c in counters:
            if c.truncated not in full_done.keys(include_nested=True):
                if c.done not in full_done.keys(include_nested=True):
                    raise RuntimeError(
                        f"RandomTruncationTransform: the done entry {c.done!r} (next to the step counter {c.count!r}) "
                        f"is not in the env's done spec; pass done_key."
                    )
                full_done[c.truncated] = full_done[c.done].clone()
        return output_spec

    # -- data ------------------------------------------------------------------------------------------
    def _new_horizons(self, episodes: torch.Tensor) -> torch.Tensor:
        shape, device = episodes.shape, episodes.device
        spread = torch.randint(1, self.max_horizon + 1, shape, device=device)
        random = torch.randint(self.min_horizon, self.max_horizon + 1, shape, device=device)
        p = torch.where(episodes == 1, self.first_episode_prob, self.prob)
        later = torch.where(torch.rand(shape, device=device) < p, random, self.max_horizon)
        return torch.where(episodes == 0, spread, later)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        for c in self._get_counters():
            count = fast_get(tensordict_reset, c.count)
            if count is None:
                raise KeyError(f"RandomTruncationTransform: step count {c.count!r} not found in the reset output.")
            episodes = self._episodes.get(c.count)
            if episodes is None or episodes.shape != count.shape or episodes.device != count.device:
                episodes = torch.zeros(count.shape, dtype=torch.int64, device=count.device)
                self._horizons[c.count] = torch.full_like(episodes, self.max_horizon)
            mask = fast_get(tensordict, c.reset) if tensordict is not None else None
            if mask is None:
                mask = torch.ones(count.shape, dtype=torch.bool, device=count.device)
            else:
                mask = mask.reshape(count.shape) if mask.numel() == count.numel() else mask.expand_as(count)
            self._horizons[c.count] = torch.where(mask, self._new_horizons(episodes), self._horizons[c.count])
            self._episodes[c.count] = episodes + mask.to(torch.int64)
            if fast_get(tensordict_reset, c.truncated) is None:
                fast_set(tensordict_reset, c.truncated, torch.zeros(count.shape, dtype=torch.bool, device=count.device))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for c in self._get_counters():
            count = fast_get(next_tensordict, c.count)
            horizons = self._horizons.get(c.count)
            if count is None or horizons is None:
                raise RuntimeError(
                    f"RandomTruncationTransform: no step count {c.count!r} or no horizon yet; reset the env first."
                )
            reached = count >= horizons
            truncated = fast_get(next_tensordict, c.truncated)
            fast_set(next_tensordict, c.truncated, reached if truncated is None else truncated | reached)
            done = fast_get(next_tensordict, c.done)
            fast_set(next_tensordict, c.done, reached if done is None else done | reached)
        return next_tensordict

    def _refuse_data(self):
        raise NotImplementedError(
            "RandomTruncationTransform cannot be called independently: it follows an environment's resets and "
            "steps, and cannot be applied to stored data. Use it in a TransformedEnv after a StepCounter."
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._refuse_data()

    def set_container(self, container) -> None:
        super().set_container(container)
        self._counters = None  # found again in the new env's specs

    def __repr__(self) -> str:
        return (
            f"RandomTruncationTransform(min_horizon={self.min_horizon}, max_horizon={self.max_horizon}, "
            f"prob={self.prob}, first_episode_prob={self.first_episode_prob})"
        )
