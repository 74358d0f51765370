"""``BatchSizeTransform``: gives an environment a new batch size (expanded, or reshaped by a function)."""
from __future__ import annotations

from typing import Callable

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl.data.tensor_specs import Composite
from torchrl.envs.transforms._transform import Transform

__all__ = ["BatchSizeTransform"]


class BatchSizeTransform(Transform):
    """Changes the batch size of an environment.

    Two uses, exclusive:

    - ``batch_size``: give a non-batch-locked env (e.g. the stateless ``PendulumEnv()``) a batch size, so that
      collectors and rollouts without an input TensorDict know how many envs to run. The env's batch size
      must expand to ``batch_size`` (its dims are the trailing ones). Specs are expanded; a reset without
      input resets the base env once and expands the result (pass ``reset_func`` to build a proper batch of
      initial states); steps are run by the base env on the whole batch.
    - ``reshape_fn``: reshape a batched env (``lambda td: td.unsqueeze(-1)``, ``reshape``, ``flatten``,
      ``unflatten``, ``squeeze``). The function is applied to outputs and specs; inputs are reshaped back
      to the base env's batch size before each step.

    Keyword Args:
        batch_size (torch.Size or equivalent): the new batch size. Exclusive with ``reshape_fn``.
        reshape_fn (callable): maps a TensorDict (and a ``Composite`` spec) to its reshaped version.
        reset_func (callable): ``reset_func(tensordict, tensordict_reset) -> TensorDict`` builds the reset
            output from the reset input (possibly ``None``) and the base env's reset output; it is expanded
            to ``batch_size`` afterwards when needed.
        env_kwarg (bool): pass the parent env to ``reset_func`` as ``env=`` (ignored without ``reset_func``).
            Defaults to ``False``.

    Raises:
        ValueError: if neither or both of ``batch_size`` and ``reshape_fn`` are given.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms import BatchSizeTransform
        >>> env = TransformedEnv(PendulumEnv(), BatchSizeTransform(batch_size=[3]))
        >>> env.batch_size, env.rollout(2).batch_size
        (torch.Size([3]), torch.Size([3, 2]))
        >>> env = TransformedEnv(PendulumEnv(batch_size=[2]), BatchSizeTransform(reshape_fn=lambda td: td.unsqueeze(-1)))
        >>> env.batch_size, env.rollout(2)["next", "th"].shape
        (torch.Size([2, 1]), torch.Size([2, 1, 2]))
    """

    def __init__(
        self,
        *,
        batch_size: torch.Size | None = None,
        reshape_fn: Callable[[TensorDictBase], TensorDictBase] | None = None,
        reset_func: Callable[[TensorDictBase, TensorDictBase], TensorDictBase] | None = None,
        env_kwarg: bool = False,
    ) -> None:
        super().__init__()
        if (batch_size is None) == (reshape_fn is None):
            raise ValueError(
                "BatchSizeTransform: one and only one of batch_size OR reshape_fn must be provided "
                f"(got batch_size={batch_size!r}, reshape_fn={reshape_fn!r})."
            )
        self.batch_size = None if batch_size is None else torch.Size(batch_size)
        self.reshape_fn = reshape_fn
        self.reset_func = reset_func
        self.env_kwarg = bool(env_kwarg)

    # -- batch size and specs ---------------------------------------------------------------------------
    def transform_env_batch_size(self, batch_size: torch.Size):
        if self.batch_size is not None:
            return self.batch_size
        return self.reshape_fn(TensorDict(batch_size=batch_size)).batch_size

    def _edit_spec(self, spec: Composite) -> Composite:
        if self.reshape_fn is not None:
            return self.reshape_fn(spec)
        if spec.shape == self.batch_size:
            return spec
        n = len(self.batch_size)
        if len(spec.shape) > n or tuple(self.batch_size[n - len(spec.shape):]) != tuple(spec.shape):
            raise ValueError(
                f"BatchSizeTransform: the env's batch size {tuple(spec.shape)} does not expand to batch_size "
                f"{tuple(self.batch_size)} (its dims must be the trailing ones)."
            )
        return spec.expand(self.batch_size)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        return self._edit_spec(output_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        return self._edit_spec(input_spec)

    # -- data -------------------------------------------------------------------------------------------
    def _to_batch(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.reshape_fn is not None:
            return self.reshape_fn(tensordict)
        if tensordict.batch_size != self.batch_size:
            tensordict = tensordict.expand(self.batch_size).clone()
        return tensordict

    def forward(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Outside an env: applies ``reshape_fn`` (data are returned unchanged in ``batch_size`` mode)."""
        if self.reshape_fn is not None:
            return self.reshape_fn(next_tensordict)
        return next_tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.forward(next_tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._to_batch(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        if self.reset_func is not None:
            if self.env_kwarg:
                tensordict_reset = self.reset_func(tensordict, tensordict_reset, env=self.parent)
            else:
                tensordict_reset = self.reset_func(tensordict, tensordict_reset)
        return self._to_batch(tensordict_reset)

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        if tensordict is not None and self.reshape_fn is not None:
            return self._to_parent(tensordict)
        return tensordict

    def _to_parent(self, tensordict: TensorDictBase) -> TensorDictBase:
        parent = self.parent
        if parent is None or tensordict.batch_size == parent.batch_size:
            return tensordict
        return tensordict.reshape(parent.batch_size)

    @property
    def _has_inverse(self) -> bool:
        return self.reshape_fn is not None

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._to_parent(tensordict)

    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Reshapes step inputs back to the base env's batch size (``reshape_fn`` mode; otherwise unchanged)."""
        return self._inv_call(tensordict) if self._has_inverse else tensordict

    def __repr__(self) -> str:
        what = f"batch_size={self.batch_size}" if self.batch_size is not None else f"reshape_fn={self.reshape_fn}"
        return f"BatchSizeTransform({what})"
