"""Replay buffers (issue 17): plain data (tuples, lists, dicts of tensors) in every storage, samplers on it,
checkpoints, writers (max-value, round-robin, immutable), write checks (dtype, trailing shape), slice
samplers' argument combinations and end flags. PrioritizedSampler is absent: TorchRL 0.14.1's reference
install lacks its compiled segment trees and cannot build one."""
import tempfile

import torch
from tensordict import TensorDict
from torch.utils._pytree import tree_map

import parity
from torchrl.data import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
    TensorStorage,
)
from torchrl.data.replay_buffers import (
    ImmutableDatasetWriter,
    PrioritizedSliceSampler,
    RoundRobinWriter,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorDictRoundRobinWriter,
)


def _pair(n=6):
    return torch.arange(2 * n, dtype=torch.float32).view(n, 2), torch.arange(n)


def _storages():
    return {"lazy": LazyTensorStorage(10), "memmap": LazyMemmapStorage(10)}


# ------------------------------------------------------------------------------------------ plain data
def scenario_tuple_in_tensor_storages():
    out = {}
    for name, storage in _storages().items():
        rb = ReplayBuffer(storage=storage, batch_size=3)
        index = rb.extend(_pair())
        torch.manual_seed(1)
        out[name] = [index, len(rb), rb.sample(), rb[0], rb[1:3], rb[torch.tensor([0, 5])]]
    return out


def scenario_tuple_add_then_extend():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
    first = [rb.add((torch.full((3,), float(i)), torch.tensor(i))) for i in range(2)]
    index = rb.extend((torch.ones(2, 3), torch.tensor([5, 6])))
    return [first, index, len(rb), rb[1], rb[torch.arange(4)]]


def scenario_tutorial_pytree():
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    element = {"a": torch.arange(3.0), "b": {"c": (torch.zeros(2), [torch.ones(1)])}, 30: -torch.ones(())}
    added = rb.add(element)
    first = parity.structure(rb.sample(10))
    index = rb.extend(tree_map(lambda x: x.expand(10, *x.shape), element))
    return [added, first, index, len(rb), rb[3], parity.structure(rb.sample(10))]


def scenario_pytree_callable_transform():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3, transform=lambda x: x[0])
    rb.extend((torch.ones(5, 2), torch.zeros(5)))
    zeroed = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
    zeroed.extend(_pair())
    zeroed.append_transform(lambda x: tree_map(lambda y: y * 0, x))
    return [rb.sample(), zeroed.sample()]


def scenario_list_is_a_list_of_elements():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
    index = rb.extend([(torch.full((3,), float(i)), torch.tensor(i)) for i in range(4)])
    lists = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
    lists.extend([[torch.arange(3.0), torch.tensor(1)]] * 2)
    dicts = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
    dicts.extend([{"a": torch.arange(3.0), "b": torch.tensor(1)}] * 4)
    return [index, rb[torch.arange(4)], parity.structure(lists.sample()), parity.structure(dicts.sample())]


def scenario_list_of_mismatched_elements():
    def extend(data):
        return ReplayBuffer(storage=LazyTensorStorage(10)).extend(data)

    return [
        parity.attempt(lambda: extend([{"a": torch.zeros(3)}, {"a": torch.zeros(2)}])),
        parity.attempt(lambda: extend([{"a": torch.zeros(3), "b": torch.tensor(1)}, {"a": torch.zeros(3)}])),
        parity.attempt(lambda: extend([1, 2, 3])),
    ]


def scenario_tensor_storage_of_pytrees():
    rb = ReplayBuffer(storage=TensorStorage((torch.arange(6.0).view(3, 2), torch.arange(3))), batch_size=2)
    before = [len(rb), rb[1]]
    index = rb.extend((torch.ones(2, 2), torch.ones(2, dtype=torch.long)))
    d = ReplayBuffer(storage=TensorStorage({"x": torch.arange(6.0).view(3, 2)}), batch_size=2)
    return [before, index, rb[:], len(d), d.add({"x": torch.ones(2)}), d[0], d[:]]


