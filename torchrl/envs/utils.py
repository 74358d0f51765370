"""Environment utilities: ``step_mdp``, done aggregation, spec inference, random policy, MARL grouping."""
from __future__ import annotations

import enum
import importlib.util
from typing import Sequence

from tensordict import TensorDictBase, is_non_tensor, is_tensor_collection
from tensordict.utils import NestedKey

from torchrl._utils._exploration import ExplorationType, exploration_type, set_exploration_type
from torchrl.data.tensor_specs import Composite, NonTensor, TensorSpec, Unbounded
from torchrl.envs._check_env import check_env_specs
from torchrl.envs._done import DONE_NAMES, as_tuple, from_tuple
from torchrl.envs._step_mdp import merge_missing, prune_emptied, structure_copy

__all__ = [
    "ExplorationType",
    "MarlGroupMapType",
    "RandomPolicy",
    "check_env_specs",
    "check_marl_grouping",
    "exploration_type",
    "get_available_libraries",
    "make_composite_from_td",
    "set_exploration_type",
    "step_mdp",
    "terminated_or_truncated",
]


def _as_key_list(keys: NestedKey | Sequence[NestedKey] | None) -> list[NestedKey]:
    if keys is None:
        return []
    if isinstance(keys, (str, tuple)):
        return [keys]
    return list(keys)


def _with_done_siblings(keys: list[NestedKey]) -> list[NestedKey]:
    out = []
    for key in keys:
        prefix = as_tuple(key)[:-1]
        out.append(key)
        if as_tuple(key)[-1] == "done":
            out.extend(from_tuple(prefix + (name,)) for name in DONE_NAMES[1:])
    return out


class _NoNextError(KeyError, AttributeError):
    """No ``"next"`` entry: TorchRL raises AttributeError (it reads from ``None``), the natural type is KeyError."""


def step_mdp(
    tensordict: TensorDictBase,
    next_tensordict: TensorDictBase = None,
    keep_other: bool = True,
    exclude_reward: bool = True,
    exclude_done: bool = False,
    exclude_action: bool = True,
    reward_keys: NestedKey | list[NestedKey] = "reward",
    done_keys: NestedKey | list[NestedKey] = "done",
    action_keys: NestedKey | list[NestedKey] = "action",
) -> TensorDictBase:
    """Moves one step forward in time: the content of ``tensordict["next"]`` becomes the root.

    Entries of ``"next"`` replace the root's entries of the same name. Rewards are dropped
    (``exclude_reward``), the ``done_keys`` entries kept unless ``exclude_done`` (as TorchRL, only the keys
    named: ``terminated``/``truncated`` stay unless listed), actions dropped (``exclude_action``), and the
    root's other entries (policy outputs, recurrent states, ...) carried over when ``keep_other``.

    Args:
        tensordict: a TensorDict with a ``"next"`` entry, as returned by ``env.step``.
        next_tensordict: if given, the result is written into it (in place) and it is returned.

    Returns:
        A new TensorDict (shallow: tensors are shared, not copied).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.utils import step_mdp
        >>> td = TensorDict({"obs": torch.zeros(2), "action": torch.ones(1),
        ...     "next": {"obs": torch.ones(2), "reward": torch.ones(1), "done": torch.zeros(1, dtype=torch.bool)}}, [])
        >>> sorted(step_mdp(td).keys())
        ['done', 'obs']
    """
    nxt = tensordict.get("next", None)
    if nxt is None:
        raise _NoNextError(
            f"step_mdp: the tensordict has no 'next' entry (keys: {list(tensordict.keys())}); "
            f"call env.step(tensordict) first."
        )
    reward_list = _as_key_list(reward_keys)
    named_done = _as_key_list(done_keys)
    done_list = _with_done_siblings(named_done)
    action_list = _as_key_list(action_keys)
    dropped_from_next = set()
    if exclude_reward:
        dropped_from_next |= {as_tuple(k) for k in reward_list}
    if exclude_done:
        dropped_from_next |= {as_tuple(k) for k in named_done}
    out = structure_copy(nxt.exclude(*[from_tuple(k) for k in dropped_from_next]) if dropped_from_next else nxt)
    prune_emptied(out, dropped_from_next)
    if keep_other:
        root_exclude = set(dropped_from_next) | {as_tuple(k) for k in reward_list} | {as_tuple(k) for k in done_list}
        if exclude_action:
            root_exclude |= {as_tuple(k) for k in action_list}
        root_exclude |= {as_tuple(k)[:-1] + ("_reset",) for k in done_list}
        merge_missing(out, tensordict, root_exclude, ())
    elif not exclude_action:
        for key in action_list:
            value = tensordict.get(key, None)
            if value is not None:
                out.set(key, value)
    if next_tensordict is not None:
        next_tensordict.update(out)
        return next_tensordict
    return out


