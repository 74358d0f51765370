"""``DiscreteActionProjection``: lets a policy with ``max_actions`` one-hot outputs drive an env with fewer actions."""
from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl.data.tensor_specs import Composite, OneHot
from torchrl.envs.transforms._transform import Transform

__all__ = ["DiscreteActionProjection"]


class DiscreteActionProjection(Transform):
    """Projects a one-hot action over ``max_actions`` onto the env's ``num_actions_effective`` actions.

    Useful when one policy (with ``max_actions`` outputs) serves several envs with fewer discrete
    actions. Going into the env (inverse), an index ``i < num_actions_effective`` is kept and an index
    ``i >= num_actions_effective`` is replaced by a uniformly random valid action. Going out (forward,
    when ``include_forward``), an env-sized one-hot action is zero-padded to ``max_actions`` (e.g. on
    replay-buffer samples). The env's one-hot action spec is seen from outside as ``OneHot(max_actions)``.

    Args:
        num_actions_effective: the number of actions the env accepts.
        max_actions: the number of actions the policy emits (``>= num_actions_effective``).
        action_key: the one-hot action entry (default ``"action"``).
        include_forward: whether ``forward`` pads env actions to ``max_actions`` (default ``True``).

    Raises:
        RuntimeError: ``max_actions < num_actions_effective``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.transforms._discrete_action_projection import DiscreteActionProjection
        >>> t = DiscreteActionProjection(3, 5)
        >>> t.inv(TensorDict(action=torch.tensor([0, 0, 1, 0, 0])))["action"]
        tensor([0, 0, 1])
        >>> t(TensorDict(action=torch.tensor([0, 1, 0])))["action"]
        tensor([0, 1, 0, 0, 0])
    """

    def __init__(
        self,
        num_actions_effective: int,
        max_actions: int,
        action_key: NestedKey = "action",
        include_forward: bool = True,
    ):
        if max_actions < num_actions_effective:
            raise RuntimeError(
                f"DiscreteActionProjection: max_actions ({max_actions}) must be greater or equal to "
                f"num_actions_effective ({num_actions_effective})."
            )
        in_keys = [action_key] if include_forward else []
        super().__init__(in_keys=in_keys, out_keys=list(in_keys), in_keys_inv=[action_key], out_keys_inv=[action_key])
        self.num_actions_effective = int(num_actions_effective)
        self.max_actions = int(max_actions)
        self.action_key = action_key
        self.include_forward = include_forward

    def _check_width(self, action: torch.Tensor, where: str) -> None:
        if action.shape[-1] > self.max_actions:
            raise ValueError(
                f"DiscreteActionProjection ({where}): action {self.action_key!r} has last dim {action.shape[-1]}, "
                f"expected a one-hot of size at most max_actions={self.max_actions}."
            )

    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        """Pads an env one-hot action (``num_actions_effective``) with zeros to ``max_actions``."""
        self._check_width(action, "forward")
        pad = action.new_zeros((*action.shape[:-1], self.max_actions - action.shape[-1]))
        return torch.cat([action, pad], -1)

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        """Keeps valid indices, draws a random valid one for the others, and returns a smaller one-hot."""
        self._check_width(action, "inverse")
        index = action.to(torch.uint8).argmax(-1)
        invalid = index >= self.num_actions_effective
        if invalid.any():
            random = torch.randint(self.num_actions_effective, index.shape, device=index.device)
            index = torch.where(invalid, random, index)
        return torch.nn.functional.one_hot(index, self.num_actions_effective).to(action.dtype)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict  # the action lives in the step's input, not in its outputs

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return tensordict_reset

    def transform_input_spec(self, input_spec: Composite):
        key = ("full_action_spec", *((self.action_key,) if isinstance(self.action_key, str) else self.action_key))
        spec = input_spec.get(key, None)
        if spec is None:
            raise KeyError(f"DiscreteActionProjection: action key {self.action_key!r} is not in the env's action spec.")
        input_spec[key] = OneHot(self.max_actions, shape=(*spec.shape[:-1], self.max_actions), device=spec.device, dtype=spec.dtype)
        return input_spec

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_actions_effective={self.num_actions_effective}, "
            f"max_actions={self.max_actions}, in_keys_inv={self.in_keys_inv})"
        )
