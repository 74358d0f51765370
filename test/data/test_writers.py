"""Writers of ``torchrl.data.replay_buffers.writers``: cursors, generations, ranking, immutability."""
from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.replay_buffers import (
    ImmutableDatasetWriter,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    RoundRobinWriter,
    TensorDictMaxValueWriter,
    TensorDictReplayBuffer,
    TensorStorage,
    WriterEnsemble,
)


class TestRoundRobinWriter:
    def test_cursor_wraps_and_returns_indices(self):
        writer = RoundRobinWriter()
        storage = LazyTensorStorage(5)
        writer.register_storage(storage)
        assert writer.extend(torch.arange(3)).tolist() == [0, 1, 2]
        assert writer.extend(torch.arange(3, 7)).tolist() == [3, 4, 0, 1]
        assert storage.get(torch.arange(5)).tolist() == [5, 6, 2, 3, 4]
        assert writer._cursor == 2 and writer._write_count == 7
        assert writer.add(torch.tensor(9)) == 2
        assert storage.get(2).item() == 9

    def test_batch_larger_than_capacity_keeps_the_last_elements(self):
        writer = RoundRobinWriter()
        storage = LazyTensorStorage(4)
        writer.register_storage(storage)
        index = writer.extend(torch.arange(10))
        assert index.tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
        assert storage.get(torch.arange(4)).tolist() == [8, 9, 6, 7]
        assert writer._cursor == 2 and writer._write_count == 10

    def test_list_storage(self):
        writer = RoundRobinWriter()
        storage = ListStorage(3)
        writer.register_storage(storage)
        writer.extend(["a", "b", "c", "d"])
        assert storage.get([0, 1, 2]) == ["d", "b", "c"]

    def test_generations(self):
        writer = RoundRobinWriter(track_generations=True)
        writer.register_storage(LazyTensorStorage(4))
        writer.extend(torch.arange(3))
        assert writer.generations_of(torch.arange(4)).tolist() == [1, 1, 1, 0]
        writer.extend(torch.arange(3))
        assert writer.generations_of(torch.arange(4)).tolist() == [2, 2, 1, 1]
        writer.write_at(torch.tensor([2]), torch.tensor([5]))
        assert writer.generations_of(2).item() == 2
        with pytest.raises(RuntimeError, match="track_generations=True"):
            RoundRobinWriter().generations_of(0)

    def test_state_round_trip(self, tmp_path):
        writer = RoundRobinWriter(track_generations=True)
        writer.register_storage(LazyTensorStorage(4))
        writer.extend(torch.arange(6))
        writer.dumps(tmp_path)
        other = RoundRobinWriter(track_generations=True)
        other.loads(tmp_path)
        assert (other._cursor, other._write_count) == (2, 6)
        # a batch larger than the storage writes each slot once (only its last elements survive)
        assert other.generations_of(torch.arange(4)).tolist() == [1, 1, 1, 1]


class TestMaxValueWriter:
    def test_keeps_the_best_elements(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter(rank_key="score"))
        rb.extend(TensorDict(score=torch.tensor([1.0, 9.0, 4.0, 0.0, 5.0]), batch_size=[5]))
        assert sorted(rb.storage.get(torch.arange(3))["score"].tolist()) == [4.0, 5.0, 9.0]
        assert rb.add(TensorDict(score=torch.tensor(2.0), batch_size=[])) is None
        index = rb.add(TensorDict(score=torch.tensor(7.0), batch_size=[]))
        assert rb.storage.get(index)["score"].item() == 7.0
        assert sorted(rb.storage.get(torch.arange(3))["score"].tolist()) == [5.0, 7.0, 9.0]

    def test_rank_reduced_over_trajectories(self):
        writer = TensorDictMaxValueWriter(reduction="sum")
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1), writer=writer)
        low = TensorDict(next=TensorDict(reward=torch.ones(4, 1), batch_size=[4]), batch_size=[4])
        high = TensorDict(next=TensorDict(reward=torch.full((4, 1), 2.0), batch_size=[4]), batch_size=[4])
        rb.add(low)
        assert writer.get_insert_index(high) == 0
        rb.add(high)
        assert rb.storage.get(0)["next", "reward"].sum().item() == 8.0

    def test_missing_rank_key(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(2), writer=TensorDictMaxValueWriter())
        with pytest.raises(KeyError, match=r"no rank entry \('next', 'reward'\)"):
            rb.extend(TensorDict(a=torch.zeros(2), batch_size=[2]))


def test_immutable_writer():
    rb = ReplayBuffer(storage=TensorStorage(torch.arange(4)), writer=ImmutableDatasetWriter(), batch_size=2)
    assert len(rb) == 4
    with pytest.raises(RuntimeError, match="immutable"):
        rb.extend(torch.arange(2))
    with pytest.raises(RuntimeError, match="immutable"):
        rb.add(torch.tensor(1))


def test_writer_ensemble():
    writers = WriterEnsemble(RoundRobinWriter(track_generations=True), RoundRobinWriter(track_generations=True))
    with pytest.raises(RuntimeError, match="does not write by itself"):
        writers.extend()
    assert writers.tracks_generations and len(writers) == 2
