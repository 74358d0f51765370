"""What ``SACLoss`` and ``DiscreteSACLoss`` share: the Q-network ensemble and the entropy temperature.

* :class:`QEnsemble` evaluates an ensemble of Q-networks with stacked parameters. When the network is a
  plain MLP (``nn.Sequential`` / :class:`~torchrl.modules.MLP` of ``nn.Linear`` layers and parameter-free
  activations), the members run as plain ``F.linear`` chains on views of the stacked weights, which costs
  no more than running separate networks one after the other by hand; other networks go through
  :class:`~torchrl.objectives._functional.EnsembleCall` (vmap or a loop).
* :class:`TemperatureMixin` holds ``log_alpha`` (a parameter, or a buffer with ``fixed_alpha``), its
  optional bounds, the target entropy (given, or ``"auto"``: derived from the action spec, or on the first
  call from the sampled action) and the temperature loss ``-log_alpha * (log_prob + target_entropy)``.
"""
from __future__ import annotations

import math
import warnings

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictParams
from torch import nn
from torch.nn import functional as F

from torchrl._fast import _switch, fast_get, new_td
from torchrl._fast.calls import plain_network
from torchrl.objectives._functional import EnsembleCall
from torchrl.objectives.common import LossModule
from torchrl.objectives.utils import _reduce

__all__ = []

_EMPTY = torch.Size([])

#: parameter-free element-wise modules a stacked MLP may contain.
_ELEMENTWISE = (
    nn.ReLU, nn.Tanh, nn.ELU, nn.LeakyReLU, nn.SiLU, nn.GELU, nn.Sigmoid, nn.Softplus, nn.Mish, nn.Identity,
    nn.SELU, nn.CELU, nn.Hardtanh, nn.ReLU6, nn.Softsign, nn.Tanhshrink, nn.Hardswish,
)


class StackedMLP:
    """Runs a plain MLP once per member of stacked parameters (``[n, ...]`` leaves), on tensors.

    Each member's layers are ``F.linear`` calls on per-member views of the stacked weights (one ``unbind``
    per stacked tensor), exactly what a hand-written loop over separate networks does; on CPU this beats
    both ``torch.vmap`` and batched ``baddbmm`` products for the usual two to four members.
    """

    def __init__(self, mlp: nn.Sequential, prefix: tuple):
        steps = []
        for name, layer in mlp.named_children():
            if isinstance(layer, nn.Linear):
                bias = None if layer.bias is None else prefix + (name, "bias")
                steps.append((prefix + (name, "weight"), bias))
            else:
                steps.append(layer.forward)  # parameter-free, element-wise: skip the module-call machinery
        self.steps = steps
        self.out_shape = getattr(mlp, "_out_shape", None)

    @classmethod
    def build(cls, module) -> StackedMLP | None:
        inner = plain_network(module)
        if type(inner) is nn.Sequential or (isinstance(inner, nn.Sequential) and type(inner).__name__ == "MLP"):
            layers = list(inner.children())
            if layers and isinstance(layers[0], nn.Linear) and all(
                isinstance(m, nn.Linear)
                or (isinstance(m, _ELEMENTWISE) and not any(True for _ in m.parameters())
                    and not m._forward_hooks and not m._forward_pre_hooks)
                for m in layers
            ):
                if type(inner) is nn.Sequential and len(module.in_keys) != 1:
                    return None  # only torchrl's MLP concatenates several inputs
                return cls(inner, ("module",))
        return None

    @staticmethod
    def _members(tensor: torch.Tensor | None, detach: bool) -> tuple | None:
        if tensor is None:
            return None
        return (tensor.detach() if detach else tensor).unbind(0)

    def __call__(self, params: TensorDictBase, xs: list, detach: bool) -> torch.Tensor:
        src = params._param_td if isinstance(params, TensorDictParams) else params
        x = xs[0] if len(xs) == 1 else torch.cat(xs, -1)
        layers = []
        for step in self.steps:
            if type(step) is tuple:
                w = self._members(fast_get(src, step[0]), detach)
                layers.append((w, self._members(None if step[1] is None else fast_get(src, step[1]), detach)))
            else:
                layers.append(step)
        linear = F.linear
        outs = []
        for m in range(len(layers[0][0])):
            h = x
            for layer in layers:
                if type(layer) is tuple:
                    h = linear(h, layer[0][m], None if layer[1] is None else layer[1][m])
                else:
                    h = layer(h)
            outs.append(h)
        out = torch.stack(outs)
        if self.out_shape is not None:
            out = out.unflatten(-1, self.out_shape)
        return out


class QEnsemble:
    """Evaluates the Q-network ensemble: ``(params [n, ...], {in_key: tensor}) -> out_key values [n, *B, ...]``."""

    def __init__(self, module, out_key, *, vmap: bool, randomness: str):
        self.module = module
        self.in_keys = list(module.in_keys)
        self.out_key = out_key
        self.stacked = StackedMLP.build(module) if list(module.out_keys) == [out_key] else None
        self.fallback = EnsembleCall(module, out_key, vmap=vmap, randomness=randomness)

    def __call__(self, params, inputs: dict, batch_size, *, detach: bool = False) -> torch.Tensor:
        if self.stacked is not None and _switch.ON:
            return self.stacked(params, [inputs[k] for k in self.in_keys], detach)
        return self.fallback(params, inputs, batch_size, detach=detach)


