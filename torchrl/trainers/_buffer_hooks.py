"""Data hooks: what happens to collected batches before the loss sees them.

:class:`ReplayBufferTrainer` (store, sample, update priorities), :class:`BatchSubSampler` (sub-trajectories
of the current batch), :class:`SelectKeys`, :class:`RewardNormalizer` and :class:`ValueEstimatorHook`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

import torch
from tensordict import TensorDictBase, pad

from torchrl.data.replay_buffers.samplers.prioritized import PrioritizedSampler
from torchrl.data.tensor_specs import DEVICE_TYPING
from torchrl.trainers._hook_base import get_entry, MASK_KEY, REWARD_KEY, TrainerHookBase

if TYPE_CHECKING:
    from torchrl.data.replay_buffers import TensorDictReplayBuffer
    from torchrl.trainers._trainer import Trainer

__all__ = ["BatchSubSampler", "ReplayBufferTrainer", "RewardNormalizer", "SelectKeys", "ValueEstimatorHook"]


class ReplayBufferTrainer(TrainerHookBase):
    """Replay buffer hook provider: stores each collected batch and samples the optimisation sub-batches.

    :meth:`extend` runs at ``"batch_process"``, :meth:`sample` at ``"process_optim_batch"`` and, for
    prioritized buffers, :meth:`update_priority` at ``"post_loss"`` (the loss writes its priority entry,
    e.g. the TD error, into the sampled sub-batch). The buffer's full content (storage, writer cursor,
    sampler state) is part of the trainer's checkpoints.

    Args:
        replay_buffer (TensorDictReplayBuffer): the buffer.
        batch_size (int, optional): sample size. Defaults to the buffer's own batch size.
        memmap (bool, optional): store memory-mapped copies of the batches. Defaults to ``False``.
        device (torch.device, optional): where samples are moved. Defaults to where the buffer has them.
        flatten_tensordicts (bool, optional): store only the valid frames, flattened (``("collector",
            "mask")`` when present, else a plain reshape). Defaults to ``False``.
        max_dims (sequence of int, optional): without flattening, pad each batch dimension up to this size
            (``-1``: no padding) so that batches of varying shapes fit one storage.
        iterate (bool, optional): sample by iterating over the buffer (restarting when exhausted) instead
            of calling ``sample``. Defaults to ``False``.

    Raises:
        ValueError: ``max_dims`` does not have one entry per batch dimension (when extending).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
        >>> from torchrl.trainers import ReplayBufferTrainer
        >>> hook = ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(100)), batch_size=4,
        ...                            flatten_tensordicts=True)
        >>> _ = hook.extend(TensorDict(x=torch.arange(10.0).reshape(2, 5), batch_size=[2, 5]))
        >>> len(hook.replay_buffer), hook.sample(None).batch_size
        (10, torch.Size([4]))
    """

    def __init__(
        self,
        replay_buffer: TensorDictReplayBuffer,
        batch_size: int | None = None,
        memmap: bool = False,
        device: DEVICE_TYPING | None = None,
        flatten_tensordicts: bool = False,
        max_dims: Sequence[int] | None = None,
        iterate: bool = False,
    ) -> None:
        self.replay_buffer = replay_buffer
        self.batch_size = batch_size
        self.memmap = memmap
        self.device = None if device is None else torch.device(device)
        self.flatten_tensordicts = flatten_tensordicts
        self.max_dims = None if max_dims is None else list(max_dims)
        self.iterate = iterate
        self._iterator = None
        self._prioritized = isinstance(getattr(replay_buffer, "sampler", None), PrioritizedSampler)

    def extend(self, batch: TensorDictBase) -> TensorDictBase:
        """Writes ``batch`` (flattened or padded as configured) into the buffer; returns ``batch``."""
        if batch is None:
            return None
        data = batch
        if self.flatten_tensordicts:
            mask = data.get(MASK_KEY, None)
            data = data[mask] if mask is not None else data.reshape(-1)
        elif self.max_dims is not None:
            if len(self.max_dims) != data.batch_dims:
                raise ValueError(
                    f"ReplayBufferTrainer: max_dims={self.max_dims} has {len(self.max_dims)} entries but the batch "
                    f"has {data.batch_dims} dimensions (batch size {tuple(data.batch_size)})."
                )
            pad_size = []
            for size, top in zip(data.batch_size, self.max_dims):
                pad_size += [0, max(top - size, 0) if top >= 0 else 0]
            if any(pad_size):
                data = pad(data, pad_size)
        if self.memmap:
            data = data.memmap()
        self.replay_buffer.extend(data)
        return batch

    def sample(self, batch: TensorDictBase) -> TensorDictBase:
        """A sub-batch from the buffer (``batch``, the collected batch, is not used)."""
        if self.iterate:
            if self._iterator is None:
                self._iterator = iter(self.replay_buffer)
            try:
                sample = next(self._iterator)
            except StopIteration:
                self._iterator = iter(self.replay_buffer)
                sample = next(self._iterator)
        else:
            sample = self.replay_buffer.sample(batch_size=self.batch_size)
        if self.device is not None:
            sample = sample.to(self.device)
        return sample

    def update_priority(self, batch: TensorDictBase) -> None:
        """Writes the sub-batch's priorities back (prioritized buffers only)."""
        if self._prioritized:
            self.replay_buffer.update_tensordict_priority(batch)

    def register(self, trainer: Trainer, name: str = "replay_buffer"):
        trainer.register_op("batch_process", self.extend)
        trainer.register_op("process_optim_batch", self.sample)
        if self._prioritized:
            trainer.register_op("post_loss", self.update_priority)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {"replay_buffer": self.replay_buffer.state_dict()}

    def load_state_dict(self, state_dict) -> None:
        self.replay_buffer.load_state_dict(state_dict["replay_buffer"])
        self._iterator = None


