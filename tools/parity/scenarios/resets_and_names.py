"""Partial resets, the order of an env's key lists, the ``"time"`` dim name of rollouts and collector batches,
and storage indexing over the written rows (issue 17)."""
import functools
import warnings

import torch
from tensordict import TensorDict

import parity
from torchrl.collectors import Collector, MultiAsyncCollector, MultiSyncCollector
from torchrl.collectors.utils import split_trajectories
from torchrl.data import Categorical, Composite, LazyMemmapStorage, LazyTensorStorage, ReplayBuffer, Unbounded
from torchrl.envs import EnvBase, GymEnv, SerialEnv


def _bool(*shape):
    return Categorical(2, shape, dtype=torch.bool)


class _Counter(EnvBase):
    """Counts up from 0; done after ``limit`` steps of a sub-env; a state entry ``s`` and no root reset logic."""

    def __init__(self, batch=(3,), limit=2):
        super().__init__(batch_size=list(batch))
        b = tuple(batch)
        self.observation_spec = Composite(o=Unbounded((*b, 1)), sub=Composite(p=Unbounded((*b, 2)), shape=b), shape=b)
        self.state_spec = Composite(s=Unbounded((*b, 1)), shape=b)
        self.action_spec = Unbounded((*b, 1))
        self.limit = limit

    def _reset(self, td):
        b = self.batch_size
        return TensorDict({"o": torch.full((*b, 1), 100.0), "s": torch.full((*b, 1), 50.0), "x": torch.full((*b, 1), 7.0),
                           "sub": {"p": torch.full((*b, 2), 9.0)}}, b)

    def _step(self, td):
        o = td["o"] + 1
        return TensorDict({"o": o, "sub": {"p": td["sub", "p"]}, "reward": torch.ones_like(o),
                           "done": o >= 100 + self.limit}, self.batch_size)

    def _set_seed(self, seed):
        return seed


class _Agents(EnvBase):
    """Three agents in an ``"agents"`` group, with or without root done entries."""

    def __init__(self, root_done):
        super().__init__(batch_size=[2])
        self.observation_spec = Composite(agents=Composite(o=Unbounded((2, 3, 1)), shape=(2, 3)), g=Unbounded((2, 1)), shape=(2,))
        self.action_spec = Composite(agents=Composite(a=Unbounded((2, 3, 1)), shape=(2, 3)), shape=(2,))
        self.reward_spec = Composite(agents=Composite(reward=Unbounded((2, 3, 1)), shape=(2, 3)), shape=(2,))
        done = Composite(agents=Composite(done=_bool(2, 3, 1), terminated=_bool(2, 3, 1), shape=(2, 3)), shape=(2,))
        if root_done:
            done["done"] = _bool(2, 1)
            done["terminated"] = _bool(2, 1)
        self.done_spec = done

    def _reset(self, td):
        out = TensorDict({"agents": TensorDict({"o": torch.full((2, 3, 1), 100.0), "done": torch.zeros(2, 3, 1, dtype=torch.bool),
                                                "terminated": torch.zeros(2, 3, 1, dtype=torch.bool)}, [2, 3]),
                          "g": torch.full((2, 1), 100.0)}, [2])
        if "done" in self.full_done_spec.keys():
            out["done"] = torch.zeros(2, 1, dtype=torch.bool)
            out["terminated"] = torch.zeros(2, 1, dtype=torch.bool)
        return out

    def _step(self, td):
        raise RuntimeError("not stepped")

    def _set_seed(self, seed):
        return seed


def _filled(env, mask):
    td = env.reset()
    td["o"] = torch.tensor([[1.0], [2.0], [3.0]])
    td["s"] = torch.tensor([[1.0], [2.0], [3.0]])
    td["x"] = torch.tensor([[1.0], [2.0], [3.0]])
    td["sub", "p"] = torch.ones(3, 2)
    td["y"] = torch.ones(3)
    td["yi"] = torch.ones(3, dtype=torch.long)
    td["yb"] = torch.ones(3, dtype=torch.bool)
    td["action"] = torch.ones(3, 1)
    td["next"] = TensorDict(o=torch.ones(3, 1), batch_size=[3])
    if mask is not None:
        td["_reset"] = torch.tensor(mask)
    return td


