"""Steps of a ``TransformedEnv`` where only some rows run (the ``"_step"`` mask of ``ConditionalSkip``).

A skipped row's step output repeats its input: the observation and done entries of the step's input,
and zero rewards; the transforms' ``_step`` does not run on it (a skip affects the transforms of the env
holding the ``ConditionalSkip``, not those of envs wrapping it).
"""
from __future__ import annotations

import torch
from tensordict import TensorDictBase


def remember_output(env, out: TensorDictBase) -> None:
    """Keeps the observations and done flags ``env`` returned last: a skipped row repeats them when its step
    input does not carry them (a ``ParallelEnv`` worker receives only the env's inputs)."""
    keys = [*env.observation_keys, *env.done_keys]
    env.__dict__["_last_output"] = out.select(*keys, strict=False).clone()


def skip_output(env, tensordict: TensorDictBase, rows: torch.Tensor | None = None) -> TensorDictBase:
    """The step output of rows that do not step: their input's observations and dones (else the last ones the
    env returned), zero rewards. ``tensordict`` holds the skipped rows; ``rows`` selects them in the batch."""
    keys = [*env.observation_keys, *env.done_keys]
    out = tensordict.select(*keys, strict=False).clone()
    last = env.__dict__.get("_last_output")
    if last is not None:
        last = last if rows is None else last[rows]
        for key in keys:
            if key not in out.keys(include_nested=True) and key in last.keys(include_nested=True):
                out.set(key, last.get(key).clone())
    batch = tensordict.batch_size
    env_dims = len(env.batch_size)
    for key in env.reward_keys:
        leaf = env.full_reward_spec[key]
        out.set(key, torch.zeros((*batch, *leaf.shape[env_dims:]), dtype=leaf.dtype, device=tensordict.device))
    return out


def partial_step(env, transform, tensordict: TensorDictBase, td_in: TensorDictBase, partial: torch.Tensor):
    """``env._step`` when ``partial`` (True: step the row) is set on the inputs."""
    out = _partial_step(env, transform, tensordict, td_in, partial)
    remember_output(env, out)
    return out


def _partial_step(env, transform, tensordict, td_in, partial):
    batch = tensordict.batch_size
    partial = partial.reshape(batch) if partial.numel() == batch.numel() else partial.reshape(()).expand(batch)
    if partial.all():
        return transform._step(tensordict, env._base._step_output(td_in))
    if not partial.any():
        return skip_output(env, tensordict)
    base = env._base
    if base.batch_locked:
        # as TorchRL: a batch-locked env gets the mask and is trusted to step only those rows (SerialEnv and
        # ParallelEnv step only the selected sub-envs); the skipped rows of its output repeat their last
        # outputs, whatever the env returned there
        td_in.set("_step", partial)
        out = base._step_output(td_in)
        skipped = skip_output(env, tensordict[~partial], ~partial)
        out[~partial] = skipped.select(*out.keys(include_nested=True, leaves_only=True), strict=False)
        return transform._step(tensordict, out)
    stepped = transform._step(tensordict[partial], base._step_output(td_in[partial]))
    skipped = skip_output(env, tensordict[~partial], ~partial)
    n = len(batch)
    out = stepped.apply(lambda x: x.new_zeros((*batch, *x.shape[n:])), batch_size=batch)
    out[partial] = stepped
    out[~partial] = skipped.select(*stepped.keys(include_nested=True, leaves_only=True), strict=False)
    return out
