"""``Evaluator``: policy evaluation rollouts, blocking (:meth:`Evaluator.evaluate`) or in a background
thread (:meth:`Evaluator.trigger_eval`, then :meth:`~Evaluator.poll` / :meth:`~Evaluator.wait`)."""
from __future__ import annotations

import inspect
import threading
import time
from typing import Any, Callable, Mapping

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl._utils._exploration import ExplorationType, set_exploration_type
from torchrl.collectors._evaluator_process import ProcessEvaluation
from torchrl.collectors._single import Collector
from torchrl.collectors.weight_update import as_weights
from torchrl.envs.common import EnvBase

__all__ = ["Evaluator"]

_BUSY = ("skip", "error", "wait")


class _Float(float):
    """A result number: a Python float (as TorchRL returns) that also answers ``.item()`` (as its docs use)."""

    def item(self) -> float:
        return float(self)


class _Int(int):
    """A result count: a Python int that also answers ``.item()``."""

    def item(self) -> int:
        return int(self)


def _call_factory(factory: Callable, env: EnvBase):
    """``factory(env)`` when the factory takes an argument (TorchRL's ``(env) -> policy``), else ``factory()``."""
    try:
        inspect.signature(factory).bind(env)
    except TypeError:
        return factory()
    except ValueError:  # no signature (some builtins): TorchRL's convention
        pass
    return factory(env)


class _EpisodeTally:
    """Returns and lengths of complete episodes, accumulated across batches by trajectory id."""

    def __init__(self) -> None:
        self.partial: dict[int, tuple[float, int]] = {}
        self.done: list[tuple[int, float, int]] = []

    def add(self, ids: torch.Tensor, reward: torch.Tensor, done: torch.Tensor) -> None:
        n = ids.numel()
        ids = ids.reshape(n)
        reward = reward.reshape(n, -1).sum(-1).to(torch.float64)
        done = done.reshape(n, -1).any(-1)
        uniq, inv = ids.unique(return_inverse=True)
        ret = torch.zeros(len(uniq), dtype=torch.float64).index_add_(0, inv, reward)
        length = torch.bincount(inv, minlength=len(uniq))
        ended = torch.zeros(len(uniq), dtype=torch.int64).scatter_reduce_(0, inv, done.long(), "amax")
        for tid, r, steps, end in zip(uniq.tolist(), ret.tolist(), length.tolist(), ended.tolist()):
            prev_r, prev_n = self.partial.pop(tid, (0.0, 0))
            if end:
                self.done.append((tid, prev_r + r, prev_n + steps))
            else:
                self.partial[tid] = (prev_r + r, prev_n + steps)


