"""``ReplayBuffer`` with plain data: tuples, lists and dicts of tensors (pytrees), in every storage.

The expected structures, shapes and error types were observed on TorchRL 0.14.1.
"""
from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_map

from torchrl.data import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    RandomSampler,
    ReplayBuffer,
    SamplerWithoutReplacement,
    TensorStorage,
)

TENSOR_STORAGES = {
    "lazy": lambda n: LazyTensorStorage(n),
    "memmap": lambda n: LazyMemmapStorage(n),
}


def _batch(n: int = 6):
    return (torch.arange(2 * n, dtype=torch.float32).view(n, 2), torch.arange(n))


@pytest.mark.parametrize("storage", sorted(TENSOR_STORAGES))
class TestTensorStoragePytrees:
    def test_tuple_extend_sample_index(self, storage):
        rb = ReplayBuffer(storage=TENSOR_STORAGES[storage](10), batch_size=3)
        index = rb.extend(_batch())
        assert index.tolist() == [0, 1, 2, 3, 4, 5] and len(rb) == 6
        obs, ids = rb.sample()
        assert obs.shape == (3, 2) and obs.dtype == torch.float32
        assert ids.shape == (3,) and ids.dtype == torch.int64
        assert torch.equal(obs[:, 0], 2.0 * ids)  # rows stay aligned across the leaves
        first = rb[0]
        assert isinstance(first, tuple) and first[0].tolist() == [0.0, 1.0] and first[1].item() == 0
        rows = rb[1:3]
        assert rows[1].tolist() == [1, 2]
        assert rb[torch.tensor([0, 5])][1].tolist() == [0, 5]

    def test_dict_of_nested_containers(self, storage):
        # the tutorial's pytree: nested dicts, a tuple, a list and a non-string key
        rb = ReplayBuffer(storage=TENSOR_STORAGES[storage](100))
        element = {"a": torch.randn(3), "b": {"c": (torch.zeros(2), [torch.ones(1)])}, 30: -torch.ones(())}
        assert rb.add(element) == 0
        sample = rb.sample(10)
        assert sample["a"].shape == (10, 3) and sample[30].shape == (10,)
        assert isinstance(sample["b"]["c"], tuple) and isinstance(sample["b"]["c"][1], list)
        assert sample["b"]["c"][1][0].shape == (10, 1)
        index = rb.extend(tree_map(lambda x: x.expand(10, *x.shape), element))
        assert index.tolist() == list(range(1, 11)) and len(rb) == 11
        assert rb[3]["b"]["c"][0].shape == (2,)

    def test_callable_transform_receives_the_pytree(self, storage):
        rb = ReplayBuffer(storage=TENSOR_STORAGES[storage](10), batch_size=2)
        rb.extend(_batch())
        rb.append_transform(lambda x: tree_map(lambda y: y * 0, x))
        obs, ids = rb.sample()
        assert obs.abs().sum() == 0 and ids.abs().sum() == 0
        rb = ReplayBuffer(storage=TENSOR_STORAGES[storage](10), batch_size=3, transform=lambda x: x[0])
        rb.extend((torch.ones(5, 2), torch.zeros(5)))
        assert torch.equal(rb.sample(), torch.ones(3, 2))

    def test_list_is_a_list_of_elements(self, storage):
        rb = ReplayBuffer(storage=TENSOR_STORAGES[storage](10), batch_size=3)
        assert rb.extend([(torch.full((3,), float(i)), torch.tensor(i)) for i in range(4)]).tolist() == [0, 1, 2, 3]
        values, ids = rb[torch.arange(4)]
        assert values.shape == (4, 3) and torch.equal(values[:, 0], ids.float())

    def test_list_of_lists_samples_a_list(self, storage):
        rb = ReplayBuffer(storage=TENSOR_STORAGES[storage](10), batch_size=3)
        rb.extend([[torch.randn(3), torch.tensor(1)]] * 2)
        sample = rb.sample()
        assert isinstance(sample, list) and sample[0].shape == (3, 3) and sample[1].shape == (3,)

    def test_list_of_different_structures_raises(self, storage):
        rb = ReplayBuffer(storage=TENSOR_STORAGES[storage](10))
        with pytest.raises(RuntimeError, match="stacking the elements of the list failed"):
            rb.extend([{"a": torch.randn(3)}, {"a": torch.randn(2)}])
        with pytest.raises(RuntimeError, match="structure"):
            rb.extend([{"a": torch.randn(3), "b": torch.tensor(1)}, {"a": torch.randn(3)}])
        with pytest.raises(RuntimeError, match="same structure"):
            rb.extend([1, 2, 3])
        assert len(rb) == 0

    def test_extend_beyond_capacity_keeps_the_last_elements(self, storage):
        rb = ReplayBuffer(storage=TENSOR_STORAGES[storage](4))
        index = rb.extend(_batch(6))
        assert index.tolist() == [0, 1, 2, 3, 0, 1]
        assert sorted(rb[torch.arange(4)][1].tolist()) == [2, 3, 4, 5]


