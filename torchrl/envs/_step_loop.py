"""The one step loop below ``EnvBase.rollout`` and the collectors, and the env's per-step plan.

:class:`StepPlan` is what every ``env.step`` needs, computed once while the specs are locked
(``EnvBase._hot()``): the actions to check with their full shapes, the reward/done shapes to enforce, and the
done structure that completes a step's done flags.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from torchrl.envs._done import DoneStructure

__all__ = ["StepPlan"]


class StepPlan(NamedTuple):
    """What one ``env.step`` needs, computed once per batch size (``EnvBase._hot()``).

    A ``NamedTuple``: positional reads (``plan[0]``) keep working while callers move to the field names.

    Attributes:
        action_shapes: ``[(action key, full shape)]`` to compare the step's actions against, or ``None``
            when some action is heterogeneous (lazily stacked): the env then checks them one by one.
        reward_done_shapes: ``[(reward or done key, full shape)]`` that ``_step``'s outputs are reshaped to.
        done_structure: the env's :class:`~torchrl.envs._done.DoneStructure` (completes missing done flags).
    """

    action_shapes: list[tuple] | None
    reward_done_shapes: list[tuple[object, torch.Size]]
    done_structure: DoneStructure
