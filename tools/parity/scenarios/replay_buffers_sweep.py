"""Replay buffers sweep: samplers (random, without replacement, slices), storages (list, lazy stack, lazy
tensor, memmap), buffer bookkeeping (len, write_count, empty, add/extend indices, indexing, iteration,
set_storage/set_sampler, dumps/loads). Random draws are compared through their structure and through
deterministic properties (coverage of an epoch, slice contiguity, lengths). PrioritizedSampler and the
prioritized buffers only through their argument checks: TorchRL 0.14.1's reference install lacks its compiled
segment trees and cannot build one."""
import itertools
import tempfile

import torch
from tensordict import TensorDict

import parity
from torchrl.data import (
    LazyMemmapStorage,
    LazyStackStorage,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    TensorDictReplayBuffer,
)
from torchrl.data.replay_buffers import (
    PrioritizedSampler,
    RandomSampler,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
)


def _td(n=10, start=0):
    return TensorDict(a=torch.arange(start, start + n), b=torch.arange(start, start + n, dtype=torch.float32).view(n, 1).expand(n, 2).clone(),
                      batch_size=[n])


def _storage(kind, size=10):
    return {"list": ListStorage, "stack": LazyStackStorage, "tensor": LazyTensorStorage, "memmap": LazyMemmapStorage}[kind](size)


KINDS = ("list", "stack", "tensor", "memmap")


def _trajs(lengths=(6, 4, 10)):
    """Trajectories of the given lengths, back to back: obs counts 0..n-1, episode ids, done at each end."""
    n = sum(lengths)
    episode = torch.cat([torch.full((length,), i) for i, length in enumerate(lengths)])
    done = torch.zeros(n, 1, dtype=torch.bool)
    done[torch.tensor(lengths).cumsum(0) - 1] = True
    return TensorDict({"obs": torch.arange(n), "episode": episode,
                       "next": {"obs": torch.arange(1, n + 1), "done": done, "terminated": done.clone(),
                                "truncated": torch.zeros_like(done)}}, batch_size=[n])


def _slices(obs, num_slices):
    """The sampled slices as lists, each checked for consecutive values and a single episode."""
    return [row.tolist() for row in obs.view(num_slices, -1)]


def _no_init(sample):
    """Our slice samples carry an "is_init" entry (a documented difference): left out of structures."""
    return sample.exclude("is_init")


def _consecutive(rows):
    return all(all(b - a == 1 for a, b in zip(row, row[1:])) for row in rows)


# ------------------------------------------------------------------------------------------ random sampler
def scenario_random_sampler_basics():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=RandomSampler(), batch_size=4)
    rb.extend(torch.arange(10))
    sample, info = rb.sample(return_info=True)
    big = rb.sample(25)
    return [parity.structure(sample), sorted(info.keys()), parity.structure(info), bool((sample == info["index"]).all()),
            big.shape, bool(((big >= 0) & (big < 10)).all()), rb.sampler.state_dict(), repr(rb.sampler)]


def scenario_random_sampler_tensordict_sample_keys():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
    rb.extend(_td())
    sample = rb.sample()
    sample_info, info = rb.sample(return_info=True)
    return [parity.structure(sample), bool((sample["a"] == sample["index"]).all()), sorted(info.keys()),
            parity.structure(sample_info), sample.batch_size]


def scenario_random_sampler_on_partial_storage():
    rb = ReplayBuffer(storage=LazyTensorStorage(100), batch_size=50)
    rb.extend(torch.arange(3))
    sample = rb.sample()
    return [len(rb), sample.shape, set(sample.tolist()) <= {0, 1, 2}]


# ------------------------------------------------------------------------------------------ without replacement
def scenario_without_replacement_epoch_sizes():
    out = {}
    for drop_last in (False, True):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(drop_last=drop_last), batch_size=3)
        rb.extend(torch.arange(10))
        draws = [parity.attempt(rb.sample) for _ in range(5)]
        sizes = [d.shape[0] if isinstance(d, torch.Tensor) else d for d in draws]
        first_epoch = sorted(torch.cat(draws[: 4 if not drop_last else 3]).tolist())
        out[f"drop_last={drop_last}"] = [sizes, first_epoch, len(set(first_epoch))]
    return out


def scenario_without_replacement_shuffle_false_order():
    out = {}
    for drop_last in (False, True):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(shuffle=False, drop_last=drop_last),
                          batch_size=4)
        rb.extend(torch.arange(10))
        out[f"drop_last={drop_last}"] = [rb.sample() for _ in range(5)]
    return out


