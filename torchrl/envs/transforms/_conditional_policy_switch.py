"""``ConditionalPolicySwitch``: lets a second policy play (one env step) whenever a condition holds."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl.envs.transforms._groups import row_mask
from torchrl.envs.transforms._transform import Transform

__all__ = ["ConditionalPolicySwitch"]


class ConditionalPolicySwitch(Transform):
    """After each step (and each reset), plays one step with ``policy`` where ``condition`` holds.

    Made for turn-based games: the trained policy plays its move, then, when ``condition(next_data)`` says
    it is the other side's turn, ``policy`` (the opponent) chooses an action and the env steps once more
    before control returns. The data the outside sees is the outcome of that extra step (its observation,
    reward and done flags); the extra steps do not appear in rollouts. After a reset where the condition
    holds, the opponent moves first and the reset returns the position after its move.

    The extra step runs through the env as this transform sees it (``parent``: the base env and the
    transforms before this one), so a ``StepCounter`` placed before the switch counts both moves and one
    placed after it counts only the outer steps.

    No extra step is played on rows that are done. In a batch-locked env (most stateful envs) the
    condition must then hold on all rows or none (the env cannot step only some rows); an env that is not
    batch-locked steps only the selected rows.

    Args:
        policy: the policy playing when the condition holds: it takes the TensorDict of the next step's
            inputs and writes the action into it.
        condition: a callable on the step's output returning a bool or a boolean tensor with one element or
            the env's batch shape (a trailing singleton dimension is accepted).

    Raises:
        TypeError: ``policy`` or ``condition`` is not callable (when first used, as TorchRL accepts them at
            construction).
        RuntimeError: the condition returns something else than a bool or a tensor of a valid shape; the
            condition selects only some rows of a batch-locked env; or the transform is called on stored
            data (it needs its env).

    Examples:
        >>> import torch
        >>> from torchrl.envs import Compose, StepCounter, TransformedEnv
        >>> from torchrl.envs.transforms import ConditionalPolicySwitch
        >>> from torchrl.testing import CountingEnv
        >>> def one(td):
        ...     return td.set("action", torch.ones(1, dtype=torch.int8))
        >>> odd = lambda td: bool(td["observation"] % 2 == 1)  # the opponent plays on odd counts
        >>> env = TransformedEnv(CountingEnv(max_steps=7), Compose(
        ...     StepCounter(step_count_key="total"),
        ...     ConditionalPolicySwitch(policy=one, condition=odd),
        ...     StepCounter(step_count_key="main"),
        ... ))
        >>> data = env.rollout(10, one)
        >>> data["next", "observation"].squeeze(-1).tolist()
        [2, 4, 6, 8]
        >>> data["next", "total"].squeeze(-1).tolist(), data["next", "main"].squeeze(-1).tolist()
        ([2, 4, 6, 8], [1, 2, 3, 4])
    """

    def __init__(
        self,
        policy: Callable[[TensorDictBase], TensorDictBase],
        condition: Callable[[TensorDictBase], bool],
    ) -> None:
        super().__init__()
        self.policy = policy
        self.condition = condition

    # -- helpers ---------------------------------------------------------------------------------------
    def _parent_or_raise(self):
        parent = self.parent
        if parent is None:
            raise RuntimeError(
                "ConditionalPolicySwitch steps its environment; it cannot be executed without a parent env. "
                "Use it inside a TransformedEnv."
            )
        return parent

    def _cond(self, data: TensorDictBase) -> torch.Tensor:
        """The condition as a boolean tensor of ``data``'s batch shape."""
        if not callable(self.condition):
            raise TypeError(f"ConditionalPolicySwitch: condition must be callable, got {type(self.condition).__name__}.")
        cond = self.condition(data)
        batch = data.batch_size
        if not isinstance(cond, (bool, torch.Tensor)):
            raise RuntimeError(  # noqa: TRY004 (TorchRL raises RuntimeError here)
                f"ConditionalPolicySwitch: calling the condition function should return a boolean or a tensor, "
                f"got {type(cond).__name__}."
            )
        mask = row_mask(cond, batch, data.device)
        if mask is not None:
            return mask
        raise RuntimeError(
            f"ConditionalPolicySwitch: the condition returned a tensor of shape {tuple(cond.shape)}; tensor outputs must have "
            f"the shape of the tensordict {tuple(batch)}, or contain a single element."
        )

    @staticmethod
    def _done_rows(parent, data: TensorDictBase) -> torch.Tensor:
        batch = data.batch_size
        done = torch.zeros(batch, dtype=torch.bool, device=data.device)
        for key in parent.done_keys:
            value = data.get(key, None)
            if value is not None:
                done = done | value.reshape(*batch, -1).any(-1).to(done.device)
        return done

    @staticmethod
    def _check_partial(parent, where: str) -> None:
        if parent.batch_locked:
            raise RuntimeError(
                f"ConditionalPolicySwitch: the condition selects only some rows {where}, but the env is batch-locked "
                f"and cannot step only those rows. Cannot run partial steps in a batched locked environment "
                f"(hint: make the condition hold on all rows or none, or use an env that is not batch-locked)."
            )

    def _play(self, parent, inputs: TensorDictBase) -> TensorDictBase:
        """One step of ``policy`` from ``inputs`` (a step's input data); returns the step's output."""
        if not callable(self.policy):
            raise TypeError(f"ConditionalPolicySwitch: policy must be callable, got {type(self.policy).__name__}.")
        inputs = self.policy(inputs)
        return parent._step_output(inputs)

    # -- env side --------------------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        cond = self._cond(next_tensordict)
        if not cond.any():
            return next_tensordict
        parent = self._parent_or_raise()
        done = self._done_rows(parent, next_tensordict)
        if done.any():
            if next_tensordict.numel() == 1 or done.all():
                return next_tensordict
            self._check_partial(parent, "(some rows are done)")
            cond = cond & ~done
            if not cond.any():
                return next_tensordict
        if cond.all():
            return self._play(parent, parent.step_mdp(tensordict.copy().set("next", next_tensordict)))
        self._check_partial(parent, "after a step")
        rows = tensordict[cond].copy().set("next", next_tensordict[cond])
        played = self._play(parent, parent.step_mdp(rows))
        merged = next_tensordict.clone()
        merged[cond] = played.select(*merged.keys(include_nested=True, leaves_only=True), strict=False)
        return merged

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        cond = self._cond(tensordict_reset)
        reset_mask = tensordict.get("_reset", None)
        if reset_mask is not None:  # rows that were not reset keep playing their episode
            cond = cond & reset_mask.reshape(*cond.shape, -1).any(-1).to(cond.device)
        if not cond.any():
            return tensordict_reset
        parent = self._parent_or_raise()
        rewards = parent.reward_keys
        if cond.all():
            return self._play(parent, tensordict_reset.copy()).exclude(*rewards)
        self._check_partial(parent, "after a reset")
        played = self._play(parent, tensordict_reset[cond].copy())
        merged = tensordict_reset.clone()
        merged[cond] = played.select(*merged.keys(include_nested=True, leaves_only=True), strict=False)
        return merged

    def forward(self, tensordict: TensorDictBase) -> Any:
        raise RuntimeError(
            "ConditionalPolicySwitch cannot be called independently, only its step and reset methods are "
            "functional: it cannot be applied to stored data."
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    def __repr__(self) -> str:
        return f"ConditionalPolicySwitch(policy={self.policy!r}, condition={self.condition!r})"
