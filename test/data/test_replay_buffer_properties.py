"""Property-based tests (hypothesis) over replay-buffer writes and samples.

Every element written carries a unique id, so what a buffer holds and what it samples can be checked
exactly: nothing lost, nothing duplicated, nothing invented.
"""
from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tensordict import TensorDict

from torchrl.data import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
)

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
STORAGES = {"list": ListStorage, "tensor": LazyTensorStorage, "memmap": LazyMemmapStorage}

writes = st.lists(st.integers(1, 12), min_size=1, max_size=6)  # sizes of successive extends


def _batch(start: int, n: int) -> TensorDict:
    ids = torch.arange(start, start + n)
    return TensorDict(
        {"id": ids, "obs": ids.float().unsqueeze(-1).expand(n, 3).clone(), ("nested", "flag"): ids % 2 == 0}, [n]
    )


def _fill(rb, sizes: list[int]) -> list[int]:
    """Extends ``rb`` with batches of ``sizes``; returns every id written, in order."""
    written, start = [], 0
    for n in sizes:
        rb.extend(_batch(start, n))
        written += list(range(start, start + n))
        start += n
    return written


@SETTINGS
@given(kind=st.sampled_from(sorted(STORAGES)), capacity=st.integers(1, 30), sizes=writes)
def test_buffer_holds_the_last_capacity_elements(kind, capacity, sizes, tmp_path_factory):
    kwargs = {"scratch_dir": tmp_path_factory.mktemp("mm")} if kind == "memmap" else {}
    rb = ReplayBuffer(storage=STORAGES[kind](capacity, **kwargs))
    written = _fill(rb, sizes)
    assert len(rb) == min(capacity, len(written))
    content = rb[:]
    assert sorted(content["id"].tolist()) == sorted(written[-len(rb):])
    # every stored element is intact: its other entries agree with its id
    assert torch.equal(content["obs"][:, 0], content["id"].float())
    assert torch.equal(content["nested", "flag"], content["id"] % 2 == 0)


@SETTINGS
@given(kind=st.sampled_from(sorted(STORAGES)), capacity=st.integers(1, 30), sizes=writes,
       batch=st.integers(1, 8), drop_last=st.booleans())
def test_sampling_without_replacement_is_a_permutation(kind, capacity, sizes, batch, drop_last, tmp_path_factory):
    kwargs = {"scratch_dir": tmp_path_factory.mktemp("mm")} if kind == "memmap" else {}
    rb = ReplayBuffer(storage=STORAGES[kind](capacity, **kwargs), sampler=SamplerWithoutReplacement(drop_last=drop_last),
                      batch_size=batch)
    written = _fill(rb, sizes)
    stored = written[-len(rb):]
    if drop_last and len(rb) < batch:
        return  # not even one full batch: nothing to sample in this epoch
    n_batches = len(rb) // batch if drop_last else -(-len(rb) // batch)
    seen = []
    for _ in range(n_batches):
        sample = rb.sample()
        assert torch.equal(sample["obs"][:, 0], sample["id"].float())
        seen += sample["id"].tolist()
    # one epoch: no element twice, and all of them unless drop_last cut the remainder
    assert len(seen) == len(set(seen)) and set(seen) <= set(stored)
    expected = (len(rb) // batch) * batch if drop_last else len(rb)
    assert len(seen) == expected


@SETTINGS
@given(capacity=st.integers(1, 30), sizes=writes, batch=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_random_and_prioritized_samples_come_from_the_content(capacity, sizes, batch, seed):
    torch.manual_seed(seed)
    for sampler in (RandomSampler(), PrioritizedSampler(capacity, alpha=0.7, beta=0.5)):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(capacity), sampler=sampler, batch_size=batch)
        written = _fill(rb, sizes)
        stored = set(written[-len(rb):])
        sample = rb.sample()
        assert sample.batch_size == (batch,)
        assert set(sample["id"].tolist()) <= stored
        assert torch.equal(sample["obs"][:, 0], sample["id"].float())
        if isinstance(sampler, PrioritizedSampler):
            index = sample["index"]
            rb.update_priority(index, torch.rand(batch) + 0.1)  # new priorities keep samples inside the content
            assert set(rb.sample()["id"].tolist()) <= stored


@SETTINGS
@given(sizes=writes, seed=st.integers(0, 2**16))
def test_prioritized_zero_priority_is_never_sampled(sizes, seed):
    torch.manual_seed(seed)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), sampler=PrioritizedSampler(100, alpha=1.0, beta=1.0),
                                batch_size=32)
    written = _fill(rb, sizes)
    if len(written) < 2:
        return
    keep = torch.arange(len(written)) % 2 == 0  # odd ids get (almost) zero priority
    rb.update_priority(torch.arange(len(written)), torch.where(keep, torch.ones(len(written)), torch.zeros(len(written))))
    assert all(i % 2 == 0 for i in rb.sample()["id"].tolist())