def scenario_list_storage_collates():
    tuples = ReplayBuffer(storage=ListStorage(10), batch_size=3)
    tuples.extend([(torch.full((2,), float(i)), torch.tensor(i)) for i in range(5)])
    lists = ReplayBuffer(storage=ListStorage(10), batch_size=3)
    for i in range(3):
        lists.add([torch.full((3,), float(i)), torch.tensor(i)])
    dicts = ReplayBuffer(storage=ListStorage(10), batch_size=3)
    for i in range(3):
        dicts.add({"a": torch.full((3,), float(i)), "b": {"c": torch.tensor(i)}})
    torch.manual_seed(0)
    return [tuples.sample(), tuples[0], tuples[[0, 1]], lists.sample(), dicts[0], dicts[0:2], dicts.sample()]


def scenario_list_storage_errors_and_sets():
    dict_error = parity.attempt(lambda: ReplayBuffer(storage=ListStorage(10)).extend({"a": torch.zeros(3)}))
    rb = ReplayBuffer(storage=ListStorage(10))
    index = rb.extend({4, 5})
    ragged = ReplayBuffer(storage=ListStorage(10), batch_size=3)
    for i in range(3):
        ragged.add(torch.zeros(i + 1))
    return [dict_error, index, len(rb), sorted([rb[0], rb[1]]), parity.attempt(ragged.sample)]


def scenario_empty_extend_raises():
    return [
        parity.attempt(lambda: ReplayBuffer(storage=LazyTensorStorage(3)).extend(torch.zeros(0))),
        parity.attempt(lambda: ReplayBuffer(storage=ListStorage(3)).extend([])),
        parity.attempt(lambda: ReplayBuffer(storage=LazyTensorStorage(3)).extend(TensorDict(a=torch.zeros(0), batch_size=[0]))),
    ]


def scenario_without_replacement_iterates_tuples():
    out = []
    for storage in (ListStorage(10), LazyTensorStorage(10)):
        rb = ReplayBuffer(storage=storage, sampler=SamplerWithoutReplacement(), batch_size=3)
        data = _pair()
        rb.extend([(data[0][i], data[1][i]) for i in range(6)] if isinstance(storage, ListStorage) else data)
        torch.manual_seed(1)
        (obs, ids), info = rb.sample(return_info=True)
        out.append([obs, ids, info["index"], len(list(rb))])
    return out


def scenario_tuple_checkpoint_round_trip():
    out = []
    for name in ("lazy", "memmap"):
        rb = ReplayBuffer(storage=_storages()[name], batch_size=3)
        rb.extend(_pair())
        with tempfile.TemporaryDirectory() as d:
            rb.dumps(d)
            other = ReplayBuffer(storage=_storages()[name], batch_size=3)
            other.extend(_pair(2))  # TorchRL restores a pytree storage only into an initialized one
            other.loads(d)
            out.append([len(other), other[4], other[:]])
    return out


def scenario_tuple_checkpoint_into_a_fresh_storage():
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
    rb.extend(_pair())
    with tempfile.TemporaryDirectory() as d:
        rb.dumps(d)
        other = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
        other.loads(d)
        return [len(other), other[:]]


# ------------------------------------------------------------------------------------------ writers
def _max_rb(capacity, **kwargs):
    return TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), writer=TensorDictMaxValueWriter(rank_key="r", **kwargs))


def scenario_max_value_writer_extend_indices():
    rb = _max_rb(2)
    first = rb.extend(TensorDict(r=torch.tensor([1.0, 5.0, 3.0, 0.0]), batch_size=[4]))
    second = rb.extend(TensorDict(r=torch.tensor([4.0, 0.5]), batch_size=[2]))
    none = rb.extend(TensorDict(r=torch.tensor([0.1]), batch_size=[1]))
    ties = _max_rb(2)
    tie_index = ties.extend(TensorDict(r=torch.tensor([1.0, 2.0, 2.0, 1.0, 2.0, 3.0]), batch_size=[6]))
    big = _max_rb(3)
    big_index = [big.extend(TensorDict(r=torch.tensor([5.0, 1, 7, 3, 9, 2, 8, 8, 0]), batch_size=[9])),
                 big.extend(TensorDict(r=torch.tensor([8.5, 1, 10]), batch_size=[3]))]
    return [first, second, none, rb.storage[:]["r"], tie_index, ties.storage[:]["r"], big_index, big.storage[:]["r"]]


