"""Plain functions as policies (issue 17): what ``EnvBase.rollout`` and ``Collector`` pass to them."""
import functools
import warnings

import torch
from tensordict import TensorDict

import parity
from torchrl.collectors import Collector
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase


class _Count(EnvBase):
    """``observation`` adds the action; ``other`` stays 10."""

    def __init__(self):
        super().__init__(batch_size=[])
        self.observation_spec = Composite(other=Unbounded((1,)), observation=Unbounded((1,)))
        self.action_spec = Unbounded((1,))
        self.reward_spec = Unbounded((1,))
        self.done_spec = Composite(done=Categorical(2, (1,), dtype=torch.bool), terminated=Categorical(2, (1,), dtype=torch.bool))

    def _reset(self, td):
        return TensorDict(observation=torch.ones(1), other=torch.full((1,), 10.0), done=torch.zeros(1, dtype=torch.bool),
                          terminated=torch.zeros(1, dtype=torch.bool))

    def _step(self, td):
        return TensorDict(observation=td["observation"] + td["action"], other=td["other"], reward=td["action"].clone(),
                          done=torch.zeros(1, dtype=torch.bool), terminated=torch.zeros(1, dtype=torch.bool))

    def _set_seed(self, seed):
        return seed


def _set_one(td):
    return td.set("action", torch.ones(1))


def _rollout(policy):
    return parity.attempt(lambda: _Count().rollout(3, policy)["action"])


def _collect(policy):
    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = Collector(_Count(), policy, frames_per_batch=3, total_frames=3)
        batch = next(iter(c))
        c.shutdown()
        return batch["action"]

    return parity.attempt(run)


class _Obj:
    def __call__(self, td):
        return td.set("action", torch.full((1,), 2.0))


def scenario_rollout_function_policies():
    return {
        "td": _rollout(lambda td: td.set("action", torch.ones(1))),
        "tensordict": _rollout(lambda tensordict: tensordict.set("action", torch.ones(1))),
        "named_def": _rollout(_set_one),
        "observation": _rollout(lambda observation: observation * 0 + 2),
        "two_positional": _rollout(lambda x, y: y - x),
        "other_name": _rollout(lambda t: t.set("action", torch.ones(1))),
        "partial": _rollout(functools.partial(lambda observation, k: observation * 0 + k, k=3)),
        "object": _rollout(_Obj()),
    }


def scenario_collector_function_policies():
    return {
        "td": _collect(lambda td: td.set("action", torch.ones(1))),
        "tensordict": _collect(lambda tensordict: tensordict.set("action", torch.ones(1))),
        "named_def": _collect(_set_one),
        "observation": _collect(lambda observation: observation * 0 + 2),
        "by_names": _collect(lambda other, observation: other - observation),
        "other_name": _collect(lambda t: t.set("action", torch.ones(1))),
        "object": _collect(_Obj()),
    }
