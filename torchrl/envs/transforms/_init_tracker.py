"""``InitTracker``: flags the first step of every episode (``is_init``)."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Categorical, Composite
from torchrl.envs._done import from_tuple
from torchrl.envs.transforms._groups import done_groups
from torchrl.envs.transforms._transform import Transform

__all__ = ["InitTracker"]


class InitTracker(Transform):
    """Writes ``is_init``: True on the observation returned by a reset, False after every step.

    Recurrent policies read it to zero their hidden state at episode starts. One flag lives next to every
    group of done entries. For partial resets only the reset sub-environments are flagged.

    Args:
        init_key: name of the flag.

    Examples:
        >>> from torchrl.envs import InitTracker, PendulumEnv, TransformedEnv
        >>> env = TransformedEnv(PendulumEnv(), InitTracker())
        >>> env.rollout(3)["is_init"].squeeze(-1).tolist()
        [True, False, False]
    """

    def __init__(self, init_key: str = "is_init") -> None:
        if not isinstance(init_key, str):
            raise ValueError(f"InitTracker: init_key must be a string (it is placed in every done group), got {init_key!r}.")
        super().__init__()
        self.init_key = init_key
        self._groups: list[tuple] | None = None

    def _set_groups(self, full_done_spec) -> None:
        self._groups = [
            (from_tuple(prefix + (self.init_key,)), from_tuple(prefix + ("_reset",)), shape)
            for prefix, shape in done_groups(full_done_spec).items()
        ]

    def _get_groups(self):
        if self._groups is None:
            parent = self.parent
            if parent is None:
                raise RuntimeError("InitTracker must be used inside a TransformedEnv (it needs the env's done keys).")
            self._set_groups(parent.output_spec["full_done_spec"])
        return self._groups

    @property
    def init_keys(self):
        return [k for k, _, _ in self._get_groups()]

    @property
    def reset_keys(self):
        return [r for _, r, _ in self._get_groups()]

    @property
    def out_keys(self):
        if self._groups is None and self.parent is None:
            # as TorchRL: the flags sit next to the env's done entries, unknown without an env
            raise NotImplementedError(
                "InitTracker.out_keys: the transform has no parent env; its out_keys (one init flag per done group "
                "of the env) are known once it is in a TransformedEnv."
            )
        return self.init_keys

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._out_keys = value

    def set_container(self, container) -> None:
        super().set_container(container)
        self._groups = None

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        for init_key, reset_key, _ in self._get_groups():
            done = fast_get(tensordict_reset, from_tuple(_prefix(init_key) + ("done",)))
            mask = fast_get(tensordict, reset_key, None) if tensordict is not None else None
            if mask is None:
                flag = torch.ones_like(done)
            elif mask.numel() == done.numel():
                flag = mask.reshape(done.shape).clone()
            else:
                flag = mask.reshape(*mask.shape, *([1] * (done.ndim - mask.ndim))).expand(done.shape).clone()
            fast_set(tensordict_reset, init_key, flag)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for init_key, _, _ in self._get_groups():
            value = fast_get(tensordict, init_key, None)
            if value is not None:
                fast_set(next_tensordict, init_key, torch.zeros_like(value))
            else:
                done = fast_get(next_tensordict, from_tuple(_prefix(init_key) + ("done",)))
                fast_set(next_tensordict, init_key, torch.zeros_like(done))
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Outside an env: ``is_init`` is True on the first step of each trajectory (time is the last dim)."""
        for init_key, _, _ in self._get_groups() if self.parent is not None else [(self.init_key, "_reset", None)]:
            done = fast_get(tensordict, ("next",) + _prefix(init_key) + ("done",), None)
            if done is None:
                raise KeyError(f"InitTracker.forward: needs ('next', 'done') to find trajectory starts; keys: {list(tensordict.keys())}.")
            time_dim = tensordict.batch_dims - 1
            first = torch.zeros_like(done)
            first.select(time_dim, 0).fill_(True)
            if done.shape[time_dim] > 1:
                first.narrow(time_dim, 1, done.shape[time_dim] - 1).copy_(done.narrow(time_dim, 0, done.shape[time_dim] - 1))
            tensordict.set(init_key, first)
        return tensordict

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        full_done = output_spec["full_done_spec"]
        self._set_groups(full_done)
        obs = output_spec["full_observation_spec"]
        for init_key, _, shape in self._groups:
            obs[init_key] = Categorical(2, shape=shape, dtype=torch.bool, device=full_done.device)
        return output_spec

    def __repr__(self) -> str:
        return f"InitTracker(init_key={self.init_key!r})"


def _prefix(key) -> tuple[str, ...]:
    return (key,)[:0] if isinstance(key, str) else tuple(key[:-1])
