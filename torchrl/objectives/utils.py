"""Helpers shared by the losses: the value-estimator registry, distances, reductions, target updaters.

* :class:`ValueEstimators` names the estimators; :func:`register_value_estimator` maps each name to an
  estimator class (the classes in :mod:`torchrl.objectives.value` register themselves), so every loss
  builds every applicable estimator through :func:`build_value_estimator` / :func:`dispatch_value_estimator`.
* :func:`distance_loss`, :func:`next_state_value`, :func:`group_optimizers`, :class:`hold_out_net`,
  :class:`hold_out_params`, :class:`KLAdaptiveLR` and the DreamerV3 scalar codecs (:func:`symlog`,
  :func:`two_hot_encode`, ...).
* :class:`SoftUpdate` / :class:`HardUpdate` (defined in ``_target_net.py``) keep target parameters in sync.
"""
from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from copy import copy
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, is_tensor_collection, unravel_key
from tensordict.nn import TensorDictModule
from torch import Tensor, nn, vmap
from torch.nn import functional as F
from torch.nn.modules import dropout
from torch.utils._pytree import tree_map

from torchrl._utils._implement_for import implement_for
from torchrl.envs.utils import step_mdp
from torchrl.objectives._target_net import HardUpdate, SoftUpdate, TargetNetUpdater

try:
    from torch.compiler import is_dynamo_compiling
except ImportError:  # pragma: no cover - older torch
    from torch._dynamo import is_compiling as is_dynamo_compiling

__all__ = [
    "RANDOM_MODULE_LIST",
    "HardUpdate",
    "KLAdaptiveLR",
    "SoftUpdate",
    "TargetNetUpdater",
    "ValueEstimators",
    "add_random_module",
    "build_value_estimator",
    "default_value_kwargs",
    "dispatch_value_estimator",
    "distance_loss",
    "get_value_estimator_entry",
    "group_optimizers",
    "hold_out_net",
    "hold_out_params",
    "next_state_value",
    "register_value_estimator",
    "symexp",
    "symlog",
    "two_hot_cross_entropy",
    "two_hot_decode",
    "two_hot_encode",
]

TensorLike = TypeVar("TensorLike", Tensor, TensorDictBase)

#: Module classes that make a network random (vmap over such a network needs ``randomness="different"``).
RANDOM_MODULE_LIST = (dropout._DropoutNd,)


def add_random_module(module: type) -> None:
    """Declares an extra module class as random (see :data:`RANDOM_MODULE_LIST`).

    Examples:
        >>> from torch import nn
        >>> from torchrl.objectives.utils import add_random_module
        >>> import torchrl.objectives.utils as u
        >>> add_random_module(nn.RReLU)
        >>> nn.RReLU in u.RANDOM_MODULE_LIST
        True
    """
    global RANDOM_MODULE_LIST
    if module not in RANDOM_MODULE_LIST:
        RANDOM_MODULE_LIST = RANDOM_MODULE_LIST + (module,)


def _has_random_module(*modules: nn.Module) -> bool:
    return any(isinstance(m, RANDOM_MODULE_LIST) for mod in modules if mod is not None for m in mod.modules())


# ------------------------------------------------------------------------------- value estimator registry
class ValueEstimators(Enum):
    """Names of the value estimators a loss can use.

    Examples:
        >>> from torchrl.objectives.utils import ValueEstimators
        >>> ValueEstimators.TD0.name, ValueEstimators.GAE.value
        ('TD0', 'Generalized advantage estimate')
    """

    TD0 = "Bootstrapped TD (1-step return)"
    TD1 = "TD(1) (infinity-step return)"
    TDLambda = "TD(lambda)"
    GAE = "Generalized advantage estimate"
    MAGAE = "Multi-agent generalized advantage estimate"
    VTrace = "V-trace"


@dataclass
class _ValueEstimatorRegistryEntry:
    value_type: Any
    cls: type
    default_kwargs: dict = field(default_factory=dict)


_REGISTRY: dict[Any, _ValueEstimatorRegistryEntry] = {}