def scenario_max_value_writer_reductions():
    out = {}
    for reduction in ("sum", "mean", "max", "min", "median"):
        rb = _max_rb(2, reduction=reduction)
        r = torch.tensor([[1.0, 9.0], [5.0, 5.0], [3.0, 4.0], [0.0, 100.0]])
        out[reduction] = [rb.extend(TensorDict(r=r, batch_size=[4])), rb.storage[:]["r"]]
    bad = parity.attempt(lambda: _max_rb(2, reduction="prod").extend(TensorDict(r=torch.ones(3, 2), batch_size=[3])))
    return [out, bad]


def scenario_max_value_writer_add_and_plain_data():
    rb = _max_rb(2)
    adds = [rb.add(TensorDict(r=torch.tensor(v), batch_size=[])) for v in (1.0, 5.0, 3.0, 0.0, 7.0)]
    plain = ReplayBuffer(storage=LazyTensorStorage(2), writer=TensorDictMaxValueWriter(rank_key="r"))
    default_key = TensorDictReplayBuffer(storage=LazyTensorStorage(2), writer=TensorDictMaxValueWriter())
    return [
        adds,
        rb.storage[:]["r"],
        rb.add(TensorDict(r=torch.tensor([9.0]), batch_size=[])),  # broadcast into the stored shape
        parity.attempt(lambda: plain.extend(torch.tensor([1.0, 5.0, 3.0]))),
        parity.attempt(lambda: plain.add(torch.tensor(1.0))),
        parity.attempt(lambda: _max_rb(3).extend(TensorDict(r=torch.tensor(2.0), batch_size=[]))),
        default_key.extend(TensorDict({"next": {"reward": torch.tensor([1.0, 2.0, 3.0])}}, batch_size=[3])),
        repr(rb.writer),
        repr(_max_rb(5, reduction="max").writer),
    ]


def scenario_round_robin_writers():
    rb = ReplayBuffer(storage=LazyTensorStorage(3), writer=RoundRobinWriter())
    index = [rb.extend(torch.arange(4)), rb.add(torch.tensor(9))]
    td = TensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictRoundRobinWriter())
    td_index = td.extend(TensorDict(a=torch.arange(4), batch_size=[4]))
    return [index, rb[:], rb.writer.state_dict(), repr(rb.writer), td_index, td.storage[:]["a"],
            ReplayBuffer(storage=LazyTensorStorage(3)).extend(torch.zeros(0))]


def scenario_immutable_writer():
    rb = ReplayBuffer(storage=TensorStorage(torch.arange(5)), writer=ImmutableDatasetWriter())
    errors = [parity.attempt(lambda: rb.extend(torch.arange(2))), parity.attempt(lambda: rb.add(torch.tensor(1))),
              parity.attempt(rb.empty)]
    rb[0] = torch.tensor(9)
    return [errors, len(rb), rb[:], rb.writer.state_dict(), repr(rb.writer)]


# ------------------------------------------------------------------------------------------ write checks
DTYPE_CASES = [
    ("int->float", torch.float32, torch.int64),
    ("float->int", torch.int64, torch.float32),
    ("bool->float", torch.float32, torch.bool),
    ("float64->float32", torch.float32, torch.float64),
    ("float32->float64", torch.float64, torch.float32),
    ("int32->int64", torch.int64, torch.int32),
]


def scenario_batched_writes_with_another_dtype_raise():
    out = {}
    for name, stored, received in DTYPE_CASES:
        for kind in ("td", "tensor", "tuple"):
            def wrap(x):
                if kind == "td":
                    return TensorDict(obs=x, batch_size=x.shape[:1])
                return x if kind == "tensor" else (x, torch.zeros(x.shape[0]))

            rb = ReplayBuffer(storage=LazyTensorStorage(4))
            rb.extend(wrap(torch.ones(2, 2, dtype=stored)))
            out[f"{name}/{kind}"] = parity.attempt(lambda: rb.extend(wrap(torch.zeros(2, 2, dtype=received))))
    return out


