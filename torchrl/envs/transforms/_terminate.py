"""``TerminateTransform``: ends episodes when a user predicate on the step's output holds."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from torchrl.envs._done import as_tuple
from torchrl.envs.transforms._transform import Transform

__all__ = ["TerminateTransform"]


class TerminateTransform(Transform):
    """Terminates episodes where ``stop(next_tensordict)`` is true.

    After each step, ``stop`` is called on the step's output (the ``"next"`` data) and its boolean result
    is OR-ed into every ``terminated`` entry of the env and, with ``write_done`` (default), every ``done``
    entry, so ``rollout(..., break_when_any_done=True)`` stops there and batched envs reset those rows.
    ``truncated`` entries are left alone. Resets are not affected.

    The result may be a Python bool, a one-element tensor, or a tensor of the env's batch shape (or any
    shape that lines up from the left with a done entry, e.g. ``(B,)`` or ``(B, 1)`` for ``(B, 1)``
    dones); it is broadcast to each done entry's shape by adding trailing dimensions.

    Args:
        stop: a callable taking the post-step TensorDict and returning the termination flag.

    Keyword Args:
        write_done: also set ``done`` (default ``True``); ``False`` writes only ``terminated``.

    Raises:
        ValueError: ``stop`` is not callable.
        TypeError: ``stop`` returned something that is not a bool or a tensor of numbers.
        RuntimeError: the flag cannot be broadcast to a done entry; or the transform is called on stored
            data (it needs an env step).

    Examples:
        >>> import torch
        >>> from torchrl.envs import TransformedEnv
        >>> from torchrl.envs.transforms import TerminateTransform
        >>> from torchrl.testing import CountingEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=10), TerminateTransform(lambda td: td["observation"] >= 2))
        >>> data = env.rollout(10, lambda td: td.set("action", torch.ones(1, dtype=torch.int8)))
        >>> data["next", "observation"].squeeze(-1).tolist(), data["next", "terminated"].squeeze(-1).tolist()
        ([1, 2], [False, True])
    """

    def __init__(self, stop: Callable[[TensorDictBase], Any], *, write_done: bool = True) -> None:
        if not callable(stop):
            # ValueError, as TorchRL
            raise ValueError(f"TerminateTransform: `stop` must be a callable, got {type(stop).__name__}.")  # noqa: TRY004
        super().__init__()
        self.stop = stop
        self.write_done = bool(write_done)
        # (done spec it was computed for, the done entries it writes): rebuilt when the env's done spec changes
        self._targets: tuple[Any, list] | None = None

    def _target_keys(self) -> list:
        parent = self.parent
        if parent is None:
            raise RuntimeError(
                "TerminateTransform is executed without a parent environment; it cannot be applied to stored "
                "data. Use it inside a TransformedEnv."
            )
        spec = parent.output_spec["full_done_spec"]
        cached = self._targets
        if cached is not None and cached[0] is spec:
            return cached[1]
        names = ("terminated", "done") if self.write_done else ("terminated",)
        keys = [k for k in spec.keys(include_nested=True, leaves_only=True) if as_tuple(k)[-1] in names]
        self._targets = (spec, keys)
        return keys

    def _flag(self, next_tensordict: TensorDictBase) -> torch.Tensor:
        flag = self.stop(next_tensordict)
        if isinstance(flag, torch.Tensor):
            return flag if flag.dtype is torch.bool else flag.bool()
        try:
            return torch.as_tensor(flag, device=next_tensordict.device).bool()
        except (TypeError, ValueError, RuntimeError) as err:
            raise TypeError(
                f"TerminateTransform: stop returned {type(flag).__name__}, expected a bool or a boolean tensor ({err})."
            ) from None

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        keys = self._target_keys()
        flag = self._flag(next_tensordict)
        for key in keys:
            done = next_tensordict.get(key, None)
            if done is None:
                continue
            f = flag.to(done.device)
            if f.ndim < done.ndim:
                f = f.reshape(*f.shape, *([1] * (done.ndim - f.ndim)))
            try:
                f = f.expand(done.shape)
            except RuntimeError:
                raise RuntimeError(
                    f"TerminateTransform: stop returned a flag of shape {tuple(flag.shape)}, which cannot be "
                    f"broadcast to the done entry {key!r} of shape {tuple(done.shape)}."
                ) from None
            next_tensordict.set(key, done | f)  # a new tensor: the env's own flags are left untouched
        return next_tensordict

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "TerminateTransform ends environment episodes; it cannot be applied to stored data. Use it inside a "
            "TransformedEnv."
        )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    def __repr__(self) -> str:
        return f"TerminateTransform(stop={self.stop!r}, write_done={self.write_done})"
