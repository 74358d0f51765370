"""What a policy needs from its environment: ``is_init`` flags and recurrent-state primers.

A recurrent policy only keeps its memory if the env (1) marks episode starts (:class:`InitTracker`) and
(2) declares the recurrent states (a :class:`TensorDictPrimer`), so that resets write zero states and
``step_mdp`` carries ``("next", state)`` to the next step. :func:`apply_policy_env_transforms` adds
whichever of these an env lacks; ``EnvBase(policy=...)`` calls it through the env hook registered below,
and collectors call it too. :func:`get_env_transforms_from_module` returns the transforms for manual use.
"""
from __future__ import annotations

import warnings

from torch import nn

from torchrl.data.tensor_specs import Composite
from torchrl.envs.common import register_env_hook
from torchrl.envs.transforms import Compose, InitTracker, TransformedEnv
from torchrl.envs.transforms._tensordict_primer import TensorDictPrimer
from torchrl.modules.tensordict_module._recurrent_base import RecurrentModuleBase
from torchrl.modules.tensordict_module.exploration import (
    OrnsteinUhlenbeckProcessModule,
    set_exploration_modules_spec_from_env,
)

__all__ = ["apply_policy_env_transforms", "get_env_transforms_from_module", "get_primers_from_module"]


def get_primers_from_module(module, warn: bool = True, strict: bool = True) -> TensorDictPrimer | None:
    """One :class:`TensorDictPrimer` with the primers of every submodule of ``module`` (``None`` if none).

    Args:
        module (nn.Module): a policy (or any module) possibly containing recurrent modules.
        warn (bool, optional): warn when no primer is found. Defaults to ``True``.
        strict (bool, optional): let errors of a submodule's ``make_tensordict_primer()`` propagate; with
            ``False`` they are collected into one warning and the other primers are still returned.

    Examples:
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> from torchrl.modules import GRUModule, MLP, get_primers_from_module
        >>> gru = GRUModule(input_size=10, hidden_size=10, in_key="input", out_key="features")
        >>> model = TensorDictSequential(gru, TensorDictModule(MLP(in_features=10, out_features=2),
        ...                              in_keys=["features"], out_keys=["output"]))
        >>> get_primers_from_module(model).primers["recurrent_state"].shape
        torch.Size([1, 10])
    """
    if not isinstance(module, nn.Module):
        return None
    merged = Composite()
    failures = []
    for sub in module.modules():
        make = getattr(sub, "make_tensordict_primer", None)
        if make is None:
            continue
        try:
            primer = make()
        except Exception as err:
            if strict:
                raise
            failures.append(f"{type(sub).__name__}: {err}")
            continue
        if primer is None:
            continue
        for key, spec in primer.primers.items(True, True):
            if key not in merged.keys(True, True):
                merged[key] = spec
    if failures:
        warnings.warn("get_primers_from_module: some primers could not be built: " + "; ".join(failures), UserWarning)
    if not len(list(merged.keys(True, True))):
        if warn:
            warnings.warn(f"get_primers_from_module: no primers found in {type(module).__name__}.", UserWarning)
        return None
    return TensorDictPrimer(merged, expand_specs=True)


def _init_keys(module) -> list[str]:
    keys = []
    for sub in module.modules():
        key = None
        if isinstance(sub, RecurrentModuleBase):
            key = sub._is_init_key
        elif isinstance(sub, OrnsteinUhlenbeckProcessModule):
            key = sub.is_init_key
        if key is not None:
            key = key if isinstance(key, str) else key[-1]
            if key not in keys:
                keys.append(key)
    return keys


def get_env_transforms_from_module(module, init_key: str = "is_init"):
    """The env transforms a (recurrent) module needs: ``Compose(InitTracker, TensorDictPrimer)``.

    Args:
        module (nn.Module): the policy.
        init_key (str, optional): the episode-start key the module reads. Defaults to ``"is_init"``.

    Returns:
        ``Compose(InitTracker(init_key), primer)`` when the module has recurrent submodules, else a bare
        ``InitTracker(init_key)``.

    Examples:
        >>> from torchrl.envs import PendulumEnv, TransformedEnv
        >>> from torchrl.modules import LSTMModule, get_env_transforms_from_module
        >>> lstm = LSTMModule(input_size=3, hidden_size=8, in_key="observation", out_key="features")
        >>> env = TransformedEnv(PendulumEnv(), get_env_transforms_from_module(lstm))
        >>> sorted(k for k in env.reset().keys() if k in ("is_init", "recurrent_state_c", "recurrent_state_h"))
        ['is_init', 'recurrent_state_c', 'recurrent_state_h']
    """
    primer = get_primers_from_module(module, warn=False)
    tracker = InitTracker(init_key)
    if primer is None:
        return tracker
    return Compose(tracker, primer)


def apply_policy_env_transforms(env, policy):
    """``env`` with the transforms ``policy`` needs and lacks (``InitTracker``, recurrent-state primers).

    Nothing is added for a policy without recurrent or ``is_init``-reading modules (``env`` is returned as
    is). Exploration modules without a spec get the env's action spec.

    Examples:
        >>> from torchrl.envs import PendulumEnv
        >>> from torchrl.modules import GRUModule
        >>> gru = GRUModule(input_size=3, hidden_size=4, in_key="observation", out_key="features")
        >>> env = PendulumEnv(policy=gru)  # calls apply_policy_env_transforms(PendulumEnv(), gru)
        >>> "recurrent_state" in env.observation_spec.keys() and "is_init" in env.observation_spec.keys()
        True
    """
    if not isinstance(policy, nn.Module):
        return env
    set_exploration_modules_spec_from_env(policy, env)
    init_keys = _init_keys(policy)
    primer = get_primers_from_module(policy, warn=False)
    if not init_keys and primer is None:
        return env
    present = set(env.observation_spec.keys(True, True)) | set(env.state_spec.keys(True, True))
    transforms = [InitTracker(key) for key in init_keys if key not in present]
    if primer is not None:
        missing = {key: spec for key, spec in primer.primers.items(True, True) if key not in present}
        if missing:
            transforms.append(TensorDictPrimer(missing, expand_specs=True))
    if not transforms:
        return env
    transform = transforms[0] if len(transforms) == 1 else Compose(*transforms)
    if isinstance(env, TransformedEnv):
        return env.append_transform(transform)
    return TransformedEnv(env, transform)


register_env_hook("policy", lambda env, policy: apply_policy_env_transforms(env, policy))
