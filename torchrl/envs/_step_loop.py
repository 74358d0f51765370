"""The one step loop below ``EnvBase.rollout`` and the collectors, and the env's stepping protocol.

:func:`run_steps` is the loop: policy → ``env.step`` → (last-step truncation) → ``step_mdp`` → reset of the
finished sub-environments, ``max_steps`` times, keeping each step's TensorDict for one stack at the end
(:func:`torchrl._fast.stack_tds`). Its users add their own policy:

- ``rollout`` (``envs/_rollout.py``): the break policy (``stop="any"``/``"all"``) and the user callback;
- ``Collector`` (``collectors/_loop.py``): trajectory ids (``on_end``) and the shared-memory output.

What an env offers the loop, in one place:

- :class:`StepPlan` (``EnvBase._hot()``): what every ``env.step`` checks, computed once while the specs are
  locked;
- :class:`ColumnStepper` (``EnvBase._column_loop(policy)``): a whole rollout without per-step TensorDicts,
  or ``None`` (the default) for this loop;
- :class:`RowStepper` (``EnvBase._row_stepper(...)``): one step of a batched-env worker written straight into
  its shared rows, or ``None`` (the default).
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Literal, NamedTuple, Protocol

import torch
from tensordict import TensorDictBase

from torchrl._fast import fast_get
from torchrl.envs._done import DoneStructure

__all__ = ["ColumnStepper", "RowStepper", "StepPlan", "check_truncatable", "run_steps", "truncate_step"]


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


class ColumnStepper(Protocol):
    """A column-wise rollout of one env with one policy (``EnvBase._column_loop``; e.g. ``GymColumns``):
    each step's values go to per-entry lists, and each stacked entry is built once."""

    NotApplicable: ClassVar[type[Exception]]  # raised by run() before its first step: use run_steps instead

    def accepts(self, td: TensorDictBase) -> bool:
        """Whether ``td`` (the first input) holds nothing the column loop would not reproduce."""

    def run(self, td: TensorDictBase, steps: int, *, reset: Callable | None = None, stop_on_done: bool = False,
            truncate_last: bool = False, reset_cut: bool = False) -> tuple[TensorDictBase, TensorDictBase, list]:
        """``(stacked steps, next input, steps at which an episode ended)``, as :func:`run_steps` would give."""


class RowStepper(Protocol):
    """One step of a batched-env worker (``EnvBase._row_stepper``): reads the action from, and writes the
    outputs into, the worker's rows of the shared buffers; returns the indices of outputs it did not write."""

    def __call__(self) -> list: ...


def check_truncatable(env, who: str) -> None:
    """Raises ``RuntimeError`` unless every done group of ``env`` has a ``truncated`` entry (``set_truncated``)."""
    missing = [g.done for g in env.done_structure.groups if g.truncated is None]
    if missing:
        raise RuntimeError(
            f"{who}(set_truncated=True): the env has no 'truncated' entry next to {missing}; call "
            f"env.add_truncated_keys() (or add a StepCounter transform) first."
        )


def truncate_step(groups, td: TensorDictBase) -> None:
    """Marks ``td["next"]`` truncated (and done) wherever it is not done: the last step of a rollout or of a
    collector's batch under ``set_truncated``."""
    nxt = fast_get(td, "next")
    for group in groups:
        done = fast_get(nxt, group.done) if group.done is not None else None
        truncated = fast_get(nxt, group.truncated) if group.truncated is not None else None
        if done is None or truncated is None:
            continue
        truncated = truncated | ~done
        nxt.set(group.truncated, truncated)
        nxt.set(group.done, done | truncated)


def run_steps(
    env,
    td: TensorDictBase,
    act: Callable[[TensorDictBase], TensorDictBase],
    max_steps: int,
    *,
    stop: Literal["any", "all"] | None = None,
    reset_when_done: bool = True,
    truncate_last: bool = False,
    callback: Callable[[Any, TensorDictBase], Any] | None = None,
    on_end: Callable[[int, TensorDictBase], Any] | None = None,
    steps: Any = None,
) -> tuple[Any, TensorDictBase | None]:
    """Steps ``env`` from ``td`` with ``act`` (the policy call) up to ``max_steps`` times.

    Args:
        env: the environment.
        td: the first input (a reset TensorDict).
        act: ``td -> td`` writing the actions.
        max_steps: the number of steps (fewer when ``stop`` ends the loop).

    Keyword Args:
        stop: ``"any"``: stop after the first step where any sub-env is done (no reset, no ``step_mdp`` after the
            last step); ``"all"``: stop once every sub-env has been done at least once; ``None``: never.
        reset_when_done: reset the finished sub-envs of the next input (otherwise they keep stepping).
        truncate_last: mark the last step truncated (and done) where it is not done (:func:`truncate_step`);
            with ``reset_when_done`` those sub-envs are reset in the next input.
        callback: ``callback(env, td)`` after every step but the last, as TorchRL's rollout: with ``stop="any"``
            on the next step's input, otherwise on the step's data.
        on_end: ``on_end(t, next_input)`` before each reset, while ``next_input`` holds the ``"_reset"`` masks
            of the sub-envs whose episode ended at step ``t`` (the collector's trajectory ids).
        steps: where the steps go (anything with ``append``; default: a new list).

    Returns:
        ``(steps, next input)``: each step's TensorDict (with ``"next"``), and the input of the step after
        the last one (``None`` with ``stop="any"``).
    """
    step, step_mdp, reset = env.step, env.step_mdp, env.reset
    structure = env.done_structure
    groups, any_done = structure.groups, structure.any_done
    # the env's own fused step (one-pass restarts, e.g. EnvPool) where nothing must happen in between
    fused = env.step_and_maybe_reset if reset_when_done and on_end is None and stop != "any" else None
    stop_any, stop_all = stop == "any", stop == "all"
    done_keys = [g.done for g in groups if g.done is not None]
    last = max_steps - 1 if truncate_last else -1
    finished = None
    if steps is None:
        steps = []
    append = steps.append
    nxt = None
    for t in range(max_steps):
        if fused is not None and t != last:
            td, nxt = fused(act(td))
            append(td)
        else:
            td = step(act(td))
            append(td)
            if t == last:
                truncate_step(groups, td)
            if stop_any:
                if any_done(fast_get(td, "next"), write_reset=False):
                    if truncate_last:
                        truncate_step(groups, td)
                    return steps, None
                if t + 1 == max_steps:
                    return steps, None
            nxt = step_mdp(td)
            if reset_when_done and any_done(nxt):
                if on_end is not None:
                    on_end(t, nxt)
                nxt = reset(nxt)
        if callback is not None and t + 1 < max_steps:
            callback(env, nxt if stop_any else td)
        if stop_all and done_keys:
            done = fast_get(fast_get(td, "next"), done_keys[0])
            if done is not None:
                finished = done.clone() if finished is None else finished | done
                if bool(finished.all()):
                    if truncate_last and t != last:
                        truncate_step(groups, td)
                    break
        td = nxt
    return steps, nxt
