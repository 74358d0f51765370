"""How a collector calls its policy: normalisation of the ``policy`` argument into one step function.

``make_actor(policy, env, ...)`` returns ``(act, module)``: ``act(td) -> td`` writes the actions into
``td``; ``module`` is the ``nn.Module`` whose weights updates target (``None`` for random actions or plain
callables). Plain ``TensorDictModule`` policies get a direct call path (:mod:`torchrl._fast`) that skips the
generic dispatch; anything unusual takes the public call.
"""
from __future__ import annotations

import copy
import inspect
from typing import Any, Callable

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase
from torch import nn

from torchrl._fast import direct_module_call
from torchrl.envs._policy_args import function_arg_names, takes_tensordict

__all__ = ["make_actor", "wrap_policy", "module_device"]


def module_device(module: Any) -> torch.device | None:
    """The device of the first parameter (or buffer) of ``module`` (``None`` if it has none)."""
    if not isinstance(module, nn.Module):
        return None
    for p in module.parameters():
        return p.device
    for b in module.buffers():
        return b.device
    return None


def _takes_tensordict(module: nn.Module) -> bool:
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return False
    if not params:
        return False
    first = params[0]
    if first.name in ("tensordict", "td"):
        return True
    ann = first.annotation
    if isinstance(ann, str):
        return "TensorDict" in ann
    return isinstance(ann, type) and issubclass(ann, TensorDictBase)


def wrap_policy(policy: Any, env, *, trust_policy: bool) -> Any:
    """``policy`` as something callable on a TensorDict (non-TensorDict modules get wrapped).

    A module whose ``forward`` takes a TensorDict is used as is. Another module is wrapped in a
    :class:`~tensordict.nn.TensorDictModule` reading the observation entries named like its ``forward``
    arguments (for a one-argument module: the only observation entry, or ``"observation"``) and writing the
    env's action key(s).

    Raises:
        TypeError: a module whose inputs cannot be matched with the env's observations.
    """
    if policy is None or trust_policy or isinstance(policy, TensorDictModuleBase):
        return policy
    if not isinstance(policy, nn.Module):
        return _wrap_function(policy, env)
    if _takes_tensordict(policy):
        return policy
    obs_keys = list(env.observation_spec.keys(True, True))
    try:
        names = [p.name for p in inspect.signature(policy.forward).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        names = []
    in_keys = [n for n in names if n in obs_keys]
    if not in_keys:
        if len(obs_keys) == 1 and len(names) <= 1:
            in_keys = obs_keys
        elif len(names) <= 1 and "observation" in obs_keys:
            in_keys = ["observation"]
        else:
            raise TypeError(
                f"Collector: cannot tell which observations {type(policy).__name__}.forward{tuple(names)} reads; the env "
                f"has observations {obs_keys}. Wrap the policy in a TensorDictModule with explicit in_keys/out_keys."
            )
    return TensorDictModule(policy, in_keys=in_keys, out_keys=list(env.action_keys))


def _wrap_function(policy: Any, env) -> Any:
    """A plain function policy, as TorchRL's collectors take it: one ``tensordict``/``td`` argument gets the
    TensorDict; arguments named like all the observation entries get those tensors (the result is the action)."""
    names = function_arg_names(policy)
    if names is None or takes_tensordict(names):
        return policy
    obs_keys = list(env.full_observation_spec.keys(True, True))
    if names and sorted(names) == sorted(map(str, obs_keys)):  # (as TorchRL: every observation, by name)
        return TensorDictModule(policy, in_keys=names, out_keys=list(env.action_keys))
    raise TypeError(
        f"Failed to wrap the policy: a plain function policy takes one argument named 'tensordict' or 'td' (the "
        f"step's TensorDict) or one argument per observation entry, named like it ({obs_keys}); got arguments {names}. "
        f"Wrap it in a TensorDictModule, or pass trust_policy=True to call it with the TensorDict as it is."
    )


def make_actor(
    policy: Any,
    env,
    *,
    trust_policy: bool = False,
    policy_device: torch.device | None = None,
    env_device: torch.device | None = None,
) -> tuple[Callable[[TensorDictBase], TensorDictBase], nn.Module | None, Any]:
    """``(act, weights_module, policy)``: the per-step call, the module holding the weights, the policy.

    ``policy=None`` draws random actions from the env's action spec. When ``policy_device`` differs from
    the policy's device, a copy of the policy is moved there (its weights are then updated through
    ``update_policy_weights_``); inputs are moved to the policy device and outputs back to ``env_device``.
    """
    if policy is None:
        return env.rand_action, None, None
    policy = wrap_policy(policy, env, trust_policy=trust_policy)
    module = policy if isinstance(policy, nn.Module) else None
    current = module_device(module)
    if policy_device is not None and current is not None and current != policy_device:
        policy = copy.deepcopy(policy).to(policy_device)
        module = policy
    fast = direct_module_call(policy)
    base = fast if fast is not None else _generic_call(policy)
    cast_in = policy_device is not None and policy_device != env_device
    if not cast_in:
        return base, module, policy

    def act(td: TensorDictBase) -> TensorDictBase:
        out = base(td.to(policy_device))
        return out.to(env_device) if env_device is not None else out

    return act, module, policy


def _generic_call(policy: Any) -> Callable[[TensorDictBase], TensorDictBase]:
    def call(td: TensorDictBase) -> TensorDictBase:
        out = policy(td)
        if out is None or out is td:
            return td
        return td.update(out)  # a policy returning another TensorDict: its output joins the step (TorchRL)

    return call