def test_tensor_storage_of_a_tuple_and_a_dict():
    rb = ReplayBuffer(storage=TensorStorage((torch.arange(6.0).view(3, 2), torch.arange(3))), batch_size=2)
    assert len(rb) == 3 and rb[1][1].item() == 1
    assert rb.extend((torch.ones(2, 2), torch.ones(2, dtype=torch.long))).tolist() == [0, 1]
    assert rb[:][1].tolist() == [1, 1, 2]
    rb = ReplayBuffer(storage=TensorStorage({"x": torch.arange(6.0).view(3, 2)}), batch_size=2)
    assert rb.add({"x": torch.ones(2)}) == 0
    assert rb[0]["x"].tolist() == [1.0, 1.0]


class TestListStorage:
    def test_list_of_tuples_collates_into_a_tuple(self):
        rb = ReplayBuffer(storage=ListStorage(10), batch_size=3)
        rb.extend([(torch.full((2,), float(i)), torch.tensor(i)) for i in range(5)])
        obs, ids = rb.sample()
        assert obs.shape == (3, 2) and ids.shape == (3,) and torch.equal(obs[:, 0], ids.float())
        assert rb[[0, 1]][1].tolist() == [0, 1]

    def test_lists_and_dicts_collate_with_their_structure(self):
        rb = ReplayBuffer(storage=ListStorage(10), batch_size=3)
        for i in range(3):
            rb.add([torch.randn(3), torch.tensor(i)])
        sample = rb.sample()
        assert isinstance(sample, list) and sample[0].shape == (3, 3) and sample[1].shape == (3,)
        rb = ReplayBuffer(storage=ListStorage(10), batch_size=3)
        for i in range(3):
            rb.add({"a": torch.randn(3), "b": {"c": torch.tensor(i)}})
        assert rb[0:2]["b"]["c"].tolist() == [0, 1]
        assert rb.sample()["a"].shape == (3, 3)

    def test_dict_extend_raises_type_error(self):
        rb = ReplayBuffer(storage=ListStorage(10))
        with pytest.raises(TypeError, match="Cannot extend a ListStorage with a dict"):
            rb.extend({"a": torch.zeros(3)})
        assert len(rb) == 0

    def test_set_extend(self):
        rb = ReplayBuffer(storage=ListStorage(10))
        assert rb.extend({4, 5}).tolist() == [0, 1]
        assert sorted([rb[0], rb[1]]) == [4, 5]

    def test_tensors_of_different_shapes_do_not_collate(self):
        # without replacement: the three elements (three shapes) are in the sample, whatever the draw
        rb = ReplayBuffer(storage=ListStorage(10), batch_size=3, sampler=SamplerWithoutReplacement())
        for i in range(3):
            rb.add(torch.zeros(i + 1))
        with pytest.raises(RuntimeError, match=r"shapes differ .*collate_fn=lambda x: x"):
            rb.sample()
        rb = ReplayBuffer(storage=ListStorage(10), batch_size=3, collate_fn=lambda x: x)
        for i in range(3):
            rb.add(torch.zeros(i + 1))
        sample = rb.sample()
        assert isinstance(sample, list) and len(sample) == 3 and {x.numel() for x in sample} <= {1, 2, 3}


SAMPLERS = {
    "random": RandomSampler,
    "without_replacement": SamplerWithoutReplacement,
    "prioritized": lambda: PrioritizedSampler(10, alpha=0.7, beta=0.9),
}


@pytest.mark.parametrize("sampler", sorted(SAMPLERS))
@pytest.mark.parametrize("storage", ["list", "lazy", "memmap"])
def test_samplers_and_checkpoints_with_tuples(sampler, storage, tmp_path):
    def make():
        store = ListStorage(10) if storage == "list" else TENSOR_STORAGES[storage](10)
        return ReplayBuffer(storage=store, sampler=SAMPLERS[sampler](), batch_size=3)

    rb = make()
    if storage == "list":
        rb.extend([(torch.full((2,), float(i)), torch.tensor(i)) for i in range(6)])
    else:
        rb.extend(_batch())
    (obs, ids), info = rb.sample(return_info=True)
    assert obs.shape == (3, 2) and torch.equal(ids, info["index"])
    if sampler == "without_replacement":
        assert len(list(rb)) == 1  # 6 elements, batches of 3, the first was drawn already
    if sampler == "prioritized":
        rb.update_priority(torch.tensor([0, 1]), torch.tensor([1e6, 1e-6]))
        (_, ids), info = rb.sample(return_info=True)
        assert ids.tolist() == [0, 0, 0] and info["priority_weight"].shape == (3,)
    rb.dumps(tmp_path / "rb")
    other = make()
    other.loads(tmp_path / "rb")
    assert len(other) == 6 and other[4][1].item() == 4 and other[4][0].tolist() == rb[4][0].tolist()
    if sampler == "prioritized":
        assert other.sample()[1].tolist() == [0, 0, 0]


def test_seeded_random_sampling_matches_torchrl():
    # RandomSampler draws torch.randint(len, (batch,)): TorchRL 0.14.1 gives these indices for seed 1
    rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
    rb.extend(_batch())
    torch.manual_seed(1)
    assert rb.sample()[1].tolist() == [1, 5, 0]
