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

    def test_empty_extend_raises(self):
        # TorchRL 0.14.1: RuntimeError("Expected at least one element in extend...") for every storage
        for storage, data in [(LazyTensorStorage(3), torch.zeros(0)), (ListStorage(3), []),
                              (LazyTensorStorage(3), TensorDict(a=torch.zeros(0), batch_size=[0]))]:
            rb = ReplayBuffer(storage=storage)
            with pytest.raises(RuntimeError, match="expected at least one element, got an empty batch"):
                rb.extend(data)
            assert len(rb) == 0 and rb.write_count == 0
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(3), writer=TensorDictMaxValueWriter(rank_key="r"))
        with pytest.raises(RuntimeError, match="expected at least one element"):
            rb.extend(TensorDict(r=torch.zeros(0), batch_size=[0]))

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


class TestMaxValueWriterParity:
    """Known answers observed on TorchRL 0.14.1."""

    @staticmethod
    def _rb(capacity, **kwargs):
        return TensorDictReplayBuffer(
            storage=LazyTensorStorage(capacity), writer=TensorDictMaxValueWriter(rank_key="r", **kwargs)
        )

    def test_extend_returns_the_slot_of_every_element_or_minus_one(self):
        rb = self._rb(2)
        assert rb.extend(TensorDict(r=torch.tensor([1.0, 5.0, 3.0, 0.0]), batch_size=[4])).tolist() == [-1, 1, 0, -1]
        assert rb.extend(TensorDict(r=torch.tensor([4.0, 0.5]), batch_size=[2])).tolist() == [0, -1]
        assert rb.storage._storage["r"].tolist() == [4.0, 5.0]
        assert rb.extend(TensorDict(r=torch.tensor([0.1]), batch_size=[1])).tolist() == [-1]

    def test_ties_replace_the_first_lowest_slot_and_need_a_strictly_higher_rank(self):
        rb = self._rb(2)
        index = rb.extend(TensorDict(r=torch.tensor([1.0, 2.0, 2.0, 1.0, 2.0, 3.0]), batch_size=[6]))
        assert index.tolist() == [-1, 1, -1, -1, -1, 0]
        assert rb.storage._storage["r"].tolist() == [3.0, 2.0]
        rb = self._rb(3)
        index = rb.extend(TensorDict(r=torch.tensor([5.0, 1, 7, 3, 9, 2, 8, 8, 0]), batch_size=[9]))
        assert index.tolist() == [-1, -1, -1, -1, 1, -1, 0, 2, -1]
        assert rb.extend(TensorDict(r=torch.tensor([8.5, 1, 10]), batch_size=[3])).tolist() == [0, -1, 2]
        assert rb.storage._storage["r"].tolist() == [8.5, 9.0, 10.0]

    @pytest.mark.parametrize(
        "reduction, index, stored",
        [
            ("sum", [-1, 1, -1, 0], [0.0, 5.0, 5.0, 100.0]),
            ("mean", [-1, 1, -1, 0], [0.0, 5.0, 5.0, 100.0]),
            ("max", [0, -1, -1, 1], [0.0, 1.0, 9.0, 100.0]),
            ("min", [-1, 1, 0, -1], [3.0, 4.0, 5.0, 5.0]),
            ("median", [-1, 1, 0, -1], [3.0, 4.0, 5.0, 5.0]),
        ],
    )
    def test_reductions(self, reduction, index, stored):
        rb = self._rb(2, reduction=reduction)
        r = torch.tensor([[1.0, 9.0], [5.0, 5.0], [3.0, 4.0], [0.0, 100.0]])
        assert rb.extend(TensorDict(r=r, batch_size=[4])).tolist() == index
        assert sorted(rb.storage._storage["r"].flatten().tolist()) == stored

    def test_extend_equals_successive_adds(self):
        torch.manual_seed(0)
        values = torch.randint(0, 6, (40,)).float()
        by_extend, by_add = self._rb(5), self._rb(5)
        by_extend.extend(TensorDict(r=values, batch_size=[40]))
        for v in values:
            by_add.add(TensorDict(r=v, batch_size=[]))
        assert by_extend.storage._storage["r"].tolist() == by_add.storage._storage["r"].tolist()

    def test_errors(self):
        with pytest.raises(NotImplementedError, match="unknown reduction 'prod'"):
            TensorDictMaxValueWriter(rank_key="r", reduction="prod")
        rb = ReplayBuffer(storage=LazyTensorStorage(2), writer=TensorDictMaxValueWriter(rank_key="r"))
        with pytest.raises(RuntimeError, match=r"extend expects a tensor collection .* rank entry 'r'; got a Tensor"):
            rb.extend(torch.tensor([1.0, 5.0]))
        with pytest.raises(RuntimeError, match="add expects a tensor collection .* got a dict"):
            rb.add({"r": torch.tensor(1.0)})
        with pytest.raises(RuntimeError, match=r"batch dimension .* Use add\(\)"):
            rb.extend(TensorDict(r=torch.tensor(2.0), batch_size=[]))
        assert len(rb) == 0

    def test_failed_write_leaves_the_ranking_unchanged(self):
        rb = self._rb(2)
        rb.extend(TensorDict(r=torch.tensor([1.0, 2.0]), batch_size=[2]))
        with pytest.raises(RuntimeError, match="dtype"):
            rb.extend(TensorDict(r=torch.tensor([7, 9]), batch_size=[2]))
        with pytest.raises(KeyError, match="unexpected keys 'x'"):
            rb.add(TensorDict(r=torch.tensor(5.0), x=torch.zeros(()), batch_size=[]))
        assert rb.writer._ranks.tolist() == [1.0, 2.0]
        assert rb.extend(TensorDict(r=torch.tensor([1.5]), batch_size=[1])).tolist() == [0]

    def test_repr_and_state_round_trip(self, tmp_path):
        rb = self._rb(2, reduction="max")
        assert repr(rb.writer) == "TensorDictMaxValueWriter(cursor=0, full_storage=False, rank_key=r, reduction=max)"
        rb.extend(TensorDict(r=torch.tensor([1.0, 5.0, 3.0]), batch_size=[3]))
        assert repr(rb.writer) == "TensorDictMaxValueWriter(cursor=0, full_storage=True, rank_key=r, reduction=max)"
        rb.dumps(tmp_path / "rb")
        other = self._rb(2, reduction="max")
        other.loads(tmp_path / "rb")
        assert other.extend(TensorDict(r=torch.tensor([4.0]), batch_size=[1])).tolist() == [0]
        assert sorted(other.storage._storage["r"].tolist()) == [4.0, 5.0]


def test_immutable_writer():
    rb = ReplayBuffer(storage=TensorStorage(torch.arange(4)), writer=ImmutableDatasetWriter(), batch_size=2)
    assert len(rb) == 4
    with pytest.raises(RuntimeError, match="immutable"):
        rb.extend(torch.arange(2))
    with pytest.raises(RuntimeError, match="immutable"):
        rb.add(torch.tensor(1))
    with pytest.raises(RuntimeError, match=r"immutable .*empty\(\) would erase"):
        rb.empty()
    assert len(rb) == 4 and rb[3].item() == 3
    rb[0] = torch.tensor(9)  # overwriting by index is allowed, as in TorchRL
    assert rb[0].item() == 9


def test_writer_ensemble():
    writers = WriterEnsemble(RoundRobinWriter(track_generations=True), RoundRobinWriter(track_generations=True))
    with pytest.raises(RuntimeError, match="does not write by itself"):
        writers.extend()
    assert writers.tracks_generations and len(writers) == 2