# ------------------------------------------------------------------------------------------- partial resets
def _reset_case(mask):
    env = _Counter()
    td = _filled(env, mask)
    out = env.reset(td)
    return [out is td, sorted(map(str, out.keys(True, True))), out.exclude("next"), out.get("next", None)]


def scenario_reset_row_mask():
    return _reset_case([[True], [False], [False]])


def scenario_reset_flat_mask():
    return _reset_case([True, False, True])


def scenario_reset_full_mask():
    return _reset_case([[True], [True], [True]])


def scenario_reset_empty_mask():
    return _reset_case([[False], [False], [False]])


def scenario_reset_without_mask():
    return _reset_case(None)


def scenario_reset_input_missing_an_output():
    env = _Counter()
    td = _filled(env, [[True], [False], [False]])
    del td["o"]
    return env.reset(td)["o"]


def scenario_reset_in_place_replaces_tensors():
    env = _Counter()
    td = _filled(env, [[True], [False], [False]])
    o = td["o"]
    env.reset(td)
    return [td["o"] is o, o, td["o"], "_reset" in td.keys()]


def scenario_step_and_maybe_reset_zeroes_reset_rows():
    env = _Counter(limit=1)
    td = env.reset()
    td["o"] = torch.tensor([[100.0], [50.0], [100.0]])
    td["action"] = torch.tensor([[1.0], [2.0], [3.0]])
    td["hidden"] = torch.ones(3, 2)
    out, nxt = env.step_and_maybe_reset(td)
    return [out["next", "done"], nxt]


def _group_case(root_done, masks):
    env = _Agents(root_done)
    td = env.reset()
    td["agents", "o"] = torch.ones(2, 3, 1)
    td["g"] = torch.ones(2, 1)
    td["agents", "h"] = torch.ones(2, 3)
    td["y"] = torch.ones(2)
    for key, mask in masks.items():
        td[key] = torch.tensor(mask)
    out = env.reset(td)
    return [out["agents", "o"], out["g"], out["agents", "h"], out["y"]]


def scenario_reset_group_mask_without_root_done():
    return _group_case(False, {("agents", "_reset"): [[[True], [False], [False]], [[False], [False], [False]]]})


def scenario_reset_whole_group_row_without_root_done():
    return _group_case(False, {("agents", "_reset"): [[[True], [True], [True]], [[False], [False], [False]]]})


def scenario_reset_root_mask_covers_groups():
    return _group_case(True, {"_reset": [[True], [False]]})


def scenario_reset_group_mask_and_root_done():
    return _group_case(True, {("agents", "_reset"): [[[True], [False], [False]], [[False], [False], [False]]]})


def scenario_reset_root_and_group_masks():
    return _group_case(True, {"_reset": [[True], [False]],
                              ("agents", "_reset"): [[[True], [False], [False]], [[False], [False], [True]]]})


# --------------------------------------------------------------------------------------------- key lists
class _Keys(EnvBase):
    def __init__(self):
        super().__init__(batch_size=[])
        u = functools.partial(Unbounded, (1,))
        self.observation_spec = Composite(z=u(), a=Composite(b=Composite(c=u()), z=u()), b=Composite(c=u()), B=u(),
                                          zz=Composite(o=u()), aa=Composite(o=u()))
        self.action_spec = Composite(zz=u(), aa=Composite(x=u()), a=u())
        self.state_spec = Composite(s2=u(), s1=u())
        self.reward_spec = Composite(zz=Composite(r=u()), reward=u(), aa=Composite(reward=u()))
        self.done_spec = Composite(zz=Composite(terminated=_bool(1), done=_bool(1)), terminated=_bool(1), done=_bool(1),
                                   truncated=_bool(1), aa=Composite(done=_bool(1), terminated=_bool(1)))

    def _reset(self, td):
        raise RuntimeError("not reset")

    def _step(self, td):
        raise RuntimeError("not stepped")

    def _set_seed(self, seed):
        return seed


