"""``evaluate``: episode returns of a policy run deterministically (no exploration noise)."""
from __future__ import annotations

from typing import Callable

import torch
from tensordict import TensorDictBase

from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.envs.common import EnvBase

__all__ = ["evaluate"]


def _first_episode_returns(rollout: TensorDictBase) -> torch.Tensor:
    """Return of each sub-env's first episode in a ``[*batch, T]`` rollout (steps after its first ``done``
    are ignored; an episode cut by the rollout's length counts as it stands)."""
    steps = rollout.batch_size[-1]
    reward = rollout.get(("next", "reward")).reshape(*rollout.batch_size, -1).sum(-1).reshape(-1, steps)
    done = rollout.get(("next", "done")).reshape(*rollout.batch_size, -1).any(-1).reshape(-1, steps).long()
    alive = (done.cumsum(-1) - done) == 0  # up to and including the first done
    return (reward * alive).sum(-1)


def evaluate(env: EnvBase, policy: Callable[[TensorDictBase], TensorDictBase], *, episodes: int = 10,
             max_steps: int = 1000) -> torch.Tensor:
    """Runs ``policy`` in deterministic mode (``ExplorationType.DETERMINISTIC``, no gradients) and returns the
    return of each of ``episodes`` episodes.

    A batched env plays ``env.batch_size.numel()`` episodes per rollout (``PendulumEnv(batch_size=[10])``
    evaluates 10 episodes in one rollout); rollouts repeat until ``episodes`` returns are collected. Each
    rollout lasts until every sub-env has finished once, or ``max_steps`` steps.

    Args:
        env: the evaluation env (with its time limit, e.g. a ``StepCounter``).
        policy: the policy; exploration modules are inactive in deterministic mode and stochastic actors
            take their distribution's deterministic sample (e.g. the mode).

    Keyword Args:
        episodes: number of episodes. Defaults to 10.
        max_steps: rollout length cap. Defaults to 1000.

    Returns:
        A float tensor of shape ``[episodes]``.

    Raises:
        ValueError: ``episodes`` or ``max_steps`` is not positive.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.envs import PendulumEnv, StepCounter, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(batch_size=[4]), StepCounter(max_steps=20))
        >>> policy = TensorDictModule(lambda obs: torch.zeros(*obs.shape[:-1], 1), ["observation"], ["action"])
        >>> evaluate(env, policy, episodes=6, max_steps=50).shape
        torch.Size([6])
    """
    if episodes <= 0 or max_steps <= 0:
        raise ValueError(f"evaluate: episodes and max_steps must be positive, got episodes={episodes}, "
                         f"max_steps={max_steps}.")
    returns = []
    count = 0
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        while count < episodes:
            rollout = env.rollout(max_steps, policy, break_when_any_done=False, break_when_all_done=True)
            out = _first_episode_returns(rollout).float().cpu()
            returns.append(out)
            count += out.numel()
    return torch.cat(returns)[:episodes]