def scenario_single_writes_cast_to_the_stored_dtype():
    out = {}
    for name, stored, received in DTYPE_CASES:
        rb = ReplayBuffer(storage=LazyTensorStorage(4))
        rb.extend(TensorDict(obs=torch.ones(2, 2, dtype=stored), batch_size=[2]))
        value = torch.tensor([3, 0]).to(received)
        index = rb.add(TensorDict(obs=value, batch_size=[]))
        rb[0] = TensorDict(obs=value, batch_size=[])
        out[name] = [index, rb[2]["obs"], rb[0]["obs"]]
    indexed = ReplayBuffer(storage=LazyTensorStorage(4))
    indexed.extend(TensorDict(obs=torch.ones(2, 2), batch_size=[2]))
    out["tensor index"] = parity.attempt(
        lambda: indexed.__setitem__(torch.tensor([0, 1]), TensorDict(obs=torch.ones(2, 2, dtype=torch.long), batch_size=[2]))
    )
    return out


def scenario_trailing_shapes():
    out = {}
    for kind in ("td", "tensor"):
        for shape in [(2, 3), (2, 1), (2, 2, 1), (2, 1, 2)]:
            rb = ReplayBuffer(storage=LazyTensorStorage(4))
            first = torch.ones(2, 2)
            rb.extend(TensorDict(obs=first, batch_size=[2]) if kind == "td" else first)
            data = torch.full(shape, 5.0)
            result = parity.attempt(lambda: rb.extend(TensorDict(obs=data, batch_size=[2]) if kind == "td" else data))
            stored = rb[torch.arange(len(rb))]
            out[f"{kind}{shape}"] = [result, stored["obs"] if kind == "td" else stored] if not isinstance(
                result, Exception) else result
        rb = ReplayBuffer(storage=LazyTensorStorage(4))
        rb.extend(torch.ones(2, 2))
        out[f"{kind} add (1, 2)"] = [rb.add(torch.full((1, 2), 7.0)), rb[2]]
        out[f"{kind} add (3,)"] = parity.attempt(lambda: rb.add(torch.zeros(3)))
    return out


# ------------------------------------------------------------------------------------------ slice samplers
def _episodes(terminated=False):
    done = torch.zeros(20, 1, dtype=torch.bool)
    done[[5, 9, 19]] = True
    nxt = {"done": done, "obs": torch.arange(1, 21.0)}
    if terminated:
        nxt["terminated"] = done.clone()
        nxt["truncated"] = torch.zeros_like(done)
    episode = torch.tensor([0] * 6 + [1] * 4 + [2] * 10)
    return TensorDict({"episode": episode, "obs": torch.arange(20.0), "next": nxt}, batch_size=[20])


def _flags(sample):
    return [sample["obs"], sample["next", "done"], sample["next", "truncated"], sample["next", "terminated"]]


def scenario_slice_sampler_wrong_combinations():
    bool3, float3 = torch.zeros(3, dtype=torch.bool), torch.zeros(3)
    cases = [
        {},
        {"num_slices": 2, "slice_len": 2},
        {"num_slices": 2, "end_key": "a", "end_keys": ["b"]},
        {"num_slices": 2, "ends": bool3, "trajectories": float3},
        {"num_slices": 2, "ends": bool3, "traj_key": "t"},
        {"num_slices": 2, "trajectories": float3, "end_key": "d"},
        {"num_slices": 2, "ends": bool3},
        {"num_slices": 2, "trajectories": float3},
        {"num_slices": 2, "pad_output": True},
    ]
    out = [parity.attempt(lambda: SliceSampler(**kw)) for kw in cases]
    out.append(parity.attempt(lambda: SliceSamplerWithoutReplacement()))
    out.append(parity.attempt(lambda: PrioritizedSliceSampler(20, 0.7, 0.5)))
    out.append(parity.attempt(lambda: PrioritizedSliceSampler(20, 0.7, 0.5, ends=bool3, num_slices=2)))
    return [type(x).__name__ if not isinstance(x, Exception) else x for x in out]


