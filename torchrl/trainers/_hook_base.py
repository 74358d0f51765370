"""``TrainerHookBase`` and the small helpers every hook shares (metric names, the collector mask)."""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

from tensordict import TensorDictBase
from tensordict.utils import NestedKey

if TYPE_CHECKING:
    from torchrl.trainers._trainer import Trainer

__all__ = ["TrainerHookBase", "mask_batch", "metric_name", "get_entry", "MASK_KEY", "REWARD_KEY"]

#: Where collectors write the validity mask of padded (``split_trajs=True``) batches.
MASK_KEY = ("collector", "mask")
#: The default reward entry of a collected batch.
REWARD_KEY = ("next", "reward")


def metric_name(key: NestedKey) -> str:
    """A log name for a (possibly nested) key: ``("next", "reward")`` -> ``"next_reward"``."""
    return key if isinstance(key, str) else "_".join(key)


def get_entry(td: TensorDictBase, key: NestedKey, owner: str):
    """``td[key]``, or a ``KeyError`` naming the key, the owner and the available entries."""
    value = td.get(key, None)
    if value is None:
        raise KeyError(
            f"{owner}: key {key!r} not found in the batch; available: {sorted(map(str, td.keys(True, True)))}."
        )
    return value


def mask_batch(batch: TensorDictBase) -> TensorDictBase:
    """Keeps the valid frames of a padded batch.

    Collectors that split trajectories (``split_trajs=True``) deliver ``[n_traj, T]`` batches padded with
    invalid frames and a boolean ``("collector", "mask")``; this returns the valid frames as a 1-d batch.
    Batches without a mask are returned unchanged.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.trainers import mask_batch
        >>> td = TensorDict({"x": torch.arange(4).reshape(2, 2),
        ...                  "collector": {"mask": torch.tensor([[True, False], [True, True]])}}, [2, 2])
        >>> mask_batch(td)["x"].tolist()
        [0, 2, 3]
    """
    mask = batch.get(MASK_KEY, None)
    if mask is None:
        return batch
    return batch[mask]


class TrainerHookBase(abc.ABC):
    """An abstract hooking class for the :class:`~torchrl.trainers.Trainer`.

    A hook is a callable registered at one (or more) destinations of the training loop (see
    :meth:`Trainer.register_op <torchrl.trainers.Trainer.register_op>`). :meth:`register` puts it at its
    default place and registers it as a module of the trainer, so that its :meth:`state_dict` is part of
    the trainer's checkpoints. Stateless hooks keep the default empty state.

    Examples:
        >>> from torchrl.trainers import TrainerHookBase
        >>> class CountBatches(TrainerHookBase):
        ...     def __init__(self):
        ...         self.count = 0
        ...     def __call__(self, batch):
        ...         self.count += 1
        ...     def register(self, trainer, name="count_batches"):
        ...         trainer.register_op("pre_steps_log", self)
        ...         trainer.register_module(name, self)
        ...     def state_dict(self):
        ...         return {"count": self.count}
        ...     def load_state_dict(self, state_dict):
        ...         self.count = state_dict["count"]
        >>> hook = CountBatches()
        >>> hook(None); hook.state_dict()
        {'count': 1}
    """

    @abc.abstractmethod
    def register(self, trainer: Trainer, name: str):
        """Registers the hook in the trainer at a default location.

        Args:
            trainer (Trainer): the trainer where the hook must be registered.
            name (str): the name of the hook (its key in the trainer's checkpoints).

        Note:
            To register the hook at another location than the default, use
            :meth:`~torchrl.trainers.Trainer.register_op`.
        """

    def state_dict(self) -> dict[str, Any]:
        """The hook's state (saved with the trainer). Stateless hooks return an empty dict."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restores :meth:`state_dict` (no-op for stateless hooks)."""
        return None
