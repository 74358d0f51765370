"""``check_env_specs``: run a short rollout and compare every entry against the env's specs."""
from __future__ import annotations

from typing import Literal

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase
from tensordict.utils import NestedKey

from torchrl._utils._check_mode import set_check_mode

__all__ = ["check_env_specs"]

_IGNORED_ROOTS = ("collector",)


class _ShapeMismatch(AssertionError, RuntimeError):
    """Data whose shape is not the spec's: TorchRL raises RuntimeError (stacking the rollout fails)."""


def _leaves(td: TensorDictBase) -> dict[NestedKey, torch.Tensor]:
    return {
        k: v
        for k, v in td.items(include_nested=True, leaves_only=True)
        if (k if isinstance(k, str) else k[0]) not in _IGNORED_ROOTS
    }


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"shape={tuple(value.shape)}, dtype={value.dtype}"
    return type(value).__name__


def _dynamic_dims(env) -> dict[NestedKey, frozenset[int]]:
    """``{data key: dims counted from the end}`` where a spec has a dynamic (``-1``) size."""
    out: dict[NestedKey, frozenset[int]] = {}
    parts = [((), env.full_observation_spec), ((), env.full_state_spec), ((), env.full_action_spec),
             ((), env.full_done_spec), (("next",), env.full_observation_spec), (("next",), env.full_reward_spec),
             (("next",), env.full_done_spec)]
    for prefix, spec in parts:
        for key, leaf in spec.items(include_nested=True, leaves_only=True):
            shape = getattr(leaf, "shape", ())
            dyn = frozenset(i - len(shape) for i, d in enumerate(shape) if d < 0)
            if dyn:
                full = prefix + ((key,) if isinstance(key, str) else tuple(key))
                out[full if len(full) > 1 else full[0]] = dyn
    return out


def _same_shape(got: torch.Size, want: torch.Size, dynamic: frozenset[int]) -> bool:
    if got == want:
        return True
    if not dynamic or len(got) != len(want):
        return False
    n = len(got)
    return all(g == w or (i - n) in dynamic for i, (g, w) in enumerate(zip(got, want)))


def _compare(name: str, where: str, data: TensorDictBase, expected: TensorDictBase, check_dtype: bool, *,
             check_missing: bool = True, dynamic: dict | None = None, allowed: frozenset = frozenset()) -> None:
    """Raises AssertionError at the first key/shape/dtype difference between ``data`` and ``expected`` (dims
    listed in ``dynamic`` for a key may differ; extra keys in ``allowed`` are accepted)."""
    real_leaves, fake_leaves = _leaves(data), _leaves(expected)
    missing = [k for k in fake_leaves if k not in real_leaves] if check_missing else []
    extra = [k for k in real_leaves if k not in fake_leaves and k not in allowed]
    if missing or extra:
        parts = []
        if extra:
            parts.append(f"the env returned {extra} which its specs do not declare")
        if missing:
            parts.append(f"its specs declare {missing} which the env did not return")
        raise AssertionError(f"check_env_specs({name}): " + "; ".join(parts) + f" ({where}).")
    for key, spec_value in fake_leaves.items():
        got = real_leaves.get(key)
        if not isinstance(spec_value, torch.Tensor) or not isinstance(got, torch.Tensor):
            continue
        if not _same_shape(got.shape, spec_value.shape, (dynamic or {}).get(key, frozenset())):
            raise _ShapeMismatch(
                f"check_env_specs({name}): key {key!r}: spec shape {tuple(spec_value.shape)}, data shape "
                f"{tuple(got.shape)} ({where})."
            )
        if check_dtype and got.dtype != spec_value.dtype:
            raise AssertionError(
                f"check_env_specs({name}): key {key!r}: spec dtype {spec_value.dtype}, data dtype {got.dtype} ({where})."
            )


