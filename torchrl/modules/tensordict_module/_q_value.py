"""Q-value policies: greedy actions from action values (``QValueModule``, ``QValueActor``), their
distributional variants, and the forward hooks that do the same on a plain network.

The action space (``"one_hot"``, ``"mult_one_hot"``, ``"binary"``, ``"categorical"``) is read from the
action spec when one is given (``OneHot``, ``MultiOneHot``, ``Binary``, ``Categorical``) and decided once,
at construction: the forward pass is one argmax (plus a mask and a gather).
"""
from __future__ import annotations

from typing import Literal, Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, dispatch
from tensordict.utils import NestedKey, unravel_key
from torch import nn

from torchrl._fast import fast_get, fast_set
from torchrl.data.tensor_specs import Binary, Categorical, Composite, MultiOneHot, OneHot, TensorSpec
from torchrl.modules.models._distributional import DistributionalDQNnet
from torchrl.modules.tensordict_module.common import _SpecMixin
from torchrl.modules.tensordict_module.sequence import SafeSequential

__all__ = [
    "DistributionalQValueActor",
    "DistributionalQValueHook",
    "DistributionalQValueModule",
    "QValueActor",
    "QValueHook",
    "QValueModule",
]

_SPACES = ("one_hot", "mult_one_hot", "binary", "categorical")
_ALIASES = {"onehot": "one_hot", "multi_one_hot": "mult_one_hot", "multionehot": "mult_one_hot", "multonehot": "mult_one_hot"}


def _canonical_space(action_space: str) -> str:
    name = str(action_space).lower().replace("-", "_")
    name = _ALIASES.get(name, name)
    if name not in _SPACES:
        raise ValueError(
            f"Unknown action_space {action_space!r}; expected one of 'one_hot', 'mult_one_hot', 'binary', "
            f"'categorical' (dashes are accepted: 'one-hot')."
        )
    return name


def _space_of_spec(spec: TensorSpec) -> str:
    if isinstance(spec, MultiOneHot):
        return "mult_one_hot"
    if isinstance(spec, OneHot):
        return "one_hot"
    if isinstance(spec, Binary):
        return "binary"
    if isinstance(spec, Categorical):
        return "categorical"
    raise ValueError(
        f"Cannot infer a Q-value action space from a {type(spec).__name__} spec; Q-value policies need a "
        f"OneHot, MultiOneHot, Binary or Categorical action spec (or pass action_space=...)."
    )


def _resolve_space(
    action_space: str | TensorSpec | None, spec: TensorSpec | None, action_key: NestedKey
) -> tuple[str, TensorSpec | None]:
    """``(action_space, action leaf spec)`` from the ``action_space`` and/or ``spec`` arguments."""
    if isinstance(action_space, TensorSpec):
        if spec is not None:
            raise ValueError("Pass the action spec once: as spec=... (action_space then must be a string or None).")
        spec, action_space = action_space, None
    leaf = spec
    if isinstance(spec, Composite):
        leaf = spec.get(action_key, None)
        if leaf is None and len(list(spec.keys(True, True))) == 1:
            leaf = next(iter(spec.values(True, True)))
    if leaf is None:
        if action_space is None:
            raise ValueError(
                "Neither action_space nor spec was given: pass spec=env.action_spec, or action_space="
                "'one_hot'/'categorical'/'mult_one_hot'/'binary'."
            )
        return _canonical_space(action_space), None
    inferred = _space_of_spec(leaf)
    if action_space is not None and _canonical_space(action_space) != inferred:
        raise ValueError(
            f"action_space={action_space!r} does not match the {type(leaf).__name__} action spec "
            f"(which means {inferred!r}); pass only one of them."
        )
    return inferred, leaf


def _var_nums_of(space: str, leaf: TensorSpec | None, var_nums) -> list[int] | None:
    if space != "mult_one_hot":
        return None
    if var_nums is None and leaf is not None:
        var_nums = [int(n) for n in leaf.nvec]
    if var_nums is None:
        raise ValueError("action_space='mult_one_hot' needs var_nums (the number of choices of each component).")
    if isinstance(var_nums, int):
        raise ValueError(f"var_nums must list the size of each component, got the single int {var_nums}.")
    return [int(v) for v in var_nums]