def register_value_estimator(value_type: Any, *, default_kwargs: dict | None = None):
    """Class decorator: makes ``cls`` the estimator built for ``value_type``.

    ``value_type`` is usually a :class:`ValueEstimators` member; any hashable works for custom estimators.
    ``default_kwargs`` are the hyperparameters used when the caller does not give them
    (see :func:`default_value_kwargs`). The class must accept them as keyword arguments and provide
    ``for_loss(loss_module, **hyperparams)``.

    Examples:
        >>> from torchrl.objectives.utils import get_value_estimator_entry, ValueEstimators
        >>> get_value_estimator_entry(ValueEstimators.GAE).cls.__name__
        'GAE'
    """

    def decorator(cls: type) -> type:
        _REGISTRY[value_type] = _ValueEstimatorRegistryEntry(value_type, cls, dict(default_kwargs or {}))
        return cls

    return decorator


def _type_name(value_type: Any) -> str:
    return value_type.name if isinstance(value_type, Enum) else repr(value_type)


def get_value_estimator_entry(value_type) -> _ValueEstimatorRegistryEntry:
    """The registry entry (``value_type``, ``cls``, ``default_kwargs``) of a value estimator.

    Raises:
        NotImplementedError: if no estimator is registered under ``value_type``.
    """
    try:
        return _REGISTRY[value_type]
    except (KeyError, TypeError):
        known = ", ".join(_type_name(k) for k in _REGISTRY)
        raise NotImplementedError(
            f"No value estimator is registered for {value_type!r}; registered: {known}. "
            "Register one with @register_value_estimator(value_type)."
        ) from None


def default_value_kwargs(value_type: ValueEstimators) -> dict:
    """The default hyperparameters of a value estimator (a fresh dict).

    Examples:
        >>> from torchrl.objectives.utils import default_value_kwargs, ValueEstimators
        >>> default_value_kwargs(ValueEstimators.GAE)
        {'gamma': 0.99, 'lmbda': 0.95, 'differentiable': True}
    """
    return dict(get_value_estimator_entry(value_type).default_kwargs)


def build_value_estimator(loss_module, value_type, **hyperparams):
    """Builds the estimator registered for ``value_type``, wired to ``loss_module``'s networks.

    The registered defaults fill in the hyperparameters that are not given.
    """
    entry = get_value_estimator_entry(value_type)
    return entry.cls.for_loss(loss_module, **{**entry.default_kwargs, **hyperparams})


def dispatch_value_estimator(
    loss_module,
    value_type,
    *,
    supported: Iterable[Any],
    tensor_keys: dict[str, NestedKey] | None = None,
    **hyperparams,
):
    """Checks that ``loss_module`` supports ``value_type``, builds the estimator and installs it.

    Sets ``loss_module._value_estimator`` and ``loss_module.value_type``; ``tensor_keys`` (``None`` values
    skipped) are passed to the estimator's ``set_keys``.

    Raises:
        NotImplementedError: if ``value_type`` is not in ``supported``.
    """
    supported = tuple(supported)
    if value_type not in supported:
        names = ", ".join(_type_name(v) for v in supported) or "none"
        raise NotImplementedError(
            f"{type(loss_module).__name__} does not support the {_type_name(value_type)} value estimator; "
            f"supported estimators: {names}."
        )
    estimator = build_value_estimator(loss_module, value_type, **hyperparams)
    loss_module._value_estimator = estimator
    loss_module.value_type = value_type
    if tensor_keys:
        keys = {k: v for k, v in tensor_keys.items() if v is not None}
        if keys:
            estimator.set_keys(**keys)
    return estimator


# ------------------------------------------------------------------------------------ distances, reduce
def _leafwise(fn, v1, v2):
    if is_tensor_collection(v1) or is_tensor_collection(v2):
        if not is_tensor_collection(v1):
            return v2.apply(lambda b: fn(v1, b))
        if not is_tensor_collection(v2):
            return v1.apply(lambda a: fn(a, v2))
        return v1.apply(fn, v2)
    return fn(v1, v2)


