"""Optimisation hooks: the optimizer step (:class:`OptimizerHook` and the optimization steppers), the
learning-rate schedule (:class:`LRSchedulerHook`) and target-network updates (:class:`TargetNetUpdaterHook`)."""
from __future__ import annotations

import abc
import contextlib
from typing import TYPE_CHECKING, Any, Literal, Sequence

import torch
from tensordict import TensorDictBase
from torch import optim

from torchrl.trainers._hook_base import TrainerHookBase

if TYPE_CHECKING:
    from torchrl.objectives.utils import TargetNetUpdater
    from torchrl.trainers._trainer import Trainer

__all__ = [
    "DefaultOptimizationStepper",
    "LRSchedulerHook",
    "MixedPrecisionOptimizationStepper",
    "OptimizationStepper",
    "OptimizerHook",
    "TargetNetUpdaterHook",
]


def total_loss(losses: TensorDictBase, components: Sequence[str] | None, owner: str) -> torch.Tensor:
    """Sum of the ``components`` entries of ``losses`` (default: every root entry named ``"loss..."``)."""
    if components is None:
        components = [key for key in losses.keys() if key.startswith("loss")]
        if not components:
            raise KeyError(
                f"{owner}: the loss TensorDict has no entry named 'loss...' (keys: {sorted(map(str, losses.keys()))}); "
                f"pass loss_components=[...] to say which entries to optimise."
            )
    values = [losses.get(key, None) for key in components]
    if any(value is None for value in values):
        missing = [key for key, value in zip(components, values) if value is None]
        raise KeyError(
            f"{owner}: loss components {missing} not found in the loss TensorDict; "
            f"available: {sorted(map(str, losses.keys()))}."
        )
    loss = values[0]
    for value in values[1:]:
        loss = loss + value
    return loss


class _ParamCache:
    """The parameters of an optimizer, refreshed only when its param groups change."""

    def __init__(self, optimizer: optim.Optimizer) -> None:
        self.optimizer = optimizer
        self._n_groups = -1
        self._params: list[torch.Tensor] = []

    def get(self) -> list[torch.Tensor]:
        groups = self.optimizer.param_groups
        if len(groups) != self._n_groups:
            self._params = [p for group in groups for p in group["params"]]
            self._n_groups = len(groups)
        return self._params


def clip_gradients(params: list[torch.Tensor], clip_grad_norm: bool, clip_norm: float | None) -> torch.Tensor:
    """Clips gradients in place and returns their total norm before clipping.

    With ``clip_grad_norm`` the gradients are rescaled so that their total norm is at most ``clip_norm``;
    otherwise each partial derivative is clamped to ``[-clip_norm, clip_norm]``. ``clip_norm=None``
    measures the norm without clipping.
    """
    if clip_grad_norm:
        return torch.nn.utils.clip_grad_norm_(params, float("inf") if clip_norm is None else clip_norm)
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros(())
    if clip_norm is not None:
        torch.nn.utils.clip_grad_value_(params, clip_norm)
    return norm


