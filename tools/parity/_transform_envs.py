"""Deterministic environments and helpers shared by the ``scenarios/transforms*.py`` files.

Importable from the scenario files as ``import _transform_envs`` (``_child.py`` puts this folder on the path,
and worker processes of ``ParallelEnv`` inherit it). Public TorchRL API only.
"""
import torch
from tensordict import TensorDict

from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.envs import EnvBase


class CountEnv(EnvBase):
    """A counter: ``count`` goes up by one per step; row ``i`` of a batch is done at ``max_count + i``.

    observation = count + [0, 1, 2] + action, reward = 2 * action + 1, ``hidden`` (a state entry when
    ``with_state``) goes up by the action. Everything is a known function of the actions.
    """

    def __init__(self, max_count=4, batch_size=(), with_state=False, obs64=False):
        super().__init__(batch_size=batch_size)
        bs = self.batch_size
        self.max_count = max_count
        self.with_state = with_state
        self.obs64 = obs64
        obs = Composite(
            observation=Unbounded((*bs, 3)),
            count=Unbounded((*bs, 1), dtype=torch.int64),
            shape=bs,
        )
        if obs64:
            obs["obs64"] = Unbounded((*bs, 2), dtype=torch.float64)
        self.observation_spec = obs
        self.action_spec = Bounded(-1.0, 1.0, (*bs, 1))
        self.reward_spec = Unbounded((*bs, 1))
        if with_state:
            self.state_spec = Composite(hidden=Unbounded((*bs, 2)), shape=bs)
        self.count = torch.zeros(*bs, 1, dtype=torch.int64)
        self._last = None
        self.limit = (max_count + torch.arange(bs.numel()).reshape(*bs, 1)) if len(bs) else torch.tensor([max_count])

    def _obs(self, action):
        out = {
            "observation": self.count.float() + torch.arange(3.0) + action,
            "count": self.count.clone(),
        }
        if self.obs64:
            out["obs64"] = (self.count.double() + action.double()).expand(*self.batch_size, 2).clone()
        return out

    def _reset(self, td):
        # rows not reset (``_reset`` mask) return their last step's values: what TorchRL keeps for them
        mask = None if td is None else td.get("_reset", None)
        if mask is None:
            self.count.zero_()
        else:
            self.count[mask.reshape(self.count.shape)] = 0
        done = torch.zeros(*self.batch_size, 1, dtype=torch.bool)
        out = dict(self._obs(torch.zeros(*self.batch_size, 1)), done=done, terminated=done.clone())
        if self.with_state:
            out["hidden"] = torch.zeros(*self.batch_size, 2)
        out = TensorDict(out, batch_size=self.batch_size)
        if mask is not None and self._last is not None:
            keep = ~mask.reshape(self.count.shape)
            for key, value in out.items():
                m = keep.reshape(*keep.shape, *([1] * (value.ndim - keep.ndim)))
                out[key] = torch.where(m, self._last[key], value)
        return out

    def _step(self, td):
        action = td["action"]
        self.count += 1
        done = self.count >= self.limit
        out = dict(self._obs(action), reward=2 * action + 1, done=done, terminated=done.clone())
        if self.with_state:
            out["hidden"] = td["hidden"] + action
        out = TensorDict(out, batch_size=self.batch_size)
        self._last = out.exclude("reward").clone()
        return out

    def _set_seed(self, seed):
        return seed


class MaskEnv(EnvBase):
    """A discrete-action env with an ``action_mask`` observation: action ``k`` is allowed while ``k >= step``."""

    def __init__(self, n=4, one_hot=False):
        super().__init__()
        self.n = n
        self.observation_spec = Composite(
            observation=Unbounded((1,)),
            action_mask=Categorical(2, (n,), dtype=torch.bool),
        )
        self.action_spec = OneHot(n) if one_hot else Categorical(n, ())
        self.reward_spec = Unbounded((1,))
        self.t = 0

    def _mask(self):
        return torch.arange(self.n) >= self.t

    def _reset(self, td):
        self.t = 0
        done = torch.zeros(1, dtype=torch.bool)
        return TensorDict(observation=torch.zeros(1), action_mask=self._mask(), done=done, terminated=done.clone())

    def _step(self, td):
        a = td["action"]
        idx = a.argmax(-1) if a.ndim else a
        self.t = min(self.t + 1, self.n - 1)
        done = torch.tensor([self.t >= self.n - 1])
        return TensorDict(observation=idx.float().reshape(1), action_mask=self._mask(), reward=idx.float().reshape(1),
                          done=done, terminated=done.clone())

    def _set_seed(self, seed):
        return seed


def const_policy(value=0.5):
    """A policy writing a constant action of the env's action shape."""

    def policy(td):
        return td.set("action", torch.full((*td.batch_size, 1), float(value)))

    return policy


def ramp_policy():
    """A policy whose action is 0.1, 0.2, ... (one per call), so that steps differ from each other."""
    calls = [0]

    def policy(td):
        calls[0] += 1
        return td.set("action", torch.full((*td.batch_size, 1), 0.1 * calls[0]))

    return policy


def specs(env):
    """What a user reads off a (transformed) env's specs."""
    return {
        "observation_spec": env.observation_spec,
        "full_done_spec": env.full_done_spec,
        "full_action_spec": env.full_action_spec,
        "full_reward_spec": env.full_reward_spec,
        "state_spec": env.state_spec,
        "batch_size": env.batch_size,
    }


def report(env, steps=5, policy=None, break_when_any_done=False):
    """Specs, a reset and a rollout with a deterministic policy."""
    out = specs(env)
    out["reset"] = env.reset()
    out["rollout"] = env.rollout(steps, policy or ramp_policy(), break_when_any_done=break_when_any_done)
    return out