def scenario_without_replacement_iteration():
    out = {}
    for drop_last in (False, True):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(drop_last=drop_last), batch_size=4)
        rb.extend(torch.arange(10))
        batches = list(rb)
        again = list(rb)
        seen = torch.cat(batches).tolist()
        out[f"drop_last={drop_last}"] = [[len(b) for b in batches], len(set(seen)), set(seen) <= set(range(10)),
                                         [len(b) for b in again]]
    ordered = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=4)
    ordered.extend(torch.arange(10))
    out["ordered"] = list(ordered)
    return out


def scenario_without_replacement_state_dict():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=4)
    rb.extend(torch.arange(10))
    rb.sample()
    state = rb.sampler.state_dict()
    fresh = SamplerWithoutReplacement(shuffle=False)
    fresh.load_state_dict(state)
    other = ReplayBuffer(storage=LazyTensorStorage(10), sampler=fresh, batch_size=4)
    other.extend(torch.arange(10))
    return [sorted(state.keys()), parity.structure(state), other.sample(), rb.sample()]


def scenario_without_replacement_grows_between_epochs():
    rb = ReplayBuffer(storage=LazyTensorStorage(20), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=4)
    rb.extend(torch.arange(6))
    first = rb.sample()
    rb.extend(torch.arange(6, 12))
    rest = [rb.sample() for _ in range(4)]
    return [first, rest]


def scenario_without_replacement_batch_larger_than_storage():
    out = []
    for drop_last in (False, True):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(drop_last=drop_last), batch_size=5)
        rb.extend(torch.arange(3))
        out.append(parity.attempt(rb.sample))
        out.append(rb.can_sample())
        out.append(parity.attempt(lambda: rb.sample(2)))
    return [x if isinstance(x, (bool, Exception)) else sorted(x.tolist()) if x.numel() == 3 else x.shape for x in out]


def scenario_drop_last_without_batch_size():
    return [parity.attempt(lambda: type(ReplayBuffer(storage=LazyTensorStorage(10),
                                                     sampler=SamplerWithoutReplacement(drop_last=True)).sampler).__name__),
            parity.attempt(lambda: type(ReplayBuffer(storage=LazyTensorStorage(10), batch_size=4,
                                                     sampler=SamplerWithoutReplacement(drop_last=True)).sampler).__name__)]


# ------------------------------------------------------------------------------------------ batch size
def scenario_batch_size_sources():
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(10))
    fixed = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
    fixed.extend(torch.arange(10))
    td = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    td.extend(_td())
    return [
        parity.attempt(rb.sample),
        parity.attempt(td.sample),
        rb.sample(4).shape,
        fixed.sample().shape,
        parity.warns(lambda: fixed.sample(5).shape),
        rb.batch_size,
        fixed.batch_size,
    ]


def scenario_sample_from_empty_buffer():
    out = {}
    for kind in KINDS:
        rb = ReplayBuffer(storage=_storage(kind), batch_size=2)
        out[kind] = [len(rb), rb.can_sample(), parity.attempt(rb.sample)]
    return out


# ------------------------------------------------------------------------------------------ bookkeeping
def scenario_len_write_count_and_empty():
    out = {}
    for kind in KINDS:
        rb = TensorDictReplayBuffer(storage=_storage(kind, 5), batch_size=2)
        first = rb.extend(_td(3))
        second = rb.extend(_td(4, 10))
        added = rb.add(_td(1, 50)[0])
        counts = [len(rb), rb.write_count]
        rb.empty()
        after_empty = [len(rb), rb.write_count]
        third = rb.extend(_td(2, 70))
        out[kind] = [first, second, added, counts, after_empty, third, len(rb), rb.write_count, rb[:]["a"]]
    return out


def scenario_empty_keeping_write_count():
    rb = ReplayBuffer(storage=LazyTensorStorage(5))
    rb.extend(torch.arange(7))
    before = rb.write_count
    rb.empty(empty_write_count=False)
    return [before, len(rb), rb.write_count, rb.extend(torch.arange(2)), rb.write_count, rb[:]]


def scenario_add_extend_return_values_plain():
    out = {}
    for kind in KINDS:
        rb = ReplayBuffer(storage=_storage(kind, 4))
        adds = [rb.add(torch.tensor(i)) for i in range(3)]
        index = rb.extend(torch.arange(10, 13)) if kind not in ("list", "stack") else rb.extend([torch.tensor(i) for i in range(10, 13)])
        out[kind] = [adds, index, len(rb), rb.write_count]
    return out


