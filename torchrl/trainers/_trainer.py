"""``Trainer``: the collect → optimise → log loop, with hooks at named places and exact checkpoints.

The loop (``train``), for each batch the collector delivers::

    batch = "batch_process"(batch)                  # e.g. ReplayBufferTrainer.extend, SelectKeys
    collected_frames += frames(batch) * frame_skip
    "pre_steps_log"(batch)                           # e.g. LogScalar, CountFramesLog
    if collected_frames > collector.init_random_frames:
        "pre_optim_steps"()
        for epoch in range(num_epochs):
            epoch_batch = "pre_epoch"(batch); "pre_epoch_log"(epoch_batch)   # e.g. ValueEstimatorHook
            for _ in range(optim_steps_per_batch):
                sub_batch = "process_optim_batch"(epoch_batch)             # e.g. ReplayBufferTrainer.sample
                losses = loss_module(sub_batch)
                "post_loss"(sub_batch)                                       # e.g. priority updates
                losses = "process_loss"(losses)
                losses = "optimizer"(losses, clip_grad_norm, clip_norm, i)   # OptimizerHook: backward + step
                "post_optim"(); "post_optim_log"(sub_batch)                  # e.g. TargetNetUpdaterHook
            "post_epoch"(); "post_epoch_log"(epoch_batch)
        "post_optim_complete_log"(batch); the averaged scalar losses are logged
    "post_steps"()                                   # e.g. UpdateWeights, LRSchedulerHook
    "post_steps_log"(batch)                          # e.g. LogValidationReward, EarlyStopping
    progress bar; checkpoint every ``save_trainer_interval`` frames (and at the end)

``"setup"`` hooks run once when ``train`` starts, ``"shutdown"`` hooks in :meth:`Trainer.shutdown`. Log
hooks return a dict of scalars (or ``None``); the trainer logs them at ``step=collected_frames``.
"""
from __future__ import annotations

import functools
import pathlib
import time
from typing import Any, Callable, Literal

import numpy as np
import torch
from tensordict import TensorDictBase
from torch import nn, optim

from torchrl._utils._deprecation import warn_once
from torchrl._fast import fast_get, shallow_dict
from torchrl._utils._timeit import timeit
from torchrl.trainers._checkpoint import atomic_save, load_checkpoint, rng_state, set_rng_state
from torchrl.trainers._hook_base import MASK_KEY
from torchrl.trainers._logging_hooks import LogTiming
from torchrl.trainers._optim_hooks import OptimizationStepper, OptimizerHook

__all__ = ["Trainer", "DESTINATIONS"]

HookDestination = Literal[
    "batch_process", "pre_optim_steps", "process_optim_batch", "post_loss", "process_loss", "optimizer",
    "post_steps", "post_optim", "pre_steps_log", "post_steps_log", "post_optim_log", "pre_epoch_log",
    "post_epoch_log", "post_optim_complete_log", "pre_epoch", "post_epoch", "setup", "shutdown",
]
#: Every place of the loop a hook can be registered at.
DESTINATIONS: tuple[str, ...] = HookDestination.__args__
# Keys of Trainer.state_dict() that are not registered modules.
_RESERVED = frozenset({"trainer", "loss_module", "collector", "logger"})
_END = object()


