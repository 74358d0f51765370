"""``EnvBase.rollout``: step an env with a policy and stack the steps along a new (last) batch dim.

The rollout is the one step loop (:func:`torchrl.envs._step_loop.run_steps`) plus its break policy
(``break_when_any_done``/``break_when_all_done``) and callback; the per-step TensorDicts are stacked once at
the end (:func:`torchrl._fast.stack_tds`). A single gym env with a plain policy takes the env's column-wise
loop instead (:class:`~torchrl.envs._step_loop.ColumnStepper`).
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl._utils._errors import ValueRuntimeError
from torchrl._fast import direct_module_call, fast_set, stack_tds
from torchrl._utils import name_time_dim
from torchrl.envs._policy_args import wrap_function_for_rollout
from torchrl.envs._step_loop import check_truncatable, run_steps

__all__ = ["rollout"]


class _BreaksError(ValueError, TypeError):
    """Both break options set: a ``ValueError``, and TorchRL's ``TypeError``."""


def _policy_device(policy) -> torch.device | None:
    params = getattr(policy, "parameters", None)
    if params is None:
        return None
    for p in params():
        return p.device
    return None


def _resolve_breaks(break_when_any_done: bool | None, break_when_all_done: bool | None) -> tuple[bool, bool]:
    if break_when_any_done and break_when_all_done:
        raise _BreaksError("rollout: break_when_any_done and break_when_all_done cannot both be True.")
    if break_when_any_done is None:
        break_when_any_done = not break_when_all_done
    return bool(break_when_any_done), bool(break_when_all_done)


def _action_writer(env, actions: Iterable[Any]) -> Callable[[TensorDictBase], TensorDictBase]:
    iterator = iter(actions)
    keys = env.action_keys

    def write(td: TensorDictBase) -> TensorDictBase:
        try:
            action = next(iterator)
        except StopIteration:
            raise ValueError("rollout: `actions` ran out before max_steps; pass at least max_steps actions.") from None
        if isinstance(action, TensorDictBase):
            return td.update(action)
        if len(keys) != 1:
            raise ValueError(f"rollout: the env has several action keys {keys}; pass actions as TensorDicts.")
        if not isinstance(action, torch.Tensor):
            action = torch.as_tensor(action)
        return td.set(keys[0], action)

    return write


def _bulk_random_actions(env, td: TensorDictBase, max_steps: int):
    """A per-step action writer drawing every step's random actions in one call per action leaf.

    Only for envs using ``EnvBase.rand_action`` on unmasked specs; a spec that gets masked during the
    rollout (e.g. by ``ActionMask``) is drawn afresh at each step from then on. ``None`` when not applicable.
    """
    if not getattr(type(env).rand_action, "bulk_safe", False):
        return None
    leaves = env._cached("_action_leaves", env._random_action_leaves)
    if leaves is None or any(getattr(leaf, "mask", None) is not None for _, leaf in leaves):
        return None
    extra = td.batch_size[: td.batch_dims - len(env.batch_size)]
    draws = [(key, leaf, list(leaf.rand(torch.Size((max_steps, *extra))))) for key, leaf in leaves]
    step = [0]

    def act(data: TensorDictBase) -> TensorDictBase:
        i = step[0]
        step[0] = i + 1
        for key, leaf, values in draws:
            if getattr(leaf, "mask", None) is None:
                fast_set(data, key, values[i])
            else:
                fast_set(data, key, leaf.rand(extra) if extra else leaf.rand())
        return data

    return act