class TemperatureMixin(LossModule):
    """The entropy temperature of SAC-style losses (see the module docstring)."""

    _te_known = False  # the target entropy is a number (set by the loss once its spec is read)
    _warned_scalars = False  # the reduction='none' warning was given

    def _setup_alpha(self, *, alpha_init: float, min_alpha, max_alpha, fixed_alpha: bool, target_entropy,
                     auto: float | None, device=None) -> None:
        """``auto``: the automatic target entropy if it is known (``None``: unknown, NaN buffer)."""
        owner = type(self).__name__
        if not alpha_init > 0:
            raise ValueError(f"{owner}: alpha_init must be positive, got {alpha_init}.")
        for name, value in (("min_alpha", min_alpha), ("max_alpha", max_alpha)):
            if value is not None and not value > 0:
                raise ValueError(f"{owner}: {name} must be positive, got {value}.")
        if min_alpha is not None and max_alpha is not None and min_alpha > max_alpha:
            raise ValueError(f"{owner}: min_alpha ({min_alpha}) exceeds max_alpha ({max_alpha}).")
        self.min_log_alpha = None if min_alpha is None else math.log(min_alpha)
        self.max_log_alpha = None if max_alpha is None else math.log(max_alpha)
        self.fixed_alpha = bool(fixed_alpha)
        self.register_buffer("alpha_init", torch.tensor(float(alpha_init), device=device))  # as TorchRL
        log_alpha = torch.tensor(math.log(alpha_init), device=device)
        if self.fixed_alpha:
            self.register_buffer("log_alpha", log_alpha)
        else:
            self.register_parameter("log_alpha", nn.Parameter(log_alpha))
        if isinstance(target_entropy, str):
            if target_entropy != "auto":
                raise ValueError(f"{owner}: target_entropy must be 'auto' or a number, got {target_entropy!r}.")
            value = auto
        else:
            value = float(target_entropy)
        self.register_buffer("_target_entropy", torch.tensor(math.nan if value is None else value, device=device))

    @property
    def target_entropy_buffer(self) -> torch.Tensor:
        """The target entropy as a buffer (NaN when unknown: ``"auto"`` without an action spec)."""
        return self._target_entropy

    @property
    def target_entropy(self) -> torch.Tensor:
        """The target entropy of the temperature loss."""
        if not self._te_known and torch.isnan(self._target_entropy):
            raise RuntimeError(
                f"{type(self).__name__}: cannot infer the dimensionality of the action for the automatic target "
                "entropy: pass action_spec (or give the actor a spec), or a number as target_entropy."
            )
        return self._target_entropy

    @property
    def _alpha(self) -> torch.Tensor:
        if self.min_log_alpha is not None or self.max_log_alpha is not None:
            with torch.no_grad():
                self.log_alpha.clamp_(self.min_log_alpha, self.max_log_alpha)
        return self.log_alpha.detach().exp()

    @property
    def alpha(self) -> torch.Tensor:
        """The current temperature ``exp(log_alpha)`` (clamped to the bounds)."""
        return self._alpha

    def alpha_loss(self, log_prob: torch.Tensor) -> torch.Tensor:
        """``-log_alpha * (log_prob + target_entropy)`` per element (``log_prob`` is detached)."""
        return -self.log_alpha * (log_prob.detach() + self.target_entropy)

    def _finish(self, losses: dict, scalars: dict, td: TensorDictBase, weights=None) -> TensorDictBase:
        """Reduces the ``loss_*`` terms and adds ``scalars`` (``alpha``, ``entropy``).

        With ``reduction="none"`` the output keeps the input's batch size (as TorchRL), so the scalars cannot be
        entries: ``scalar_output_mode=None`` leaves them out with a warning (once per loss), ``"exclude"``
        silently, ``"non_tensor"`` stores them as non-tensor data."""
        mask = self._loss_mask(td)
        out = {name: _reduce(value, self.reduction, mask, weights if name == "loss_qvalue" else None)
               for name, value in losses.items()}
        if self.reduction != "none":
            out.update(scalars)
            return new_td(out, _EMPTY)
        bs = td.batch_size
        batch = bs if all(v.shape[: len(bs)] == bs for v in out.values()) else _EMPTY
        result = new_td(out, batch)
        mode = self.scalar_output_mode
        if mode == "non_tensor":
            for key, value in scalars.items():
                result.set_non_tensor(key, value.detach())
        elif mode is None and not self._warned_scalars:
            self._warned_scalars = True
            warnings.warn(
                f"{type(self).__name__} with reduction='none' cannot include scalar values ({', '.join(scalars)}) "
                "in the output TensorDict, whose batch size is the input's: they are left out. Pass "
                "scalar_output_mode='exclude' to silence this warning, or 'non_tensor' to keep them as non-tensor "
                "entries.",
                UserWarning,
                stacklevel=3,
            )
        return result


def check_scalar_output_mode(owner: str, mode) -> str | None:
    if mode not in (None, "exclude", "non_tensor"):
        raise ValueError(f"{owner}: scalar_output_mode must be None, 'exclude' or 'non_tensor', got {mode!r}.")
    return mode
