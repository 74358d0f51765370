"""``TargetReturn``: a return-to-go the policy can condition on (Decision-Transformer style)."""
from __future__ import annotations

from typing import Literal, Sequence

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Composite, Unbounded
from torchrl.envs._done import as_tuple, from_tuple
from torchrl.envs.transforms._groups import done_groups, reset_key_for, restart_where_reset
from torchrl.envs.transforms._transform import Transform, _key_list

__all__ = ["TargetReturn"]

_MODES = ("reduce", "constant")


class TargetReturn(Transform):
    """Writes a target return next to each reward: the return the agent should still collect.

    At each reset the target is set to ``target_return`` (only in the reset sub-envs when the reset is
    partial). After each step it becomes ``target - reward`` (``mode="reduce"``: the return still to go) or
    stays as it was (``mode="constant"``). The target is an observation (and a state entry, so that each
    step reads the previous one from its input) with the reward's shape and dtype.

    Args:
        target_return: the return to reach, set at every episode start.
        mode: ``"reduce"`` (default) or ``"constant"``.
        in_keys: reward entries (default: every reward entry of the env, ``["reward"]`` outside an env).
        out_keys: target entries (default: ``"target_return"`` in place of the last element of each in_key).
        reset_key: the reset entry that restarts the targets (default: the reset entry of the rewards' done
            group, ``"_reset"`` for a root reward).

    Raises:
        ValueError: an unknown ``mode``, ``in_keys`` and ``out_keys`` of different lengths, or ``in_keys``
            that are not rewards of the env.
        NotImplementedError: called on data outside an env (the targets follow the env's resets).

    Examples:
        >>> import torch
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.envs.transforms._target_return import TargetReturn
        >>> env = TransformedEnv(PendulumEnv(seed=0), TargetReturn(10.0))
        >>> data = env.rollout(3)
        >>> data["target_return"][0].tolist()
        [10.0]
        >>> expected = 10.0 - data["next", "reward"].cumsum(0)
        >>> bool(torch.allclose(data["next", "target_return"], expected))
        True
    """

    def __init__(
        self,
        target_return: float,
        mode: str = "reduce",
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        reset_key: NestedKey | None = None,
    ) -> None:
        if mode not in _MODES:
            raise ValueError(f"TargetReturn: mode can only be 'reduce' or 'constant', got {mode!r}.")
        self._resolved: list[tuple[NestedKey, NestedKey]] | None = None  # (in, out) pairs
        super().__init__()
        self.target_return = target_return
        self.mode: Literal["reduce", "constant"] = mode
        self._given_in = _key_list(in_keys) or None
        self._given_out = _key_list(out_keys) or None
        if self._given_in and self._given_out and len(self._given_in) != len(self._given_out):
            raise ValueError(f"TargetReturn: in_keys {self._given_in} and out_keys {self._given_out} differ in length.")
        self._given_reset = reset_key
        self._reset_key: NestedKey | None = None
        self._shapes: dict = {}  # out_key -> (target shape without batch dims, dtype), from the reward spec

    # -- keys --------------------------------------------------------------------------------------------
    def _resolve(self, full_reward_spec=None, full_done_spec=None) -> list[tuple[NestedKey, NestedKey]]:
        if self._resolved is not None and full_reward_spec is None:
            return self._resolved
        if full_reward_spec is None and self.parent is not None:
            full_reward_spec = self.parent.output_spec["full_reward_spec"]
            full_done_spec = self.parent.output_spec["full_done_spec"]
        groups = {(): torch.Size([])}
        if full_reward_spec is None:
            in_keys = self._given_in or ["reward"]
        else:
            reward_keys = list(full_reward_spec.keys(include_nested=True, leaves_only=True))
            in_keys = self._given_in or reward_keys
            missing = [k for k in in_keys if k not in reward_keys]
            if missing:
                raise ValueError(
                    f"TargetReturn: in_keys {missing} are not reward entries of the env (reward keys: {reward_keys})."
                )
            groups = done_groups(full_done_spec)
        out_keys = self._given_out or [from_tuple(as_tuple(k)[:-1] + ("target_return",)) for k in in_keys]
        if len(out_keys) != len(in_keys):
            raise ValueError(f"TargetReturn: {len(in_keys)} reward keys {in_keys} but {len(out_keys)} out_keys {out_keys}.")
        self._reset_key = self._given_reset or reset_key_for(in_keys[0], groups)
        self._resolved = list(zip(in_keys, out_keys))
        return self._resolved

    @property
    def in_keys(self) -> list[NestedKey]:
        return [i for i, _ in self._resolve()]

    @in_keys.setter
    def in_keys(self, value) -> None:
        self._in_keys = _key_list(value)

    @property
    def out_keys(self) -> list[NestedKey]:
        return [o for _, o in self._resolve()]

    @out_keys.setter
    def out_keys(self, value) -> None:
        self._out_keys = None if value is None else _key_list(value)

    @property
    def reset_key(self) -> NestedKey:
        self._resolve()
        return self._reset_key

    # -- data ----------------------------------------------------------------------------------------------
    def _fresh(self, out_key: NestedKey, batch_size: torch.Size, device) -> torch.Tensor:
        shape, dtype = self._shapes.get(out_key, (torch.Size([1]), torch.get_default_dtype()))
        return torch.full(batch_size + shape, self.target_return, dtype=dtype, device=device)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        pairs = self._resolve()
        reset_key = self._reset_key
        for _, out_key in pairs:
            fresh = self._fresh(out_key, tensordict_reset.batch_size, tensordict_reset.device)
            previous = fast_get(tensordict, out_key, None) if tensordict is not None else None
            if previous is not None and previous.shape != fresh.shape:
                previous = None
            fast_set(tensordict_reset, out_key, restart_where_reset(tensordict, reset_key, previous, fresh))
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in self._resolved or self._resolve():
            previous = fast_get(tensordict, out_key)
            if previous is None:  # a step without a reset before it: start from the target
                reward = fast_get(next_tensordict, in_key)
                previous = torch.full_like(reward, self.target_return)
            if self.mode == "reduce":
                reward = fast_get(next_tensordict, in_key)
                if reward is None:
                    raise KeyError(f"TargetReturn: reward {in_key!r} not found in the step's output.")
                fast_set(next_tensordict, out_key, previous - reward)
            else:
                fast_set(next_tensordict, out_key, previous.clone())
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(
            "TargetReturn follows an environment's resets and steps; it cannot be applied to stored data. Use it "
            "inside a TransformedEnv."
        )

    # -- specs -----------------------------------------------------------------------------------------
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        full_reward = output_spec["full_reward_spec"]
        self._resolve(full_reward, output_spec["full_done_spec"])
        obs = output_spec["full_observation_spec"]
        n = len(output_spec.shape)
        shapes = {}
        for in_key, out_key in self._resolved:
            leaf = full_reward[in_key]
            obs[out_key] = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
            shapes[out_key] = (leaf.shape[n:], leaf.dtype)
        self._shapes = shapes
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        state = input_spec["full_state_spec"]
        for _, out_key in self._resolve():
            shape, dtype = self._shapes.get(out_key, (torch.Size([1]), torch.get_default_dtype()))
            state[out_key] = Unbounded(shape=input_spec.shape + shape, dtype=dtype, device=state.device)
        return input_spec

    def __repr__(self) -> str:
        keys = "" if self._resolved is None else f"in_keys={self.in_keys}, out_keys={self.out_keys}, "
        return f"TargetReturn({keys}target_return={self.target_return}, mode={self.mode!r})"