_DISTANCES = {
    "l2": functools.partial(F.mse_loss, reduction="none"),
    "l1": functools.partial(F.l1_loss, reduction="none"),
    "smooth_l1": functools.partial(F.smooth_l1_loss, reduction="none"),
}
# Same-shape plain tensors skip the functional wrappers (broadcast checks, warnings): ~10 us a call.
_C_NN = getattr(torch._C, "_nn", None)
_FAST_DISTANCES = {}
if _C_NN is not None and all(hasattr(_C_NN, n) for n in ("mse_loss", "l1_loss", "smooth_l1_loss")):
    _FAST_DISTANCES = {
        "l2": lambda a, b: _C_NN.mse_loss(a, b, 0),
        "l1": lambda a, b: _C_NN.l1_loss(a, b, 0),
        "smooth_l1": lambda a, b: _C_NN.smooth_l1_loss(a, b, 0, 1.0),
    }


def mean_squared_error(v1: Tensor, v2: Tensor) -> Tensor:
    """``F.mse_loss(v1, v2)`` (mean) for same-shape tensors: one fused node in the autograd graph."""
    if _FAST_DISTANCES:
        return _C_NN.mse_loss(v1, v2, 1)
    return F.mse_loss(v1, v2)


def distance_loss(v1: TensorLike, v2: TensorLike, loss_function: str, strict_shape: bool = True) -> TensorLike:
    """Element-wise distance between two tensors (or tensordicts, leaf by leaf); no reduction.

    Args:
        v1: first input.
        v2: second input.
        loss_function: ``"l2"`` (squared error), ``"l1"`` (absolute error) or ``"smooth_l1"`` (Huber, delta 1).
        strict_shape: if ``True`` (default), the shapes must be equal; if ``False`` they are broadcast.

    Returns:
        The distance, shaped like the (broadcast) inputs.

    Raises:
        RuntimeError: if ``strict_shape`` and the shapes differ (both shapes are named).
        NotImplementedError: for an unknown ``loss_function``.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.utils import distance_loss
        >>> distance_loss(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 1.0]), "l2")
        tensor([1., 4.])
    """
    if type(v1) is Tensor and type(v2) is Tensor and v1.shape == v2.shape:
        fast = _FAST_DISTANCES.get(loss_function) or _DISTANCES.get(loss_function)
        if fast is not None:
            return fast(v1, v2)  # the common case, without the checks below
    fn = _DISTANCES.get(loss_function)
    if fn is None:
        raise NotImplementedError(
            f"distance_loss: unknown loss_function {loss_function!r}; expected one of {sorted(_DISTANCES)}."
        )
    s1, s2 = v1.shape, v2.shape
    if s1 != s2:
        if strict_shape:
            raise RuntimeError(
                f"distance_loss: shapes differ: v1 {tuple(s1)}, v2 {tuple(s2)}; pass strict_shape=False to "
                "broadcast them."
            )
        if not (is_tensor_collection(v1) or is_tensor_collection(v2)):
            v1, v2 = torch.broadcast_tensors(v1, v2)
    return _leafwise(fn, v1, v2)


def _reduce(tensor: Tensor, reduction: str, mask: Tensor | None = None, weights: Tensor | None = None) -> Tensor:
    """Applies (optional) per-element ``weights`` and ``mask``, then ``reduction``."""
    if weights is not None:
        if weights.shape != tensor.shape:
            weights = _align(weights, tensor)
        tensor = tensor * weights
    if mask is not None:
        if mask.shape != tensor.shape:
            mask = _align(mask, tensor)
        # masked-out elements are zeroed, not dropped: boolean indexing would read the mask on the host
        tensor = torch.where(mask, tensor, torch.zeros((), dtype=tensor.dtype, device=tensor.device))
        if reduction == "mean":
            return tensor.sum() / mask.sum().clamp_min(1)
    if reduction == "mean":
        return tensor.mean()
    if reduction == "sum":
        return tensor.sum()
    return tensor


def _align(t: Tensor, like: Tensor) -> Tensor:
    """Drops / adds trailing singleton dims so ``t`` broadcasts against ``like`` (``[B, 1]`` vs ``[B]``)."""
    while t.ndim > like.ndim and t.shape[-1] == 1:
        t = t.squeeze(-1)
    while t.ndim < like.ndim:
        t = t.unsqueeze(-1)
    return t.expand_as(like)


