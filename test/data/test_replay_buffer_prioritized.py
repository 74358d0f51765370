"""Prioritized buffers: priorities through the buffer API, tensordict priorities, asynchronous writes."""
from __future__ import annotations

import multiprocessing as mp

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import (
    LazyTensorStorage,
    PrioritizedReplayBuffer,
    PrioritizedSampler,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)


def data(n: int, start: int = 0) -> TensorDict:
    return TensorDict(obs=torch.arange(start, start + n, dtype=torch.float32), batch_size=[n])


def test_prioritized_replay_buffer_weights_and_updates():
    rb = PrioritizedReplayBuffer(alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(10), batch_size=500)
    rb.extend(data(4))
    rb.update_priority(torch.arange(4), torch.tensor([1.0, 1.0, 2.0, 4.0]))
    sample, info = rb.sample(return_info=True)
    expected = 1.0 / torch.tensor([1.0, 1.0, 2.0, 4.0])
    torch.testing.assert_close(info["priority_weight"], expected[info["index"]])
    assert torch.equal(sample["obs"].long(), info["index"])
    assert isinstance(rb.prioritized_sampler, PrioritizedSampler)


def test_tensordict_priorities_round_trip():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=0.0, eps=0.0, storage=LazyTensorStorage(10), batch_size=8)
    rb.extend(data(5))
    batch = rb.sample()
    assert set(batch.keys()) == {"obs", "index", "priority_weight"}
    assert (batch["priority_weight"] == 1).all()
    rb.update_priority(torch.arange(5), torch.zeros(5))
    batch["td_error"] = torch.where(batch["index"] == batch["index"][0], 10.0, 0.0)
    rb.update_tensordict_priority(batch)
    assert rb.sample()["index"].unique().tolist() == [batch["index"][0].item()]
    with pytest.raises(KeyError, match="no 'index' entry"):
        rb.update_tensordict_priority(TensorDict(td_error=torch.ones(2), batch_size=[2]))


def test_extend_with_priorities_uses_them():
    rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(10), batch_size=100)
    batch = data(3)
    batch["td_error"] = torch.tensor([0.0, 0.0, 3.0])
    rb.extend(batch)
    assert rb.sample()["index"].unique().tolist() == [2]
    assert rb.sampler._tree.leaves[:3].tolist() == [0.0, 0.0, 3.0]


def test_multi_step_priorities_reduced():
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=1.0, beta=1.0, eps=0.0, reduction="max", storage=LazyTensorStorage(10), batch_size=2
    )
    rb.extend(TensorDict(obs=torch.zeros(2, 3), batch_size=[2, 3]))
    batch = rb.sample()
    assert batch["index"].shape == (2, 3)  # one index per element, expanded over its steps
    batch = TensorDict(index=torch.tensor([[0] * 3, [1] * 3]), td_error=torch.tensor([[1.0, 5.0, 2.0], [0.5, 0.1, 0.2]]),
                       batch_size=[2, 3])
    rb.update_tensordict_priority(batch)
    assert rb.sampler._tree.leaves[:2].tolist() == [5.0, 0.5]


def test_bad_priorities_leave_the_buffer_untouched():
    rb = PrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(10))
    rb.extend(data(5))
    before = rb.sampler._tree.leaves.clone()
    with pytest.raises(ValueError, match="priorities must be finite and >= 0"):
        rb.update_priority(torch.arange(2), torch.tensor([float("nan"), -1.0]))
    with pytest.raises(ValueError, match="got 3 priorities"):
        rb.update_priority(torch.arange(2), torch.ones(3))
    assert torch.equal(rb.sampler._tree.leaves, before)


def test_async_writes_catch_up_before_sampling():
    rb = PrioritizedReplayBuffer(alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(8), sync=False, batch_size=64)
    rb.extend(data(5))
    assert rb.sampler._tree.leaves.sum() == 0  # writes did not touch the trees
    assert set(rb.sample()["obs"].long().tolist()) <= set(range(5))
    assert torch.count_nonzero(rb.sampler._tree.leaves) == 5
    rb.extend(data(6, start=5))  # wraps: slots 5, 6, 7, 0, 1, 2
    rb.update_priority(torch.tensor([3]), torch.tensor([0.0]))
    assert torch.count_nonzero(rb.sampler._tree.leaves) == 7
    rb.empty()
    rb.extend(data(2))
    assert rb.sample()["obs"].long().unique().tolist() in ([0], [1], [0, 1])


def test_priority_sampler_in_a_plain_tensordict_buffer():
    sampler = PrioritizedSampler(max_capacity=10, alpha=1.0, beta=1.0)
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), sampler=sampler, batch_size=4)
    rb.extend(data(4))
    assert "priority_weight" in rb.sample().keys()


def _child_update(rb):
    rb.update_priority(torch.arange(4), torch.tensor([0.0, 0.0, 0.0, 1.0]))


def test_shared_priorities_across_processes():
    rb = TensorDictPrioritizedReplayBuffer(
        alpha=1.0, beta=1.0, eps=0.0, storage=LazyTensorStorage(8), shared=True, batch_size=32
    )
    rb.extend(data(4))
    proc = mp.get_context("fork").Process(target=_child_update, args=(rb,))
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0
    assert rb.sample()["index"].unique().tolist() == [3]