def _greedy(values: torch.Tensor, space: str, var_nums: list[int] | None, dtype: torch.dtype | None):
    """``(action, chosen_action_value)`` for (already masked) action values."""
    if space == "categorical":
        idx = values.argmax(-1)
        return (idx if dtype is None else idx.to(dtype)), values.gather(-1, idx.unsqueeze(-1))
    if space == "one_hot":
        idx = values.argmax(-1, keepdim=True)
        action = torch.zeros_like(values, dtype=dtype or torch.long).scatter_(-1, idx, 1)
        return action, values.gather(-1, idx)
    if space == "binary":
        action = values > 0
        chosen = (values * action).sum(-1, keepdim=True)
        return action.to(dtype or torch.long), chosen
    actions, chosen = [], []
    for chunk in values.split(var_nums, -1):
        idx = chunk.argmax(-1, keepdim=True)
        actions.append(torch.zeros_like(chunk, dtype=dtype or torch.long).scatter_(-1, idx, 1))
        chosen.append(chunk.gather(-1, idx))
    # the chosen value of a multi-one-hot action is the sum over its components (as TorchRL)
    return torch.cat(actions, -1), torch.cat(chosen, -1).sum(-1, keepdim=True)


def _apply_mask(values: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    if mask is None:
        return values
    if mask.shape != values.shape:
        mask = mask.expand_as(values)
    return values.masked_fill(~mask.bool(), torch.finfo(values.dtype).min)


def _out_keys(out_keys, action_value_key, defaults: list[NestedKey], owner: str) -> list[NestedKey]:
    if out_keys is None:
        return list(defaults)
    out_keys = [out_keys] if isinstance(out_keys, (str, tuple)) else list(out_keys)
    if unravel_key(action_value_key) not in [unravel_key(k) for k in out_keys]:
        raise KeyError(f"{owner}: out_keys {out_keys} must contain the action-value key {action_value_key!r}.")
    return out_keys


class QValueModule(_SpecMixin, TensorDictModuleBase):
    """Greedy action from action values: writes the action, the (masked) values and the chosen value.

    Args:
        action_space (str, optional): ``"one_hot"``, ``"mult_one_hot"``, ``"binary"`` or
            ``"categorical"`` (dashes accepted). Inferred from ``spec`` when omitted.
        action_value_key (NestedKey, optional): the action values. Defaults to ``"action_value"``.
        action_mask_key (NestedKey, optional): a boolean mask of allowed actions (masked actions are
            never picked and their values are written as the dtype's minimum).
        out_keys (list, optional): ``[action, action_value, chosen_action_value]`` keys. Defaults to
            ``["action", action_value_key, "chosen_action_value"]``.
        var_nums (list of int, optional): component sizes for ``"mult_one_hot"`` (read from the spec).
        spec (TensorSpec, optional): the action spec (its type sets the action space). The action is
            ``int64`` whatever the spec's dtype, as in TorchRL.
        safe (bool, optional): project the action into the spec.
        strict_shape (bool, "auto" or None, optional): ``True`` (default) checks on every call that the
            number of action values matches the spec; ``"auto"`` also reshapes the action to the spec's
            shape when they differ only by singleton dims (e.g. a ``Categorical(n, shape=(1,))`` spec);
            ``False``/``None`` skip both.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import OneHot
        >>> from torchrl.modules import QValueModule
        >>> module = QValueModule(spec=OneHot(3))
        >>> td = module(TensorDict(action_value=torch.tensor([1.0, 3.0, 2.0])))
        >>> td["action"], td["chosen_action_value"]
        (tensor([0, 1, 0]), tensor([3.]))
    """

    def __init__(
        self,
        action_space: str | None = None,
        action_value_key: NestedKey | None = None,
        action_mask_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        var_nums: int | None = None,
        spec: TensorSpec | None = None,
        safe: bool = False,
        strict_shape: bool | Literal["auto"] | None = True,
    ) -> None:
        super().__init__()
        action_value_key = "action_value" if action_value_key is None else action_value_key
        out_keys = _out_keys(out_keys, action_value_key, ["action", action_value_key, "chosen_action_value"], type(self).__name__)
        self._setup(action_space, action_value_key, action_mask_key, out_keys, var_nums, spec, safe)
        if strict_shape not in (True, False, None, "auto"):
            raise ValueError(f"strict_shape must be True, False, None or 'auto', got {strict_shape!r}.")
        self.strict_shape = strict_shape

    def _setup(self, action_space, action_value_key, action_mask_key, out_keys, var_nums, spec, safe) -> None:
        self.out_keys = out_keys
        self.in_keys = [action_value_key] + ([action_mask_key] if action_mask_key is not None else [])
        self._action_value_key = unravel_key(action_value_key)
        self.action_mask_key = unravel_key(action_mask_key) if action_mask_key is not None else None
        self._action_key = unravel_key(out_keys[0])
        space, leaf = _resolve_space(action_space, spec, self._action_key)
        self.action_space = space
        self.var_nums = _var_nums_of(space, leaf, var_nums)
        self._dtype = None  # TorchRL writes int64 actions whatever the spec's dtype
        self._n = None if leaf is None else (sum(self.var_nums) if space == "mult_one_hot" else getattr(leaf, "n", leaf.shape[-1] if leaf.shape else None))
        self._leaf_shape = None if leaf is None else leaf.shape
        self._value_out_key = unravel_key(out_keys[1]) if len(out_keys) > 1 else None
        self._chosen_key = unravel_key(out_keys[2]) if len(out_keys) > 2 else None
        if spec is not None and not isinstance(spec, Composite):
            spec = Composite({out_keys[0]: spec})
        self.register_spec(safe=safe, spec=spec)

    def _spec_keys(self) -> list[NestedKey]:
        return [self.out_keys[0]]

    @property
    def action_value_key(self) -> NestedKey:
        return self._action_value_key

    def _values(self, tensordict: TensorDictBase) -> torch.Tensor:
        values = fast_get(tensordict, self._action_value_key)
        if values is None:
            raise KeyError(
                f"{type(self).__name__}: action values {self._action_value_key!r} not found in the input (keys: "
                f"{list(tensordict.keys(True, True))}); the Q-network must write them first."
            )
        if self.action_mask_key is not None:
            mask = fast_get(tensordict, self.action_mask_key)
            if mask is None:
                raise KeyError(
                    f"{type(self).__name__}: action mask {self.action_mask_key!r} not found in the input; add it "
                    f"(e.g. with the env's ActionMask support) or build the module without action_mask_key."
                )
            values = _apply_mask(values, mask)
        return values

    def _check_width(self, values: torch.Tensor) -> None:
        if self.strict_shape and self._n is not None and self.action_space != "binary" and values.shape[-1] != self._n:
            raise ValueError(
                f"{type(self).__name__}: action values {self._action_value_key!r} have {values.shape[-1]} entries "
                f"along the last dim but the action spec has {self._n} actions; make the network output "
                f"{self._n} values (or pass strict_shape=False)."
            )

    def _shape_action(self, action: torch.Tensor) -> torch.Tensor:
        shape = self._leaf_shape
        if (
            self.strict_shape == "auto"
            and self.action_space == "categorical"
            and shape
            and shape[-1] == 1
            and (action.ndim == 0 or action.shape[-1] != 1)
        ):
            return action.unsqueeze(-1)
        return action

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        values = self._values(tensordict)
        self._check_width(values)
        action, chosen = _greedy(values, self.action_space, self.var_nums, self._dtype)
        fast_set(tensordict, self._action_key, self._shape_action(action))
        if self._value_out_key is not None:
            fast_set(tensordict, self._value_out_key, values)
        if self._chosen_key is not None:
            fast_set(tensordict, self._chosen_key, chosen)
        return tensordict


class DistributionalQValueModule(QValueModule):
    """Greedy action from a distribution of action values over a fixed ``support`` (C51-style).

    The action values have shape ``[..., n_atoms, n_actions]`` and hold log-probabilities over atoms; the
    action maximises the expected value ``sum(softmax(values, -2) * support)``.

    Args:
        action_space (str or None): as in :class:`QValueModule` (inferred from ``spec`` when None).
        support (torch.Tensor): the atom values, shape ``[n_atoms]``.
        action_value_key (NestedKey, optional): defaults to ``"action_value"``.
        action_mask_key (NestedKey, optional): a boolean mask of allowed actions.
        out_keys (list, optional): defaults to ``["action", action_value_key]``.
        var_nums (list of int, optional): component sizes for ``"mult_one_hot"``.
        spec (TensorSpec, optional): the action spec.
        safe (bool, optional): project the action into the spec.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import DistributionalQValueModule
        >>> module = DistributionalQValueModule("categorical", support=torch.tensor([0.0, 1.0]))
        >>> logits = torch.tensor([[0.0, 5.0], [5.0, 0.0]]).log_softmax(-2)  # action 0 -> atom 1
        >>> module(TensorDict(action_value=logits))["action"]
        tensor(0)
    """

    def __init__(
        self,
        action_space: str | None,
        support: torch.Tensor,
        action_value_key: NestedKey | None = None,
        action_mask_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        var_nums: int | None = None,
        spec: TensorSpec | None = None,
        safe: bool = False,
    ) -> None:
        TensorDictModuleBase.__init__(self)
        action_value_key = "action_value" if action_value_key is None else action_value_key
        out_keys = _out_keys(out_keys, action_value_key, ["action", action_value_key], type(self).__name__)
        self.register_buffer("support", torch.as_tensor(support, dtype=torch.get_default_dtype()))
        self._setup(action_space, action_value_key, action_mask_key, out_keys, var_nums, spec, safe)
        self.strict_shape = False

    def _expected(self, values: torch.Tensor) -> torch.Tensor:
        support = self.support.to(values.dtype)
        return (values.exp() * support.unsqueeze(-1)).sum(-2)

    @dispatch(auto_batch_size=False)
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        values = fast_get(tensordict, self._action_value_key)
        if values is None:
            raise KeyError(f"{type(self).__name__}: action values {self._action_value_key!r} not found in the input.")
        if values.max() > 0:
            raise ValueError(
                f"{type(self).__name__}: the action values {self._action_value_key!r} must be log-softmax values over "
                f"the atoms (non-positive numbers); got a maximum value of {values.max().item():.4g}. Apply "
                "log_softmax over the atom dimension (DistributionalQValueActor(make_log_softmax=True) does)."
            )
        expected = self._expected(values)
        if self.action_mask_key is not None:
            expected = _apply_mask(expected, fast_get(tensordict, self.action_mask_key))
        action, _ = _greedy(expected, self.action_space, self.var_nums, self._dtype)
        fast_set(tensordict, self._action_key, action)
        if self._value_out_key is not None:
            fast_set(tensordict, self._value_out_key, values)
        return tensordict


class QValueHook:
    """Forward hook turning a plain Q-network's output into ``(action, values, chosen_action_value)``.

    Args:
        action_space (str): ``"one_hot"``, ``"mult_one_hot"``, ``"binary"`` or ``"categorical"``.
        var_nums (list of int, optional): component sizes for ``"mult_one_hot"``.
        action_value_key, action_mask_key, out_keys: kept for API compatibility (the hook works on tensors).

    Examples:
        >>> import torch
        >>> from torchrl.modules import QValueHook
        >>> net = torch.nn.Linear(4, 3)
        >>> _ = net.register_forward_hook(QValueHook("categorical"))
        >>> action, values, chosen = net(torch.randn(4))
        >>> bool(chosen == values[action])
        True
    """

    def __init__(
        self,
        action_space: str,
        var_nums: int | None = None,
        action_value_key: NestedKey | None = None,
        action_mask_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        self.action_space = _canonical_space(action_space)
        self.var_nums = _var_nums_of(self.action_space, None, var_nums)
        self.action_value_key = "action_value" if action_value_key is None else action_value_key
        self.action_mask_key = action_mask_key
        self.out_keys = out_keys

    def __call__(self, net: nn.Module, observation: torch.Tensor, values: torch.Tensor):
        action, chosen = _greedy(values, self.action_space, self.var_nums, None)
        return action, values, chosen


class DistributionalQValueHook(QValueHook):
    """Forward hook for a distributional Q-network (output ``[..., n_atoms, n_actions]`` log-probs).

    Returns ``(action, values)``.

    Examples:
        >>> import torch
        >>> from torchrl.modules import DistributionalQValueHook
        >>> hook = DistributionalQValueHook("categorical", support=torch.tensor([0.0, 1.0]))
        >>> logits = torch.tensor([[0.0, 5.0], [5.0, 0.0]]).log_softmax(-2)
        >>> hook(None, None, logits)[0]
        tensor(0)
    """

    def __init__(
        self,
        action_space: str,
        support: torch.Tensor,
        var_nums: int | None = None,
        action_value_key: NestedKey | None = None,
        action_mask_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        super().__init__(action_space, var_nums, action_value_key, action_mask_key, out_keys)
        self.support = torch.as_tensor(support)

    def __call__(self, net: nn.Module, observation: torch.Tensor, values: torch.Tensor):
        expected = (values.exp() * self.support.to(values).unsqueeze(-1)).sum(-2)
        action, _ = _greedy(expected, self.action_space, self.var_nums, None)
        return action, values


def _q_network(module, in_keys, action_value_key, owner: str) -> TensorDictModuleBase:
    if isinstance(module, TensorDictModuleBase):
        if unravel_key(action_value_key) not in [unravel_key(k) for k in module.out_keys]:
            raise KeyError(
                f"{owner}: the module writes {module.out_keys} but the action values are expected at "
                f"{action_value_key!r}; set its out_keys to include it or pass action_value_key=..."
            )
        return module
    in_keys = ["observation"] if in_keys is None else ([in_keys] if isinstance(in_keys, (str, tuple)) else list(in_keys))
    return TensorDictModule(module, in_keys=in_keys, out_keys=[action_value_key])


class QValueActor(SafeSequential):
    """A Q-network followed by a :class:`QValueModule`: a greedy policy over discrete actions.

    Args:
        module (nn.Module or TensorDictModule): the Q-network. A plain module is wrapped to read
            ``in_keys`` and write ``action_value_key``.

    Keyword Args:
        in_keys (list, optional): the network inputs (plain modules only). Defaults to ``["observation"]``.
        spec (TensorSpec, optional): the action spec (sets the action space).
        safe (bool, optional): project the action into the spec.
        action_space (str, optional): when no spec is given.
        action_value_key (NestedKey, optional): defaults to ``"action_value"``.
        action_key (NestedKey, optional): defaults to ``"action"``.
        chosen_action_value_key (NestedKey, optional): defaults to ``"chosen_action_value"``.
        action_mask_key (NestedKey, optional): a boolean mask of allowed actions.
        strict_shape (bool, "auto" or None, optional): see :class:`QValueModule`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import OneHot
        >>> from torchrl.modules import MLP, QValueActor
        >>> actor = QValueActor(MLP(in_features=4, out_features=2, num_cells=[8]), in_keys=["observation"],
        ...                     spec=OneHot(2))
        >>> td = actor(TensorDict(observation=torch.randn(5, 4), batch_size=[5]))
        >>> td["action"].shape, td["chosen_action_value"].shape
        (torch.Size([5, 2]), torch.Size([5, 1]))
    """

    def __init__(
        self,
        module,
        *,
        in_keys=None,
        spec: TensorSpec | None = None,
        safe: bool = False,
        action_space: str | None = None,
        action_value_key=None,
        action_key: NestedKey | None = None,
        chosen_action_value_key: NestedKey | None = None,
        action_mask_key: NestedKey | None = None,
        strict_shape: bool | Literal["auto"] | None = True,
    ) -> None:
        action_value_key = "action_value" if action_value_key is None else action_value_key
        action_key = "action" if action_key is None else action_key
        chosen_action_value_key = "chosen_action_value" if chosen_action_value_key is None else chosen_action_value_key
        net = _q_network(module, in_keys, action_value_key, type(self).__name__)
        qvalue = QValueModule(
            action_space=action_space,
            action_value_key=action_value_key,
            action_mask_key=action_mask_key,
            out_keys=[action_key, action_value_key, chosen_action_value_key],
            spec=spec,
            safe=safe,
            strict_shape=strict_shape,
        )
        super().__init__(net, qvalue)


class DistributionalQValueActor(QValueActor):
    """A distributional Q-network followed by a :class:`DistributionalQValueModule`.

    Args:
        module (nn.Module or TensorDictModule): outputs ``[..., n_atoms, n_actions]`` values.
        support (torch.Tensor): the atom values.
        in_keys (list, optional): the network inputs (plain modules only).
        spec, safe, var_nums, action_space, action_value_key, action_mask_key: as in
            :class:`QValueActor`.
        make_log_softmax (bool, optional): apply ``log_softmax`` over the atoms to the network output.
            Defaults to ``True``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.modules import DistributionalQValueActor
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 2 * 5), torch.nn.Unflatten(-1, (5, 2)))
        >>> actor = DistributionalQValueActor(net, support=torch.linspace(-1, 1, 5), action_space="categorical")
        >>> actor(TensorDict(observation=torch.randn(3, 4), batch_size=[3]))["action"].shape
        torch.Size([3])
    """

    def __init__(
        self,
        module,
        support: torch.Tensor,
        in_keys=None,
        spec: TensorSpec | None = None,
        safe: bool = False,
        var_nums: int | None = None,
        action_space: str | None = None,
        action_value_key: str = "action_value",
        action_mask_key: NestedKey | None = None,
        make_log_softmax: bool = True,
    ) -> None:
        net = _q_network(module, in_keys, action_value_key, type(self).__name__)
        modules = [net]
        if make_log_softmax:
            modules.append(DistributionalDQNnet(in_keys=[action_value_key], out_keys=[action_value_key]))
        modules.append(
            DistributionalQValueModule(
                action_space,
                support=support,
                action_value_key=action_value_key,
                action_mask_key=action_mask_key,
                var_nums=var_nums,
                spec=spec,
                safe=safe,
            )
        )
        SafeSequential.__init__(self, *modules)
        # the atoms, also on the actor itself (TorchRL's state dict holds both)
        self.register_buffer("support", modules[-1].support.clone())
