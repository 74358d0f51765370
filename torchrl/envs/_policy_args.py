"""Plain-function policies, as TorchRL reads them: a function of one ``tensordict``/``td`` argument gets the
TensorDict; any other function gets observation tensors and returns the action.

``EnvBase.rollout`` passes every observation entry positionally (in the spec's order) to such a function;
collectors match the function's argument names with observation keys (TorchRL refuses the other functions).
"""
from __future__ import annotations

import inspect
from typing import Any

from tensordict.nn import TensorDictModule
from torch import nn

__all__ = ["function_arg_names", "takes_tensordict", "wrap_function_for_rollout"]

_TD_NAMES = ("tensordict", "td")


def function_arg_names(policy: Any) -> list[str] | None:
    """The parameter names of a plain callable (not an ``nn.Module``); ``None`` when it has no signature."""
    if policy is None or isinstance(policy, nn.Module) or not callable(policy):
        return None
    try:
        return list(inspect.signature(policy).parameters)
    except (TypeError, ValueError):  # builtins without a signature: called with the TensorDict
        return None


def takes_tensordict(names: list[str]) -> bool:
    """Whether a callable with parameters ``names`` is called with the TensorDict."""
    return names in ([name] for name in _TD_NAMES)


def wrap_function_for_rollout(policy: Any, env) -> Any:
    """``policy``, or a :class:`~tensordict.nn.TensorDictModule` calling it on the observations (positionally, in
    the spec's order) and writing the env's action keys, when it is a plain function that does not take a
    TensorDict."""
    names = function_arg_names(policy)
    if names is None or takes_tensordict(names):
        return policy
    in_keys = list(env.full_observation_spec.keys(True, True))
    return TensorDictModule(policy, in_keys=in_keys, out_keys=list(env.action_keys))
