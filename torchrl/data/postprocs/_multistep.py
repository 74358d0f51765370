"""``MultiStep``: n-step returns and n-step-ahead next states for time-major batches."""
from __future__ import annotations

from tensordict import TensorDictBase
from torch import nn

from torchrl.envs.transforms._multi_step_transform import n_step_transitions

_DONE_KEYS = ("done", "truncated", "terminated")


class _MissingEntryError(KeyError, AttributeError):
    """A missing entry: a ``KeyError`` that TorchRL's callers catch as ``AttributeError``."""


def multi_step(td: TensorDictBase, gamma: float, n_steps: int) -> TensorDictBase:
    """The n-step version of a time-major batch (time = last batch dim), see :class:`MultiStep`.

    The one n-step implementation is :func:`~torchrl.envs.transforms._multi_step_transform.n_step_transitions`
    (shared with ``MultiStepTransform``); the post-processing reads ``("next", "reward")`` and
    ``("next", "done")`` and applies no mask.
    """
    return n_step_transitions(td, gamma, n_steps, reward_keys=("reward",), done_key="done", mask_key=None)


class MultiStep(nn.Module):
    """Turns one-step transitions into n-step transitions (Sutton, 1988).

    The batch is time-major along its last batch dim. For every step ``t``, with ``k`` the number of steps
    until the episode ends (inclusive) or the batch ends, capped at ``n_steps``:

    - ``("next", "reward")`` becomes :math:`\\sum_{i<k} \\gamma^i r_{t+i}` (the one-step reward is kept under
      ``("next", "original_reward")``);
    - every other ``"next"`` entry (observations, done flags...) is taken from step ``t + k - 1``;
    - ``"steps_to_next_obs"`` holds ``k`` and ``"gamma"`` holds :math:`\\gamma^k` (the discount of the bootstrap
      term), both shaped like the batch; ``"nonterminal"`` is ``k > 1`` (TorchRL's entry).

    One difference with TorchRL 0.14.1, on purpose: TorchRL leaves the done flags of step ``t`` in
    ``"next"``, so a transition whose n-step window reaches the end of its episode bootstraps from the
    terminal observation; here the done flags come from step ``t + k - 1`` with the observation, so the
    bootstrap is masked.

    Args:
        gamma (float): the discount factor.
        n_steps (int): the number of steps (``1`` leaves rewards and next states unchanged); a window
            longer than the batch is cut at its end.

    Raises:
        TypeError: if ``n_steps`` is not an int.
        ValueError: if ``n_steps < 1`` or ``gamma`` is outside ``[0, 1]``; when called, if the tensordict has
            no batch dim.
        KeyError: when called, if ``("next", "done")`` or ``("next", "reward")`` is missing (the error is also
            an ``AttributeError``, TorchRL's type).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data.postprocs import MultiStep
        >>> done = torch.tensor([False, False, True, False, False]).unsqueeze(-1)
        >>> td = TensorDict(obs=torch.arange(5.0), next=TensorDict(obs=torch.arange(1.0, 6), reward=torch.ones(5, 1),
        ...                 done=done, batch_size=[5]), batch_size=[5])
        >>> out = MultiStep(gamma=0.5, n_steps=2)(td)
        >>> out["next", "reward"].squeeze(-1).tolist(), out["next", "obs"].tolist()
        ([1.5, 1.5, 1.0, 1.5, 1.0], [2.0, 3.0, 3.0, 5.0, 5.0])
        >>> out["steps_to_next_obs"].tolist(), out["gamma"].tolist()
        ([2, 2, 1, 2, 1], [0.25, 0.25, 0.5, 0.25, 0.5])
    """

    def __init__(self, gamma: float, n_steps: int):
        super().__init__()
        if isinstance(n_steps, bool) or not isinstance(n_steps, int):
            raise TypeError(f"MultiStep: n_steps must be an int, got {type(n_steps).__name__} ({n_steps!r}).")
        if n_steps < 1:
            raise ValueError(f"MultiStep: n_steps must be >= 1, got {n_steps}.")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"MultiStep: gamma must lie in [0, 1], got {gamma}.")
        self.gamma = gamma
        self.n_steps = n_steps
        # TorchRL's attributes (this implementation reads "done" and "reward" under "next")
        self.done_key = "done"
        self.done_keys = _DONE_KEYS
        self.reward_keys = ("reward",)
        self.mask_key = ("collector", "mask")

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.ndim == 0:
            raise ValueError("MultiStep: the tensordict needs a time dimension (its last batch dim).")
        nxt = tensordict.get("next", None)
        for key in ("done", "reward"):
            if nxt is None or nxt.get(key, None) is None:
                raise _MissingEntryError(
                    f"MultiStep: the tensordict needs ('next', 'done') and ('next', 'reward') entries; "
                    f"('next', {key!r}) is missing."
                )
        return multi_step(tensordict, self.gamma, self.n_steps)
