"""Collector options on a deterministic counting env: batch contents, trajectory ids, truncation, splitting,
resets, post-processing, frame accounting, state dicts, devices, errors and warnings (issue 17)."""
import functools
import warnings

import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

import parity
from torchrl.collectors import Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase, GymEnv, StepCounter, TransformedEnv


class _Count(EnvBase):
    """``observation`` counts steps since the last reset (plus the action); done once it reaches ``limit``."""

    def __init__(self, limit=3, batch_size=()):
        super().__init__(batch_size=list(batch_size))
        b = tuple(batch_size)
        self.observation_spec = Composite(observation=Unbounded((*b, 1)), shape=b)
        self.action_spec = Unbounded((*b, 1))
        self.reward_spec = Unbounded((*b, 1))
        self.done_spec = Composite(done=Categorical(2, (*b, 1), dtype=torch.bool),
                                   terminated=Categorical(2, (*b, 1), dtype=torch.bool), shape=b)
        self.limit = limit
        self.count = torch.zeros((*b, 1))

    def _reset(self, td):
        mask = td.get("_reset", None) if td is not None else None
        if mask is None:
            self.count.zero_()
        else:
            self.count[mask.expand_as(self.count)] = 0
        done = torch.zeros_like(self.count, dtype=torch.bool)
        return TensorDict(observation=self.count.clone(), done=done, terminated=done.clone(), batch_size=self.batch_size)

    def _step(self, td):
        self.count += td["action"]
        done = self.count >= self.limit
        return TensorDict(observation=self.count.clone(), reward=td["action"].clone(), done=done,
                          terminated=done.clone(), batch_size=self.batch_size)

    def _set_seed(self, seed):
        return seed


def _ones():
    return TensorDictModule(lambda obs: torch.ones_like(obs), in_keys=["observation"], out_keys=["action"])


def _batches(collector, n=None):
    out = []
    for i, batch in enumerate(collector):
        out.append(batch)
        if n is not None and i + 1 >= n:
            break
    collector.shutdown()
    return out