def scenario_indexing_per_storage():
    out = {}
    for kind in KINDS:
        rb = TensorDictReplayBuffer(storage=_storage(kind, 6))
        rb.extend(_td(4))
        out[kind] = [
            rb[0], rb[-1], rb[1:3], rb[[0, 2]], rb[torch.tensor([3, 1])],
            parity.attempt(lambda: rb[10]),
        ]
    return out


def scenario_indexing_with_coordinate_tuples():
    td = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    td.extend(_td())
    plain = ReplayBuffer(storage=LazyTensorStorage(10))
    plain.extend(torch.arange(10))
    return [td[(torch.tensor([3, 1]),)], td[(3,)], td[(slice(1, 3),)], plain[(torch.tensor([3, 1]),)]]


def scenario_indexing_after_wraparound():
    out = {}
    for kind in KINDS:
        rb = TensorDictReplayBuffer(storage=_storage(kind, 4))
        rb.extend(_td(6))
        out[kind] = [rb[:]["a"], rb[0]["a"], rb[-1]["a"], len(rb), rb.write_count]
    return out


def scenario_setitem():
    out = {}
    for kind in ("tensor", "memmap", "list"):
        rb = TensorDictReplayBuffer(storage=_storage(kind, 6))
        rb.extend(_td(4))
        rb[1] = _td(1, 100)[0]
        rb[torch.tensor([2, 3])] = _td(2, 200)
        out[kind] = [rb[:]["a"], len(rb), rb.write_count]
    return out


def scenario_storage_sample_classes():
    out = {}
    for kind in KINDS:
        rb = TensorDictReplayBuffer(storage=_storage(kind), batch_size=3)
        rb.extend(_td(5))
        sample = rb.sample()
        out[kind] = [type(sample).__name__, sample.batch_size, sorted(sample.keys()), sample["a"].dtype, sample["b"].shape]
    return out


def scenario_lazy_stack_storage_heterogeneous():
    rb = ReplayBuffer(storage=LazyStackStorage(10), batch_size=3)
    for i in range(4):
        rb.add(TensorDict(obs=torch.full((i + 1,), float(i)), batch_size=[]))
    sample = rb[[0, 2, 3]]
    lst = ReplayBuffer(storage=ListStorage(10))
    for i in range(4):
        lst.add(TensorDict(obs=torch.full((i + 1,), float(i)), batch_size=[]))
    return [type(sample).__name__, sample.batch_size, [t.tolist() for t in sample["obs"].unbind(0)],
            type(rb[0]).__name__, rb[1]["obs"], type(lst[0]).__name__, parity.attempt(lambda: type(lst[[0, 1]]).__name__), len(rb)]


def scenario_storage_attributes():
    out = {}
    for kind in KINDS:
        storage = _storage(kind, 7)
        rb = ReplayBuffer(storage=storage)
        before = [len(storage), storage.max_size]
        rb.extend(_td(3))
        out[kind] = [before, len(storage), storage.max_size, rb.storage is storage, type(rb.storage).__name__]
    tensor = LazyTensorStorage(5)
    ReplayBuffer(storage=tensor).extend(_td(2))
    out["tensor_is_memmap"] = tensor[:].is_memmap()
    return out


def scenario_memmap_storage_reads():
    memmap = LazyMemmapStorage(5)
    ReplayBuffer(storage=memmap).extend(_td(2))
    return [memmap[:].is_memmap(), memmap[[0, 1]].is_memmap(), memmap[:]["a"], memmap[[1, 0]]["a"]]


def scenario_storage_max_size_none_and_zero():
    out = {}
    for kind in ("list", "stack"):
        rb = ReplayBuffer(storage=_storage(kind, None))
        index = rb.extend([torch.tensor(i) for i in range(20)])
        out[kind] = [index, len(rb)]
    out["tensor zero"] = parity.attempt(lambda: ReplayBuffer(storage=LazyTensorStorage(0)).extend(torch.arange(3)))
    return out


# ------------------------------------------------------------------------------------------ set_*
def scenario_set_sampler_storage_writer():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
    rb.extend(torch.arange(10))
    rb.set_sampler(SamplerWithoutReplacement(shuffle=False))
    ordered = [rb.sample(), rb.sample()]
    rb.set_writer(rb.writer)
    return [ordered, type(rb.sampler).__name__, rb.sample(), len(rb), rb.write_count]


def scenario_set_storage():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
    rb.extend(torch.arange(10))
    rb.set_storage(LazyTensorStorage(3))
    return [len(rb), rb.extend(torch.arange(5)), len(rb), rb[:], type(rb.storage).__name__]