class OptimizerHook(TrainerHookBase):
    """Add an optimizer for one or more loss components.

    At each optimisation step the hook sums the selected loss entries, back-propagates, clips the
    gradients of the optimizer's parameters (following the trainer's ``clip_grad_norm``/``clip_norm``),
    steps and zeroes the optimizer, and writes the pre-clipping gradient norm as ``"grad_norm_<index>"``
    in the loss TensorDict (``index`` is the hook's rank among the trainer's optimizer hooks). A trainer
    built with ``optimizer=`` registers one for all losses under the name ``"optimizer"``. The hook's
    state is the optimizer's state.

    Args:
        optimizer (optim.Optimizer): the optimizer to apply to the loss components.
        loss_components (Sequence[str], optional): the keys of the loss TensorDict to optimise. Defaults
            to every entry whose name starts with ``"loss"`` (``"loss"``, ``"loss_actor"``, ...).

    Raises:
        ValueError: ``loss_components`` is an empty sequence.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import OptimizerHook
        >>> w = torch.nn.Parameter(torch.ones(()))
        >>> hook = OptimizerHook(torch.optim.SGD([w], lr=0.5), ["loss_a"])
        >>> losses = TensorDict(loss_a=w * 2, loss_b=w * 100)
        >>> out = hook(losses, clip_grad_norm=True, clip_norm=None, index=0)
        >>> w.item(), out["grad_norm_0"].item()
        (0.0, 2.0)
    """

    def __init__(self, optimizer: optim.Optimizer, loss_components: Sequence[str] | None = None):
        if loss_components is not None:
            loss_components = [loss_components] if isinstance(loss_components, str) else list(loss_components)
            if not loss_components:
                raise ValueError("OptimizerHook: loss_components must name at least one loss entry (or be None).")
        self.optimizer = optimizer
        self.loss_components = loss_components
        self._params = _ParamCache(optimizer)

    def __call__(
        self, losses_td: TensorDictBase, clip_grad_norm: bool, clip_norm: float, index: int
    ) -> TensorDictBase:
        loss = total_loss(losses_td, self.loss_components, "OptimizerHook")
        loss.backward()
        norm = clip_gradients(self._params.get(), clip_grad_norm, clip_norm)
        losses_td.set(f"grad_norm_{index}", norm.detach())
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return losses_td

    def register(self, trainer, name="optimizer") -> None:
        trainer.register_op("optimizer", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if "optimizer" in state_dict:
            self.optimizer.load_state_dict(state_dict["optimizer"])


class OptimizationStepper(TrainerHookBase):
    """Owns a whole optimisation step: loss, backward, gradient handling and optimizer update.

    When a stepper is registered, the trainer calls :meth:`step` for each sub-batch instead of its own
    ``loss → "post_loss" → "process_loss" → "optimizer"`` sequence; the ``"process_optim_batch"``,
    ``"post_optim"`` and ``"post_optim_log"`` hooks still run around it. Subclasses implement :meth:`step`
    and return the (detached) loss TensorDict, whose scalar entries the trainer averages and logs.

    Examples:
        >>> import torch
        >>> from torchrl.trainers import OptimizationStepper
        >>> class SGDStepper(OptimizationStepper):
        ...     def __init__(self, optimizer):
        ...         self.optimizer = optimizer
        ...     def step(self, trainer, sub_batch):
        ...         losses = trainer.compute_loss(sub_batch)
        ...         losses["loss"].backward()
        ...         self.optimizer.step()
        ...         self.optimizer.zero_grad()
        ...         return losses.detach()
        >>> isinstance(SGDStepper(None), OptimizationStepper)
        True
    """

    @abc.abstractmethod
    def step(self, trainer: Trainer, sub_batch: TensorDictBase) -> TensorDictBase:
        """Runs one optimisation step on ``sub_batch``; returns the detached losses."""

    def register(self, trainer: Trainer, name: str = "optimization_stepper") -> None:
        trainer._optimization_stepper = self
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None


class DefaultOptimizationStepper(OptimizationStepper):
    """The trainer's standard step as a stepper: loss, ``"post_loss"``/``"process_loss"`` hooks, backward of
    the summed loss components, gradient clipping (the trainer's ``clip_grad_norm``/``clip_norm``) and a
    step of ``trainer.optimizer``. ``"grad_norm"`` (before clipping) is added to the returned losses.

    Args:
        loss_components (Sequence[str], optional): the loss entries to optimise. Defaults to every
            entry whose name starts with ``"loss"``.

    Raises:
        RuntimeError: (at :meth:`step`) the trainer has no optimizer.

    Examples:
        >>> from torchrl.trainers import DefaultOptimizationStepper
        >>> stepper = DefaultOptimizationStepper(["loss_actor", "loss_value"])
        >>> stepper.loss_components
        ['loss_actor', 'loss_value']
    """

    def __init__(self, loss_components: Sequence[str] | None = None) -> None:
        self.loss_components = None if loss_components is None else list(loss_components)
        self._params: _ParamCache | None = None

    def step(self, trainer: Trainer, sub_batch: TensorDictBase) -> TensorDictBase:
        opt = trainer.optimizer
        if opt is None:
            raise RuntimeError("DefaultOptimizationStepper: the trainer has no optimizer; pass optimizer= to Trainer.")
        if self._params is None or self._params.optimizer is not opt:
            self._params = _ParamCache(opt)
        losses = trainer._run_loss_hooks(sub_batch, trainer.compute_loss(sub_batch))
        total_loss(losses, self.loss_components, "DefaultOptimizationStepper").backward()
        norm = clip_gradients(self._params.get(), trainer.clip_grad_norm, trainer.clip_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses = losses.detach()
        losses.set("grad_norm", norm.detach())
        return losses


class MixedPrecisionOptimizationStepper(OptimizationStepper):
    """Optimization step with mixed precision and gradient accumulation.

    Each forward/backward runs under ``torch.autocast(device_type, autocast_dtype)`` when
    ``mixed_precision`` is set; with ``float16`` a ``torch.amp.GradScaler`` scales the loss. Gradients of
    ``gradient_accumulation_steps`` micro-batches are accumulated (each loss divided by that number)
    before the gradients are clipped to ``clip_norm``, the optimizer steps and the gradients are zeroed.

    Args:
        optimizer (optim.Optimizer): the optimizer to use.

    Keyword Args:
        mixed_precision (bool, optional): enable autocast. Defaults to ``False``.
        autocast_dtype (torch.dtype, optional): the autocast dtype. Defaults to ``torch.bfloat16``.
        gradient_accumulation_steps (int, optional): micro-batches per optimizer step. Defaults to 1.
        clip_norm (float, optional): maximum gradient norm (``None``: no clipping). Defaults to 1.0.
        device_type (str, optional): device type for autocast and the scaler. Defaults to the device type
            of the optimizer's first parameter.

    Raises:
        ValueError: ``gradient_accumulation_steps`` is smaller than 1.

    Examples:
        >>> import torch
        >>> from torchrl.trainers import MixedPrecisionOptimizationStepper
        >>> w = torch.nn.Parameter(torch.zeros(2))
        >>> stepper = MixedPrecisionOptimizationStepper(torch.optim.SGD([w], lr=0.1), gradient_accumulation_steps=2)
        >>> stepper.optimizer_step_count
        0
    """

    def __init__(
        self,
        optimizer: optim.Optimizer,
        *,
        mixed_precision: bool = False,
        autocast_dtype: torch.dtype = torch.bfloat16,
        gradient_accumulation_steps: int = 1,
        clip_norm: float | None = 1.0,
        device_type: str | None = None,
    ) -> None:
        if gradient_accumulation_steps < 1:
            raise ValueError(
                f"MixedPrecisionOptimizationStepper: gradient_accumulation_steps must be >= 1, "
                f"got {gradient_accumulation_steps}."
            )
        self.optimizer = optimizer
        self.mixed_precision = mixed_precision
        self.autocast_dtype = autocast_dtype
        self.gradient_accumulation_steps = int(gradient_accumulation_steps)
        self.clip_norm = clip_norm
        self._params = _ParamCache(optimizer)
        if device_type is None:
            params = self._params.get()
            device_type = params[0].device.type if params else "cpu"
        self.device_type = device_type
        use_scaler = mixed_precision and autocast_dtype == torch.float16
        self.scaler = torch.amp.GradScaler(device_type, enabled=True) if use_scaler else None
        self._micro_steps = 0
        self._optimizer_steps = 0

    @property
    def optimizer_step_count(self) -> int:
        """Number of optimizer updates performed so far (micro-batches / accumulation steps)."""
        return self._optimizer_steps

    def _autocast(self):
        if not self.mixed_precision:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    def step(self, trainer: Trainer, sub_batch: TensorDictBase) -> TensorDictBase:
        with self._autocast():
            losses = trainer.compute_loss(sub_batch)
            loss = total_loss(losses, None, "MixedPrecisionOptimizationStepper")
        loss = loss / self.gradient_accumulation_steps
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
        else:
            loss.backward()
        self._micro_steps += 1
        losses = losses.detach()
        if self._micro_steps % self.gradient_accumulation_steps:
            return losses
        params = self._params.get()
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        norm = clip_gradients(params, True, self.clip_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self._optimizer_steps += 1
        losses.set("grad_norm", norm.detach())
        return losses

    def state_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer.state_dict(),
            "scaler": None if self.scaler is None else self.scaler.state_dict(),
            "micro_steps": self._micro_steps,
            "optimizer_steps": self._optimizer_steps,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state_dict["optimizer"])
        if self.scaler is not None and state_dict.get("scaler") is not None:
            self.scaler.load_state_dict(state_dict["scaler"])
        self._micro_steps = int(state_dict["micro_steps"])
        self._optimizer_steps = int(state_dict["optimizer_steps"])


class LRSchedulerHook(TrainerHookBase):
    """A hook that steps a learning-rate scheduler during training.

    Args:
        scheduler (torch.optim.lr_scheduler.LRScheduler): the scheduler to step.
        interval (Literal["batch", "optim"], optional): ``"batch"`` steps the scheduler once per collected
            batch (at ``"post_steps"``), ``"optim"`` after every optimisation step (at ``"post_optim"``).
            Defaults to ``"batch"``.

    Once registered, the hook only steps the scheduler when at least one optimisation step ran since its
    last call, so the learning rate does not decay while no training happens (e.g. during the
    collector's ``init_random_frames``). Its state is the scheduler's state.

    Raises:
        ValueError: ``interval`` is neither ``"batch"`` nor ``"optim"``.

    Examples:
        >>> import torch
        >>> from torchrl.trainers import LRSchedulerHook
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> hook = LRSchedulerHook(torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5))
        >>> opt.step()
        >>> hook(); opt.param_groups[0]["lr"]
        0.5
    """

    def __init__(
        self, scheduler: torch.optim.lr_scheduler.LRScheduler, interval: Literal["batch", "optim"] = "batch"
    ) -> None:
        if interval not in ("batch", "optim"):
            raise ValueError(f"LRSchedulerHook: interval must be 'batch' or 'optim', got {interval!r}.")
        self.scheduler = scheduler
        self.interval = interval
        self._trainer: Trainer | None = None
        self._last_optim_count = 0

    def __call__(self, batch: TensorDictBase | None = None) -> TensorDictBase | None:
        trainer = self._trainer
        if trainer is not None:
            count = trainer._optim_count
            if count == self._last_optim_count:
                return batch
            self._last_optim_count = count
        self.scheduler.step()
        return batch

    def register(self, trainer: Trainer, name: str = "lr_scheduler"):
        self._trainer = trainer
        self._last_optim_count = trainer._optim_count
        trainer.register_op("post_steps" if self.interval == "batch" else "post_optim", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {"scheduler": self.scheduler.state_dict(), "last_optim_count": self._last_optim_count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state_dict["scheduler"])
        self._last_optim_count = int(state_dict["last_optim_count"])


class TargetNetUpdaterHook(TrainerHookBase):
    """A hook for target parameters update: calls ``target_params_updater.step()`` after each optimisation
    step (``"post_optim"``). The updater's state (e.g. a :class:`~torchrl.objectives.HardUpdate` step
    counter) is saved with the trainer.

    Args:
        target_params_updater (TargetNetUpdater): e.g. a :class:`~torchrl.objectives.SoftUpdate`.

    Raises:
        TypeError: the updater has no ``step`` method.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.objectives import DQNLoss, HardUpdate
        >>> from torchrl.trainers import TargetNetUpdaterHook
        >>> net = TensorDictModule(torch.nn.Linear(3, 2), ["observation"], ["action_value"])
        >>> updater = HardUpdate(DQNLoss(net, action_space="one-hot"), value_network_update_interval=2)
        >>> hook = TargetNetUpdaterHook(updater)
        >>> hook(); hook.state_dict()
        {'_steps': 1}
    """

    def __init__(self, target_params_updater: TargetNetUpdater):
        if not callable(getattr(target_params_updater, "step", None)):
            raise TypeError(
                f"TargetNetUpdaterHook: expected a TargetNetUpdater (with a step() method), "
                f"got {type(target_params_updater).__name__}."
            )
        self.target_params_updater = target_params_updater

    def __call__(self, tensordict: TensorDictBase | None = None):
        self.target_params_updater.step()
        return tensordict

    def register(self, trainer: Trainer, name: str):
        trainer.register_op("post_optim", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        getter = getattr(self.target_params_updater, "state_dict", None)
        return dict(getter()) if getter is not None else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        loader = getattr(self.target_params_updater, "load_state_dict", None)
        if loader is not None and state_dict:
            loader(state_dict)
