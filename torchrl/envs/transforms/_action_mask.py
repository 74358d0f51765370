"""``ActionMask``: keeps the mask of a discrete action spec in sync with an action-mask entry of the env."""
from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.utils import NestedKey

from torchrl._fast import fast_get
from torchrl.data.tensor_specs import Categorical, MultiCategorical, MultiOneHot, OneHot, TensorSpec
from torchrl.envs.transforms._transform import Transform

__all__ = ["ActionMask"]

_MASKABLE = (Categorical, OneHot, MultiCategorical, MultiOneHot)


class ActionMask(Transform):
    """Reads the legal-action mask after every reset and step and sets it on the env's action spec.

    ``env.action_spec.rand()`` (hence ``env.rand_action`` and random rollouts) then draws legal actions
    only, and ``env.action_spec.is_in(action)`` rejects illegal ones. The action spec must be finite
    (``Categorical``, ``OneHot``, ``MultiCategorical`` or ``MultiOneHot``); the mask entry is a boolean
    tensor shaped like the mask of that spec (e.g. ``(*batch, n)``), usually part of the observation or
    state spec. Specs are not changed.

    Args:
        action_key: the action entry whose spec is masked.
        mask_key: the entry holding the mask.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Binary, Categorical, Composite, Unbounded
        >>> from torchrl.envs import EnvBase, TransformedEnv
        >>> from torchrl.envs.transforms._action_mask import ActionMask
        >>> class MaskedEnv(EnvBase):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.action_spec = Categorical(4)
        ...         self.state_spec = Composite(action_mask=Binary(4, dtype=torch.bool))
        ...         self.observation_spec = Composite(obs=Unbounded(3), action_mask=Binary(4, dtype=torch.bool))
        ...         self.reward_spec = Unbounded(1)
        ...     def _reset(self, td=None):
        ...         return TensorDict(obs=torch.zeros(3), action_mask=torch.ones(4, dtype=torch.bool))
        ...     def _step(self, td):
        ...         mask = td["action_mask"].clone()
        ...         mask[td["action"]] = False  # each action can be played once
        ...         return TensorDict(obs=torch.zeros(3), action_mask=mask, reward=torch.zeros(1), done=~mask.any(-1, keepdim=True))
        ...     def _set_seed(self, seed):
        ...         pass
        >>> env = TransformedEnv(MaskedEnv(), ActionMask())
        >>> sorted(env.rollout(10)["action"].tolist())  # every action exactly once, then done
        [0, 1, 2, 3]
    """

    def __init__(self, action_key: NestedKey = "action", mask_key: NestedKey = "action_mask") -> None:
        if not isinstance(action_key, (str, tuple)):
            raise ValueError(f"ActionMask: action_key must be a string or a tuple of strings, got {action_key!r}.")
        if not isinstance(mask_key, (str, tuple)):
            raise ValueError(f"ActionMask: mask_key must be a string or a tuple of strings, got {mask_key!r}.")
        super().__init__(in_keys=[action_key, mask_key], out_keys=[], in_keys_inv=[], out_keys_inv=[])
        self.action_key = action_key
        self.mask_key = mask_key
        self._cache: tuple | None = None  # (env's full_action_spec, its action leaf)

    def set_container(self, container) -> None:
        super().set_container(container)
        self._cache = None

    # -- the live action spec -----------------------------------------------------------------------------
    def _env(self):
        root = self._container
        while isinstance(root, Transform):
            root = root._container
        if root is None:
            raise RuntimeError("ActionMask must be used inside a TransformedEnv: it updates the env's action spec.")
        return root

    @property
    def action_spec(self) -> TensorSpec:
        """The action spec of the transformed env that this transform masks."""
        full = self._env().full_action_spec
        cache = self._cache
        if cache is not None and cache[0] is full:
            return cache[1]
        try:
            spec = full[self.action_key]
        except KeyError:
            raise KeyError(
                f"ActionMask: action key {self.action_key!r} not in the env's action spec; available: "
                f"{sorted(map(str, full.keys(True, True)))}."
            ) from None
        if not isinstance(spec, _MASKABLE):
            raise ValueError(
                f"ActionMask: the action spec at {self.action_key!r} is {type(spec).__name__}; masking needs a "
                f"finite spec (Categorical, OneHot, MultiCategorical or MultiOneHot)."
            )
        self._cache = (full, spec)
        return spec

    # -- data -------------------------------------------------------------------------------------------
    def _update(self, tensordict: TensorDictBase) -> TensorDictBase:
        spec = self.action_spec
        mask = fast_get(tensordict, self.mask_key)
        if mask is None:
            raise KeyError(
                f"ActionMask: mask key {self.mask_key!r} not found in the env's output; available keys: "
                f"{sorted(map(str, tensordict.keys(include_nested=True, leaves_only=True)))}."
            )
        spec.update_mask(mask)
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._update(next_tensordict)

    def _reset(self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase) -> TensorDictBase:
        return self._update(tensordict_reset)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._update(next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(
            "ActionMask updates an environment's action spec; it cannot be applied to stored data. Use it inside "
            "a TransformedEnv."
        )

    def __repr__(self) -> str:
        return f"ActionMask(action_key={self.action_key!r}, mask_key={self.mask_key!r})"