def scenario_slice_sampler_boundaries_and_flags():
    out = {}
    for name, kwargs in [("default", {}), ("end_key", {"end_key": ("next", "done")}), ("traj_key", {"traj_key": "episode"}),
                         ("end_keys", {"end_keys": [("next", "done")]}), ("compile", {"compile": True}),
                         ("cache_values", {"cache_values": True}), ("use_gpu", {"use_gpu": "cpu"})]:
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=SliceSampler(slice_len=4, **kwargs), batch_size=12)
        rb.extend(_episodes())
        torch.manual_seed(3)
        # TorchRL's compiled path draws its slices differently: structure only there
        out[name] = _flags(rb.sample()) if name != "compile" else parity.structure(_flags(rb.sample()))
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=SliceSampler(slice_len=4), batch_size=12)
    rb.extend(_episodes(terminated=True))
    torch.manual_seed(3)
    out["stored terminated"] = _flags(rb.sample())
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=SliceSampler(num_slices=2, truncated_key=("next", "trunc")),
                                batch_size=8)
    rb.extend(_episodes())
    torch.manual_seed(0)
    sample = rb.sample()
    out["truncated_key"] = [sample["next", "trunc"], sample["next", "terminated"], sample["next", "done"]]
    return out


def scenario_slice_sampler_traj_key_wins_over_end_key():
    data = _episodes()
    data["one"] = torch.zeros(20, dtype=torch.long)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=20,
                                sampler=SliceSampler(slice_len=10, end_key=("next", "done"), traj_key="one"))
    rb.extend(data)
    torch.manual_seed(0)
    return [rb.sample()["obs"] for _ in range(3)]


def scenario_slice_sampler_span_strict_and_padding():
    out = []
    for strict in (True, False):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=8,
                                    sampler=SliceSampler(slice_len=4, span=(True, False), strict_length=strict))
        rb.extend(_episodes())
        torch.manual_seed(1)
        out.append(rb.sample()["obs"])
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=16,
                                sampler=SliceSampler(slice_len=8, pad_output=True, strict_length=False))
    rb.extend(_episodes())
    torch.manual_seed(2)
    sample, info = rb.sample(return_info=True)
    out.append([sample["obs"], sample["next", "done"], sample["next", "truncated"], info[("collector", "mask")],
                ("collector", "mask") in sample.keys(True)])
    return out


def scenario_slice_sampler_errors_at_sampling():
    def sample(sampler, batch):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=sampler, batch_size=batch)
        rb.extend(_episodes())
        return rb.sample()

    return [
        parity.attempt(lambda: sample(SliceSampler(slice_len=3), 8)),
        parity.attempt(lambda: sample(SliceSampler(num_slices=3), 8)),
        parity.attempt(lambda: sample(SliceSampler(slice_len=12), 24)),
        parity.structure(sample(SliceSampler(slice_len=8), 16)["obs"]),
    ]


def scenario_slice_sampler_without_replacement():
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=8,
                                sampler=SliceSamplerWithoutReplacement(num_slices=2, traj_key="episode"))
    rb.extend(_episodes())
    torch.manual_seed(0)
    batches = [_flags(batch) for batch in rb]
    return [len(batches), sorted(torch.cat([b[0] for b in batches]).int().tolist())]


def scenario_tensordict_buffer_index_entry():
    import torch as _torch
    from tensordict import TensorDict as _TD
    from torchrl.data import LazyTensorStorage as _LTS, TensorDictReplayBuffer as _TDRB

    rb = _TDRB(storage=_LTS(4))
    single = _TD({"a": _torch.tensor(3)}, [])
    rb.add(single)
    batch = _TD({"a": _torch.arange(5)}, [5])
    ret = rb.extend(batch)
    grid = _TD({"a": _torch.arange(6).view(3, 2)}, [3, 2])
    rb2 = _TDRB(storage=_LTS(10))
    rb2.extend(grid)
    return [sorted(single.keys()), sorted(batch.keys()), ret, rb[:], rb[1:3], rb2[:]]