class Trainer:
    """A generic Trainer class.

    A trainer collects data and trains a model. It does not build any specific operation itself: replay
    buffers, logging, target updates, weight syncs, schedules... are hooks registered at named places of
    the loop (see :meth:`register_op` and the module docstring of ``torchrl.trainers._trainer``).

    Keyword Args:
        collector (iterable of TensorDictBase): the data source, usually a collector; batches are
            ``[*batch, time]`` TensorDicts. ``state_dict``/``load_state_dict``/``set_seed``/``shutdown`` are
            used when present.
        total_frames (int): frames to collect (``frame_skip`` included) before training stops.
        frame_skip (int, optional): frames each collected step stands for. Defaults to 1.
        optim_steps_per_batch (int, optional): optimisation steps per batch (and per epoch). Defaults to
            the collector's ``num_workers`` when it has one, else 1.
        loss_module (LossModule or callable): maps a sub-batch to a TensorDict of losses (entries named ``"loss..."``).
        optimizer (optim.Optimizer, optional): registered as an :class:`~torchrl.trainers.OptimizerHook`
            named ``"optimizer"`` (all ``"loss..."`` entries).
        logger (Logger, optional): receives the logged scalars (``step=collected_frames``).
        clip_grad_norm (bool, optional): clip the gradients' total norm (``True``, default) or each
            partial derivative (``False``) to ``clip_norm``.
        clip_norm (float, optional): the clipping threshold; ``None`` (default) measures without clipping.
        progress_bar (bool, optional): show a tqdm bar (needs ``tqdm``, from the ``utils`` extra; without it
            a warning is emitted once and no bar is shown). Defaults to ``True``.
        seed (int, optional): seeds the collector, torch and numpy at construction (:meth:`set_seed`).
        save_trainer_interval (int, optional): frames between two checkpoints. Defaults to 10000.
        log_interval (int, optional): minimum number of frames between two logs of the same value.
            Defaults to 10000.
        save_trainer_file (str or Path, optional): where checkpoints go (none are written when ``None``).
        num_epochs (int, optional): passes of ``optim_steps_per_batch`` steps over each batch. Defaults to 1.
        async_collection (bool, optional): the collector fills its replay buffer in the background
            (``collector.start()``) while the trainer optimises; frames are counted from the buffer's
            ``write_count``, batch hooks are not called (there is no batch: register a
            :class:`~torchrl.trainers.ReplayBufferTrainer` on the collector's buffer to sample from it) and
            each round of optimisation ends with the ``"post_steps"``/``"post_steps_log"`` hooks, the
            progress bar and the checkpoint. Defaults to ``False``.
        log_timings (bool, optional): time collection (``"collect"``) and optimisation (``"optim"``) with
            :class:`~torchrl.timeit` and log the per-call times as ``"time/collect"``, ``"time/optim"`` (a
            :class:`~torchrl.trainers.LogTiming` hook). Defaults to ``False``.
        auto_log_optim_steps (bool, optional): log the scalar loss entries averaged over the batch's
            optimisation steps. Defaults to ``True``.
        optimization_stepper (OptimizationStepper, optional): replaces the loss/backward/optimizer
            sequence of each step.

    Raises:
        ValueError: a non-positive ``total_frames``, ``frame_skip``, ``num_epochs``, a negative
            ``optim_steps_per_batch``, or ``async_collection`` with a collector without replay buffer.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import Trainer
        >>> net = torch.nn.Linear(2, 1)
        >>> def loss_module(td):
        ...     return TensorDict(loss_mse=(net(td["x"]) - td["y"]).pow(2).mean())
        >>> data = [TensorDict(x=torch.randn(8, 2), y=torch.randn(8, 1), batch_size=[8]) for _ in range(3)]
        >>> trainer = Trainer(collector=data, total_frames=24, optim_steps_per_batch=2,
        ...                   loss_module=loss_module, optimizer=torch.optim.SGD(net.parameters(), lr=0.1),
        ...                   progress_bar=False)
        >>> w0 = net.weight.detach().clone()
        >>> trainer.train()
        >>> trainer.collected_frames, bool((net.weight != w0).any())
        (24, True)
    """

    def __init__(
        self,
        *,
        collector,
        total_frames: int,
        frame_skip: int = 1,
        optim_steps_per_batch: int | None = None,
        loss_module: nn.Module | Callable[[TensorDictBase], TensorDictBase],
        optimizer: optim.Optimizer | None = None,
        logger=None,
        clip_grad_norm: bool = True,
        clip_norm: float | None = None,
        progress_bar: bool = True,
        seed: int | None = None,
        save_trainer_interval: int = 10000,
        log_interval: int = 10000,
        save_trainer_file: str | pathlib.Path | None = None,
        num_epochs: int = 1,
        async_collection: bool = False,
        log_timings: bool = False,
        auto_log_optim_steps: bool = True,
        optimization_stepper: OptimizationStepper | None = None,
    ) -> None:
        if optim_steps_per_batch is None:
            optim_steps_per_batch = int(getattr(collector, "num_workers", 1) or 1)
        for name, value, low in (("total_frames", total_frames, 1), ("frame_skip", frame_skip, 1),
                                 ("num_epochs", num_epochs, 1), ("optim_steps_per_batch", optim_steps_per_batch, 0)):
            if int(value) != value or value < low:
                raise ValueError(f"Trainer: {name} must be an integer >= {low}, got {value!r}.")
        if async_collection and getattr(collector, "replay_buffer", None) is None:
            raise ValueError(
                "Trainer(async_collection=True): the collector must write into a replay buffer; build it with "
                "replay_buffer=... and register a ReplayBufferTrainer that samples from that buffer."
            )
        self._collector = collector
        self.total_frames = int(total_frames)
        self.frame_skip = int(frame_skip)
        self.optim_steps_per_batch = int(optim_steps_per_batch)
        self.loss_module = loss_module
        self.optimizer = optimizer
        self.logger = logger
        self.clip_grad_norm = clip_grad_norm
        self.clip_norm = clip_norm
        self.progress_bar = progress_bar
        self.seed = seed
        self.save_trainer_interval = save_trainer_interval
        self._log_interval = log_interval
        self.save_trainer_file = save_trainer_file
        self.num_epochs = int(num_epochs)
        self.async_collection = async_collection
        self.log_timings = log_timings
        self.auto_log_optim_steps = auto_log_optim_steps

        self.collected_frames = 0
        self._optim_count = 0
        self._last_log: dict[str, int] = {}
        self._last_save = 0
        self._latest_logs: dict[str, float] = {}
        self._pbar_str: dict[str, float] = {}
        self._pbar = None
        self._stop_requested = False
        self._stop_reason: str | None = None
        self._ops: dict[str, list[Callable]] = {dest: [] for dest in DESTINATIONS}
        self._modules: dict[str, Any] = {}
        self._optimization_stepper: OptimizationStepper | None = None

        if optimizer is not None:
            OptimizerHook(optimizer).register(self)
        if optimization_stepper is not None:
            optimization_stepper.register(self)
        if log_timings:
            LogTiming().register(self)
        if seed is not None:
            self.set_seed()

    # -- registration ---------------------------------------------------------------------------------------------
    @property
    def collector(self):
        """The data source."""
        return self._collector

    @collector.setter
    def collector(self, collector) -> None:
        self._collector = collector

    def register_op(self, dest: HookDestination, op: Callable, **kwargs) -> None:
        """Registers ``op`` at ``dest`` (one of :data:`DESTINATIONS`); ``kwargs`` are bound to every call.

        Call conventions: ``"batch_process"``, ``"process_optim_batch"``, ``"pre_epoch"`` and
        ``"process_loss"`` ops receive a TensorDict and may return a replacement (``None`` keeps it);
        ``"post_loss"`` ops receive the sub-batch; ``"optimizer"`` ops receive
        ``(losses, clip_grad_norm, clip_norm, index)`` and may return the losses; ``*_log`` ops receive
        the batch and return a dict of scalars to log (a ``"log_pbar"`` entry puts them on the progress
        bar); the other destinations are called without arguments. Ops run in registration order.

        Raises:
            RuntimeError: unknown ``dest``.
            TypeError: ``op`` is not callable.
        """
        ops = self._ops.get(dest)
        if ops is None:
            raise RuntimeError(
                f"Trainer.register_op: unknown destination {dest!r}; choose one of {list(DESTINATIONS)}."
            )
        if not callable(op):
            raise TypeError(f"Trainer.register_op({dest!r}): op must be callable, got {type(op).__name__}.")
        ops.append(functools.partial(op, **kwargs) if kwargs else op)

    def register_hook(self, dest: HookDestination, op: Callable, **kwargs) -> None:
        """Same as :meth:`register_op`."""
        self.register_op(dest, op, **kwargs)

    def register_module(self, module_name: str, module: Any) -> None:
        """Makes ``module``'s ``state_dict``/``load_state_dict`` part of the trainer's checkpoints.

        Raises:
            RuntimeError: the name is taken (by another module or by the trainer's own entries
                ``"trainer"``, ``"loss_module"``, ``"collector"``, ``"logger"``).
        """
        if module_name in self._modules or module_name in _RESERVED:
            raise RuntimeError(
                f"Trainer.register_module: {module_name!r} is already registered; choose a different name "
                f"(taken: {sorted(_RESERVED | self._modules.keys())})."
            )
        self._modules[module_name] = module

    def request_stop(self, reason: str | None = None) -> None:
        """Ends training after the current batch (a checkpoint is saved, as at the end of training)."""
        self._stop_requested = True
        self._stop_reason = reason

    # -- the loop ----------------------------------------------------------------------------------------------------
    def set_seed(self):
        """Seeds the collector (``collector.set_seed(seed)``), torch and numpy; returns the seed used."""
        seed = self.seed
        if seed is None:
            return None
        set_collector_seed = getattr(self._collector, "set_seed", None)
        if set_collector_seed is not None:
            out = set_collector_seed(seed, static_seed=False)
            seed = seed if out is None else out
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        return seed

    def train(self):
        """Runs the loop until ``total_frames`` frames were collected or :meth:`request_stop` was called,
        then calls :meth:`shutdown`."""
        self._stop_requested = False
        self._stop_reason = None
        self._call("setup")
        self._pbar = self._make_pbar()
        try:
            if self.async_collection:
                self._train_async()
            else:
                self._train_sync()
        finally:
            if self._pbar is not None:
                self._pbar.close()
                self._pbar = None
        self.shutdown()

    def _train_sync(self) -> None:
        init_random = int(getattr(self._collector, "init_random_frames", 0) or 0)
        timing = self.log_timings
        iterator = iter(self._collector)
        try:
            while True:
                if timing:
                    with timeit("collect"):
                        batch = next(iterator, _END)
                else:
                    batch = next(iterator, _END)
                if batch is _END or self._step(batch, init_random):
                    break
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def _step(self, batch, init_random: int) -> bool:
        """One batch of the loop; returns whether training is over."""
        ops = self._ops
        if ops["batch_process"]:
            batch = self._transform("batch_process", batch)
        frames = self._count_frames(batch)
        self.collected_frames += frames
        self._log_ops("pre_steps_log", batch)
        if self.collected_frames > init_random:
            if self.log_timings:
                with timeit("optim"):
                    self.optim_steps(batch)
            else:
                self.optim_steps(batch)
        return self._end_of_batch(batch, frames)

    def _end_of_batch(self, batch, frames: int) -> bool:
        self._call("post_steps")
        self._log_ops("post_steps_log", batch)
        pbar = self._pbar
        if pbar is not None:
            pbar.update(frames)
            if self._pbar_str:
                pbar.set_description(", ".join(f"{k}: {float(v): 4.4f}" for k, v in self._pbar_str.items()))
        done = self.collected_frames >= self.total_frames or self._stop_requested
        self.save_trainer(force_save=done)
        return done

    def _train_async(self) -> None:
        collector = self._collector
        buffer = collector.replay_buffer
        init_random = int(getattr(collector, "init_random_frames", 0) or 0)
        collector.start()
        try:
            while True:
                written = int(buffer.write_count) * self.frame_skip
                frames = written - self.collected_frames
                if frames == 0 and not collector.is_running():
                    break  # the collector is done and everything written was counted
                self.collected_frames = written
                if written > init_random and len(buffer):
                    self.optim_steps(None)
                elif frames == 0:
                    time.sleep(1e-3)
                    continue
                with collector.pause():  # no background write while hooks run and checkpoints are taken
                    if self._end_of_batch(None, frames):
                        break
        finally:
            collector.async_shutdown()

    def optim_steps(self, batch: TensorDictBase) -> None:
        """The optimisation phase of one batch: ``num_epochs`` × ``optim_steps_per_batch`` steps."""
        self._call("pre_optim_steps")
        stepper = self._optimization_stepper
        totals: dict[str, torch.Tensor] | None = None
        count = 0
        for _ in range(self.num_epochs):
            epoch_batch = self._transform("pre_epoch", batch)
            self._log_ops("pre_epoch_log", epoch_batch)
            for _ in range(self.optim_steps_per_batch):
                self._optim_count += 1
                sub_batch = self._transform("process_optim_batch", epoch_batch)
                losses = stepper.step(self, sub_batch) if stepper is not None else self._optim_step(sub_batch)
                self._call("post_optim")
                self._log_ops("post_optim_log", sub_batch)
                if self.auto_log_optim_steps and isinstance(losses, TensorDictBase):
                    totals = _accumulate(totals, losses)
                    count += 1
            self._call("post_epoch")
            self._log_ops("post_epoch_log", epoch_batch)
        self._log_ops("post_optim_complete_log", batch)
        if totals:
            self._log(**{key: value.item() / count for key, value in totals.items()})

    def _optim_step(self, sub_batch: TensorDictBase) -> TensorDictBase:
        losses = self._run_loss_hooks(sub_batch, self.compute_loss(sub_batch))
        clip_grad_norm, clip_norm = self.clip_grad_norm, self.clip_norm
        for index, op in enumerate(self._ops["optimizer"]):
            out = op(losses, clip_grad_norm, clip_norm, index)
            if out is not None:
                losses = out
        return losses.detach()

    def _run_loss_hooks(self, sub_batch: TensorDictBase, losses: TensorDictBase) -> TensorDictBase:
        for op in self._ops["post_loss"]:
            op(sub_batch)
        return self._transform("process_loss", losses)

    def compute_loss(self, sub_batch: TensorDictBase, method: str | None = None) -> TensorDictBase | tuple[Any, ...]:
        """``loss_module(sub_batch)``, or ``loss_module.<method>(sub_batch)`` when ``method`` is given."""
        if method is None:
            return self.loss_module(sub_batch)
        return getattr(self.loss_module, method)(sub_batch)

    def shutdown(self):
        """Runs the ``"shutdown"`` hooks and shuts the collector down."""
        self._call("shutdown")
        close = getattr(self._collector, "shutdown", None)
        if close is not None:
            close()

    # -- hook dispatch ------------------------------------------------------------------------------------------------
    def _transform(self, dest: str, data):
        for op in self._ops[dest]:
            out = op(data)
            if out is not None:
                data = out
        return data

    def _call(self, dest: str) -> None:
        for op in self._ops[dest]:
            op()

    def _log_ops(self, dest: str, batch) -> None:
        for op in self._ops[dest]:
            out = op(batch)
            if out:
                self._log(**out)

    def _count_frames(self, batch) -> int:
        if batch is None:  # a collector writing into a replay buffer delivers None
            return int(getattr(self._collector, "frames_per_batch", 0)) * self.frame_skip
        mask = batch.get(MASK_KEY, None)
        frames = int(mask.sum()) if mask is not None else batch.numel()
        return frames * self.frame_skip

    def _log(self, log_pbar: bool = False, **kwargs) -> None:
        frames = self.collected_frames
        logger, interval = self.logger, self._log_interval
        for key, value in kwargs.items():
            if isinstance(value, torch.Tensor):
                value = value.item()
            self._latest_logs[key] = value
            if logger is not None and frames - self._last_log.get(key, 0) > interval:
                self._last_log[key] = frames
                logger.log_scalar(key, value, step=frames)
            if log_pbar:
                self._pbar_str[key] = value

    def _make_pbar(self):
        if not self.progress_bar:
            return None
        try:
            from tqdm import tqdm  # noqa: PLC0415 - optional dependency (the "utils" extra)
        except ImportError:
            warn_once(
                "Trainer(progress_bar=True): tqdm is not installed, so no progress bar is shown; install it with "
                "`pip install tqdm` (or the torchrl[utils] extra), or pass progress_bar=False.",
                category=UserWarning,
            )
            return None
        return tqdm(total=self.total_frames, initial=self.collected_frames)

    # -- checkpoints ---------------------------------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything a resumed run needs: counters, global RNG states, the loss module, the collector, the
        logger's counters and the state of every registered module (optimizers, replay buffers, hooks)."""
        out: dict[str, Any] = {
            "trainer": {
                "collected_frames": self.collected_frames,
                "_optim_count": self._optim_count,
                "_last_log": dict(self._last_log),
                "_last_save": self._last_save,
                "_latest_logs": dict(self._latest_logs),
                "rng": rng_state(),
            }
        }
        for name, obj in (("loss_module", self.loss_module), ("collector", self._collector), ("logger", self.logger)):
            getter = getattr(obj, "state_dict", None)
            if getter is not None:
                out[name] = getter()
        for name, module in self._modules.items():
            out[name] = module.state_dict()
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Restores :meth:`state_dict` (the global RNG states included).

        Raises:
            KeyError: the state has no ``"trainer"`` entry or lacks the state of a registered module.
        """
        if "trainer" not in state_dict:
            raise KeyError(
                f"Trainer.load_state_dict: not a trainer state (no 'trainer' entry; keys: {sorted(state_dict)})."
            )
        missing = [name for name in self._modules if name not in state_dict]
        if missing:
            raise KeyError(
                f"Trainer.load_state_dict: no state for the registered modules {missing}; the state has "
                f"{sorted(state_dict)}. Register the same hooks (same names) as the run that saved it."
            )
        for name, obj in (("loss_module", self.loss_module), ("collector", self._collector), ("logger", self.logger)):
            loader = getattr(obj, "load_state_dict", None)
            if loader is not None and name in state_dict:
                loader(state_dict[name])
        for name, module in self._modules.items():
            module.load_state_dict(state_dict[name])
        state = state_dict["trainer"]
        self.collected_frames = int(state["collected_frames"])
        self._optim_count = int(state["_optim_count"])
        self._last_log = dict(state["_last_log"])
        self._last_save = int(state["_last_save"])
        self._latest_logs = dict(state.get("_latest_logs", {}))
        if "rng" in state:
            set_rng_state(state["rng"])

    @property
    def app_state(self):
        """``{"state": state_dict}`` for snapshot libraries (a torchsnapshot ``StateDict`` when installed)."""
        state = self.state_dict()
        try:
            from torchsnapshot import StateDict  # noqa: PLC0415 - optional dependency
        except ImportError:
            return {"state": state}
        return {"state": StateDict(**state)}

    def save_trainer(self, force_save: bool = False) -> None:
        """Writes a checkpoint to ``save_trainer_file`` (atomically: temporary file, then rename) when
        ``save_trainer_interval`` frames passed since the last one, or when ``force_save``."""
        if self.save_trainer_file is None:
            return
        due = self.collected_frames - self._last_save > self.save_trainer_interval
        if due:
            self._last_save = self.collected_frames
        if due or force_save:
            atomic_save(self.state_dict(), self.save_trainer_file)

    def load_from_file(self, file: str | pathlib.Path, **kwargs) -> Trainer:
        """Loads a checkpoint written by :meth:`save_trainer` (``kwargs`` go to ``torch.load``); returns self.

        Raises:
            FileNotFoundError: no such file.
        """
        self.load_state_dict(load_checkpoint(file, **kwargs))
        return self

    def __repr__(self) -> str:
        hooks = {dest: len(ops) for dest, ops in self._ops.items() if ops}
        return (
            f"Trainer(total_frames={self.total_frames}, collected_frames={self.collected_frames}, "
            f"optim_steps_per_batch={self.optim_steps_per_batch}, num_epochs={self.num_epochs}, hooks={hooks}, "
            f"modules={list(self._modules)})"
        )


def _accumulate(totals: dict[str, torch.Tensor] | None, losses: TensorDictBase) -> dict[str, torch.Tensor]:
    """Adds the scalar root entries of (detached) ``losses`` to ``totals`` (keys: the first step's)."""
    if totals is None:
        entries = shallow_dict(losses)
        items = entries.items() if entries is not None else losses.items()
        return {key: value for key, value in items if isinstance(value, torch.Tensor) and value.numel() == 1}
    for key in totals:
        value = fast_get(losses, key)
        if value is not None:
            totals[key] = totals[key] + value
    return totals
