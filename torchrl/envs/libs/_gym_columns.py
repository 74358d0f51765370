"""Column-wise stepping of a single gym env: the hot loop of rollouts and collectors without per-step TensorDicts.

A generic step builds a ``"next"`` TensorDict from the gym outputs, writes it into the step's TensorDict,
and ``step_mdp`` builds the next root TensorDict; the trajectory is stacked at the end. For one
(non-vectorized) gym env driven by random actions or by a plain ``TensorDictModule`` (see
:func:`torchrl._fast.plain_parts`), all of that can be replaced by appending the step's values to
Python lists and building each stacked entry once: the loop then costs little more than the raw
``env.step`` + network loop. :class:`GymColumns` is that loop (a
:class:`~torchrl.envs._step_loop.ColumnStepper`), and :func:`row_stepper` its one-step counterpart for batched-env
workers (a :class:`~torchrl.envs._step_loop.RowStepper`). It produces exactly the TensorDict the generic path
produces (same keys, shapes, dtypes and values; ``test/envs/libs/test_gym_columns.py`` compares both on the same
seeds) and is only used when every condition for that holds (and the fast paths are on):

- the env is a :class:`~torchrl.envs.GymWrapper`/``GymEnv`` itself (no transform, no subclass hook), not
  vectorized, on CPU, without info readers, pixels, frame skip or type checks, and has been validated
  (its first reset and step were checked against the specs);
- the policy is ``None`` (random actions from an unmasked spec) or a plain ``TensorDictModule`` whose
  in_keys are observation entries and whose out_keys include the action, without hooks;
- the root TensorDict holds nothing but observations, done flags and the policy's outputs.

Everything else takes the generic step loop.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import skip_existing

from torchrl._fast import _switch, entries, fast_get, hooked, new_td, plain_parts, shallow_dict

__all__ = ["ColumnsNotApplicable", "GymColumns", "plain_gym_keys", "row_stepper"]

_FLAGS = ("done", "terminated", "truncated")


def plain_gym_keys(env) -> tuple[str, list[str]] | None:
    """``(action key, observation keys)`` of a single, validated gym env whose step is exactly "action to
    gym, gym outputs to observation/reward/done/terminated/truncated entries" (``GymWrapper``'s own step,
    see its ``_plain_step``); ``None`` otherwise, and with the fast paths off."""
    if not _switch.ON or not env._plain_step or env._vec is not None or env._info_dict_reader:
        return None
    if env.run_type_checks or not env.validated or env._from_pixels or env.is_closed:
        return None
    plan = env._get_plan()
    if plan.move_to is not None or plan.reward_key != "reward" or len(env.batch_size):
        return None
    if sorted(env.full_done_spec.keys()) != sorted(_FLAGS):
        return None
    action_keys = env.action_keys
    if len(action_keys) != 1 or not isinstance(action_keys[0], str):
        return None
    obs_spec = env.full_observation_spec
    obs_keys = list(obs_spec.keys())
    if any(isinstance(k, tuple) for k in obs_spec.keys(True, True)) or set(obs_keys) & {*_FLAGS, "reward", "next"}:
        return None
    return action_keys[0], obs_keys


def row_stepper(env, in_keys: list, in_views: list, out_keys: list, out_views: list) -> Callable[[], list] | None:
    """A step of ``env`` that reads its action from, and writes its outputs into, preallocated tensors.

    ``in_views``/``out_views`` are a batched env worker's rows of the shared step buffers, in the order of
    ``in_keys``/``out_keys``. The returned ``step()`` does what ``write(out, env._step_output(td(in)))``
    does, without the per-step TensorDict and tensor conversions: rewards and flags go straight into the
    numpy views of the shared rows. ``None`` when ``env`` is not a plain gym env (see
    :func:`plain_gym_keys`) or the rows hold other entries.
    """
    keys = plain_gym_keys(env)
    if keys is None:
        return None
    action_key, obs_keys = keys
    if action_key not in in_keys or sorted(out_keys, key=str) != sorted([*obs_keys, "reward", *_FLAGS], key=str):
        return None
    out = dict(zip(out_keys, out_views))
    if any(out[k].dtype != torch.bool for k in _FLAGS) or out["reward"].dtype != torch.float32:
        return None
    if any(out[k].device.type != "cpu" for k in out) or in_views[in_keys.index(action_key)].device.type != "cpu":
        return None
    gym_step, write_action, read_obs = env._env.step, env._write_action, env._read_obs
    action = in_views[in_keys.index(action_key)]
    obs_views = [(k, out[k]) for k in obs_keys]
    reward, done, terminated, truncated = (out[k].numpy() for k in ("reward", *_FLAGS))

    def step() -> list:
        obs, r, term, trunc, _ = gym_step(write_action(action))
        values = read_obs(obs)
        for k, view in obs_views:
            view.copy_(values[k])
        reward[...] = r
        terminated[...] = term
        truncated[...] = trunc
        done[...] = term or trunc
        return []

    return step


class ColumnsNotApplicable(Exception):
    """Raised by :meth:`GymColumns.run` before any step when the policy's outputs are not plain tensors."""


