"""``FrameSkipTransform``: repeats each action for several env steps and sums the rewards."""
from __future__ import annotations

from tensordict import TensorDictBase

from torchrl._fast import fast_get, fast_set
from torchrl.envs.transforms._transform import Transform

__all__ = ["FrameSkipTransform"]


def _transforms_after(transform: Transform) -> list[Transform]:
    """The transforms that run after ``transform`` in its env's chain (through nested ``Compose``)."""
    container = transform.container
    if not isinstance(container, Transform):
        return []
    siblings = list(container.transforms)
    index = next(i for i, t in enumerate(siblings) if t is transform)
    return siblings[index + 1 :] + _transforms_after(container)


class FrameSkipTransform(Transform):
    """Runs every action ``frame_skip`` times; the step returns the last frame and the summed rewards.

    Between repeats the env's new state and observations are fed back (so stateless envs such as
    :class:`~torchrl.envs.PendulumEnv` advance too). Repeats stop early as soon as any done entry is set
    (in batched envs: as soon as any sub-environment is done), so no reward from after an episode's end is
    counted. Transforms placed before this one run on every frame; those after it see one step.

    Args:
        frame_skip: number of env steps per action (``>= 1``; 1 is a no-op).

    Examples:
        >>> import torch
        >>> from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv
        >>> from torchrl.envs.transforms._frame_skip_transform import FrameSkipTransform
        >>> env = TransformedEnv(PendulumEnv(), StepCounter())
        >>> env = env.append_transform(FrameSkipTransform(frame_skip=3))
        >>> env.rollout(2)["next", "step_count"].squeeze(-1).tolist()
        [3, 6]
    """

    def __init__(self, frame_skip: int = 1) -> None:
        if not isinstance(frame_skip, int) or isinstance(frame_skip, bool) or frame_skip < 1:
            raise ValueError(f"FrameSkipTransform: frame_skip must be an integer >= 1, got {frame_skip!r}.")
        super().__init__()
        self.frame_skip = frame_skip
        self._plan: tuple | None = None

    def set_container(self, container) -> None:
        super().set_container(container)
        self._plan = None

    def _get_plan(self, parent) -> tuple:
        """``(reward keys, done keys, keys not fed back, action keys, later inverses)``, computed once."""
        plan = self._plan
        if plan is None:
            reward_keys = list(parent.reward_keys)
            done_keys = [g.done for g in parent.done_structure.groups if g.done is not None]
            drop = reward_keys + list(parent.done_keys)
            later = [t for t in _transforms_after(self) if t._has_inverse]
            plan = self._plan = (reward_keys, done_keys, drop, list(parent.action_keys), later)
        return plan

    @staticmethod
    def _parent_input(tensordict: TensorDictBase, later: list) -> TensorDictBase:
        """The step input as this transform's parent sees it (inverses of the later transforms applied)."""
        if not later:
            return tensordict
        tensordict = tensordict.copy()
        for t in reversed(later):
            tensordict = t._inv_call(tensordict)
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.frame_skip == 1:
            return next_tensordict
        parent = self.parent
        if parent is None:
            raise RuntimeError("FrameSkipTransform must be used inside a TransformedEnv.")
        reward_keys, done_keys, drop, action_keys, later = self._get_plan(parent)
        actions = self._parent_input(tensordict, later)
        actions = [(k, fast_get(actions, k)) for k in action_keys]
        rewards = [fast_get(next_tensordict, k) for k in reward_keys]
        for _ in range(self.frame_skip - 1):
            if any(bool(fast_get(next_tensordict, k).any()) for k in done_keys):
                break
            step_input = next_tensordict.exclude(*drop)
            for key, action in actions:
                fast_set(step_input, key, action)
            next_tensordict = parent._step_output(step_input)
            rewards = [r + fast_get(next_tensordict, k) for r, k in zip(rewards, reward_keys)]
        for key, reward in zip(reward_keys, rewards):
            fast_set(next_tensordict, key, reward)
        return next_tensordict

    def forward(self, tensordict):
        raise RuntimeError(
            "FrameSkipTransform repeats environment steps; it cannot be applied to stored data. Use it inside a "
            "TransformedEnv."
        )

    def __repr__(self) -> str:
        return f"FrameSkipTransform(frame_skip={self.frame_skip})"
