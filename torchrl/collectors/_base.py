"""``BaseCollector``: what every collector shares (iteration protocol, delivery of batches, weight
updates, profiling switches, background collection into a replay buffer, bookkeeping)."""
from __future__ import annotations

import contextlib
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Iterator

from tensordict import TensorDictBase
from torch.utils.data import IterableDataset

from torchrl._utils import name_time_dim
from torchrl.collectors._profile import ProfileConfig
from torchrl.collectors.utils import split_trajectories
from torchrl.collectors.weight_update import WeightUpdaterBase

__all__ = ["BaseCollector"]


def resolve_attr(root: Any, path: str) -> Any:
    """``root.a.b["k"].c`` from ``"a.b['k'].c"`` (attribute names and string/int subscripts)."""
    obj = root
    token = ""
    i = 0
    while i <= len(path):
        ch = path[i] if i < len(path) else "."
        if ch in ".[":
            if token:
                obj = getattr(obj, token)
                token = ""
            if ch == "[":
                end = path.index("]", i)
                inner = path[i + 1 : end].strip()
                key: Any = inner[1:-1] if inner[:1] in "'\"" else int(inner)
                obj = obj[key]
                i = end
        else:
            token += ch
        i += 1
    return obj


class BaseCollector(IterableDataset):
    """Base class of data collectors: iterate over it to get batches of collected frames.

    Subclasses implement :meth:`iterator`, :meth:`shutdown`, :meth:`set_seed`, :meth:`state_dict` and
    :meth:`load_state_dict`; this class provides the rest of the public protocol.

    Keyword Args:
        pre_collect_hook: called with no argument before each batch is collected.
        post_collect_hook: called with each batch before it is delivered.

    Examples:
        >>> from torchrl.collectors import BaseCollector, Collector
        >>> from torchrl.envs import PendulumEnv
        >>> collector = Collector(PendulumEnv(), None, frames_per_batch=10, total_frames=20)
        >>> isinstance(collector, BaseCollector), len(collector)
        (True, 2)
    """

    def __init__(
        self,
        *,
        pre_collect_hook: Callable[[], None] | None = None,
        post_collect_hook: Callable[[TensorDictBase], None] | None = None,
    ) -> None:
        super().__init__()
        self._pre_collect_hook = pre_collect_hook
        self._post_collect_hook = post_collect_hook
        self._iterator: Iterator | None = None
        self._weight_updater: WeightUpdaterBase | None = None
        self._profile_config: ProfileConfig | None = None
        self._policy_version = 0
        self._recv_schemes: dict = {}
        self._worker_idx: int | None = None
        self._bg_thread: threading.Thread | None = None
        self._bg_lock = threading.Lock()
        self._bg_stop = threading.Event()
        self._bg_error: BaseException | None = None
        self._start_time = time.monotonic()
        self._frames = 0
        self._iter = -1

    # -- iteration --------------------------------------------------------------------------------------------
    def iterator(self) -> Iterator[TensorDictBase]:
        raise NotImplementedError(f"{type(self).__name__} must implement iterator().")

    def __iter__(self) -> Iterator[TensorDictBase]:
        return self.iterator()

    def next(self):
        """The next batch (``None`` once ``total_frames`` have been collected)."""
        if self._iterator is None:
            self._iterator = iter(self)
        try:
            return next(self._iterator)
        except StopIteration:
            self._iterator = None
            return None

    def __len__(self) -> int:
        total = getattr(self, "total_frames", -1)
        if total is None or total < 0 or total == float("inf"):
            raise RuntimeError(f"{type(self).__name__} runs forever (total_frames=-1): it has no length.")
        per_batch = self.requested_frames_per_batch
        return -(-int(total) // per_batch)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # -- hooks ----------------------------------------------------------------------------------------------------
    @property
    def pre_collect_hook(self) -> Callable[[], None] | None:
        return self._pre_collect_hook

    @property
    def post_collect_hook(self) -> Callable[[TensorDictBase], None] | None:
        return self._post_collect_hook

    def set_post_collect_hook(self, hook: Callable[[TensorDictBase], None] | None) -> None:
        """Sets (``None``: removes) the hook called with each batch before it is delivered."""
        self._post_collect_hook = hook

    def _deliver(self, batch: TensorDictBase, *, split: bool = True) -> TensorDictBase | None:
        """split_trajs → postproc → post-collect hook → replay buffer (then ``None`` is delivered).

        ``split=False`` for batches that are already whole trajectories (``trajs_per_batch``)."""
        if split:
            name_time_dim(batch)
            if self.split_trajs:
                batch = split_trajectories(batch, prefix="collector")
        if self.postproc is not None:
            batch = self.postproc(batch)
        if self._post_collect_hook is not None:
            self._post_collect_hook(batch)
        rb = self.replay_buffer
        if rb is not None:
            if batch.batch_dims > 1 and getattr(rb.storage, "ndim", 1) == 1:
                batch = batch.reshape(-1)
            rb.extend(batch)
            return None
        return batch

    # -- weights ---------------------------------------------------------------------------------------------------
    @property
    def weight_updater(self) -> WeightUpdaterBase | None:
        return self._weight_updater

    @weight_updater.setter
    def weight_updater(self, value: WeightUpdaterBase | None) -> None:
        if value is not None:
            if not isinstance(value, WeightUpdaterBase):
                raise TypeError(f"weight_updater must be a WeightUpdaterBase, got {type(value).__name__}.")
            value.register_collector(self)
        self._weight_updater = value

    def init_updater(self, *args, **kwargs):
        """Forwards to the weight updater's ``init`` (no-op without an updater)."""
        if self._weight_updater is not None:
            self._weight_updater.init(*args, **kwargs)

    def update_policy_weights_(
        self,
        policy_or_weights=None,
        *,
        weights=None,
        policy=None,
        worker_ids=None,
        model_id: str | None = None,
        weights_dict: dict[str, Any] | None = None,
        **kwargs,
    ) -> None:
        """Brings new weights to the policy (or policies) this collector runs.

        Args:
            policy_or_weights: a module, a TensorDict of weights or a ``state_dict``. ``None`` pushes the
                weights of the policy the collector was built with (needed when they do not share memory
                with the running copies, e.g. another device or a replaced parameter).

        Keyword Args:
            weights / policy: same as ``policy_or_weights`` (TorchRL's keyword forms).
            worker_ids: restrict the update to some workers (process collectors).
            model_id / weights_dict: the model to update; only ``"policy"`` exists here.

        Raises:
            KeyError: ``model_id`` (or a ``weights_dict`` key) is not ``"policy"``.
            ValueError: weights were given but the collector's policy has no parameters to update.
        """
        if kwargs:
            raise TypeError(f"update_policy_weights_() got unexpected keyword arguments {sorted(kwargs)}.")
        if weights_dict is not None:
            unknown = [k for k in weights_dict if k != "policy"]
            if unknown:
                raise KeyError(f"update_policy_weights_: unknown model ids {unknown}; this collector only has 'policy'.")
            policy_or_weights = weights_dict.get("policy", policy_or_weights)
        if model_id not in (None, "policy"):
            raise KeyError(f"update_policy_weights_: unknown model_id {model_id!r}; this collector only has 'policy'.")
        for alt in (weights, policy):
            if alt is not None:
                policy_or_weights = alt
        updater = self._weight_updater
        if updater is None:
            if policy_or_weights is not None:
                raise ValueError(
                    f"{type(self).__name__}.update_policy_weights_: the policy is not an nn.Module (or there is "
                    f"none), so there are no weights to update; pass weight_updater= to the collector to handle it."
                )
            return
        updater(policy_or_weights, worker_ids=worker_ids)
        self.increment_version()

    def receive_weights(self, policy_or_weights=None, *, weights=None, policy=None) -> None:
        """Receiver side of a weight update: applies the given weights to the local policy."""
        self.update_policy_weights_(policy_or_weights, weights=weights, policy=policy)

    def register_scheme_receiver(self, weight_recv_schemes, *, synchronize_weights: bool = True):
        """Makes this collector a receiver of weight-sync schemes: each scheme is initialized on the receiver
        side with this collector as context (its model: ``get_model(model_id)``), connected (the sender's
        current weights are applied) when ``synchronize_weights``, and polled before every batch, so weights
        the sender sent in the meantime are applied before the batch is collected.

        Args:
            weight_recv_schemes: ``{model_id: WeightSyncScheme}`` (this collector runs ``"policy"``).

        Raises:
            TypeError: not a dict of :class:`~torchrl.weight_update.WeightSyncScheme`.
            KeyError: a model id this collector does not run.
        """
        from torchrl.weight_update import WeightSyncScheme

        owner = type(self).__name__
        if not isinstance(weight_recv_schemes, dict) or not all(
                isinstance(s, WeightSyncScheme) for s in weight_recv_schemes.values()):
            raise TypeError(f"{owner}: weight_recv_schemes must be a dict {{model_id: WeightSyncScheme}}.")
        for model_id, scheme in weight_recv_schemes.items():
            self.get_model(model_id)  # raises KeyError for a model this collector does not run
            scheme.init_on_receiver(model_id=model_id, context=self, worker_idx=self._worker_idx or 0)
            if synchronize_weights:
                scheme.connect()
            self._recv_schemes[model_id] = scheme

    def poll_weights(self) -> int:
        """Applies the weights that arrived through the receiver schemes (no wait); returns how many updates
        were applied."""
        applied = 0
        for scheme in self._recv_schemes.values():
            if scheme.receive(timeout=0) is not None:
                applied += 1
                self.increment_version()
        return applied

    def get_model(self, model_id: str):
        raise KeyError(f"{type(self).__name__}.get_model: unknown model_id {model_id!r}.")

    def increment_version(self) -> None:
        self._policy_version += 1

    def get_policy_version(self) -> int:
        return self._policy_version

    @property
    def policy_version(self) -> int:
        return self._policy_version

    # -- profiling -----------------------------------------------------------------------------------------------------
    def enable_profile(
        self,
        *,
        workers: list[int] | None = None,
        num_rollouts: int = 3,
        warmup_rollouts: int = 1,
        save_path: str | Path | None = None,
        activities: list[str] | None = None,
        record_shapes: bool = True,
        profile_memory: bool = False,
        with_stack: bool = True,
        with_flops: bool = False,
        on_trace_ready: Callable | None = None,
    ) -> None:
        """Profiles the next ``num_rollouts`` rollouts (of the listed workers) with :mod:`torch.profiler`.

        See :class:`~torchrl.collectors.ProfileConfig` for the arguments. Call before iterating.
        """
        self._profile_config = ProfileConfig(
            workers=[0] if workers is None else list(workers),
            num_rollouts=num_rollouts,
            warmup_rollouts=warmup_rollouts,
            save_path=save_path,
            activities=["cpu"] if activities is None else list(activities),
            record_shapes=record_shapes,
            profile_memory=profile_memory,
            with_stack=with_stack,
            with_flops=with_flops,
            on_trace_ready=on_trace_ready,
        )
        self._on_profile_change()

    def disable_profile(self) -> None:
        self._profile_config = None
        self._on_profile_change()

    def _on_profile_change(self) -> None:
        """Subclasses apply the new profile configuration (to themselves or their workers)."""

    @property
    def profile_config(self) -> ProfileConfig | None:
        return self._profile_config

    # -- background collection into a replay buffer ------------------------------------------------------------------
    def start(self):
        """Collects in a background thread, writing every batch into the replay buffer, until
        ``total_frames`` or :meth:`async_shutdown`.

        Raises:
            RuntimeError: the collector has no replay buffer.
        """
        if getattr(self, "replay_buffer", None) is None:
            raise RuntimeError(
                f"{type(self).__name__}.start() collects into a replay buffer in the background; build the collector "
                f"with replay_buffer=... (or iterate over it instead)."
            )
        if self.is_running():
            return
        self._bg_stop.clear()
        self._bg_error = None
        self._bg_thread = threading.Thread(target=self._bg_loop, name=f"{type(self).__name__}-bg", daemon=True)
        self._bg_thread.start()

    def _bg_loop(self) -> None:
        it = self.iterator()
        try:
            while not self._bg_stop.is_set():
                with self._bg_lock:
                    try:
                        next(it)
                    except StopIteration:
                        break
        except BaseException as err:  # noqa: BLE001 - re-raised by async_shutdown
            self._bg_error = err
        finally:
            it.close()

    def is_running(self) -> bool:
        return self._bg_thread is not None and self._bg_thread.is_alive()

    @contextlib.contextmanager
    def pause(self):
        """Context manager: no batch is collected in the background while it is active."""
        if not self.is_running():
            yield
            return
        with self._bg_lock:
            yield

    def async_shutdown(self, timeout: float | None = None, close_env: bool = True) -> None:
        """Stops background collection started with :meth:`start`, then shuts the collector down.

        Raises:
            RuntimeError: background collection failed (the original error is chained).
        """
        self._bg_stop.set()
        thread = self._bg_thread
        if thread is not None:
            thread.join(timeout)
        self._bg_thread = None
        self.shutdown(close_env=close_env)
        if self._bg_error is not None:
            err, self._bg_error = self._bg_error, None
            raise RuntimeError(f"{type(self).__name__}: background collection failed: {err}") from err

    # -- remote-style helpers (local here) ---------------------------------------------------------------------------
    def cascade_execute(self, attr_path: str, *args, **kwargs) -> Any:
        """Calls the callable at ``attr_path`` (e.g. ``"env.set_seed"``) with the given arguments."""
        return resolve_attr(self, attr_path)(*args, **kwargs)

    def get_distant_attr(self, attr: str) -> Any:
        """The attribute at ``attr`` (a dotted path) of this collector."""
        return resolve_attr(self, attr)

    def map_fn(self, method_name: str, list_of_args: list[tuple] | None = None, list_of_kwargs: list[dict] | None = None) -> list[Any]:
        """Calls ``method_name`` once per argument set; returns the results in order."""
        n = max(len(list_of_args or []), len(list_of_kwargs or []), 1)
        args = list_of_args or [()] * n
        kwargs = list_of_kwargs or [{}] * n
        if len(args) != len(kwargs):
            raise ValueError(f"map_fn: list_of_args has {len(args)} entries but list_of_kwargs has {len(kwargs)}.")
        fn = resolve_attr(self, method_name)
        return [fn(*a, **k) for a, k in zip(args, kwargs)]

    # -- bookkeeping -------------------------------------------------------------------------------------------------
    @property
    def worker_idx(self) -> int | None:
        return self._worker_idx

    def stats(self) -> dict[str, int | float | bool]:
        """Frames and batches collected so far, elapsed seconds and frames per second."""
        elapsed = max(time.monotonic() - self._start_time, 1e-9)
        return {
            "frames": int(self._frames),
            "batches": int(self._iter + 1),
            "elapsed": elapsed,
            "fps": self._frames / elapsed,
            "running": self.is_running(),
            "policy_version": self._policy_version,
        }

    def shutdown(self, timeout: float | None = None, close_env: bool = True, raise_on_error: bool = True) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement shutdown().")

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        raise NotImplementedError(f"{type(self).__name__} must implement set_seed().")

    def state_dict(self) -> OrderedDict:
        raise NotImplementedError(f"{type(self).__name__} must implement state_dict().")

    def load_state_dict(self, state_dict: OrderedDict) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement load_state_dict().")

    def __repr__(self) -> str:
        total = getattr(self, "total_frames", -1)
        return (
            f"{type(self).__name__}(frames_per_batch={getattr(self, 'requested_frames_per_batch', None)}, "
            f"total_frames={total}, frames={self._frames})"
        )