def _check_once(env, *, return_contiguous, check_dtype: bool, tensordict, break_when_any_done: bool) -> None:
    name = type(env).__name__
    fake = env.fake_tensordict()
    dynamic = _dynamic_dims(env)
    # as TorchRL: a step may also write the env's state entries under "next"
    allowed = frozenset(("next", k) if isinstance(k, str) else ("next", *k) for k in env.state_keys)
    # Step by hand first, so that a bad entry is reported by key before any stacking can fail on it.
    td = env.reset(tensordict) if tensordict is None else tensordict
    if tensordict is None:
        _compare(name, "after reset", td, fake.exclude("next", *env.action_keys), check_dtype, check_missing=False,
                 dynamic=dynamic)
    for step in range(3):
        td = env.rand_step(td)
        _compare(name, f"step {step}", td, fake, check_dtype, dynamic=dynamic, allowed=allowed)
        td = env.step_mdp(td)
        if env.any_done(td):
            td = env.reset(td)
    real = env.rollout(
        3,
        return_contiguous=return_contiguous,
        tensordict=tensordict,
        auto_reset=tensordict is None,
        break_when_any_done=break_when_any_done,
    )
    if isinstance(real, LazyStackedTensorDict):  # steps of different shapes (dynamic specs): one by one
        for t, step in enumerate(real.unbind(real.batch_dims - 1)):
            _compare(name, f"rollout step {t}", step, fake, check_dtype, dynamic=dynamic, allowed=allowed)
            _check_values(env, step.unsqueeze(step.batch_dims), name, check_dtype)
        return
    fake = fake.unsqueeze(real.batch_dims - 1).expand(*real.shape)
    _compare(name, "rollout", real, fake, check_dtype, dynamic=dynamic, allowed=allowed)
    _check_values(env, real, name, check_dtype)


def _check_values(env, real: TensorDictBase, name: str, check_dtype: bool) -> None:
    batch_dims = real.batch_dims
    checks = [
        (env.full_observation_spec, ()),
        (env.full_observation_spec, ("next",)),
        (env.full_reward_spec, ("next",)),
        (env.full_done_spec, ("next",)),
        (env.full_done_spec, ()),
        (env.full_action_spec, ()),
    ]
    for spec, prefix in checks:
        for key, leaf in spec.items(include_nested=True, leaves_only=True):
            if getattr(leaf, "mask", None) is not None:
                # masks change from step to step: past values are checked against the unmasked space
                leaf = leaf.clone()
                leaf.update_mask(None)
            full_key = prefix + ((key,) if isinstance(key, str) else tuple(key))
            value = real.get(full_key if len(full_key) > 1 else full_key[0], None)
            if value is None or not isinstance(value, torch.Tensor):
                continue
            # Move the time dim last among batch dims is unnecessary: check each step separately.
            for t in range(value.shape[batch_dims - 1]):
                step_value = value.select(batch_dims - 1, t)
                if not check_dtype and step_value.dtype != leaf.dtype:
                    step_value = step_value.to(leaf.dtype)
                if not leaf.is_in(step_value):
                    raise AssertionError(
                        f"check_env_specs({name}): key {full_key if len(full_key) > 1 else full_key[0]!r} at step {t} "
                        f"is outside its spec {type(leaf).__name__}(shape={tuple(leaf.shape)}, dtype={leaf.dtype}): "
                        f"got {_describe(step_value)}, min={_min(step_value)}, max={_max(step_value)}."
                    )


def _min(x: torch.Tensor):
    return x.min().item() if x.numel() else None


def _max(x: torch.Tensor):
    return x.max().item() if x.numel() else None


def check_env_specs(
    env,
    return_contiguous: bool | None = None,
    check_dtype=True,
    seed: int | None = None,
    tensordict: TensorDictBase | None = None,
    break_when_any_done: bool | Literal["both"] | None = None,
) -> None:
    """Checks an environment against its specs with a 3-step rollout.

    Every entry the env produces must be declared in its specs (and every declared entry produced), with
    the declared shape and dtype, and with values inside the declared space. The first discrepancy raises,
    naming the key, the spec and the data. The rollout runs in check mode (:func:`torchrl.set_check_mode`):
    every action is checked against the action spec as the env steps.

    Args:
        env: the environment to check.
        return_contiguous: forwarded to ``rollout``.
        check_dtype: also compare dtypes.
        seed: seed the env first (the global torch seed is restored afterwards).
        tensordict: initial TensorDict (then the rollout starts without a reset).
        break_when_any_done: forwarded to ``rollout``; ``"both"`` runs the check in both modes.

    Raises:
        AssertionError: naming the first offending key, what the spec says and what the data is.

    Examples:
        >>> from torchrl.envs import PendulumEnv, check_env_specs
        >>> check_env_specs(PendulumEnv())
    """
    state = None
    if seed is not None:
        state = torch.get_rng_state()
        env.set_seed(seed)
    try:
        modes = [True, False] if break_when_any_done == "both" else [break_when_any_done]
        for mode in modes:
            with set_check_mode(True):  # every step's actions are checked against the action spec
                _check_once(
                    env,
                    return_contiguous=return_contiguous,
                    check_dtype=check_dtype,
                    tensordict=tensordict,
                    break_when_any_done=mode,
                )
    finally:
        if state is not None:
            torch.set_rng_state(state)
