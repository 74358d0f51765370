"""``Run``: what every recipe does around its training loop (run folder, logger, progress, evaluation,
checkpoints, learning curve, summary), so the recipe itself only shows the algorithm."""
from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tensordict import NestedKey, TensorDictBase

from torchrl.envs.common import EnvBase
from torchrl.record.loggers.common import cfg_to_dict
from torchrl.record.loggers.utils import get_logger
from torchrl.trainers._checkpoint import atomic_save, load_checkpoint, rng_state, set_rng_state
from torchrl.train._curve import LearningCurve, plot_learning_curves
from torchrl.train._eval import evaluate
from torchrl.train._progress import Progress

__all__ = ["Run", "CHECKPOINT_NAME"]

#: File name of a run's checkpoint inside its folder.
CHECKPOINT_NAME = "checkpoint.pt"


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    getter = getattr(cfg, "get", None)
    value = getter(key, default) if getter is not None else getattr(cfg, key, default)
    return default if value is None else value


def _env_name(cfg: Any) -> str:
    env = _get(cfg, "env", "env")
    return str(env if isinstance(env, str) else _get(env, "name", "env"))


def _checkpoint_file(resume: str | Path) -> Path:
    path = Path(resume).expanduser()
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise FileNotFoundError(
            f"Run: resume={str(resume)!r}: no checkpoint found at {str(path)!r}. Pass a run folder holding "
            f"{CHECKPOINT_NAME} or the checkpoint file itself."
        )
    return path