# ------------------------------------------------------------------------------------------ dumps / loads
def scenario_dumps_loads_per_storage():
    out = {}
    for kind in ("tensor", "memmap"):
        rb = TensorDictReplayBuffer(storage=_storage(kind, 5), batch_size=2)
        rb.extend(_td(7))
        with tempfile.TemporaryDirectory() as d:
            rb.dumps(d)
            other = TensorDictReplayBuffer(storage=_storage(kind, 5), batch_size=2)
            result = parity.attempt(lambda: other.loads(d))
            out[kind] = result if isinstance(result, Exception) else [len(other), other.write_count, other[:]["a"],
                                                                       other.extend(_td(1, 99)), other[:]["a"]]
    return out


def scenario_dumps_loads_list_storages():
    out = {}
    for kind in ("list", "stack"):
        rb = TensorDictReplayBuffer(storage=_storage(kind, 5), batch_size=2)
        rb.extend(_td(7))
        with tempfile.TemporaryDirectory() as d:
            result = parity.attempt(lambda: rb.dumps(d))
            out[kind] = result if isinstance(result, Exception) else type(result).__name__
    return out


def scenario_dumps_loads_without_replacement_state():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=3)
    rb.extend(_td())
    rb.sample()
    with tempfile.TemporaryDirectory() as d:
        rb.dumps(d)
        other = TensorDictReplayBuffer(storage=LazyTensorStorage(10), sampler=SamplerWithoutReplacement(shuffle=False), batch_size=3)
        other.loads(d)
        return [len(other), [other.sample()["a"] for _ in range(4)], rb.sample()["a"], other.sampler.state_dict()]


def scenario_state_dict_round_trip():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(5), batch_size=2)
    rb.extend(_td(7))
    state = rb.state_dict()
    other = TensorDictReplayBuffer(storage=LazyTensorStorage(5), batch_size=2)
    other.load_state_dict(state)
    return [sorted(k for k in state.keys() if k in ("_storage", "_sampler", "_writer", "_batch_size")), len(other), other.write_count, other[:]["a"], other.extend(_td(1, 99)), other[:]["a"]]


# ------------------------------------------------------------------------------------------ slice samplers
def _slice_rb(sampler, batch_size, data=None, size=None):
    data = _trajs() if data is None else data
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(size or data.shape[0]), sampler=sampler, batch_size=batch_size)
    rb.extend(data)
    return rb


def scenario_slice_num_slices_vs_slice_len():
    out = {}
    for name, kwargs in [("num_slices", {"num_slices": 3}), ("slice_len", {"slice_len": 4})]:
        for key, more in [("end_key", {}), ("traj_key", {"traj_key": "episode"})]:
            rb = _slice_rb(SliceSampler(**kwargs, **more), 12)
            sample = rb.sample()
            rows = _slices(sample["obs"], 3)
            episodes = _slices(sample["episode"], 3)
            out[f"{name}/{key}"] = [sample.batch_size, _consecutive(rows), all(len(set(e)) == 1 for e in episodes),
                                    parity.structure(_no_init(sample))]
    return out


def scenario_slice_info_and_truncation():
    rb = _slice_rb(SliceSampler(num_slices=4), 12)
    sample, info = rb.sample(return_info=True)
    rows = _slices(sample["obs"], 4)
    ends = sample["next", "truncated"].view(4, 3)
    done = sample["next", "done"].view(4, 3)
    episode_ends = {5, 9, 19}
    # the last step of each slice is flagged truncated or done, no other step is
    last_flagged = all(bool(ends[i, -1] | done[i, -1]) for i in range(4))
    inner = all(not bool(ends[i, :-1].any()) for i in range(4))
    inner_done = all((row[-1] in episode_ends) == bool(done[i, -1]) for i, row in enumerate(rows))
    return [sorted(info.keys(True, True)), parity.structure(info), last_flagged, inner, inner_done, _consecutive(rows),
            bool((info["index"] == sample["obs"]).all()) if isinstance(info["index"], torch.Tensor) else type(info["index"]).__name__]


def scenario_slice_strict_length_short_trajectories():
    data = _trajs((2, 8, 3, 7))
    out = {}
    for strict in (True, False):
        rb = _slice_rb(SliceSampler(slice_len=5, strict_length=strict, traj_key="episode"), 20, data=data)
        draws = [parity.attempt(rb.sample) for _ in range(5)]
        if isinstance(draws[0], Exception):
            out[f"strict={strict}"] = draws[0]
            continue
        episodes = sorted({int(e) for d in draws for e in d["episode"]})
        sizes = sorted({d.shape[0] for d in draws})
        out[f"strict={strict}"] = [episodes if strict else set(episodes) <= {0, 1, 2, 3}, sizes if strict else max(sizes) <= 20]
    return out


