"""``Reward2GoTransform``: the discounted reward-to-go of stored trajectories, written on buffer writes."""
from __future__ import annotations

from typing import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.envs._done import as_tuple
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["Reward2GoTransform"]

_REFUSAL = (
    "The Reward2GoTransform is only an inverse transform and can only be applied to the replay buffer "
    "(ReplayBuffer(..., transform=Reward2GoTransform(...)) or rb.append_transform(...)); it cannot be "
    "placed in an environment."
)


class _MissingEntryError(KeyError, AttributeError):
    """A missing done entry: a ``KeyError`` that TorchRL's callers catch as ``AttributeError``."""


class Reward2GoTransform(Transform):
    """Replaces rewards by their discounted reward-to-go when trajectories are written to a replay buffer.

    .. math::

        G_t = \\sum_{k=t}^{\\text{end}} \\gamma^{k-t} r_k

    where the sum stops at the end of each trajectory: the first ``("next", done_key)`` flag at or after
    ``t``, or the end of the data (a trajectory cut by the end of the batch sums what it has). The time
    dimension is the data's last batch dim (the reward's second-to-last dim for a root reward; a group's
    reward, e.g. ``("next", "agents", "reward")`` of shape ``[T, n_agents, 1]``, gets one reward-to-go per
    agent, under root done flags broadcast over the agents or under per-agent ones). The computation is vectorised
    (:func:`torchrl.objectives.value.functional.reward2go`).

    The transform works as an inverse: it runs on ``ReplayBuffer.extend`` (or ``transform.inv(data)``);
    sampled data pass through unchanged. It cannot be placed in an environment (``ValueError``, as in
    TorchRL), since an episode's future rewards are not known while it runs.

    Args:
        gamma (float or tensor): the discount factor (stored as a ``gamma`` buffer). Defaults to ``1.0``.
        in_keys (list of NestedKey): the rewards. Defaults to ``[("next", "reward")]``.
        out_keys (list of NestedKey): where the rewards-to-go are written. Defaults to ``in_keys`` (in
            place). As in TorchRL they are the inverse keys: ``transform.out_keys`` stays ``[]`` and
            ``transform.out_keys_inv`` holds them.
        done_key (NestedKey): the entry under ``"next"`` whose flags end the trajectories. Defaults to
            ``"done"``.

    Raises:
        ValueError: ``in_keys`` and ``out_keys`` of different lengths; the transform is placed in an env;
            done flags that do not broadcast to a reward's shape.
        RuntimeError: ``gamma`` is not a number or a tensor; the data hold no episode end at all.
        KeyError: the data lack a reward or the done entry (the latter is also an ``AttributeError``, TorchRL's
            type).
        IndexError: a reward without a trailing feature dim (``[T]`` instead of ``[T, 1]``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage, ReplayBuffer
        >>> from torchrl.envs.transforms import Reward2GoTransform
        >>> done = torch.tensor([False, False, True, False, False, True]).unsqueeze(-1)
        >>> data = TensorDict(next=TensorDict(reward=torch.arange(1.0, 7.0).unsqueeze(-1), done=done,
        ...     batch_size=[6]), batch_size=[6])
        >>> rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=Reward2GoTransform(gamma=0.5))
        >>> _ = rb.extend(data)
        >>> rb[:6]["next", "reward"].squeeze(-1).tolist()
        [2.75, 3.5, 3.0, 8.0, 8.0, 6.0]
    """

    def __init__(
        self,
        gamma: float | torch.Tensor | None = 1.0,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        done_key: NestedKey | None = "done",
    ) -> None:
        in_keys = _key_list(in_keys) or [("next", "reward")]
        out_keys = _key_list(out_keys) or list(in_keys)
        if len(in_keys) != len(out_keys):
            raise ValueError(
                f"Reward2GoTransform: in_keys {in_keys} and out_keys {out_keys} differ in length (one reward-to-go "
                f"per reward)."
            )
        super().__init__(in_keys=in_keys, out_keys=[], in_keys_inv=in_keys, out_keys_inv=out_keys)
        if not isinstance(gamma, torch.Tensor):
            if isinstance(gamma, bool) or not isinstance(gamma, (int, float)):
                raise RuntimeError(
                    f"Reward2GoTransform: gamma must be a number or a tensor, got {type(gamma).__name__} ({gamma!r})."
                )
            gamma = torch.tensor(gamma)
        self.register_buffer("gamma", gamma)
        self.done_key = done_key if done_key is not None else "done"

    # -- placement: buffers only -----------------------------------------------------------------------
    def _in_env(self) -> bool:
        container = self._container
        while isinstance(container, Transform):  # up through Compose (or a buffer's chain) to an env, if any
            container = container.container
        return container is not None

    def set_container(self, container) -> None:
        super().set_container(container)
        if self._in_env():
            self._detach_container()
            raise ValueError(_REFUSAL)

    def reset_parent(self) -> None:  # a Compose holding this transform was put in an env
        super().reset_parent()
        if self._container is not None and self._in_env():
            raise ValueError(_REFUSAL)

    # -- data ------------------------------------------------------------------------------------------
    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._in_env():
            raise ValueError(_REFUSAL)
        done_key = ("next",) + as_tuple(self.done_key)
        done = tensordict.get(done_key, None)
        if done is None:
            raise _MissingEntryError(f"Reward2GoTransform: done entry {done_key} not found in the data.")
        if not done.any():
            raise RuntimeError(
                f"Reward2GoTransform: no episode end found ({done_key} is never set) to calculate the reward to "
                f"go. Make sure that the data (frames_per_batch) span more steps than an episode."
            )
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            reward = tensordict.get(in_key, None)
            if reward is None:
                raise KeyError(f"Reward2GoTransform: reward {in_key!r} not found in the data.")
            tensordict.set(out_key, self._reward_to_go(reward, done, in_key, tensordict.ndim))
        return tensordict

    def _reward_to_go(self, reward: torch.Tensor, done: torch.Tensor, key: NestedKey, batch_ndim: int) -> torch.Tensor:
        if reward.ndim < 2:
            raise IndexError(
                f"Reward2GoTransform: reward {key!r} has shape {tuple(reward.shape)}; it needs a time dim and a "
                f"trailing feature dim (e.g. [T, 1])."
            )
        if done.shape != reward.shape:  # e.g. one done flag for a multi-dimensional reward
            if batch_ndim and done.ndim < reward.ndim:
                # a group's reward (*batch, n_agents, 1) under root flags (*batch, 1): the flags hold for
                # every agent, so they gain the group's dims right after the data's batch dims
                extra = (1,) * (reward.ndim - done.ndim)
                done = done.reshape(*done.shape[:batch_ndim], *extra, *done.shape[batch_ndim:])
            try:
                done = done.expand_as(reward)
            except RuntimeError:
                raise ValueError(
                    f"Reward2GoTransform: done flags of shape {tuple(done.shape)} do not broadcast to reward "
                    f"{key!r} of shape {tuple(reward.shape)}."
                ) from None
        # Deferred: torchrl.objectives imports torchrl.envs, so a module-level import here is a cycle. The scan
        # belongs on the ground floor (torchrl/_utils); until it moves there, the one reward-to-go
        # implementation is reached at call time.
        from torchrl.objectives.value.functional import reward2go

        # time is the data's last batch dim, also for a group's reward that has agent dims after it
        time_dim = batch_ndim - 1 if batch_ndim else -2
        return reward2go(reward, done, self.gamma.to(reward.dtype), time_dim=time_dim)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # sampled data already hold rewards-to-go

    def __repr__(self) -> str:
        return (
            f"Reward2GoTransform(in_keys={self.in_keys_inv}, out_keys={self.out_keys_inv}, "
            f"gamma={self.gamma.tolist()}, done_key={self.done_key!r})"
        )