class BatchSubSampler(TrainerHookBase):
    """Data subsampler for online RL: draws sub-trajectories from the batch just collected.

    For a ``[*batch, T]`` batch (time last, e.g. from a collector), it returns ``batch_size // L``
    windows of ``L`` consecutive valid steps, with ``L = min(sub_traj_len, longest valid trajectory)``
    (``sub_traj_len <= 0``: the longest valid length); the output has batch size
    ``[batch_size // L, L]``. Windows are drawn uniformly among the trajectories at least ``L`` long (the
    valid length comes from ``("collector", "mask")``, when present) and uniformly in start position.
    A 1-d batch of transitions gives ``batch_size`` transitions drawn uniformly. Registered at
    ``"process_optim_batch"``; uses the global torch generator.

    Args:
        batch_size (int): number of frames of each sub-batch.
        sub_traj_len (int, optional): window length; ``0`` (default) uses the full trajectory length.
        min_sub_traj_len (int, optional): the shortest acceptable window when trajectories are shorter
            than ``sub_traj_len``. Defaults to 0.

    Raises:
        ValueError: ``batch_size`` < 1, or (when called) ``batch_size`` smaller than the window length.
        RuntimeError: (when called) no trajectory of the batch is at least ``min_sub_traj_len`` long.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import BatchSubSampler
        >>> td = TensorDict({"t": torch.arange(20).reshape(2, 10)}, [2, 10])
        >>> out = BatchSubSampler(batch_size=12, sub_traj_len=4)(td)
        >>> out.shape, bool((out["t"].diff(dim=-1) == 1).all())
        (torch.Size([3, 4]), True)
    """

    def __init__(self, batch_size: int, sub_traj_len: int = 0, min_sub_traj_len: int = 0) -> None:
        if batch_size < 1:
            raise ValueError(f"BatchSubSampler: batch_size must be >= 1, got {batch_size}.")
        self.batch_size = int(batch_size)
        self.sub_traj_len = int(sub_traj_len)
        self.min_sub_traj_len = int(min_sub_traj_len)

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        if batch.batch_dims < 2:
            index = torch.randint(batch.numel(), (self.batch_size,), device=batch.device)
            return batch[index]
        time = batch.batch_size[-1]
        batch = batch.reshape(-1, time)
        mask = batch.get(MASK_KEY, None)
        lengths = mask.sum(-1) if mask is not None else torch.full((batch.shape[0],), time, device=batch.device)
        longest = int(lengths.max())
        length = longest if self.sub_traj_len <= 0 else min(self.sub_traj_len, longest)
        if length < max(self.min_sub_traj_len, 1):
            raise RuntimeError(
                f"BatchSubSampler: the longest valid trajectory of the batch has {longest} steps, fewer than "
                f"min_sub_traj_len={self.min_sub_traj_len}."
            )
        n_windows = self.batch_size // length
        if n_windows == 0:
            raise ValueError(
                f"BatchSubSampler: batch_size={self.batch_size} is smaller than the window length {length}; "
                f"raise batch_size or lower sub_traj_len."
            )
        candidates = (lengths >= length).nonzero().squeeze(-1)
        traj = candidates[torch.randint(candidates.numel(), (n_windows,), device=batch.device)]
        span = (lengths[traj] - length + 1).float()
        start = (torch.rand(n_windows, device=batch.device) * span).long()
        steps = start.unsqueeze(-1) + torch.arange(length, device=batch.device)
        return batch[traj.unsqueeze(-1), steps]

    def register(self, trainer: Trainer, name: str = "batch_subsampler"):
        trainer.register_op("process_optim_batch", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None


class SelectKeys(TrainerHookBase):
    """Selects keys in a TensorDict batch (at ``"batch_process"``): later hooks and the replay buffer see
    only these entries.

    Args:
        keys (sequence of NestedKey): the entries to keep.

    Raises:
        ValueError: ``keys`` is empty.
        KeyError: (when called) one of the keys is missing from the batch.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import SelectKeys
        >>> td = TensorDict({"a": torch.zeros(2), "b": torch.zeros(2), "next": {"c": torch.zeros(2)}}, [2])
        >>> list(SelectKeys(["a", ("next", "c")])(td).keys(True, True))
        ['a', ('next', 'c')]
    """

    def __init__(self, keys: Sequence[str]):
        if isinstance(keys, (str, tuple)):
            keys = [keys]
        keys = list(keys)
        if not keys:
            raise ValueError("SelectKeys: keys must name at least one entry.")
        self.keys = keys

    def __call__(self, batch: TensorDictBase) -> TensorDictBase:
        try:
            return batch.select(*self.keys, strict=True)
        except KeyError:
            available = set(batch.keys(True))
            missing = [key for key in self.keys if key not in available]
            raise KeyError(
                f"SelectKeys: keys {missing} not found in the batch; available: {sorted(map(str, available))}."
            ) from None

    def register(self, trainer, name="select_keys") -> None:
        trainer.register_op("batch_process", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None


class RewardNormalizer(TrainerHookBase):
    """Reward normalizer hook: standardises rewards with decayed running statistics.

    :meth:`update_reward_stats` (at ``"batch_process"``) folds each collected batch into decayed sums
    ``S = decay * S + sum(r)``, ``Q = decay * Q + sum(r^2)``, ``N = decay * N + count`` (valid frames
    only), from which ``mean = S / N`` and ``std = sqrt(max(Q / N - mean^2, eps))``.
    :meth:`normalize_reward` (at ``"process_optim_batch"``, after the sampling hooks) returns a copy of the
    sub-batch with ``reward <- (reward - mean) / std * scale``; the input is left untouched.

    Args:
        decay (float, optional): decay of the running sums. Defaults to 0.999.
        scale (float, optional): multiplies the standardised reward. Defaults to 1.0.
        eps (float, optional): lower bound of the variance. Defaults to the machine epsilon of the
            default dtype.
        log_pbar (bool, optional): accepted for compatibility (nothing is logged).
        reward_key (NestedKey, optional): the reward entry. Defaults to ``("next", "reward")``.

    Raises:
        ValueError: ``decay`` is not in ``[0, 1]``.
        RuntimeError: :meth:`normalize_reward` is called before any :meth:`update_reward_stats`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import RewardNormalizer
        >>> norm = RewardNormalizer()
        >>> td = TensorDict({"next": {"reward": torch.tensor([[1.0], [2.0], [3.0]])}}, [3])
        >>> norm.update_reward_stats(td)
        >>> norm.normalize_reward(td)["next", "reward"].squeeze(-1)
        tensor([-1.2247,  0.0000,  1.2247])
    """

    def __init__(
        self,
        decay: float = 0.999,
        scale: float = 1.0,
        eps: float | None = None,
        log_pbar: bool = False,
        reward_key=None,
    ):
        if not 0.0 <= decay <= 1.0:
            raise ValueError(f"RewardNormalizer: decay must be in [0, 1], got {decay}.")
        self.decay = float(decay)
        self.scale = float(scale)
        self.eps = float(torch.finfo(torch.get_default_dtype()).eps if eps is None else eps)
        self.log_pbar = log_pbar
        self.reward_key = REWARD_KEY if reward_key is None else reward_key
        self._stats: dict[str, torch.Tensor] = {}

    def update_reward_stats(self, batch: TensorDictBase) -> None:
        reward = get_entry(batch, self.reward_key, "RewardNormalizer")
        mask = batch.get(MASK_KEY, None)
        if mask is not None:
            reward = reward[mask]
        reward = reward.detach().reshape(-1).double()
        total, squares = reward.sum(), reward.pow(2).sum()
        count = torch.tensor(float(reward.numel()), dtype=torch.float64)
        stats = self._stats
        if stats:
            decay = self.decay
            total = decay * stats["sum"] + total
            squares = decay * stats["ssq"] + squares
            count = decay * stats["count"] + count
        mean = total / count
        var = (squares / count - mean.pow(2)).clamp_min(self.eps)
        self._stats = {"sum": total, "ssq": squares, "count": count, "mean": mean, "std": var.sqrt()}

    def normalize_reward(self, tensordict: TensorDictBase) -> TensorDictBase:
        stats = self._stats
        if not stats:
            raise RuntimeError(
                "RewardNormalizer.normalize_reward called before update_reward_stats: register the hook with "
                "register(trainer) (or call update_reward_stats on collected batches first)."
            )
        reward = get_entry(tensordict, self.reward_key, "RewardNormalizer")
        mean = stats["mean"].to(reward.device, reward.dtype)
        std = stats["std"].to(reward.device, reward.dtype)
        out = tensordict.copy()
        out.set(self.reward_key, (reward - mean) * (self.scale / std))
        return out

    def register(self, trainer: Trainer, name: str = "reward_normalizer"):
        trainer.register_op("batch_process", self.update_reward_stats)
        trainer.register_op("process_optim_batch", self.normalize_reward)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        return {"stats": {key: value.clone() for key, value in self._stats.items()}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._stats = {key: value.clone() for key, value in state_dict["stats"].items()}


class ValueEstimatorHook(TrainerHookBase):
    """A hook that computes value estimates over a collected batch (at ``"pre_epoch"``).

    It applies ``value_estimator`` (e.g. :class:`~torchrl.objectives.value.GAE`) to the whole batch without
    gradients at the start of each epoch, so that advantages and value targets exist when the loss reads
    the sub-batches. With no batch (asynchronous collection) it passes ``None`` through.

    Args:
        value_estimator (Callable[[TensorDictBase], TensorDictBase]): the estimator.

    Raises:
        TypeError: ``value_estimator`` is not callable.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import ValueEstimatorHook
        >>> def double_reward(td):
        ...     td["advantage"] = td["reward"] * 2
        ...     return td
        >>> ValueEstimatorHook(double_reward)(TensorDict(reward=torch.ones(3), batch_size=[3]))["advantage"].tolist()
        [2.0, 2.0, 2.0]
    """

    def __init__(self, value_estimator: Callable[[TensorDictBase], TensorDictBase]) -> None:
        if not callable(value_estimator):
            raise TypeError(
                f"ValueEstimatorHook: value_estimator must be callable, got {type(value_estimator).__name__}."
            )
        self.value_estimator = value_estimator

    def __call__(self, batch: TensorDictBase | None) -> TensorDictBase | None:
        if batch is None:
            return None
        with torch.no_grad():
            out = self.value_estimator(batch)
        return batch if out is None else out

    def register(self, trainer: Trainer, name: str = "value_estimator"):
        trainer.register_op("pre_epoch", self)
        trainer.register_module(name, self)

    def state_dict(self) -> dict[str, Any]:
        getter = getattr(self.value_estimator, "state_dict", None)
        return {"value_estimator": getter()} if getter is not None else {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        loader = getattr(self.value_estimator, "load_state_dict", None)
        if loader is not None and "value_estimator" in state_dict:
            loader(state_dict["value_estimator"])