def _quiet(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn()


# ---------------------------------------------------------------------------------------------- basics
def scenario_basic_batches():
    return _batches(Collector(_Count(), _ones(), frames_per_batch=4, total_frames=12))


def scenario_env_factory_and_len():
    c = Collector(_Count, _ones(), frames_per_batch=4, total_frames=12)
    return [parity.attempt(lambda: len(c)), _batches(c)]


def scenario_batched_env_batches():
    return _batches(Collector(_Count(batch_size=(2,)), _ones(), frames_per_batch=6, total_frames=12))


def scenario_batched_env_frames_not_divisible():
    return parity.warns(lambda: [b.shape for b in _batches(
        Collector(_Count(batch_size=(2,)), None, frames_per_batch=5, total_frames=10))])


def scenario_total_frames_not_multiple():
    return parity.warns(lambda: [b.shape for b in _batches(Collector(_Count(), None, frames_per_batch=4, total_frames=10))])


def scenario_tensordict_module_policy_warnings():
    return parity.warns(lambda: Collector(_Count(), _ones(), frames_per_batch=4, total_frames=8).shutdown())


def scenario_endless_collector():
    return [b["observation"] for b in _batches(Collector(_Count(), _ones(), frames_per_batch=2, total_frames=-1), n=3)]


def scenario_rollout_method():
    c = Collector(_Count(), _ones(), frames_per_batch=5, total_frames=10)
    out = [c.rollout(), c.rollout()]
    c.shutdown()
    return out


# ---------------------------------------------------------------------------------------------- options
def scenario_max_frames_per_traj():
    return _batches(Collector(_Count(limit=100), _ones(), frames_per_batch=5, total_frames=10, max_frames_per_traj=3))


def scenario_reset_at_each_iter():
    return _batches(Collector(_Count(limit=100), _ones(), frames_per_batch=3, total_frames=9, reset_at_each_iter=True))


def scenario_reset_when_done_false():
    return _batches(Collector(_Count(limit=2), _ones(), frames_per_batch=5, total_frames=5, reset_when_done=False))


def scenario_set_truncated():
    return _batches(Collector(_Count(limit=100), _ones(), frames_per_batch=3, total_frames=6, set_truncated=True))


def scenario_split_trajs():
    return _quiet(lambda: _batches(Collector(_Count(limit=3), _ones(), frames_per_batch=8, total_frames=8, split_trajs=True)))


def scenario_split_trajs_batched():
    return _quiet(lambda: _batches(Collector(_Count(limit=2, batch_size=(2,)), _ones(), frames_per_batch=8,
                                             total_frames=8, split_trajs=True)))


def scenario_postproc():
    def post(batch):
        batch["twice"] = batch["observation"] * 2
        return batch

    return _batches(Collector(_Count(), _ones(), frames_per_batch=4, total_frames=8, postproc=post))


def scenario_step_counter_env():
    env = TransformedEnv(_Count(limit=100), StepCounter(max_steps=2))
    return _batches(Collector(env, _ones(), frames_per_batch=5, total_frames=5))


def scenario_storing_and_env_devices():
    c = Collector(_Count(), _ones(), frames_per_batch=4, total_frames=4, storing_device="cpu", env_device="cpu",
                  policy_device="cpu")
    return [b.device for b in _batches(c)]


def scenario_random_policy_frames():
    c = Collector(_Count(), None, frames_per_batch=4, total_frames=8, init_random_frames=4)
    return [parity.structure(b) for b in _batches(c)]


# ---------------------------------------------------------------------------------------- state and errors
def scenario_state_dict_round_trip():
    c = Collector(_Count(limit=100), _ones(), frames_per_batch=3, total_frames=-1)
    it = iter(c)
    next(it)
    state = c.state_dict()
    first = next(it)
    other = Collector(_Count(limit=100), _ones(), frames_per_batch=3, total_frames=-1)
    other.load_state_dict(state)
    again = next(iter(other))
    c.shutdown()
    other.shutdown()
    return [sorted(state.keys()), first["observation"], again["observation"]]


def scenario_update_policy_weights():
    policy = TensorDictModule(torch.nn.Linear(1, 1), in_keys=["observation"], out_keys=["action"])
    torch.nn.init.zeros_(policy.module.weight)
    torch.nn.init.ones_(policy.module.bias)
    c = Collector(_Count(limit=100), policy, frames_per_batch=2, total_frames=-1)
    it = iter(c)
    before = next(it)["action"]
    with torch.no_grad():
        policy.module.bias.fill_(2.0)
    c.update_policy_weights_()
    after = next(it)["action"]
    c.shutdown()
    return [before, after]


def scenario_bad_arguments():
    return [
        parity.attempt(lambda: Collector(_Count(), _ones(), frames_per_batch=-2, total_frames=4)),
        parity.attempt(lambda: Collector(_Count(), _ones(), frames_per_batch=4, total_frames=4, max_frames_per_traj=0)),
    ]


def scenario_zero_frames_per_batch():
    return parity.attempt(lambda: Collector(_Count(), _ones(), frames_per_batch=0, total_frames=4))


def scenario_iterate_after_shutdown():
    c = Collector(_Count(), _ones(), frames_per_batch=2, total_frames=4)
    c.shutdown()
    return parity.attempt(lambda: next(iter(c)))


# ---------------------------------------------------------------------------------------------- multi
def _cartpole_policy():
    return TensorDictModule(lambda obs: torch.zeros(*obs.shape[:-1], 2).scatter_(-1, (obs[..., 2:3] > 0).long(), 1.0),
                            in_keys=["observation"], out_keys=["action"])


def scenario_multi_sync_batches():
    c = MultiSyncCollector([functools.partial(GymEnv, "CartPole-v1")] * 2, None, frames_per_batch=8, total_frames=16)
    return [parity.structure(b) for b in _batches(c)]


def scenario_multi_sync_cat_results():
    c = _quiet(lambda: MultiSyncCollector([functools.partial(GymEnv, "CartPole-v1")] * 2, None, frames_per_batch=8,
                                          total_frames=8, cat_results=0))
    return [parity.structure(b) for b in _batches(c)]


def scenario_multi_async_batches():
    c = MultiAsyncCollector([functools.partial(GymEnv, "CartPole-v1")] * 2, None, frames_per_batch=8, total_frames=16)
    return [parity.structure(b) for b in _batches(c)]