_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(owner: str, reduction: str | None) -> str:
    if reduction is None:
        return "mean"
    if reduction not in _REDUCTIONS:  # TorchRL raises NotImplementedError for an unknown reduction
        raise NotImplementedError(f"{owner}: reduction must be one of {_REDUCTIONS}, got {reduction!r}.")
    return reduction


# -------------------------------------------------------------------------------------- context managers
class _context_manager:  # noqa: N801 - TorchRL's name
    """Base of the ``hold_out_*`` helpers: usable as ``with`` blocks and as function decorators."""

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with copy(self):
                return func(*args, **kwargs)

        return wrapper


class hold_out_params(_context_manager):  # noqa: N801 - TorchRL's name
    """Turns ``requires_grad`` off for some tensors inside the block, restoring each one's flag after.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.utils import hold_out_params
        >>> w = torch.zeros(2, requires_grad=True)
        >>> with hold_out_params([w]):
        ...     inside = w.requires_grad
        >>> inside, w.requires_grad
        (False, True)
    """

    def __init__(self, params: Iterable[Tensor]) -> None:
        self.params = tuple(params)
        self._flags: list[bool] = []

    def __enter__(self) -> None:
        self._flags = [p.requires_grad for p in self.params]
        for p in self.params:
            if p.is_leaf:
                p.requires_grad_(False)

    def __exit__(self, *exc) -> None:
        for p, flag in zip(self.params, self._flags):
            if p.is_leaf:
                p.requires_grad_(flag)


class hold_out_net(hold_out_params):  # noqa: N801 - TorchRL's name
    """Freezes a network's parameters inside the block (gradients still flow *through* the network).

    Examples:
        >>> from torch import nn
        >>> from torchrl.objectives.utils import hold_out_net
        >>> net = nn.Linear(2, 1)
        >>> with hold_out_net(net):
        ...     frozen = not net.weight.requires_grad
        >>> frozen, net.weight.requires_grad
        (True, True)
    """

    def __init__(self, network: nn.Module) -> None:
        self.network = network
        super().__init__(network.parameters())


# --------------------------------------------------------------------------------------------- misc
def next_state_value(
    tensordict: TensorDictBase,
    operator: TensorDictModule | None = None,
    next_val_key: str = "state_action_value",
    gamma: float = 0.99,
    pred_next_val: Tensor | None = None,
    **kwargs,
) -> torch.Tensor:
    """One-step bootstrapped target :math:`r + \\gamma^{n} (1 - \\text{terminated}) V(s')`, detached.

    ``n`` is the ``"steps_to_next_obs"`` entry when present (multi-step returns), else 1. The next value
    is ``pred_next_val`` when given, else ``operator`` is run on the next state (extra ``kwargs`` are
    passed to it) and ``next_val_key`` is read. ``("next", "terminated")`` is used when present, else
    ``("next", "done")``.

    Returns:
        The target with the trailing singleton dimension removed (``[*B]`` for a ``[*B, 1]`` reward).

    Raises:
        ValueError: if neither ``operator`` nor ``pred_next_val`` is given.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.objectives.utils import next_state_value
        >>> td = TensorDict({"next": {"reward": torch.ones(2, 1), "done": torch.tensor([[False], [True]])}}, [2])
        >>> next_state_value(td, gamma=0.5, pred_next_val=torch.full((2, 1), 4.0))
        tensor([3., 1.])
    """
    reward = tensordict.get(("next", "reward"))
    terminated = tensordict.get(("next", "terminated"), None)
    if terminated is None:
        terminated = tensordict.get(("next", "done"))
    steps = tensordict.get("steps_to_next_obs", None)
    if pred_next_val is None:
        if operator is None:
            raise ValueError("next_state_value: pass either `operator` (to evaluate s') or `pred_next_val`.")
        with torch.no_grad():
            next_td = step_mdp(tensordict)
            pred_next_val = operator(next_td, **kwargs).get(next_val_key)
    pred_next_val = pred_next_val.detach()
    reward = reward.squeeze(-1) if reward.shape[-1:] == (1,) else reward
    not_term = (~terminated.bool()).squeeze(-1) if terminated.shape[-1:] == (1,) else ~terminated.bool()
    pred = pred_next_val.squeeze(-1) if pred_next_val.shape[-1:] == (1,) else pred_next_val
    discount = gamma if steps is None else gamma ** steps.squeeze(-1).to(reward.dtype)
    return reward.to(torch.get_default_dtype()) + discount * not_term.to(pred.dtype) * pred