def terminated_or_truncated(
    data: TensorDictBase,
    full_done_spec: TensorSpec | None = None,
    key: str = "_reset",
    write_full_false: bool = False,
) -> bool:
    """Aggregates done/terminated/truncated per group into ``key`` (e.g. ``"_reset"``); returns any().

    Groups are the parents of the done leaves (given by ``full_done_spec``, or the default three names
    searched at every level of ``data``). As TorchRL, every group's aggregate is written at
    ``parent + (key,)`` once any group has a True entry (and always when ``write_full_false``); an existing
    entry at that place is left as is. With ``key=None`` nothing is written.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.utils import terminated_or_truncated
        >>> td = TensorDict({"done": torch.tensor([[True], [False]]), "terminated": torch.tensor([[True], [False]])}, [2])
        >>> terminated_or_truncated(td), td["_reset"].squeeze(-1).tolist()
        (True, [True, False])
    """
    if full_done_spec is not None:
        keys = list(full_done_spec.keys(include_nested=True, leaves_only=True))
    else:
        keys = [k for k in data.keys(include_nested=True, leaves_only=True) if as_tuple(k)[-1] in DONE_NAMES]
    groups: dict[tuple[str, ...], list[NestedKey]] = {}
    for k in keys:
        groups.setdefault(as_tuple(k)[:-1], []).append(k)
    found = False
    masks = []
    for prefix, members in groups.items():
        mask = None
        for member in members:
            value = data.get(member, None)
            if value is not None:
                mask = value if mask is None else mask | value
        if mask is None:
            continue
        found = found or bool(mask.any())
        masks.append((prefix, mask))
    if key is not None and (found or write_full_false):
        for prefix, mask in masks:
            out_key = from_tuple(prefix + (key,))
            if data.get(out_key, None) is None:
                data.set(out_key, mask)
    return found


def make_composite_from_td(data: TensorDictBase, *, unsqueeze_null_shapes: bool = True, dynamic_shape: bool = False) -> Composite:
    """Builds a ``Composite`` of ``Unbounded`` leaves matching ``data``'s structure, shapes and dtypes.

    Args:
        data: the TensorDict to describe.

    Keyword Args:
        unsqueeze_null_shapes: give 0-dim leaves (shape ``()``) the shape ``(1,)`` (as TorchRL: a leaf whose
            shape is a non-empty batch shape is kept as it is).
        dynamic_shape: make the last dim of the leaves dynamic (``-1``), as TorchRL (leaves without dims past
            the batch dims are kept as they are).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from torchrl.envs.utils import make_composite_from_td
        >>> spec = make_composite_from_td(TensorDict({"obs": torch.zeros(3, 4), "sub": {"x": torch.zeros(3)}}, [3]))
        >>> spec["obs"].shape, spec["sub", "x"].shape
        (torch.Size([3, 4]), torch.Size([3]))
    """
    entries = {}
    for key, value in data.items():
        if is_non_tensor(value):
            entries[key] = NonTensor(shape=value.shape, device=value.device, example_data=getattr(value, "data", None))
        elif is_tensor_collection(value):
            entries[key] = make_composite_from_td(value, unsqueeze_null_shapes=unsqueeze_null_shapes, dynamic_shape=dynamic_shape)
        else:
            shape = value.shape
            if unsqueeze_null_shapes and not len(shape):
                shape = (1,)
            elif dynamic_shape and len(shape) > data.batch_dims:
                shape = (*shape[:-1], -1)  # as TorchRL: the last dim is dynamic
            entries[key] = Unbounded(shape=shape, dtype=value.dtype, device=value.device)
    return Composite(entries, shape=data.batch_size, device=data.device)


class RandomPolicy:
    """A policy that writes a random action drawn from ``action_spec``.

    Args:
        action_spec: the spec to sample from (a leaf spec or a ``Composite`` of actions).
        action_key: where to write a leaf spec's sample.

    Examples:
        >>> from tensordict import TensorDict
        >>> from torchrl.data import Bounded
        >>> from torchrl.envs.utils import RandomPolicy
        >>> policy = RandomPolicy(Bounded(-1, 1, shape=(2,)))
        >>> policy(TensorDict()).get("action").shape
        torch.Size([2])
    """

    def __init__(self, action_spec: TensorSpec | None = None, action_key: NestedKey = "action") -> None:
        self.action_spec = action_spec
        self.action_key = action_key

    def set_action_spec_from_env(self, env) -> None:
        self.action_spec = env.full_action_spec

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        if self.action_spec is None:
            raise RuntimeError("RandomPolicy: no action_spec; pass one or call set_action_spec_from_env(env).")
        if isinstance(self.action_spec, Composite):
            return td.update(self.action_spec.rand())
        return td.set(self.action_key, self.action_spec.rand())


class MarlGroupMapType(enum.Enum):
    """How agents are grouped in multi-agent envs: all in one group, or one group per agent."""

    ALL_IN_ONE_GROUP = 1
    ONE_GROUP_PER_AGENT = 2

    def get_group_map(self, agent_names: list[str]) -> dict[str, list[str]]:
        if self is MarlGroupMapType.ALL_IN_ONE_GROUP:
            return {"agents": list(agent_names)}
        return {name: [name] for name in agent_names}


def check_marl_grouping(group_map: dict[str, list[str]], agent_names: list[str]) -> None:
    """Checks that ``group_map`` puts every agent in exactly one group and names no unknown agent.

    Raises:
        ValueError: naming the agents that are missing, duplicated or unknown.
    """
    seen: dict[str, str] = {}
    problems = []
    for group, members in group_map.items():
        if not members:
            problems.append(f"group {group!r} is empty")
        for agent in members:
            if agent in seen:
                problems.append(f"agent {agent!r} is in both {seen[agent]!r} and {group!r}")
            seen[agent] = group
    unknown = [a for a in seen if a not in agent_names]
    missing = [a for a in agent_names if a not in seen]
    if unknown:
        problems.append(f"unknown agents {unknown}")
    if missing:
        problems.append(f"agents {missing} are in no group")
    if problems:
        raise ValueError("check_marl_grouping: " + "; ".join(problems) + f" (agents: {list(agent_names)}).")


_LIBRARIES = ("gymnasium", "gym", "dm_control", "brax", "jumanji", "pettingzoo", "vmas", "envpool", "mujoco", "open_spiel")


def get_available_libraries() -> set[str]:
    """Names of the optional simulator libraries installed here (found without importing them)."""
    return {name for name in _LIBRARIES if importlib.util.find_spec(name) is not None}