class GymColumns:
    """The column-wise step loop of one gym env with one policy (see the module docstring).

    Build it with :meth:`plan`, which returns ``None`` when the generic loop must be used.
    """

    __slots__ = ("env", "policy", "inner", "in_keys", "out_keys", "action_index", "action_key", "action_shape",
                 "obs_keys", "device")
    NotApplicable = ColumnsNotApplicable  # callers catch it without importing this module

    def __init__(self, env, policy, inner, in_keys, out_keys, action_key, obs_keys) -> None:
        self.env = env
        self.policy = policy
        self.inner = inner
        self.in_keys = in_keys
        self.out_keys = out_keys
        self.action_key = action_key
        self.action_index = out_keys.index(action_key)
        self.action_shape = env.full_action_spec[action_key].shape
        self.obs_keys = obs_keys
        self.device = env.device

    @classmethod
    def plan(cls, env, policy: Any) -> "GymColumns | None":
        """The loop for ``env`` driven by ``policy`` (``None``: random actions), or ``None`` if not applicable."""
        keys = plain_gym_keys(env)
        if keys is None:
            return None
        action_key, obs_keys = keys
        if policy is None:
            if not getattr(type(env).rand_action, "bulk_safe", False):
                return None
            leaf = env.full_action_spec[action_key]
            if getattr(leaf, "mask", None) is not None or -1 in leaf.shape:
                return None
            return cls(env, None, None, [], [action_key], action_key, obs_keys)
        parts = plain_parts(policy)
        if parts is None:
            return None
        inner, in_keys, out_keys = parts
        if not all(isinstance(k, str) and k in obs_keys for k in in_keys):
            return None
        if action_key not in out_keys or not all(isinstance(k, str) for k in out_keys):
            return None
        if set(out_keys) & {*obs_keys, *_FLAGS, "reward", "next", "collector"}:
            return None
        return cls(env, policy, inner, in_keys, out_keys, action_key, obs_keys)

    def accepts(self, td: TensorDictBase) -> bool:
        """Whether ``td`` (the root TensorDict the next step starts from) holds only what this loop carries."""
        if type(td) is not TensorDict or td.batch_size != self.env.batch_size:
            return False
        keys = entries(td)  # None with the fast paths off: the generic loop
        if keys is None:
            return False
        allowed = {*self.obs_keys, *_FLAGS, *self.out_keys}
        if not all(k in keys for k in self.obs_keys) or not all(k in keys for k in _FLAGS):
            return False
        if not all(k in allowed and type(v) is torch.Tensor for k, v in keys.items()):
            return False
        return not (self.policy is not None and (skip_existing() or hooked(self.policy)))

    # -- the loop --------------------------------------------------------------------------------------------
    def run(
        self,
        td: TensorDictBase,
        steps: int,
        *,
        reset: Callable[[], TensorDictBase] | None,
        stop_on_done: bool = False,
        truncate_last: bool = False,
        reset_cut: bool = False,
    ) -> tuple[TensorDict, TensorDict, list[int]]:
        """Steps the env ``steps`` times from ``td``.

        Args:
            td: the root TensorDict to start from (:meth:`accepts` must hold).
            steps: number of steps.
            reset: called at each episode end to get the next root TensorDict (``None``: never reset).
            stop_on_done: stop after the first step that ends an episode.
            truncate_last: mark the last step truncated (and done) when it does not end its episode, as
                ``set_truncated`` does.
            reset_cut: with ``truncate_last``, reset after the cut step like after any episode end (what a
                collector does; a rollout leaves the env where it stopped).

        Returns:
            ``(batch, root, ends)``: the stacked steps (batch size ``(n,)``), the root TensorDict the next
            step would start from, and the indices of the steps after which the env was reset.
        """
        env = self.env
        gym_step = env._env.step
        write_action = env._write_action
        read_obs = env._read_obs
        obs_keys, in_keys, inner = self.obs_keys, self.in_keys, self.inner
        action_index, action_shape = self.action_index, self.action_shape
        random_actions = None
        if inner is None:
            leaf = env.full_action_spec[self.action_key]
            random_actions = list(leaf.rand(torch.Size((steps,))).unbind(0))
        obs = {k: fast_get(td, k) for k in obs_keys}
        first_flags = {k: fast_get(td, k) for k in _FLAGS}
        root_obs: list[dict] = []
        next_obs: list[dict] = []
        outputs: list[tuple] = []
        rewards: list = []
        terms: list = []
        truncs: list = []
        ends: list[int] = []
        last = steps - 1 if truncate_last else -1
        cut = last if reset_cut else -1
        fresh = None  # the reset that followed the latest step, if any
        for t in range(steps):
            fresh = None
            if inner is None:
                out = (random_actions[t],)
            else:
                out = inner(*[obs[k] for k in in_keys])
                if type(out) is not tuple:
                    out = (out,)
                self._check_outputs(out, t)
            action = out[action_index]
            if action.shape != action_shape:
                self._bad_action(obs, out)
            nobs, reward, terminated, truncated, _ = gym_step(write_action(action))
            nobs = read_obs(nobs)
            root_obs.append(obs)
            next_obs.append(nobs)
            outputs.append(out)
            rewards.append(reward)
            terms.append(terminated)
            truncs.append(truncated)
            if terminated or truncated or t == cut:
                ends.append(t)
                if stop_on_done and (terminated or truncated):
                    break
                if reset is not None:
                    fresh = reset()
                    obs = {k: fast_get(fresh, k) for k in obs_keys}
                    continue
            obs = nobs
        n = len(rewards)
        batch = self._assemble(n, root_obs, next_obs, outputs, rewards, terms, truncs, first_flags, last)
        root = self._root(obs, outputs[-1] if outputs else (), fresh)
        return batch, root, ends

    def _check_outputs(self, out: tuple, t: int) -> None:
        n_out = len(self.out_keys)
        if len(out) != n_out:
            raise RuntimeError(
                f"{type(self.inner).__name__} returned {len(out)} output(s) for the {n_out} out_keys "
                f"{self.out_keys} of its TensorDictModule; make them match."
            )
        if not all(type(o) is torch.Tensor for o in out):
            if t == 0:  # nothing was stepped yet: the caller runs the generic loop instead
                raise ColumnsNotApplicable
            raise RuntimeError(
                f"{type(self.inner).__name__} returned tensors at the first step and "
                f"{[type(o).__name__ for o in out]} at step {t}; a policy's outputs must keep their types."
            )

    def _step_td(self, obs: dict, out: tuple) -> TensorDict:
        source = dict(obs)
        source.update(zip(self.out_keys, out))
        return TensorDict(source, self.env.batch_size, device=self.device)

    def _bad_action(self, obs: dict, out: tuple) -> None:
        self.env._check_actions(self._step_td(obs, out))  # raises the env's own error, naming the key
        raise ValueError(
            f"{type(self.env).__name__}.step: {self.action_key!r} has shape {tuple(out[self.action_index].shape)}; "
            f"the action spec expects {tuple(self.action_shape)}."
        )

    def _assemble(
        self, n, root_obs, next_obs, outputs, rewards, terms, truncs, first_flags, last
    ) -> TensorDict:
        device = self.device
        batch = torch.Size((n,))
        term = np.array(terms, dtype=np.bool_).reshape(n, 1)
        trunc = np.array(truncs, dtype=np.bool_).reshape(n, 1)
        if last == n - 1:  # set_truncated: the cut step is truncated (and done) unless it already ended
            trunc[-1] |= ~term[-1]
        nxt = {k: torch.stack([o[k] for o in next_obs]) for k in self.obs_keys}
        nxt["reward"] = torch.from_numpy(np.array(rewards, dtype=np.float32).reshape(n, 1))
        terminated = torch.from_numpy(term)
        truncated = torch.from_numpy(trunc)
        nxt["done"] = terminated | truncated
        nxt["terminated"] = terminated
        nxt["truncated"] = truncated
        source = {k: torch.stack([o[k] for o in root_obs]) for k in self.obs_keys}
        for i, k in enumerate(self.out_keys):
            source[k] = torch.stack([o[i] for o in outputs])
        for k in _FLAGS:  # the root flags: the start's, then False (an episode end is always reset)
            flags = torch.zeros((n, *first_flags[k].shape), dtype=torch.bool)
            flags[0] = first_flags[k]
            source[k] = flags
        source["next"] = new_td(nxt, batch, device)
        return new_td(source, batch, device)

    def _root(self, obs: dict, out: tuple, fresh: TensorDictBase | None) -> TensorDict:
        """The root TensorDict after the last step: as ``step_mdp`` (or the reset that followed) leaves it."""
        if fresh is not None:
            source = shallow_dict(fresh)
            if source is None:  # a reset that returned another TensorDict type
                source = dict(fresh.items())
        else:
            source = dict(obs)
            for k in _FLAGS:
                source[k] = torch.zeros(self.env.full_done_spec[k].shape, dtype=torch.bool)
        for k, v in zip(self.out_keys, out):
            if k != self.action_key:
                source[k] = v
        return new_td(source, self.env.batch_size, self.device)