class Evaluator:
    """Evaluates a policy on complete episodes, synchronously or in a background thread.

    Args:
        env: the evaluation env, or a callable building it (called on first use, in the thread that runs it).
        policy: the evaluation policy (weights passed to :meth:`evaluate` / :meth:`trigger_eval` are copied
            into it first).

    Keyword Args:
        policy_factory: builds the policy instead of ``policy``: called with the env (TorchRL's
            ``(env) -> policy``), or without arguments if it takes none.
        num_trajectories: complete episodes per evaluation.
        max_steps: episodes are truncated after this many steps.
        frames_per_batch: frames the inner collector gathers per batch (default ``max_steps`` per env, or 1000).
        collector_cls / collector_kwargs: the collector used (default :class:`~torchrl.collectors.Collector`).
        log_prefix: prefix of the result keys (``"<prefix>/reward"``, ...).
        reward_keys / done_keys: where rewards and done flags are read in collected batches.
        device: device of the env and policy.
        exploration_type: exploration type during evaluation (default ``DETERMINISTIC``).
        metrics_fn: ``data -> {name: value}``, extra metrics from the collected data.
        dump_video: call ``dump()`` on the env's transforms that have it (video recorders) after each run.
        on_result: called with each result dict.
        busy_policy: what :meth:`trigger_eval` does while an evaluation runs: ``"skip"`` (return False),
            ``"error"`` (raise ``RuntimeError``) or ``"wait"`` (wait for it, then start).
        backend: ``"thread"`` (background evaluations in a thread of this process) or ``"process"`` (in a
            worker process, started on first use: the env, policy, ``metrics_fn`` and ``init_fn`` must pickle,
            with cloudpickle; ``on_result`` runs here).
        init_fn: called once in the evaluation thread before the first evaluation.

    Result keys: ``<prefix>/reward`` (mean episode return), ``<prefix>/reward_std``, ``<prefix>/num_episodes``,
    ``<prefix>/episode_length`` (mean), ``<prefix>/fps`` (frames collected per second), ``<prefix>/step``:
    Python numbers, as in TorchRL (they also answer ``.item()``), plus ``metrics_fn``'s entries.

    Raises:
        ValueError: unsupported ``backend`` (``"ray"``), weight-sync schemes or ``busy_policy``.

    Examples:
        >>> import torch
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl.collectors import Evaluator
        >>> from torchrl.envs import PendulumEnv
        >>> policy = TensorDictModule(torch.nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
        >>> evaluator = Evaluator(PendulumEnv, policy, num_trajectories=2, max_steps=20)
        >>> result = evaluator.evaluate(step=0)
        >>> result["eval/num_episodes"], result["eval/episode_length"]
        (2, 20.0)
        >>> evaluator.shutdown()
    """

    def __init__(
        self,
        env: EnvBase | Callable[[], EnvBase],
        policy: Any = None,
        *,
        policy_factory: Callable[..., Callable] | None = None,
        num_trajectories: int = 10,
        max_steps: int | None = None,
        frames_per_batch: int | None = None,
        collector_cls: type | str | None = None,
        collector_kwargs: dict | None = None,
        weight_sync_schemes: dict[str, Any] | None = None,
        log_prefix: str = "eval",
        reward_keys=("next", "reward"),
        done_keys=("next", "done"),
        device=None,
        exploration_type: ExplorationType = ExplorationType.DETERMINISTIC,
        metrics_fn: Callable[[TensorDictBase], dict[str, float]] | None = None,
        dump_video: bool = True,
        on_result: Callable[[dict], None] | None = None,
        busy_policy: str = "skip",
        backend: str = "thread",
        init_fn: Callable[[], None] | None = None,
        num_gpus: int = 1,
        ray_kwargs: dict | None = None,
    ) -> None:
        if backend not in ("thread", "process"):
            raise ValueError(
                f"Evaluator: backend={backend!r} is not supported by this implementation; use 'thread' or 'process'."
            )
        if weight_sync_schemes is not None:
            raise ValueError("Evaluator: weight-sync schemes are not supported; pass weights to evaluate()/trigger_eval().")
        if busy_policy not in _BUSY:
            raise ValueError(f"Evaluator: busy_policy must be one of {_BUSY}, got {busy_policy!r}.")
        if policy is not None and policy_factory is not None:
            raise TypeError("Evaluator: pass either policy or policy_factory, not both.")
        if num_trajectories < 1:
            raise ValueError(f"Evaluator: num_trajectories must be >= 1, got {num_trajectories}.")
        if isinstance(collector_cls, str):
            if collector_cls not in ("Collector", "SyncDataCollector"):
                raise ValueError(f"Evaluator: unknown collector_cls {collector_cls!r}; pass a class.")
            collector_cls = Collector
        self._env_arg = env
        self._policy = policy
        self._policy_factory = policy_factory
        self.num_trajectories = num_trajectories
        self.max_steps = max_steps
        self.frames_per_batch = frames_per_batch
        self.collector_cls = collector_cls or Collector
        self.collector_kwargs = dict(collector_kwargs or {})
        self.log_prefix = log_prefix
        self.reward_keys = reward_keys
        self.done_keys = done_keys
        self.device = device
        self.exploration_type = exploration_type
        self.metrics_fn = metrics_fn
        self.dump_video = dump_video
        self.on_result = on_result
        self.busy_policy = busy_policy
        self.init_fn = init_fn
        self._collector: Collector | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._result: dict | None = None
        self._error: BaseException | None = None
        self._init_done = False
        self.num_evals = 0
        self.last_result: dict | None = None
        self.backend = backend
        self._remote: ProcessEvaluation | None = None  # backend="process": the worker, started on first use

    # -- setup ------------------------------------------------------------------------------------------------
    def _ensure_collector(self) -> Collector:
        if self._collector is not None:
            return self._collector
        if self.init_fn is not None and not self._init_done:
            self.init_fn()
        self._init_done = True
        env = self._env_arg if isinstance(self._env_arg, EnvBase) else self._env_arg()
        policy = _call_factory(self._policy_factory, env) if self._policy_factory is not None else self._policy
        steps = self.max_steps or 1000
        fpb = self.frames_per_batch or steps * env.batch_size.numel()
        kwargs = dict(frames_per_batch=fpb, total_frames=-1, exploration_type=self.exploration_type,
                      max_frames_per_traj=self.max_steps, device=self.device)
        kwargs.update(self.collector_kwargs)
        self._owns_env = not isinstance(self._env_arg, EnvBase)
        self._collector = self.collector_cls(env, policy, **kwargs)
        return self._collector

    @staticmethod
    def extract_weights(policy: nn.Module) -> TensorDictBase:
        """A detached copy of ``policy``'s parameters and buffers (safe to hand to another thread)."""
        return TensorDict.from_module(policy).data.clone()

    def _ensure_remote(self) -> ProcessEvaluation:
        if self._remote is None:
            options = dict(num_trajectories=self.num_trajectories, max_steps=self.max_steps,
                           frames_per_batch=self.frames_per_batch, collector_cls=self.collector_cls,
                           collector_kwargs=self.collector_kwargs, log_prefix=self.log_prefix,
                           reward_keys=self.reward_keys, done_keys=self.done_keys, device=self.device,
                           exploration_type=self.exploration_type, metrics_fn=self.metrics_fn,
                           dump_video=self.dump_video, init_fn=self.init_fn)
            self._remote = ProcessEvaluation(_EvaluatorWorker, self._env_arg, self._policy, self._policy_factory, options)
        return self._remote

    def _finish(self, result: dict[str, Any]) -> dict[str, Any]:
        """Bookkeeping of a result computed in the worker process."""
        self.num_evals += 1
        self.last_result = result
        if self.on_result is not None:
            self.on_result(result)
        return result

    # -- evaluation ------------------------------------------------------------------------------------------------
    def evaluate(self, weights=None, step: int | None = None, *, weights_dict: dict | None = None) -> dict[str, Any]:
        """Runs ``num_trajectories`` complete episodes (with ``weights`` copied into the policy first)."""
        if weights_dict is not None:
            unknown = [k for k in weights_dict if k != "policy"]
            if unknown:
                raise KeyError(f"Evaluator: unknown model ids {unknown}; only 'policy' is evaluated.")
            weights = weights_dict.get("policy", weights)
        if self.backend == "process":
            weights = as_weights(weights)
            return self._finish(self._ensure_remote().evaluate(weights, self.num_evals if step is None else step))
        with self._lock:
            return self._run(weights, step)

    def _run(self, weights, step: int | None) -> dict[str, Any]:
        collector = self._ensure_collector()
        if weights is not None:
            collector.update_policy_weights_(as_weights(weights))
        collector.reset()
        start = time.perf_counter()
        tally = _EpisodeTally()
        kept: list[TensorDictBase] = []
        frames = 0
        while len(tally.done) < self.num_trajectories:
            batch = collector.rollout()
            frames += batch.numel()
            tally.add(batch.get(("collector", "traj_ids")), batch.get(self.reward_keys), batch.get(self.done_keys))
            if self.metrics_fn is not None:
                kept.append(batch)
        elapsed = time.perf_counter() - start
        episodes = sorted(tally.done)[: self.num_trajectories]
        returns = torch.tensor([r for _, r, _ in episodes], dtype=torch.float32)
        lengths = torch.tensor([n for _, _, n in episodes], dtype=torch.float32)
        p = self.log_prefix
        result: dict[str, Any] = {
            f"{p}/reward": _Float(returns.mean()),
            f"{p}/reward_std": _Float(returns.std() if len(episodes) > 1 else 0.0),
            f"{p}/num_episodes": _Int(len(episodes)),
            f"{p}/episode_length": _Float(lengths.mean()),
            f"{p}/fps": _Float(frames / max(elapsed, 1e-9)),
            f"{p}/step": _Int(self.num_evals if step is None else step),
        }
        if self.metrics_fn is not None:
            data = torch.cat(kept, -1)
            result.update({f"{p}/{k}" if not k.startswith(f"{p}/") else k: v for k, v in self.metrics_fn(data).items()})
        if self.dump_video:
            self._dump_videos(collector.env)
        self.num_evals += 1
        self.last_result = result
        if self.on_result is not None:
            self.on_result(result)
        return result

    @staticmethod
    def _dump_videos(env) -> None:
        transform = getattr(env, "transform", None)
        for t in list(transform) if transform is not None and hasattr(transform, "__iter__") else [transform]:
            dump = getattr(t, "dump", None)
            if callable(dump):
                dump()

    # -- background evaluation ---------------------------------------------------------------------------------------
    @property
    def pending(self) -> bool:
        """Whether a background evaluation is running."""
        if self._remote is not None:
            return self._remote.in_flight and not self._remote.ready(0)
        return self._thread is not None and self._thread.is_alive()

    def trigger_eval(self, weights=None, step: int | None = None, *, weights_dict: dict | None = None) -> bool:
        """Starts an evaluation in the background; returns False if one is running (``busy_policy="skip"``).

        Weights are copied now, so training can go on modifying the originals.

        Raises:
            RuntimeError: an evaluation is running and ``busy_policy="error"``.
        """
        if self.pending:
            if self.busy_policy == "skip":
                return False
            if self.busy_policy == "error":
                raise RuntimeError("Evaluator.trigger_eval: an evaluation is already running (busy_policy='error').")
            self.wait()
        if weights_dict is not None:
            weights = weights_dict.get("policy", weights)
        snapshot = as_weights(weights)
        snapshot = snapshot.clone() if snapshot is not None else None
        self._result, self._error = None, None
        if self.backend == "process":
            remote = self._ensure_remote()
            if remote.in_flight:  # finished but not read: keep its result for poll()/wait()
                self._result = self._finish(remote.receive())
            remote.send(snapshot, self.num_evals if step is None else step)
            return True

        def work() -> None:
            try:
                with set_exploration_type(self.exploration_type, thread_local=True):
                    self._result = self.evaluate(snapshot, step)
            except BaseException as err:  # noqa: BLE001 - re-raised by poll()/wait()
                self._error = err

        self._thread = threading.Thread(target=work, name="torchrl-evaluator", daemon=True)
        self._thread.start()
        return True

    def _take(self) -> dict[str, Any] | None:
        if self._error is not None:
            err, self._error = self._error, None
            raise RuntimeError(f"Evaluator: the background evaluation failed: {type(err).__name__}: {err}") from err
        result, self._result = self._result, None
        return result

    def _take_remote(self, timeout: float | None) -> dict[str, Any] | None:
        remote = self._remote
        if remote.in_flight:
            if not remote.ready(timeout):
                return None
            return self._finish(remote.receive())
        result, self._result = self._result, None
        return result

    def poll(self, timeout: float = 0) -> dict[str, Any] | None:
        """The result of the background evaluation if it finished within ``timeout`` seconds, else ``None``."""
        if self._remote is not None:
            return self._take_remote(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return None
        return self._take()

    def wait(self, timeout: float | None = None) -> dict[str, Any] | None:
        """Blocks until the background evaluation finishes (or ``timeout``); returns its result."""
        if self._remote is not None:
            return self._take_remote(timeout)
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return None
        return self._take()

    # -- lifetime and state -------------------------------------------------------------------------------------------
    def shutdown(self, timeout: float = 5.0) -> None:
        """Waits for a running evaluation (up to ``timeout``), then releases the collector and its env (or
        stops the worker process)."""
        if self._remote is not None:
            if self._remote.in_flight:
                self._remote.ready(timeout)
            self._remote.shutdown()
            self._remote = None
        if self._thread is not None:
            self._thread.join(timeout)
        if self._collector is not None:
            self._collector.shutdown()
            if self._owns_env:
                self._collector.env.close(raise_if_closed=False)
            self._collector = None

    def state_dict(self) -> dict[str, Any]:
        return {"num_evals": self.num_evals, "last_result": self.last_result}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.num_evals = int(state_dict.get("num_evals", 0))
        self.last_result = state_dict.get("last_result")


class _EvaluatorWorker:
    """What ``Evaluator(backend="process")`` runs in its worker: a thread-backend evaluator."""

    def __init__(self, env, policy, *, create_env_kwargs=None, worker_idx=None, **options) -> None:
        self.evaluator = Evaluator(env, policy, backend="thread", **options)

    def evaluate(self, weights, step: int | None) -> dict[str, Any]:
        return self.evaluator.evaluate(weights, step)

    def shutdown(self, raise_on_error: bool = True) -> None:
        self.evaluator.shutdown()
