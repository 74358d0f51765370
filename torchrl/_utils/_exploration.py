"""Exploration type: TorchRL's names for tensordict's interaction type.

``ExplorationType`` *is* ``tensordict.nn.InteractionType`` and ``set_exploration_type`` sets the same
global that ``ProbabilisticTensorDictModule`` reads, so both libraries agree on it.
"""
from __future__ import annotations

from tensordict.nn import InteractionType, interaction_type, set_interaction_type

__all__ = ["ExplorationType", "set_exploration_type", "exploration_type"]

ExplorationType = InteractionType


def exploration_type() -> InteractionType | None:
    """The exploration type in force (``None`` outside any :class:`set_exploration_type` block)."""
    return interaction_type()


class set_exploration_type(set_interaction_type):  # noqa: N801 - TorchRL's public name
    """Context manager / decorator setting the exploration type (``"random"``, ``"deterministic"``, ...).

    Examples:
        >>> from torchrl.envs.utils import ExplorationType, exploration_type, set_exploration_type
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     exploration_type() is ExplorationType.RANDOM
        True
    """

    def __init__(
        self, type: InteractionType | str | None = InteractionType.DETERMINISTIC, *, thread_local: bool = False  # noqa: A002
    ) -> None:
        super().__init__(type, thread_local=thread_local)