def scenario_env_key_lists_are_sorted():
    env = _Keys()
    return [env.observation_keys, env.action_keys, env.state_keys, env.reward_keys, env.done_keys, env.reset_keys,
            env.done_keys_groups, list(env.full_done_spec.keys(True, True))]


# ------------------------------------------------------------------------------------------ "time" names
def scenario_rollout_names():
    env = _Counter(limit=10)
    single = _Counter(batch=(), limit=10)
    return [env.rollout(3).names, env.rollout(3, break_when_any_done=False).names,
            env.rollout(3, return_contiguous=False).names, single.rollout(3).names, env.rollout(3)["next"].names,
            env.rollout(3)[0].names, env.rollout(3)[:, 0].names, env.rollout(3).reshape(-1).names]


def scenario_gym_and_serial_rollout_names():
    env = SerialEnv(2, functools.partial(GymEnv, "CartPole-v1"))
    out = [GymEnv("Pendulum-v1").rollout(3).names, env.rollout(3).names]
    env.close()
    return out


def scenario_collector_names():
    out = []
    for kwargs in ({}, {"split_trajs": True}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            c = Collector(_Counter(limit=2), None, frames_per_batch=12, total_frames=24, **kwargs)
            batch = next(iter(c))
        out.append([batch.names, batch.shape])
        c.shutdown()
    c = Collector(_Counter(batch=(), limit=2), None, frames_per_batch=4, total_frames=8)
    out += [c.rollout().names, next(iter(c)).names]
    c.shutdown()
    return out


def scenario_collector_trajectory_names():
    out = []
    for fmt in ("padded", "cat"):
        c = Collector(_Counter(batch=(), limit=2), None, frames_per_batch=4, total_frames=-1, trajs_per_batch=2, traj_format=fmt)
        out.append(next(iter(c)).names)
        c.shutdown()
    return out


def scenario_multi_collector_names():
    out = []
    for cls in (MultiSyncCollector, MultiAsyncCollector):
        c = cls([functools.partial(GymEnv, "CartPole-v1")] * 2, None, frames_per_batch=4, total_frames=8)
        batch = next(iter(c))
        out.append([batch.names, batch.shape])
        c.shutdown()
    return out


def scenario_split_trajectories_names():
    data = _Counter(limit=2).rollout(5, break_when_any_done=False)
    named = split_trajectories(data).names
    data.names = None
    return [named, split_trajectories(data).names]


# -------------------------------------------------------------------------------------- storage indexing
def _partly_written(cls):
    rb = ReplayBuffer(storage=cls(10))
    rb.extend(TensorDict({"a": torch.arange(4)}, [4]))
    return rb.storage


def _indexing(cls):
    s = _partly_written(cls)
    out = [s[:], s.get(slice(None)), s[0:8], s[2:], s[::2], s[1:3], s[-1], s[-4], s[[0, 3]], s[torch.tensor([3, -1])]]
    out += [parity.attempt(lambda i=i: s[i]) for i in (-5, 4, [0, 4], torch.tensor([4]))]
    return out


def scenario_lazy_tensor_storage_indexing():
    return _indexing(LazyTensorStorage)


def scenario_lazy_memmap_storage_indexing():
    return _indexing(LazyMemmapStorage)


def scenario_full_and_wrapped_storage_indexing():
    rb = ReplayBuffer(storage=LazyTensorStorage(4))
    rb.extend(TensorDict({"a": torch.arange(6)}, [6]))
    plain = ReplayBuffer(storage=LazyTensorStorage(10))
    plain.extend(torch.arange(4))
    return [rb.storage[:], rb.storage[-1], plain.storage[:], len(plain.storage)]


def scenario_two_dim_buffer_reads_written_rows():
    rb = ReplayBuffer(storage=LazyTensorStorage(10, ndim=2))
    rb.extend(TensorDict({"a": torch.arange(6).reshape(2, 3)}, [2, 3]))
    return [rb[:], len(rb), len(rb.storage)]
