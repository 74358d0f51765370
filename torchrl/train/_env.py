"""``make_env``: the environment every recipe starts from (native env or gymnasium id, time limit,
float32 observations, episode returns)."""
from __future__ import annotations

import warnings
from collections.abc import Sequence
from functools import partial

import torch

from torchrl.envs.batched_envs import SerialEnv
from torchrl.envs.common import EnvBase
from torchrl.envs.custom.pendulum import PendulumEnv
from torchrl.envs.libs.gym import GymEnv
from torchrl.envs.transforms import (
    Compose,
    DoubleToFloat,
    RewardSum,
    StepCounter,
    Transform,
    TransformedEnv,
    VecNorm,
)

__all__ = ["NATIVE_ENVS", "make_batched_env", "make_env", "normalize_observations"]

#: Envs built without a simulator, by name (everything else is a gymnasium id).
NATIVE_ENVS: dict[str, type[EnvBase]] = {"PendulumEnv": PendulumEnv}


def make_env(name: str, *, seed: int | None = None, max_episode_steps: int | None = None, batch_size: int | None = None,
             device=None, transforms: Sequence[Transform] = ()) -> TransformedEnv:
    """Builds ``name`` (a key of :data:`NATIVE_ENVS`, or a gymnasium id) with the transforms recipes need.

    The env is wrapped in a :class:`~torchrl.envs.TransformedEnv` with, in order: a
    :class:`~torchrl.envs.StepCounter` (when ``max_episode_steps`` is given: the time limit; native envs
    need one, gymnasium envs have their own), a :class:`~torchrl.envs.DoubleToFloat` when the env emits
    float64 observations (MuJoCo), the extra ``transforms``, and a :class:`~torchrl.envs.RewardSum`
    writing ``"episode_reward"`` (read by :meth:`torchrl.train.Run.step`).

    Args:
        name: ``"PendulumEnv"`` or a gymnasium id such as ``"Pendulum-v1"``, ``"HalfCheetah-v5"``.

    Keyword Args:
        seed: seeds the env.
        max_episode_steps: time limit (truncation) in steps.
        batch_size: number of sub-envs (a batched native env, or a gymnasium vector env); ``None``: one env.
        device: the env's device.
        transforms: more transforms, applied after the dtype cast and before the return sum.

    Raises:
        ValueError: ``max_episode_steps`` missing for a native env (it would never end).

    Examples:
        >>> env = make_env("PendulumEnv", seed=0, max_episode_steps=200, batch_size=4)
        >>> td = env.rollout(200)
        >>> td.shape, bool(td["next", "done"][:, -1].all())
        (torch.Size([4, 200]), True)
    """
    native = NATIVE_ENVS.get(name)
    if native is not None:
        if not max_episode_steps:
            raise ValueError(f"make_env: {name} never ends by itself; pass max_episode_steps (e.g. 200).")
        base = native(batch_size=[batch_size] if batch_size else None, seed=seed, device=device)
    else:
        kwargs = {"num_envs": batch_size} if batch_size else {}
        base = GymEnv(name, device=device, **kwargs)
        if seed is not None:
            base.set_seed(seed)
    steps = [StepCounter(max_steps=int(max_episode_steps))] if max_episode_steps else []
    if any(spec.dtype == torch.float64 for spec in base.observation_spec.values(True, True)):
        steps.append(DoubleToFloat())
    return TransformedEnv(base, Compose(*steps, *transforms, RewardSum()))


def make_batched_env(name: str, num_envs: int, *, seed: int | None = None, max_episode_steps: int | None = None,
                     device=None) -> EnvBase:
    """``num_envs`` copies of :func:`make_env`'s env stepped together.

    A native env is batched natively (``batch_size=[num_envs]``); a gymnasium env becomes a
    :class:`~torchrl.envs.SerialEnv` of ``num_envs`` wrapped envs (a single env when ``num_envs`` is 1).

    Examples:
        >>> env = make_batched_env("PendulumEnv", 4, seed=0, max_episode_steps=200)
        >>> env.rollout(3).shape
        torch.Size([4, 3])
    """
    if name in NATIVE_ENVS:
        return make_env(name, seed=seed, max_episode_steps=max_episode_steps, batch_size=num_envs, device=device)
    build = partial(make_env, name, max_episode_steps=max_episode_steps, device=device)
    if num_envs == 1:
        return build(seed=seed)
    env = SerialEnv(num_envs, build, device=device)
    if seed is not None:
        env.set_seed(seed)
    return env


def normalize_observations(train_env: EnvBase, eval_env: EnvBase) -> tuple[TransformedEnv, TransformedEnv]:
    """Appends a :class:`~torchrl.envs.VecNorm` of ``"observation"`` to ``train_env`` and a frozen copy of it
    (same running statistics, never updated) to ``eval_env``; returns both envs.

    Examples:
        >>> train, test = normalize_observations(make_env("PendulumEnv", max_episode_steps=10),
        ...                                      make_env("PendulumEnv", max_episode_steps=10))
        >>> _ = train.rollout(10)
        >>> bool((test.transform[-1].loc == train.transform[-1].loc).all())
        True
    """
    with warnings.catch_warnings():  # (the recipes keep the legacy statistics on purpose)
        warnings.simplefilter("ignore", FutureWarning)
        vecnorm = VecNorm(in_keys=["observation"], decay=0.99999, new_api=False)
    train_env = _append(train_env, vecnorm)
    train_env.observation_spec  # noqa: B018 - building the specs creates the statistics the copy shares
    return train_env, _append(eval_env, vecnorm.frozen_copy())


def _append(env: EnvBase, transform: Transform) -> TransformedEnv:
    if isinstance(env, TransformedEnv):
        env.append_transform(transform)
        return env
    return TransformedEnv(env, transform)