def scenario_slice_strict_length_all_short():
    data = _trajs((2, 3, 2))
    return [parity.attempt(lambda: _slice_rb(SliceSampler(slice_len=5, strict_length=True), 10, data=data).sample()),
            parity.structure(parity.attempt(lambda: _slice_rb(SliceSampler(slice_len=5, strict_length=False), 10, data=data).sample()["obs"]))]


def scenario_slice_not_strict_lengths_sum_to_batch():
    data = _trajs((2, 8, 3, 7))
    rb = _slice_rb(SliceSampler(num_slices=4, strict_length=False, traj_key="episode"), 20, data=data)
    out = []
    for _ in range(5):
        sample = rb.sample()
        ep = sample["episode"].tolist()
        obs = sample["obs"].tolist()
        # cut where the episode changes or the values stop being consecutive
        runs, run = [], [obs[0]]
        for prev, cur, pe, ce in zip(obs, obs[1:], ep, ep[1:]):
            if cur == prev + 1 and pe == ce:
                run.append(cur)
            else:
                runs.append(run)
                run = [cur]
        runs.append(run)
        out.append([len(obs) <= 20, len(runs) <= 4 + 4])
    return out


def scenario_slice_span():
    data = _trajs((6, 4, 10))
    out = {}
    for span in (False, True, (True, False), (False, True)):
        rb = _slice_rb(SliceSampler(slice_len=4, span=span, strict_length=False, traj_key="episode"), 16, data=data)
        samples = [rb.sample() for _ in range(4)]
        out[str(span)] = [sorted(_no_init(samples[0]).keys(True, True)), samples[0]["index"].shape[1:],
                          all(s.shape[0] <= 16 for s in samples),
                          all(_consecutive([s["obs"][s["episode"] == e].tolist()]) for s in samples for e in range(3))]
    return out


def scenario_slice_cache_values_after_extend():
    sampler = SliceSampler(slice_len=3, cache_values=True, traj_key="episode")
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(40), sampler=sampler, batch_size=9)
    rb.extend(_trajs((6, 4)))
    first = rb.sample()
    more = _trajs((8,))
    more["obs"] += 10
    more["episode"] += 2
    rb.extend(more)
    seen = set()
    for _ in range(30):
        seen |= set(rb.sample()["episode"].tolist())
    return [parity.structure(_no_init(first)), sorted(seen)]


def scenario_slice_sampler_state_and_repr():
    sampler = SliceSampler(num_slices=2, traj_key="episode")
    rb = _slice_rb(sampler, 8)
    rb.sample()
    return [parity.structure(sampler.state_dict()), type(sampler).__name__]


def scenario_slice_without_replacement_epoch():
    out = {}
    for drop_last in (False, True):
        rb = _slice_rb(SliceSamplerWithoutReplacement(slice_len=2, traj_key="episode", drop_last=drop_last), 4)
        batches = [parity.attempt(rb.sample) for _ in range(3)]
        ok = [b for b in batches if not isinstance(b, Exception)]
        out[f"drop_last={drop_last}"] = [[b.shape[0] for b in ok], [type(b).__name__ for b in batches if isinstance(b, Exception)],
                                         all(_consecutive(_slices(b["obs"], 2)) for b in ok),
                                         all(len(set(e)) == 1 for b in ok for e in _slices(b["episode"], 2))]
    return out


def scenario_slice_without_replacement_iteration_covers_trajectories():
    rb = _slice_rb(SliceSamplerWithoutReplacement(num_slices=3, traj_key="episode", strict_length=False), 6)
    batches = list(rb)
    episodes = sorted(int(e) for b in batches for e in set(b["episode"].tolist()))
    return [len(batches), episodes]


def scenario_slice_without_replacement_shuffle_false():
    rb = _slice_rb(SliceSamplerWithoutReplacement(num_slices=3, traj_key="episode", shuffle=False), 6)
    first = rb.sample()
    return [parity.structure(_no_init(first)), sorted(set(first["episode"].tolist()))]


# ------------------------------------------------------------------------------------------ prioritized
def scenario_prioritized_argument_checks():
    return [parity.attempt(lambda: PrioritizedSampler(10, 0.7, -1.0))]


def scenario_iteration_with_random_sampler():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
    rb.extend(torch.arange(10))
    batches = list(itertools.islice(iter(rb), 3))
    no_batch = ReplayBuffer(storage=LazyTensorStorage(10))
    no_batch.extend(torch.arange(10))
    return [[b.shape for b in batches], parity.attempt(lambda: next(iter(no_batch)))]
