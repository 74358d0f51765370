"""Control hooks: weight syncs to the collector (:class:`UpdateWeights`), early stopping
(:class:`EarlyStopping`) and CUDA cache clearing (:class:`ClearCudaCache`)."""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Callable, Literal

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from torchrl.trainers._hook_base import TrainerHookBase, metric_name

if TYPE_CHECKING:
    from torchrl.collectors import BaseCollector
    from torchrl.trainers._trainer import Trainer

__all__ = ["ClearCudaCache", "EarlyStopping", "UpdateWeights"]

_PATH_TOKEN = re.compile(r"([^.\[\]]+)|\[([^\]]+)\]")


def resolve_path(root: Any, path: str) -> Any:
    """``root.a.b[0].c`` from ``"a.b[0].c"`` (attribute names, integer or quoted-string subscripts)."""
    obj = root
    for name, index in _PATH_TOKEN.findall(path):
        if name:
            obj = getattr(obj, name)
        else:
            index = index.strip()
            obj = obj[index[1:-1] if index[:1] in "'\"" else int(index)]
    return obj


class UpdateWeights(TrainerHookBase):
    """A collector weights update hook class.

    Every ``update_weights_interval`` batches (``interval_unit="batches"``, at ``"post_steps"``) or
    optimisation steps (``"optim_steps"``, at ``"post_optim"``), the collector's policy receives the
    trained weights, which is needed whenever the collector runs a copy of the policy (another device,
    another process). What is sent:

    - with ``weight_update_map``: for each ``{destination: source path on the trainer}`` pair, the
      parameters of the trainer's module at that path (``collector.update_policy_weights_(weights_dict=...)``);
    - with ``policy_weights_getter``: what it returns (``collector.update_policy_weights_(weights)``);
    - otherwise: ``collector.update_policy_weights_()``, which pushes the weights of the policy the
      collector was built with.

    With a ``sender`` (a weight-sync sender with a ``send(weights)`` method) the weights go through it
    instead of the collector. The call counter is saved with the trainer.

    Args:
        collector (BaseCollector, optional): the collector to update (not needed with a ``sender``).
        update_weights_interval (int, optional): interval between two syncs. Defaults to 1.
        policy_weights_getter (Callable, optional): returns the weights to send.
        weight_update_map (dict[str, str], optional): destination → source path (e.g.
            ``{"policy": "loss_module.actor_network"}``); takes precedence over ``policy_weights_getter``.
        trainer (Trainer, optional): resolves the source paths (set by :meth:`register` when omitted).

    Keyword Args:
        sender (optional): a weight sender used instead of the collector.
        interval_unit (Literal["batches", "optim_steps"], optional): the unit of the interval. Defaults to
            ``"batches"``.

    Raises:
        TypeError: neither a collector nor a sender.
        ValueError: non-positive interval or unknown ``interval_unit``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.collectors import Collector
        >>> from torchrl.envs import PendulumEnv
        >>> from torchrl.trainers import UpdateWeights
        >>> trained = torch.nn.Linear(3, 1)
        >>> acting = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
        >>> collector = Collector(PendulumEnv(), acting, frames_per_batch=10, total_frames=20)
        >>> hook = UpdateWeights(collector, 1, policy_weights_getter=lambda: TensorDict.from_module(
        ...     TensorDictModule(trained, ["observation"], ["action"])))
        >>> hook()
        >>> torch.equal(acting.module.weight, trained.weight)
        True
        >>> collector.shutdown()
    """

    def __init__(
        self,
        collector: BaseCollector | None = None,
        update_weights_interval: int = 1,
        policy_weights_getter: Callable[[Any], Any] | None = None,
        weight_update_map: dict[str, str] | None = None,
        trainer: Trainer | None = None,
        *,
        sender: Any | None = None,
        interval_unit: Literal["batches", "optim_steps"] = "batches",
    ):
        if collector is None and sender is None:
            raise TypeError("UpdateWeights: pass the collector to update (or a weight sender with sender=...).")
        if update_weights_interval < 1:
            raise ValueError(f"UpdateWeights: update_weights_interval must be >= 1, got {update_weights_interval}.")
        if interval_unit not in ("batches", "optim_steps"):
            raise ValueError(f"UpdateWeights: interval_unit must be 'batches' or 'optim_steps', got {interval_unit!r}.")
        self.collector = collector
        self.update_weights_interval = int(update_weights_interval)
        self.policy_weights_getter = policy_weights_getter
        self.weight_update_map = None if weight_update_map is None else dict(weight_update_map)
        self.trainer = trainer
        self.sender = sender
        self.interval_unit = interval_unit
        self.counter = 0

    def __call__(self):
        self.counter += 1
        if self.counter % self.update_weights_interval == 0:
            self._push()

    def _weights(self):
        if self.weight_update_map is not None:
            if self.trainer is None:
                raise RuntimeError("UpdateWeights(weight_update_map=...): pass trainer= or register the hook first.")
            out = {}
            for dest, source in self.weight_update_map.items():
                module = resolve_path(self.trainer, source)
                out[dest] = TensorDict.from_module(module) if isinstance(module, nn.Module) else module
            return out
        if self.policy_weights_getter is not None:
            return self.policy_weights_getter()
        return None

    def _push(self) -> None:
        weights = self._weights()
        if self.sender is not None:
            self.sender.send(weights)
        elif isinstance(weights, dict) and self.weight_update_map is not None:
            self.collector.update_policy_weights_(weights_dict=weights)
        elif weights is not None:
            self.collector.update_policy_weights_(weights)
        else:
            self.collector.update_policy_weights_()

    def register(self, trainer: Trainer, name: str = "update_weights"):
        if self.trainer is None:
            self.trainer = trainer
        trainer.register_op("post_steps" if self.interval_unit == "batches" else "post_optim", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict:
        return {"counter": self.counter}

    def load_state_dict(self, state_dict) -> None:
        self.counter = int(state_dict["counter"])


class EarlyStopping(TrainerHookBase):
    """Early stopping hook for Trainer: stops training when a logged metric stops improving.

    After each batch (at ``"post_steps_log"``; register it after the hook that logs the metric) it reads
    the latest value the trainer logged under ``monitor``. A value better than the best one by more than
    ``min_delta`` (larger in ``"max"`` mode, smaller in ``"min"`` mode) becomes the best. Once
    ``wait_for`` frames have been collected, training stops (:meth:`Trainer.request_stop`, which also
    saves a checkpoint) when more than ``patience`` frames passed since the best value was seen. With
    ``check_finite``, a NaN or infinite value stops training at once. Nothing happens before the metric
    is first logged. The best value and where it was seen are saved with the trainer.

    Keyword Args:
        monitor (NestedKey, optional): the metric name. Defaults to ``"r_evaluation"``.
        mode (Literal["min", "max"], optional): which direction is better. Defaults to ``"max"``.
        min_delta (float, optional): minimum improvement. Defaults to 0.0.
        patience (int, optional): non-improving frames tolerated. Defaults to 100_000.
        wait_for (int, optional): frames before the criterion is checked. Defaults to 1_000_000.
        check_finite (bool, optional): stop on non-finite values. Defaults to ``True``.

    Raises:
        ValueError: unknown ``mode`` or negative ``min_delta``/``patience``/``wait_for``.

    Examples:
        >>> from torchrl.trainers import EarlyStopping
        >>> hook = EarlyStopping(monitor="r_training", mode="max", patience=10_000)
        >>> hook.best is None
        True
    """

    def __init__(
        self,
        *,
        monitor: NestedKey = "r_evaluation",
        mode: Literal["min", "max"] = "max",
        min_delta: float = 0.0,
        patience: int = 100_000,
        wait_for: int = 1_000_000,
        check_finite: bool = True,
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'min' or 'max', got {mode!r}.")
        for name, value in (("min_delta", min_delta), ("patience", patience), ("wait_for", wait_for)):
            if value < 0:
                raise ValueError(f"EarlyStopping: {name} must be >= 0, got {value!r}.")
        self.monitor = metric_name(monitor)
        self.mode = mode
        self.min_delta = float(min_delta)
        self.patience = int(patience)
        self.wait_for = int(wait_for)
        self.check_finite = check_finite
        self.best: float | None = None
        self.best_frame = 0
        self._sign = 1.0 if mode == "max" else -1.0
        self._trainer: Trainer | None = None

    def __call__(self, batch: TensorDictBase | None = None) -> None:
        trainer = self._trainer
        if trainer is None:
            raise RuntimeError("EarlyStopping: register the hook with register(trainer) before calling it.")
        value = trainer._latest_logs.get(self.monitor)
        if value is None:
            return None
        frames = trainer.collected_frames
        value = float(value)
        if not math.isfinite(value):
            if self.check_finite:
                trainer.request_stop(f"EarlyStopping: {self.monitor!r} is {value} at {frames} frames.")
            return None
        if self.best is None or self._sign * (value - self.best) > self.min_delta:
            self.best, self.best_frame = value, frames
        elif frames >= self.wait_for and frames - self.best_frame > self.patience:
            trainer.request_stop(
                f"EarlyStopping: {self.monitor!r} did not improve on {self.best} for {frames - self.best_frame} "
                f"frames (patience {self.patience})."
            )
        return None

    def register(self, trainer: Trainer, name: str = "early_stopping") -> None:
        self._trainer = trainer
        trainer.register_op("post_steps_log", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {"best": self.best, "best_frame": self.best_frame}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.best = state_dict["best"]
        self.best_frame = int(state_dict["best_frame"])


class ClearCudaCache(TrainerHookBase):
    """Clears cuda cache at a given interval: ``torch.cuda.empty_cache()`` every ``interval`` calls (at
    ``"pre_optim_steps"``, i.e. once per trained batch); a no-op without CUDA.

    Args:
        interval (int): calls between two clears.

    Raises:
        ValueError: ``interval`` < 1.

    Examples:
        >>> from torchrl.trainers import ClearCudaCache
        >>> hook = ClearCudaCache(2)
        >>> hook(); hook.state_dict()
        {'count': 1}
    """

    def __init__(self, interval: int):
        if interval < 1:
            raise ValueError(f"ClearCudaCache: interval must be >= 1, got {interval}.")
        self.interval = int(interval)
        self.count = 0

    def __call__(self, *args, **kwargs):
        self.count += 1
        if self.count % self.interval == 0 and torch.cuda.is_available():
            torch.cuda.empty_cache()

    def register(self, trainer: Trainer, name: str = "clear_cuda_cache"):
        trainer.register_op("pre_optim_steps", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.count = int(state_dict["count"])
