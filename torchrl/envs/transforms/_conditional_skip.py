"""``ConditionalSkip``: skips the env step for the rows where a condition on the step's input holds."""
from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl.envs.transforms._groups import row_mask
from torchrl.envs.transforms._transform import Transform

__all__ = ["ConditionalSkip"]


class ConditionalSkip(Transform):
    """Skips the step of the env holding it where ``cond(input)`` is true.

    Before each step, ``cond`` is called on the step's input; its result (``True``: skip) is written, negated,
    as the ``"_step"`` mask of the inputs. The transformed env then steps only the other rows: when no row
    steps, the base env is not called at all; in an env that is not batch-locked, only the stepping rows
    are passed to it; a batch-locked env receives the mask and is trusted to honour it (as TorchRL). A
    skipped row's output repeats its input (observations and done flags) with a zero reward, and the
    transforms of this env do not run on it. Transforms of an env wrapping this one still do (wrap with
    ``auto_unwrap=False`` to keep a counter outside the skip, as in the example).

    Args:
        cond: a callable on the step's input returning a bool or a boolean tensor with one element or the
            env's batch shape (a trailing singleton dimension is accepted); ``True`` skips the row.

    Raises:
        TypeError: ``cond`` is not callable.
        RuntimeError: ``cond`` returns a tensor of another shape.
        NotImplementedError: the transform is called on stored data (it needs an env).

    Examples:
        >>> import torch
        >>> from torchrl.envs import Compose, StepCounter, TransformedEnv
        >>> from torchrl.envs.transforms import ConditionalSkip
        >>> from torchrl.testing import CountingEnv
        >>> def one(td):
        ...     return td.set("action", torch.ones(1, dtype=torch.int8))
        >>> inner = TransformedEnv(
        ...     CountingEnv(max_steps=20),
        ...     Compose(StepCounter(step_count_key="inner"), ConditionalSkip(lambda td: td["step_count"] % 2 == 1)),
        ... )
        >>> env = TransformedEnv(inner, StepCounter(), auto_unwrap=False)
        >>> data = env.rollout(6, one)
        >>> data["next", "observation"].squeeze(-1).tolist()
        [1, 1, 2, 2, 3, 3]
        >>> data["next", "inner"].squeeze(-1).tolist(), data["next", "step_count"].squeeze(-1).tolist()
        ([1, 1, 2, 2, 3, 3], [1, 2, 3, 4, 5, 6])
    """

    _skips_steps = True  # (the transformed env keeps its last outputs for skipped rows)

    def __init__(self, cond: Callable[[TensorDict], bool | torch.Tensor]) -> None:
        if not callable(cond):
            raise TypeError(f"ConditionalSkip: cond must be callable, got {type(cond).__name__}.")
        super().__init__()
        self.cond = cond

    def _skip_mask(self, tensordict: TensorDictBase) -> torch.Tensor:
        skip = self.cond(tensordict)
        batch = tensordict.batch_size
        mask = row_mask(skip, batch, tensordict.device)
        if mask is not None:
            return mask
        raise RuntimeError(
            f"ConditionalSkip: cond returned a tensor of shape {tuple(torch.as_tensor(skip).shape)}; expected one element or the batch shape "
            f"{tuple(batch)}."
        )

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        step = ~self._skip_mask(tensordict)
        previous = tensordict.get("_step", None)  # another ConditionalSkip in the same env
        if previous is not None:
            step = step & previous.reshape(step.shape)
        tensordict.set("_step", step)
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "ConditionalSkip cannot be executed without a parent environment: it skips environment steps and "
            "cannot be applied to stored data."
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def __repr__(self) -> str:
        return f"ConditionalSkip(cond={self.cond!r})"