def _new_run_dir(root: Path, algo: str, env: str) -> Path:
    stem = f"{algo}-{re.sub(r'[^A-Za-z0-9._-]+', '_', env)}-{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    root.mkdir(parents=True, exist_ok=True)
    for i in range(1, 1000):
        path = root / (stem if i == 1 else f"{stem}-{i}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"Run: could not create a new run folder {stem!r} under {str(root)!r}.")


def _write_config(cfg: Any, path: Path) -> Path:
    data = cfg_to_dict(cfg) if cfg is not None else {}
    try:
        import yaml  # optional (ships with hydra-core, the ``utils`` extra)
    except ImportError:
        path = path.with_suffix(".json")
        path.write_text(json.dumps(data, indent=2, default=str))
        return path
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _scalars(source: Mapping | TensorDictBase | None) -> dict[str, float]:
    """Scalar entries (0-dim tensors or numbers) as floats; other entries are skipped."""
    out: dict[str, float] = {}
    if source is None:
        return out
    items = source.items(True, True) if isinstance(source, TensorDictBase) else source.items()
    for key, value in items:
        name = "/".join(key) if isinstance(key, tuple) else str(key)
        if isinstance(value, torch.Tensor):
            if value.numel() == 1:
                out[name] = float(value.detach().reshape(()))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


class Run:
    """One training run's plumbing: run folder, logger, progress bar, evaluation, checkpoints, curve, summary.

    ``Run(algo, cfg)`` reads the recipe config's common top-level keys: ``total_frames``, ``seed``,
    ``device`` (:attr:`device`; ``"auto"``: CUDA when available), ``threads`` (``torch.set_num_threads``;
    0 keeps torch's default), ``logger`` (a :func:`~torchrl.record.loggers.get_logger` type, ``""`` for
    none), ``output_dir`` (default ``"runs"``), ``resume`` (a run folder or checkpoint file), ``progress``
    (tqdm bar; plain lines without it), ``log_every`` (frames) and ``env.name``.
    It seeds torch/numpy/random, then creates ``<output_dir>/<algo>-<env>-<timestamp>/`` (or reopens the
    resumed run's folder) holding ``config.yaml``, the logger's files, ``curve.csv``, ``learning_curve.png``,
    ``checkpoint.pt`` and ``summary.json``.

    The loop calls :meth:`step` once per collected batch, :meth:`due` to decide when to evaluate or save,
    :meth:`evaluate`, :meth:`save`, and :meth:`finish` at the end; :meth:`restore` loads a resumed run's
    checkpoint into the recipe's objects and returns the frame count to continue from. Episode returns are
    read from each batch at ``("next", "episode_reward")`` (a :class:`~torchrl.envs.RewardSum` on the env)
    where ``("next", "done")`` is set, without host synchronisation; losses are turned into floats only
    every ``log_every`` frames.

    Args:
        algo: the recipe's name (``"sac"``), first part of the run folder's name.
        cfg: the recipe config (an OmegaConf ``DictConfig`` or any mapping).

    Raises:
        FileNotFoundError: ``resume`` names no checkpoint.

    Examples:
        >>> import tempfile
        >>> from torchrl.train import Run
        >>> run = Run("demo", {"total_frames": 100, "logger": "", "output_dir": tempfile.mkdtemp(),
        ...                    "progress": False, "env": {"name": "PendulumEnv"}})
        >>> run.step(100)
        >>> summary = run.finish(quiet=True)
        >>> summary["frames"], (run.dir / "curve.csv").is_file()
        (100, True)
    """

    episode_reward_key: NestedKey = ("next", "episode_reward")
    done_key: NestedKey = ("next", "done")

    def __init__(self, algo: str, cfg: Any) -> None:
        self.algo = algo
        self.cfg = cfg
        self.env_name = _env_name(cfg)
        self.total_frames = int(_get(cfg, "total_frames", 0))
        self.log_every = max(1, int(_get(cfg, "log_every", 1000)))
        device = str(_get(cfg, "device", "cpu"))
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else \
            torch.device(device)
        threads = int(_get(cfg, "threads", 0))
        if threads > 0:
            torch.set_num_threads(threads)
        seed = int(_get(cfg, "seed", 0))
        torch.manual_seed(seed)
        np.random.seed(seed % 2**32)
        random.seed(seed)
        resume = _get(cfg, "resume", None)
        self._checkpoint = None
        if resume:
            path = _checkpoint_file(resume)
            self._checkpoint = load_checkpoint(path)
            self.dir = path.parent
        else:
            self.dir = _new_run_dir(Path(str(_get(cfg, "output_dir", "runs"))).expanduser(), algo, self.env_name)
        self.config_path = _write_config(cfg, self.dir / "config.yaml")
        saved = self._checkpoint["run"] if self._checkpoint is not None else {}
        self.frames = int(self._checkpoint["frames"]) if self._checkpoint is not None else 0
        self._prev = self.frames
        self._seconds0 = float(saved.get("seconds", 0.0))
        self._cpu0 = float(saved.get("cpu_seconds", 0.0))
        self._t0, self._c0 = time.perf_counter(), time.process_time()
        self._paused = self._cpu_paused = 0.0
        self.logger = get_logger(_get(cfg, "logger", ""), str(self.dir.parent), self.dir.name,
                                 state_dict=saved.get("logger"))
        if self.logger is not None and self._checkpoint is None:
            self.logger.log_hparams(cfg if cfg is not None else {})
        self.curve = LearningCurve(self.dir / "curve.csv")
        self.progress = Progress(self.total_frames, f"{algo} {self.env_name}", initial=self.frames,
                                 bar=bool(_get(cfg, "progress", True)), line_every=self.log_every)
        self.train_return: float | None = None
        self.eval_return: float | None = None
        self.eval_std: float | None = None
        self._ret_sum = torch.zeros(())
        self._ret_count = torch.zeros((), dtype=torch.int64)
        self._finished = False

    # ------------------------------------------------------------------------------------------ time
    @property
    def seconds(self) -> float:
        """Training wall-clock so far (resumed runs included), without evaluation and checkpoint time."""
        return self._seconds0 + time.perf_counter() - self._t0 - self._paused

    @property
    def cpu_seconds(self) -> float:
        """CPU time of this process spent training (as :attr:`seconds`, but insensitive to other processes
        competing for the cores; higher than :attr:`seconds` when torch runs several threads)."""
        return self._cpu0 + time.process_time() - self._c0 - self._cpu_paused

    def _pause(self, fn: Callable[[], Any]) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            return fn()
        finally:
            self._paused += time.perf_counter() - t0
            self._cpu_paused += time.process_time() - c0

    # --------------------------------------------------------------------------------------- restore
    def restore(self, **objects: Any) -> int:
        """Loads a resumed run's checkpoint into ``objects`` (``name=obj`` with ``load_state_dict``, the same
        names as given to :meth:`save`) and restores the random generators. Returns the frame count to
        continue from (0 for a fresh run, where nothing is loaded).

        Raises:
            KeyError: the checkpoint holds no state under one of the names.
        """
        if self._checkpoint is None:
            return 0
        states = self._checkpoint["objects"]
        for name, obj in objects.items():
            if name not in states:
                raise KeyError(f"Run.restore: the checkpoint holds no state for {name!r}; it has {sorted(states)}.")
            obj.load_state_dict(states[name])
        set_rng_state(self._checkpoint["rng"])
        self.progress.write(f"Resumed {self.dir} at {self.frames} frames.")
        return self.frames

    # ------------------------------------------------------------------------------------------ loop
    def step(self, frames: int, batch: TensorDictBase | None = None, losses: Mapping | TensorDictBase | None = None,
             **scalars: float) -> None:
        """Advances to ``frames`` (absolute). Every ``log_every`` frames, logs the mean return of the episodes
        finished in the batches since the last log (``train/episode_return``), ``train/fps``, the scalar
        entries of ``losses`` (``train/<name>``) and ``scalars``, and appends a row to the curve."""
        self._prev, self.frames = self.frames, int(frames)
        if batch is not None:
            done = batch.get(self.done_key, None)
            ret = batch.get(self.episode_reward_key, None)
            if done is not None and ret is not None:
                done = done.reshape(ret.shape) if done.numel() == ret.numel() else done.expand_as(ret)
                self._ret_sum = self._ret_sum.to(ret.device) + torch.where(done, ret, 0).sum()
                self._ret_count = self._ret_count.to(ret.device) + done.sum()
        log = self._crossed(self.log_every) or self.frames >= self.total_frames
        if log:
            count = int(self._ret_count)
            if count:
                self.train_return = float(self._ret_sum) / count
                self._ret_sum.zero_()
                self._ret_count.zero_()
            values = {f"train/{k}": v for k, v in _scalars(losses).items()}
            values.update({f"train/{k}": float(v) for k, v in scalars.items()})
            values["train/fps"] = self.frames / max(self.seconds, 1e-9)
            if count:
                values["train/episode_return"] = self.train_return
            self._log(values)
            self.curve.add(self.frames, self.seconds, cpu_seconds=self.cpu_seconds,
                           train_return=self.train_return if count else None)
        self.progress.update(self.frames, train_return=self.train_return if log else None)

    def _crossed(self, every: int) -> bool:
        return every > 0 and self._prev // every != self.frames // every

    def due(self, every: int) -> bool:
        """``True`` if the last :meth:`step` crossed a multiple of ``every`` frames or reached
        ``total_frames`` (so the last evaluation and checkpoint always happen); ``every <= 0`` never."""
        return every > 0 and (self._crossed(every) or (self.frames >= self.total_frames > self._prev))

    def _log(self, values: Mapping[str, float]) -> None:
        if self.logger is not None:
            for name, value in values.items():
                self.logger.log_scalar(name, value, step=self.frames)

    def evaluate(self, env: EnvBase, policy: Callable, *, episodes: int = 10, max_steps: int = 1000) -> float:
        """Deterministic evaluation (:func:`~torchrl.train.evaluate`) outside the training clock; logs
        ``eval/episode_return`` (mean) and ``eval/episode_return_std``, adds a curve row, returns the mean."""
        returns = self._pause(lambda: evaluate(env, policy, episodes=episodes, max_steps=max_steps))
        self.eval_return = float(returns.mean())
        self.eval_std = float(returns.std(unbiased=False)) if returns.numel() > 1 else 0.0
        self._log({"eval/episode_return": self.eval_return, "eval/episode_return_std": self.eval_std})
        self.curve.add(self.frames, self.seconds, cpu_seconds=self.cpu_seconds, eval_return=self.eval_return)
        self.progress.update(self.frames, eval_return=self.eval_return)
        return self.eval_return

    def save(self, **objects: Any) -> Path:
        """Writes ``checkpoint.pt`` (atomically): every ``name=obj``'s ``state_dict()``, the frame count, the
        random generators and the run's clock and logger state. Returns the file."""
        def write():
            state = {
                "frames": self.frames,
                "objects": {name: obj.state_dict() for name, obj in objects.items()},
                "rng": rng_state(),
                "run": {"seconds": self.seconds, "cpu_seconds": self.cpu_seconds, "algo": self.algo, "env": self.env_name,
                        "logger": self.logger.state_dict() if self.logger is not None else None},
            }
            return atomic_save(state, self.dir / CHECKPOINT_NAME)
        return self._pause(write)

    # ------------------------------------------------------------------------------------------ end
    def finish(self, *, quiet: bool = False, **extra: Any) -> dict[str, Any]:
        """Closes the progress bar and the logger, draws ``learning_curve.png`` and writes ``summary.json``.

        Keyword Args:
            quiet: do not print the summary.
            **extra: more entries for the summary.

        Returns:
            The summary: ``algo``, ``env``, ``frames``, ``seconds`` (training clock), ``fps``,
            ``cpu_seconds``, ``train_return``, ``eval_return``, ``eval_return_std`` and the paths ``run_dir``, ``curve_csv``,
            ``curve_png`` (``None`` without matplotlib), ``checkpoint`` (``None`` if never saved), ``logs``.
        """
        if self._finished:
            raise RuntimeError(f"Run.finish: the run in {self.dir} is already finished.")
        self._finished = True
        seconds = self.seconds
        self.progress.close()
        self.curve.close()
        png = self.dir / "learning_curve.png"
        drawn = plot_learning_curves({self.algo: self.curve.rows}, png, title=f"{self.algo} on {self.env_name}")
        if self.logger is not None:
            self.logger.close()
        checkpoint = self.dir / CHECKPOINT_NAME
        summary = {
            "algo": self.algo,
            "env": self.env_name,
            "frames": self.frames,
            "seconds": round(seconds, 3),
            "cpu_seconds": round(self.cpu_seconds, 3),
            "fps": round(self.frames / seconds, 1) if seconds > 0 else math.nan,
            "train_return": self.train_return,
            "eval_return": self.eval_return,
            "eval_return_std": self.eval_std,
            **extra,
            "run_dir": str(self.dir),
            "curve_csv": str(self.curve.path),
            "curve_png": str(png) if drawn else None,
            "checkpoint": str(checkpoint) if checkpoint.is_file() else None,
            "logs": str(self.dir) if self.logger is not None else None,
        }
        (self.dir / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
        if not quiet:
            print_summary(summary)
        return summary


def print_summary(summary: Mapping[str, Any], file=None) -> None:
    """Prints a finished run's figures and where its files are."""
    def fmt(value):
        return "-" if value is None else f"{value:.1f}" if isinstance(value, float) else str(value)

    lines = [
        f"Finished {summary['algo']} on {summary['env']}: {summary['frames']} frames in {summary['seconds']:.1f} s "
        f"({fmt(summary['fps'])} frames/s)",
        f"  last training return: {fmt(summary['train_return'])}   deterministic evaluation: "
        f"{fmt(summary['eval_return'])} +- {fmt(summary['eval_return_std'])}",
        f"  run folder:      {summary['run_dir']}",
        f"  learning curve:  {summary['curve_png'] or summary['curve_csv'] + ' (install matplotlib for the PNG)'}",
    ]
    if summary.get("checkpoint"):
        lines.append(f"  checkpoint:      {summary['checkpoint']}  (continue with resume=<run folder>)")
    if summary.get("logs"):
        lines.append(f"  logs:            {summary['logs']}")
    print("\n".join(lines), file=file, flush=True)