def group_optimizers(*optimizers: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """One optimizer holding the parameter groups of several optimizers of the same class.

    Raises:
        ValueError: if the optimizers are of different classes (both named) or none is given.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.utils import group_optimizers
        >>> a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 1)
        >>> opt = group_optimizers(torch.optim.Adam(a.parameters(), lr=1e-3), torch.optim.Adam(b.parameters()))
        >>> len(opt.param_groups)
        2
    """
    if not optimizers:
        raise ValueError("group_optimizers: pass at least one optimizer.")
    cls = type(optimizers[0])
    groups = []
    for opt in optimizers:
        if type(opt) is not cls:
            raise ValueError(
                f"group_optimizers: cannot group optimizers of different classes ({cls.__name__} and "
                f"{type(opt).__name__})."
            )
        groups.extend(opt.param_groups)
    return cls(groups)


class KLAdaptiveLR:
    """Scales an optimizer's learning rate to keep the policy KL near ``target_kl`` (rsl_rl's PPO schedule).

    After each update, :meth:`step` compares the measured KL with ``target_kl``: above ``2 * target_kl``
    the learning rate is divided by ``factor``; positive but below ``target_kl / 2`` it is multiplied by
    ``factor``; otherwise (and for a KL of exactly 0) it is unchanged. Learning rates stay within
    ``[min_lr, max_lr]``.

    Args:
        optimizer: the optimizer whose parameter groups are rescaled in place.
        target_kl: the desired KL per update (> 0).

    Keyword Args:
        factor: multiplicative change, > 1. Defaults to 1.5.
        min_lr: lower bound. Defaults to 1e-5.
        max_lr: upper bound. Defaults to 1e-2.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.utils import KLAdaptiveLR
        >>> opt = torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=1e-3)
        >>> sched = KLAdaptiveLR(opt, target_kl=0.01)
        >>> sched.step(0.1)
        >>> round(sched.get_last_lr()[0], 8)
        0.00066667
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        target_kl: float,
        *,
        factor: float = 1.5,
        min_lr: float = 1e-5,
        max_lr: float = 1e-2,
    ) -> None:
        if target_kl <= 0:
            raise ValueError(f"KLAdaptiveLR: target_kl must be > 0, got {target_kl}.")
        if factor <= 1:
            raise ValueError(f"KLAdaptiveLR: factor must be > 1, got {factor}.")
        if not 0 < min_lr <= max_lr:
            raise ValueError(f"KLAdaptiveLR: need 0 < min_lr <= max_lr, got min_lr={min_lr}, max_lr={max_lr}.")
        self.optimizer = optimizer
        self.target_kl, self.factor, self.min_lr, self.max_lr = float(target_kl), float(factor), min_lr, max_lr

    def step(self, kl: float | Tensor) -> None:
        """Rescales the learning rates given the KL measured after the last update."""
        kl = float(kl.detach().mean()) if isinstance(kl, Tensor) else float(kl)
        if kl > 2 * self.target_kl:
            scale = 1 / self.factor
        elif 0 < kl < self.target_kl / 2:
            scale = self.factor
        else:
            return
        for group in self.optimizer.param_groups:
            lr = group["lr"] * scale
            group["lr"] = min(max(lr, self.min_lr), self.max_lr)

    def get_last_lr(self) -> list[float]:
        """The current learning rate of each parameter group."""
        return [float(g["lr"]) for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's settings (the learning rates live in the optimizer's own state dict)."""
        return {"target_kl": self.target_kl, "factor": self.factor, "min_lr": self.min_lr, "max_lr": self.max_lr}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores settings saved by :meth:`state_dict`."""
        self.target_kl = float(state_dict["target_kl"])
        self.factor = float(state_dict["factor"])
        self.min_lr, self.max_lr = state_dict["min_lr"], state_dict["max_lr"]


# --------------------------------------------------------------------- DreamerV3 scalar representations
def symlog(value: Tensor) -> Tensor:
    """:math:`\\operatorname{sign}(x) \\log(1 + |x|)` (Hafner et al., 2023, eq. 9).

    Examples:
        >>> import torch
        >>> from torchrl.objectives.utils import symlog, symexp
        >>> x = torch.tensor([-10.0, 0.0, 3.0])
        >>> torch.allclose(symexp(symlog(x)), x)
        True
    """
    return value.sign() * value.abs().log1p()


def symexp(value: Tensor) -> Tensor:
    """:math:`\\operatorname{sign}(x) (e^{|x|} - 1)`, the inverse of :func:`symlog`."""
    return value.sign() * value.abs().expm1()


def two_hot_encode(x: Tensor, bins: Tensor) -> Tensor:
    """Spreads each scalar over its two neighbouring support values so that the expectation is ``x``.

    Values outside the support saturate at its ends.

    Args:
        x: raw scalars, any shape.
        bins: one-dimensional ascending support.

    Returns:
        Shape ``(*x.shape, bins.numel())``, on ``x``'s dtype and device.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.utils import two_hot_encode
        >>> two_hot_encode(torch.tensor([0.25]), torch.tensor([-1.0, 0.0, 1.0]))
        tensor([[0.0000, 0.7500, 0.2500]])
    """
    n = bins.numel()
    bins = bins.to(device=x.device, dtype=x.dtype)
    xc = x.clamp(bins[0], bins[-1])
    upper = torch.searchsorted(bins, xc.detach().contiguous()).clamp(1, n - 1)
    lower = upper - 1
    lo, hi = bins[lower], bins[upper]
    w_hi = ((xc - lo) / (hi - lo)).clamp(0.0, 1.0)
    out = torch.zeros(*x.shape, n, dtype=x.dtype, device=x.device)
    out.scatter_(-1, lower.unsqueeze(-1), (1.0 - w_hi).unsqueeze(-1))
    out.scatter_add_(-1, upper.unsqueeze(-1), w_hi.unsqueeze(-1))
    return out


def two_hot_decode(logits: Tensor, bins: Tensor) -> Tensor:
    """Expectation of ``bins`` under ``softmax(logits)``; the trailing category dimension is removed.

    For an antisymmetric support (``bins == -bins.flip(0)``) mirrored bins are paired through their
    probability difference, so a uniform distribution decodes to exactly 0.

    Examples:
        >>> import torch
        >>> from torchrl.objectives.utils import two_hot_decode, two_hot_encode
        >>> bins = torch.tensor([-1.0, 0.0, 1.0])
        >>> two_hot_decode((two_hot_encode(torch.tensor([0.25]), bins) + 1e-8).log(), bins)
        tensor([0.2500])
    """
    probs = logits.softmax(-1)
    bins = bins.to(device=probs.device, dtype=probs.dtype)
    n = bins.numel()
    if torch.equal(bins, -bins.flip(0)):
        half = n // 2
        out = (probs[..., :half] - probs[..., n - half :].flip(-1)) @ bins[:half]
        return out + probs[..., half] * bins[half] if n % 2 else out
    return probs @ bins


def two_hot_cross_entropy(logits: Tensor, target: Tensor, bins: Tensor) -> Tensor:
    """Cross-entropy between the two-hot encoding of ``target`` and ``logits`` (per element, no reduction).

    ``target`` has shape ``logits.shape[:-1]`` (a trailing singleton dimension is accepted).

    Examples:
        >>> import torch
        >>> from torchrl.objectives.utils import two_hot_cross_entropy
        >>> bins = torch.tensor([-1.0, 0.0, 1.0])
        >>> two_hot_cross_entropy(torch.zeros(1, 3), torch.zeros(1), bins).item() == torch.tensor(3.0).log().item()
        True
    """
    if target.shape != logits.shape[:-1] and target.shape[-1:] == (1,):
        target = target.squeeze(-1)
    return -(two_hot_encode(target, bins) * logits.log_softmax(-1)).sum(-1)


# names TorchRL's module exposes (re-exported imports)
_REEXPORTS = (
    Any, Callable, Enum, Iterable, Mapping, NestedKey, Tensor, TensorDict, TensorDictBase, TensorDictModule,
    TypeVar, copy, implement_for, is_dynamo_compiling, step_mdp, tree_map, unravel_key, vmap, math, warnings,
)
