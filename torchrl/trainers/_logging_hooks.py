"""Logging hooks: they return a dict of scalars that the trainer logs at ``step=collected_frames``.

:class:`LogScalar` (any batch entry), :class:`CountFramesLog` (frame counter), :class:`LogTiming`
(:class:`~torchrl.timeit` registry), :class:`LogValidationReward` (evaluation rollouts) and
:class:`UTDRHook` (update-to-data ratio). A ``"log_pbar"`` entry puts the values on the progress bar.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from tensordict.utils import NestedKey

from torchrl._utils._deprecation import warn_once
from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl._utils._timeit import timeit
from torchrl.envs.common import EnvBase
from torchrl.trainers._hook_base import get_entry, MASK_KEY, metric_name, REWARD_KEY, TrainerHookBase

if TYPE_CHECKING:
    from torchrl.trainers._trainer import Trainer

__all__ = ["CountFramesLog", "LogScalar", "LogTiming", "LogValidationReward", "UTDRHook"]

_REDUCTIONS = {"mean": torch.mean, "sum": torch.sum, "min": torch.min, "max": torch.max}


class LogScalar(TrainerHookBase):
    """Generic scalar logger hook for any tensor values in the batch.

    Logs a reduction (mean, sum, min or max) of ``batch[key]`` over the valid frames (those where the
    collector's ``("collector", "mask")`` is set, when present), and its standard deviation as
    ``"<logname>_std"``. Registered at ``"pre_steps_log"``.

    Args:
        key (NestedKey, optional): the entry to log. Defaults to ``("next", "reward")``.
        logname (str, optional): the metric name. Defaults to the key (nested keys joined with ``"_"``).
        log_pbar (bool, optional): also show the value on the progress bar. Defaults to ``False``.
        include_std (bool, optional): also log the standard deviation. Defaults to ``True``.
        reduction (str, optional): ``"mean"``, ``"sum"``, ``"min"`` or ``"max"``. Defaults to ``"mean"``.

    Raises:
        ValueError: unknown ``reduction``.
        KeyError: (when called) the batch has no ``key`` entry.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import LogScalar
        >>> hook = LogScalar(("next", "reward"), "r_training")
        >>> hook(TensorDict({"next": {"reward": torch.tensor([[1.0], [3.0]])}}, [2]))
        {'r_training': 2.0, 'r_training_std': 1.4142135381698608, 'log_pbar': False}
    """

    def __init__(
        self,
        key: NestedKey = REWARD_KEY,
        logname: str | None = None,
        log_pbar: bool = False,
        include_std: bool = True,
        reduction: str = "mean",
    ):
        if reduction not in _REDUCTIONS:
            raise ValueError(f"LogScalar: reduction must be one of {list(_REDUCTIONS)}, got {reduction!r}.")
        self.key = key
        self.logname = logname if logname is not None else metric_name(key)
        self.log_pbar = log_pbar
        self.include_std = include_std
        self.reduction = reduction
        self._reduce = _REDUCTIONS[reduction]

    def __call__(self, batch: TensorDictBase) -> dict:
        if batch is None:
            return {}
        value = get_entry(batch, self.key, "LogScalar")
        mask = batch.get(MASK_KEY, None)
        if mask is not None:
            value = value[mask]
        value = value.float()
        out = {self.logname: self._reduce(value).item()}
        if self.include_std and value.numel() > 1:
            out[f"{self.logname}_std"] = value.std().item()
        out["log_pbar"] = self.log_pbar
        return out

    def register(self, trainer: Trainer, name: str | None = None):
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(name if name is not None else f"log_{self.logname}", self)


class CountFramesLog(TrainerHookBase):
    """A frame counter hook: logs ``"n_frames"``, the number of frames seen so far (valid frames times
    ``frame_skip``). Registered at ``"pre_steps_log"``; the count is part of the hook's state.

    Args:
        frame_skip (int, optional): frame skip of the environment, so that the count is the true number of
            frames and not the apparent one. Defaults to 1.
        log_pbar (bool, optional): also show the count on the progress bar. Defaults to ``False``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import CountFramesLog
        >>> count = CountFramesLog(frame_skip=4)
        >>> count(TensorDict(x=torch.zeros(10), batch_size=[10]))
        {'n_frames': 40, 'log_pbar': False}
    """

    def __init__(self, frame_skip: int = 1, log_pbar: bool = False):
        if int(frame_skip) != frame_skip or frame_skip < 1:
            raise ValueError(f"CountFramesLog: frame_skip must be a positive integer, got {frame_skip!r}.")
        self.frame_skip = int(frame_skip)
        self.log_pbar = log_pbar
        self.frame_count = 0

    def __call__(self, batch: TensorDictBase) -> dict:
        if batch is None:  # nothing delivered (the collector writes into a replay buffer)
            return {}
        mask = batch.get(MASK_KEY, None)
        frames = int(mask.sum()) if mask is not None else batch.numel()
        self.frame_count += frames * self.frame_skip
        return {"n_frames": self.frame_count, "log_pbar": self.log_pbar}

    def register(self, trainer: Trainer, name: str = "count_frames_log"):
        trainer.register_op("pre_steps_log", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict:
        return {"frame_count": self.frame_count}

    def load_state_dict(self, state_dict) -> None:
        self.frame_count = int(state_dict["frame_count"])


class LogTiming(TrainerHookBase):
    """Logs the :class:`~torchrl.timeit` registry (``"<prefix>/<name>"`` entries), at ``"post_steps_log"``.

    A trainer built with ``log_timings=True`` registers one and times its collection (``"collect"``) and
    optimisation phases.

    Args:
        prefix (str, optional): prefix of the logged names. Defaults to ``"time"``.
        percall (bool, optional): log seconds per call (``True``) or total seconds. Defaults to ``True``.
        erase (bool, optional): clear the registry after each log. Defaults to ``False``.

    Examples:
        >>> from torchrl import timeit
        >>> from torchrl.trainers import LogTiming
        >>> timeit.erase()
        >>> with timeit("step"):
        ...     pass
        >>> sorted(LogTiming(erase=True)())
        ['log_pbar', 'time/step']
    """

    def __init__(self, prefix: str = "time", percall: bool = True, erase: bool = False):
        self.prefix = prefix
        self.percall = percall
        self.erase = erase

    def __call__(self, batch: TensorDictBase | None = None) -> dict:
        out: dict[str, Any] = timeit.todict(percall=self.percall, prefix=self.prefix)
        if self.erase:
            timeit.erase()
        out["log_pbar"] = False
        return out

    def register(self, trainer: Trainer, name: str | None = None):
        trainer.register_op("post_steps_log", self)
        trainer.register_module(name if name is not None else "log_timing", self)


class LogValidationReward(TrainerHookBase):
    """Recorder hook for Trainer: evaluates the policy every ``record_interval`` calls.

    Registered at ``"post_steps_log"`` (one call per collected batch; the first call evaluates). An
    evaluation runs ``environment.rollout(record_frames, policy_exploration)`` without gradients, with the
    policy in eval mode and under ``exploration_type``, asks the environment's transforms to ``dump``
    (video recorders write their files), and logs for each of ``log_keys`` the mean value under its
    ``out_keys`` name. For the reward, the mean per step is divided by ``frame_skip`` and the total is
    logged too as ``"total_<name>"``. The call counter (and the environment's state) are saved with the
    trainer.

    Keyword Args:
        record_interval (int): calls between two evaluations.
        record_frames (int): steps of each evaluation rollout.
        frame_skip (int, optional): frame skip of the environment (normalises the mean reward). Defaults to 1.
        policy_exploration (TensorDictModule): the policy to evaluate.
        environment (EnvBase): the evaluation environment.
        exploration_type (ExplorationType, optional): exploration during evaluation. Defaults to ``RANDOM``.
        log_keys (list of NestedKey, optional): the rollout entries to log. Defaults to ``[("next", "reward")]``.
        out_keys (dict, optional): log name of each key. ``("next", "reward")`` is logged as ``"r_evaluation"``
            unless given here; other keys default to their name (nested keys joined with ``"_"``).
        suffix (str, optional): passed to the transforms' ``dump``.
        log_pbar (bool, optional): show the values on the progress bar. Defaults to ``False``.
        recorder (EnvBase, optional): deprecated spelling of ``environment``.

    Raises:
        TypeError: no environment, or both ``environment`` and ``recorder``.
        ValueError: non-positive ``record_interval``, ``record_frames`` or ``frame_skip``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.envs import PendulumEnv
        >>> from torchrl.trainers import LogValidationReward
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
        >>> hook = LogValidationReward(record_interval=10, record_frames=20, policy_exploration=policy,
        ...                            environment=PendulumEnv())
        >>> sorted(hook(None))
        ['log_pbar', 'r_evaluation', 'total_r_evaluation']
    """

    def __init__(
        self,
        *,
        record_interval: int,
        record_frames: int,
        frame_skip: int = 1,
        policy_exploration: TensorDictModule,
        environment: EnvBase = None,
        exploration_type: ExplorationType = ExplorationType.RANDOM,
        log_keys: list[str | tuple[str]] | None = None,
        out_keys: dict[str | tuple[str], str] | None = None,
        suffix: str | None = None,
        log_pbar: bool = False,
        recorder: EnvBase = None,
    ) -> None:
        if recorder is not None:
            if environment is not None:
                raise TypeError("LogValidationReward: pass environment= only (recorder= is its deprecated spelling).")
            warn_once("LogValidationReward(recorder=...) is deprecated; use environment=... instead.")
            environment = recorder
        if environment is None:
            raise TypeError("LogValidationReward: environment= (the evaluation environment) is required.")
        for name, value in (("record_interval", record_interval), ("record_frames", record_frames),
                            ("frame_skip", frame_skip)):
            if value < 1:
                raise ValueError(f"LogValidationReward: {name} must be >= 1, got {value!r}.")
        self.record_interval = int(record_interval)
        self.record_frames = int(record_frames)
        self.frame_skip = int(frame_skip)
        self.policy_exploration = policy_exploration
        self.environment = environment
        self.exploration_type = exploration_type
        self.log_keys = list(log_keys) if log_keys is not None else [REWARD_KEY]
        names = {REWARD_KEY: "r_evaluation", **(out_keys or {})}
        self.out_keys = {key: names.get(key, metric_name(key)) for key in self.log_keys}
        self.suffix = suffix
        self.log_pbar = log_pbar
        self._count = 0

    @property
    def recorder(self) -> EnvBase:
        return self.environment

    def __call__(self, batch: TensorDictBase) -> dict:
        out = self._evaluate() if self._count % self.record_interval == 0 else None
        self._count += 1
        return out

    def _evaluate(self) -> dict:
        policy = self.policy_exploration
        training = bool(getattr(policy, "training", False))
        if training:
            policy.eval()
        try:
            with torch.no_grad(), set_exploration_type(self.exploration_type):
                rollout = self.environment.rollout(
                    self.record_frames, policy, auto_cast_to_device=True, break_when_any_done=False
                )
        finally:
            if training:
                policy.train()
        dump = getattr(getattr(self.environment, "transform", None), "dump", None)
        if dump is not None:
            dump(suffix=self.suffix)
        out: dict[str, Any] = {}
        for key in self.log_keys:
            value = get_entry(rollout, key, "LogValidationReward").float()
            name = self.out_keys[key]
            if key == REWARD_KEY:
                out[name] = value.mean().item() / self.frame_skip
                out[f"total_{name}"] = value.sum().item()
            else:
                out[name] = value.mean().item()
        out["log_pbar"] = self.log_pbar
        return out

    def register(self, trainer: Trainer, name: str = "recorder"):
        trainer.register_op("post_steps_log", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict:
        return {"_count": self._count, "recorder_state_dict": self.environment.state_dict()}

    def load_state_dict(self, state_dict: dict) -> None:
        self._count = int(state_dict["_count"])
        if "recorder_state_dict" in state_dict:
            self.environment.load_state_dict(state_dict["recorder_state_dict"])


class UTDRHook(TrainerHookBase):
    """Logs the update-to-data ratio ``"utd_ratio"`` = ``batch_size * optim_steps / write_count``.

    ``batch_size`` is the replay buffer's sample size, ``optim_steps`` the trainer's optimisation steps
    so far and ``write_count`` the number of samples written to the buffer (by the collector, with
    ``async_collection=True``, or by a :class:`~torchrl.trainers.ReplayBufferTrainer`). The buffer is the
    trainer's ``replay_buffer`` attribute, else the collector's, else a registered module's. Registered
    at ``"pre_steps_log"`` (and ``"post_steps_log"`` when the trainer collects asynchronously).

    Args:
        trainer (Trainer): the trainer to monitor.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
        >>> from torchrl.trainers import Trainer, UTDRHook
        >>> rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
        >>> _ = rb.extend(TensorDict(x=torch.zeros(8), batch_size=[8]))
        >>> trainer = Trainer(collector=[], total_frames=1, loss_module=lambda td: td, progress_bar=False)
        >>> trainer.replay_buffer = rb
        >>> trainer._optim_count = 6
        >>> UTDRHook(trainer)()
        {'utd_ratio': 3.0, 'log_pbar': False}
    """

    def __init__(self, trainer: Trainer):
        self.trainer = trainer
        self._buffer = None

    def _replay_buffer(self):
        if self._buffer is None:
            trainer = self.trainer
            candidates = [getattr(trainer, "replay_buffer", None), getattr(trainer.collector, "replay_buffer", None)]
            candidates += [getattr(module, "replay_buffer", None) for module in trainer._modules.values()]
            self._buffer = next((rb for rb in candidates if rb is not None), None)
            if self._buffer is None:
                raise RuntimeError(
                    "UTDRHook: no replay buffer found on the trainer (replay_buffer attribute), its collector or "
                    "its registered modules (e.g. a ReplayBufferTrainer)."
                )
        return self._buffer

    def __call__(self, batch: TensorDictBase | None = None) -> dict:
        buffer = self._replay_buffer()
        written = int(buffer.write_count)
        batch_size = buffer.batch_size or 0
        ratio = batch_size * self.trainer._optim_count / written if written else 0.0
        return {"utd_ratio": ratio, "log_pbar": False}

    def register(self, trainer: Trainer, name: str = "utdr_hook"):
        self.trainer = trainer
        trainer.register_op("post_steps_log" if trainer.async_collection else "pre_steps_log", self)
        trainer.register_module(name, self)