def rollout(
    env,
    max_steps: int,
    policy: Callable[[TensorDictBase], TensorDictBase] | None = None,
    callback: Callable[..., Any] | None = None,
    *,
    actions: Iterable[Any] | None = None,
    auto_reset: bool = True,
    auto_cast_to_device: bool = False,
    break_when_any_done: bool | None = None,
    break_when_all_done: bool | None = None,
    return_contiguous: bool | None = None,
    tensordict: TensorDictBase | None = None,
    set_truncated: bool = False,
    out: TensorDictBase | None = None,
    trust_policy: bool = False,
    storing_device: torch.device | str | None = None,
) -> TensorDictBase:
    """See :meth:`torchrl.envs.EnvBase.rollout`."""
    if max_steps < 1:
        raise ValueRuntimeError(f"rollout: max_steps must be >= 1, got {max_steps}.")
    if policy is not None and actions is not None:
        raise ValueError("rollout: pass either a policy or actions, not both.")
    any_done, all_done = _resolve_breaks(break_when_any_done, break_when_all_done)
    if set_truncated:
        check_truncatable(env, "rollout")
    if policy is not None and not trust_policy:
        policy = wrap_function_for_rollout(policy, env)  # (a function of observations, as TorchRL)

    if auto_reset:
        td = env.reset(tensordict)
    else:
        if tensordict is None:
            raise ValueRuntimeError("rollout: auto_reset=False requires an initial `tensordict`.")
        td = env.maybe_reset(tensordict)

    columns = None
    plain = actions is None and callback is None and out is None and not auto_cast_to_device
    if plain and return_contiguous is not False:
        columns = env._column_loop(policy)
        if columns is not None and not columns.accepts(td):
            columns = None
    if columns is not None:
        # one gym env and a plain (or random) policy: no per-step TensorDicts (see libs/_gym_columns.py)
        stop = any_done or all_done
        try:
            result, _, _ = columns.run(
                td, max_steps, reset=None if stop else env.reset, stop_on_done=stop, truncate_last=set_truncated
            )
        except type(columns).NotApplicable:  # the policy's outputs are not plain tensors: generic loop
            result = None
        if result is not None:
            return name_time_dim(result.to(storing_device) if storing_device is not None else result)

    if actions is not None:
        act = _action_writer(env, actions)
    elif policy is None:
        act = _bulk_random_actions(env, td, max_steps) or env.rand_action
    elif auto_cast_to_device:
        policy_device = _policy_device(policy)
        env_device = env.device

        def act(data: TensorDictBase) -> TensorDictBase:
            moved = data.to(policy_device) if policy_device is not None else data
            result = _merge(moved, policy(moved))
            result = result.to(env_device) if env_device is not None else result
            return result if moved is data else data.update(result)

    else:
        act = direct_module_call(policy)
        if act is None:

            def act(data: TensorDictBase) -> TensorDictBase:
                return _merge(data, policy(data))

    stop = "any" if any_done else "all" if all_done else None
    sink = _StepChunks(td.batch_dims, _CHUNK if out is None and max_steps > _ONE_STACK else None)
    run_steps(
        env, td, act, max_steps, stop=stop, reset_when_done=stop != "any", truncate_last=set_truncated,
        callback=callback, steps=sink,
    )
    # (return_contiguous=False stacks densely too where it can, as TorchRL does)
    result = sink.stack(out)
    if storing_device is not None:
        result = result.to(storing_device)
    return name_time_dim(result)


# Steps per chunk of a rollout. Step TensorDicts kept alive until the end get promoted to the GC's oldest
# generation, which then triggers full collections over the whole heap: 23% of a 20,000-step PendulumEnv
# rollout went to the GC with one stack at the end, 15% with chunks of 1024 steps, 7.5% with 256, 2.1% with 128
# (no full collection). Stacking every _CHUNK steps bounds the live objects instead of switching the GC off
# process-wide. Up to _ONE_STACK steps the GC's share stays under 1% and the steps are stacked once (chunks
# would add ~4% of instructions to a 400-step rollout: benchmarks/icount.py env).
_CHUNK = 128
_ONE_STACK = 1024


class _StepChunks:
    """A rollout's steps, stacked every ``size`` steps (``None``: once, at the end) along ``dim``."""

    __slots__ = ("dim", "size", "steps", "chunks")

    def __init__(self, dim: int, size: int | None) -> None:
        self.dim, self.size = dim, size
        self.steps: list[TensorDictBase] = []
        self.chunks: list[tuple[TensorDictBase, list[TensorDictBase]]] = []

    def append(self, td: TensorDictBase) -> None:
        steps = self.steps
        steps.append(td)
        if len(steps) == self.size:
            self.chunks.append(stack_tds(steps, self.dim))
            self.steps = []

    def stack(self, out: TensorDictBase | None) -> TensorDictBase:
        """All steps stacked (into ``out`` when given), as one ``stack_tds`` of every step would."""
        if not self.chunks:
            return stack_tds(self.steps, self.dim, out=out)
        parts = [*self.chunks, stack_tds(self.steps, self.dim)] if self.steps else self.chunks
        if all(type(p) is TensorDict for p in parts):
            try:
                return torch.cat(parts, self.dim)
            except (KeyError, RuntimeError, ValueError, TypeError):  # the structure changed between chunks
                pass
        steps = [step for part in parts for step in part.unbind(self.dim)]
        return stack_tds(steps, self.dim)


def _merge(data: TensorDictBase, result: TensorDictBase | None) -> TensorDictBase:
    """What a policy call leaves for the step: its output merged into its input when it returned another
    TensorDict (as TorchRL does: the root observations and done flags stay)."""
    if result is None or result is data:
        return data
    return data.update(result)
