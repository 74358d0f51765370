"""Storages of ``torchrl.data.replay_buffers.storages``: layouts, validation, memmap files, checkpoints."""
from __future__ import annotations

import os

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.replay_buffers import (
    CompressedListStorage,
    Flat2TED,
    FlatStorageCheckpointer,
    LazyMemmapStorage,
    LazyStackStorage,
    LazyTensorStorage,
    ListStorage,
    Nested2TED,
    NestedStorageCheckpointer,
    ReplayBuffer,
    StorageEnsemble,
    TED2Flat,
    TED2Nested,
    TensorStorage,
)


def transitions(n: int, start: int = 0) -> TensorDict:
    obs = torch.arange(start, start + n, dtype=torch.float32).unsqueeze(-1).expand(n, 3).clone()
    return TensorDict(
        obs=obs,
        action=torch.arange(start, start + n),
        next=TensorDict(obs=obs + 1, reward=torch.ones(n, 1), done=torch.zeros(n, 1, dtype=torch.bool), batch_size=[n]),
        batch_size=[n],
    )


class TestTensorStorages:
    def test_lazy_tensor_storage_allocates_from_first_write(self):
        storage = LazyTensorStorage(10)
        assert not storage.initialized and len(storage) == 0
        storage.set(slice(0, 4), transitions(4))
        assert storage.initialized and len(storage) == 4
        assert storage._storage.batch_size == torch.Size([10])
        out = storage.get(torch.tensor([3, 0]))
        assert out.batch_size == torch.Size([2])
        assert out["obs"][:, 0].tolist() == [3.0, 0.0]
        assert out["next", "obs"][:, 0].tolist() == [4.0, 1.0]
        assert out["next"].batch_size == torch.Size([2])

    def test_single_element_write_and_int_read(self):
        storage = LazyTensorStorage(5)
        storage.set(0, transitions(1)[0])
        storage.set(1, transitions(1, start=7)[0])
        assert len(storage) == 2
        assert storage.get(1)["action"].item() == 7

    def test_plain_tensor_and_pytree(self):
        storage = LazyTensorStorage(6)
        storage.set(torch.arange(3), torch.arange(6.0).reshape(3, 2))
        assert storage.get(torch.tensor([2]))[0].tolist() == [4.0, 5.0]
        tree = LazyTensorStorage(6)
        tree.set(slice(0, 2), {"a": torch.ones(2, 3), "b": (torch.zeros(2), torch.arange(2))})
        got = tree.get(torch.tensor([1]))
        assert got["a"].shape == (1, 3) and got["b"][1].tolist() == [1]

    def test_key_mismatch_is_rejected_and_content_untouched(self):
        storage = LazyTensorStorage(10)
        storage.set(slice(0, 3), transitions(3))
        before = storage.get(torch.arange(3)).clone()
        with pytest.raises(KeyError, match=r"missing keys 'action'"):
            storage.set(slice(0, 3), transitions(3, start=5).exclude("action"))
        extra = transitions(3, start=5)
        extra["next", "extra"] = torch.zeros(3)
        with pytest.raises(KeyError, match=r"unexpected keys \('next', 'extra'\)"):
            storage.set(slice(0, 3), extra)
        assert (storage.get(torch.arange(3)) == before).all()
        assert len(storage) == 3

    def test_shape_mismatch_names_the_nested_key(self):
        storage = LazyTensorStorage(10)
        storage.set(slice(0, 3), transitions(3))
        bad = transitions(3)
        bad["next", "obs"] = torch.zeros(3, 4)
        with pytest.raises(RuntimeError, match=r"key \('next', 'obs'\) has per-element shape \(4,\).*shape \(3,\)"):
            storage.set(slice(3, 6), bad)
        assert len(storage) == 3

    def test_index_key_is_not_stored(self):
        storage = LazyTensorStorage(4)
        data = transitions(2)
        data["index"] = torch.arange(2)
        storage.set(slice(0, 2), data)
        assert "index" not in storage._storage.keys()

    def test_tensor_storage_from_existing_data_is_full(self):
        data = transitions(5)
        storage = TensorStorage(data)
        assert len(storage) == 5 and storage.max_size == 5
        with pytest.raises(ValueError, match="max_size=4 but the storage holds 5 elements"):
            TensorStorage(data, max_size=4)

    def test_ndim_2_layout(self):
        storage = LazyTensorStorage(12, ndim=2)  # [time, env=3] -> 4 time steps
        data = TensorDict(x=torch.arange(6).reshape(2, 3), batch_size=[2, 3])
        storage.set(slice(0, 2), data)
        assert storage.shape == torch.Size([2, 3]) and len(storage) == 6
        assert storage._storage.batch_size == torch.Size([4, 3])
        got = storage.get((torch.tensor([1, 0]), torch.tensor([2, 1])))
        assert got["x"].tolist() == [5, 1]
        rows, cols = storage._rand_given_ndim(50)
        assert rows.max() < 2 and cols.max() < 3
        assert storage.flatten().get(torch.arange(6))["x"].tolist() == list(range(6))

    def test_state_dict_round_trip(self):
        storage = LazyTensorStorage(8)
        storage.set(slice(0, 5), transitions(5))
        other = LazyTensorStorage(8)
        other.load_state_dict(storage.state_dict())
        assert len(other) == 5
        assert (other.get(torch.arange(5)) == storage.get(torch.arange(5))).all()


class TestMemmap:
    @pytest.mark.parametrize("data", ["td", "tensor", "tuple"])
    def test_other_files_in_scratch_dir_are_left_alone(self, tmp_path, data):
        # as TorchRL (the README's scratch_dir="/tmp/"): a folder holding other files is fine
        (tmp_path / "notes.txt").write_text("keep me")
        rb = ReplayBuffer(storage=LazyMemmapStorage(10, scratch_dir=tmp_path))
        batch = {"td": transitions(3), "tensor": torch.ones(3, 2), "tuple": (torch.ones(3), torch.zeros(3, 2))}[data]
        rb.extend(batch)
        assert len(rb) == 3 and (tmp_path / "notes.txt").read_text() == "keep me"
        again = ReplayBuffer(storage=LazyMemmapStorage(10, scratch_dir=tmp_path))
        with pytest.raises(RuntimeError, match="already exists"):
            again.extend(batch)

    def test_files_in_scratch_dir_and_exists_check(self, tmp_path):
        storage = LazyMemmapStorage(20, scratch_dir=tmp_path / "mm")
        storage.set(slice(0, 4), transitions(4))
        assert (tmp_path / "mm" / "obs.memmap").exists()
        assert storage.get(torch.tensor([2]))["obs"][0, 0].item() == 2.0
        again = LazyMemmapStorage(20, scratch_dir=tmp_path / "mm")
        with pytest.raises(RuntimeError, match="already exists"):  # as TorchRL: a file it would write exists
            again.set(slice(0, 4), transitions(4))
        ok = LazyMemmapStorage(20, scratch_dir=tmp_path / "mm", existsok=True)
        ok.set(slice(0, 2), transitions(2, start=10))
        assert ok.get(torch.tensor([0]))["action"].item() == 10

    def test_reopen_saved_storage(self, tmp_path):
        storage = LazyMemmapStorage(20, scratch_dir=tmp_path / "a")
        storage.set(slice(0, 6), transitions(6))
        storage.dumps(tmp_path / "saved")
        reopened = LazyMemmapStorage(20, scratch_dir=tmp_path / "b")
        reopened.loads(tmp_path / "saved")
        assert len(reopened) == 6
        assert (reopened.get(torch.arange(6)) == storage.get(torch.arange(6))).all()

    def test_temporary_dir_cleanup(self):
        storage = LazyMemmapStorage(5)
        storage.set(slice(0, 2), transitions(2))
        files = storage._files_dir
        assert os.path.isdir(files)
        assert storage.cleanup() is True
        assert not os.path.exists(files) and storage.cleanup() is False


class TestListStorages:
    def test_list_storage_any_object(self):
        storage = ListStorage(3)
        for i, item in enumerate(["a", {"b": 1}, 3.0]):
            storage.set(i, item)
        storage.set(0, "z")
        assert storage.get([0, 1]) == ["z", {"b": 1}]
        assert len(storage) == 3
        with pytest.raises(IndexError, match="next free position is 3"):
            storage.set(5, "x")

    def test_lazy_stack_storage_ragged(self):
        storage = LazyStackStorage()
        storage.set(0, TensorDict(a=torch.zeros(2), batch_size=[2]))
        storage.set(1, TensorDict(a=torch.ones(4), batch_size=[4]))
        stacked = storage.get([1, 0])
        assert stacked.shape == torch.Size([2, -1])
        assert stacked[0]["a"].tolist() == [1.0] * 4

    def test_compressed_round_trip_and_size(self):
        storage = CompressedListStorage(4)
        image = torch.zeros(2, 32, 32, dtype=torch.uint8)
        image[1, 0, 0] = 7
        storage.set(slice(0, 2), TensorDict(pixels=image, label=torch.tensor([3, 4]), batch_size=[2]))
        storage.set(2, torch.arange(5.0))
        storage.set(3, ("any", 1))
        got = storage.get([1])[0]
        assert got["pixels"].dtype == torch.uint8 and got["pixels"][0, 0].item() == 7 and got["label"].item() == 4
        assert storage.get(2).tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        assert storage.get(3) == ("any", 1)
        assert storage.bytes() < 2 * 32 * 32
        with pytest.raises(ValueError, match="both compression_fn and decompression_fn"):
            CompressedListStorage(3, compression_fn=lambda x: x)

    def test_custom_codec(self):
        storage = CompressedListStorage(2, compression_fn=lambda t: t.to(torch.float16), decompression_fn=lambda t: t.float())
        storage.set(0, torch.tensor([1.5, 2.0]))
        assert storage.get(0).dtype == torch.float32 and storage.get(0).tolist() == [1.5, 2.0]


class TestCheckpointers:
    @pytest.mark.parametrize("make", [lambda: LazyTensorStorage(10), lambda: ListStorage(10), lambda: CompressedListStorage(10)])
    def test_dumps_loads(self, make, tmp_path):
        storage = make()
        data = transitions(4)
        if isinstance(storage, LazyTensorStorage):
            storage.set(slice(0, 4), data)
        else:
            for i in range(4):
                storage.set(i, data[i])
        storage.dumps(tmp_path)
        other = make()
        other.loads(tmp_path)
        assert len(other) == 4
        for i in range(4):
            assert (other.get(i) == storage.get(i)).all()

    def test_empty_storage_round_trip(self, tmp_path):
        storage = LazyTensorStorage(4)
        storage.dumps(tmp_path)
        other = LazyTensorStorage(4)
        other.loads(tmp_path)
        assert not other.initialized and len(other) == 0

    def test_capacity_mismatch(self, tmp_path):
        storage = LazyTensorStorage(10)
        storage.set(slice(0, 8), transitions(8))
        storage.dumps(tmp_path)
        small = LazyTensorStorage(4)
        small.set(slice(0, 1), transitions(1))
        with pytest.raises(RuntimeError, match="holds 8 rows but this storage has room for 4"):
            small.loads(tmp_path)

    def test_storage_ensemble_checkpoint(self, tmp_path):
        ensemble = StorageEnsemble(LazyTensorStorage(4), LazyTensorStorage(4))
        ensemble[0].set(slice(0, 2), transitions(2))
        ensemble[1].set(slice(0, 3), transitions(3, start=5))
        ensemble.dumps(tmp_path)
        other = StorageEnsemble(LazyTensorStorage(4), LazyTensorStorage(4))
        other.loads(tmp_path)
        assert [len(s) for s in other._storages] == [2, 3]
        assert other.get([(1, torch.tensor([0]))])[0]["action"].tolist() == [5]

    @pytest.mark.parametrize("ckpt", [FlatStorageCheckpointer, NestedStorageCheckpointer])
    def test_flat_and_nested_checkpointers_are_exact(self, ckpt, tmp_path):
        storage = LazyTensorStorage(12)
        storage.checkpointer = ckpt()
        episodes = []
        for length, start in ((4, 0), (5, 100), (3, 200)):
            ep = transitions(length, start)
            ep["next", "done"][-1] = True
            ep["next", "obs"][-1] = -1.0  # the final observation exists only under "next"
            episodes.append(ep)
        storage.set(slice(0, 12), torch.cat(episodes))
        storage.dumps(tmp_path)
        other = LazyTensorStorage(12)
        other.checkpointer = ckpt()
        other.loads(tmp_path)
        assert (other.get(torch.arange(12)) == storage.get(torch.arange(12))).all()


class TestTED:
    def make(self) -> TensorDict:
        obs = torch.arange(6.0)
        done = torch.tensor([False, False, True, False, False, True]).unsqueeze(-1)
        nxt = obs + 1
        nxt[2] = 50.0
        nxt[5] = 60.0
        return TensorDict(
            observation=obs,
            next=TensorDict(observation=nxt, done=done, reward=torch.arange(6.0).unsqueeze(-1), batch_size=[6]),
            batch_size=[6],
        )

    def test_flat_keeps_only_non_duplicated_next_values(self):
        flat = TED2Flat()(self.make())
        assert flat["next_index", "observation"].tolist() == [2, 5]
        assert flat["next_value", "observation"].tolist() == [50.0, 60.0]
        assert ("next", "observation") not in flat["root"].keys(True)
        assert (flat["root", "next", "reward"] == self.make()["next", "reward"]).all()

    def test_round_trips(self):
        ted = self.make()
        assert (Flat2TED()(TED2Flat()(ted)) == ted).all()
        nested = TED2Nested()(ted)
        assert [t.shape[0] for t in nested["trajectories"].tensordicts] == [3, 3]
        assert (Nested2TED()(nested) == ted).all()

    def test_rows_in_storage_order_of_a_circular_buffer(self):
        ted = self.make().roll(2, 0)  # the newest rows wrapped to the front
        assert (Flat2TED()(TED2Flat()(ted)) == ted).all()


class TestWriteChecks:
    """dtype and shape checks on writes: TorchRL 0.14.1's behaviour by default, exact checks in check mode."""

    @pytest.mark.parametrize("storage_cls", [LazyTensorStorage, LazyMemmapStorage])
    @pytest.mark.parametrize(
        "stored, received",
        [
            (torch.float32, torch.int64),
            (torch.int64, torch.float32),
            (torch.float32, torch.bool),
            (torch.float32, torch.float64),
            (torch.int64, torch.int32),
        ],
    )
    def test_batched_write_with_another_dtype_raises(self, storage_cls, stored, received):
        from torchrl.data import ReplayBuffer

        rb = ReplayBuffer(storage=storage_cls(8))
        rb.extend(TensorDict(obs=torch.ones(2, 2, dtype=stored), batch_size=[2]))
        with pytest.raises(RuntimeError, match=rf"key 'obs' has dtype {received}, but the storage holds {stored}"):
            rb.extend(TensorDict(obs=torch.zeros(2, 2, dtype=received), batch_size=[2]))
        assert len(rb) == 2 and rb.writer._cursor == 2 and rb.write_count == 2
        # a single element (add, rb[i] = ...) is cast, as TorchRL does
        value = torch.full((2,), 3, dtype=received)
        assert rb.add(TensorDict(obs=value, batch_size=[])) == 2
        assert rb[2]["obs"].dtype == stored and rb[2]["obs"].tolist() == value.to(stored).tolist()

    def test_tensor_and_pytree_storages_check_dtypes_too(self):
        from torchrl.data import ReplayBuffer

        rb = ReplayBuffer(storage=LazyTensorStorage(8))
        rb.extend(torch.ones(2, 2))
        with pytest.raises(RuntimeError, match=r"the data has dtype torch.int64, but the storage holds torch.float32"):
            rb.extend(torch.ones(2, 2, dtype=torch.long))
        rb = ReplayBuffer(storage=LazyTensorStorage(8))
        rb.extend((torch.ones(2, 2), {"b": torch.zeros(2)}))
        with pytest.raises(RuntimeError, match=r"entry \[1\]\['b'\] has dtype torch.int64"):
            rb.extend((torch.ones(2, 2), {"b": torch.zeros(2, dtype=torch.long)}))
        with pytest.raises(RuntimeError, match="structure differs"):
            rb.extend((torch.ones(2, 2), {"c": torch.zeros(2)}))
        assert len(rb) == 2

    def test_trailing_shapes_that_broadcast_are_accepted(self):
        # TorchRL writes with torch's broadcasting: (1,) and () per-element shapes fill a (2,) slot
        storage = LazyTensorStorage(8)
        storage.set(slice(0, 2), TensorDict(obs=torch.zeros(2, 2), batch_size=[2]))
        storage.set(slice(2, 4), TensorDict(obs=torch.tensor([[5.0], [6.0]]), batch_size=[2]))
        assert storage.get(torch.tensor([2, 3]))["obs"].tolist() == [[5.0, 5.0], [6.0, 6.0]]
        for shape in [(2, 3), (2, 2, 1), (2, 1, 2)]:
            with pytest.raises(RuntimeError, match=rf"key 'obs' has per-element shape \({shape[1]}, ?"):
                storage.set(slice(4, 6), TensorDict(obs=torch.zeros(shape), batch_size=[2]))
        assert len(storage) == 4

    def test_check_mode_makes_every_write_exact(self):
        from torchrl import set_check_mode
        from torchrl.data import ReplayBuffer

        rb = ReplayBuffer(storage=LazyTensorStorage(8))
        rb.extend(transitions(2))
        with set_check_mode(True):
            with pytest.raises(RuntimeError, match=r"key 'action' has dtype torch.int32, but the storage holds "
                                                   r"torch.int64 there \(check mode\)"):
                rb.add(transitions(1)[0].set("action", torch.tensor(1, dtype=torch.int32)))
            bad = transitions(2)
            bad["next", "obs"] = torch.ones(2, 1)
            with pytest.raises(RuntimeError, match=r"key \('next', 'obs'\) has per-element shape \(1,\).*"
                                                   r"shape \(3,\) there \(check mode\)"):
                rb.extend(bad)
            with pytest.raises(RuntimeError, match=r"the data has dtype torch.int64.*\(check mode\)"):
                plain = ReplayBuffer(storage=LazyTensorStorage(4))
                plain.add(torch.zeros(2))
                plain[0] = torch.zeros(2, dtype=torch.long)
            rb.extend(transitions(2))  # exact data passes
        assert len(rb) == 4
        rb.extend(bad)  # broadcast accepted outside check mode, as in TorchRL
        assert len(rb) == 6 and rb[5]["next", "obs"].tolist() == [1.0, 1.0, 1.0]

    def test_check_mode_from_the_environment_variable(self):
        import subprocess
        import sys

        code = (
            "import torch\n"
            "from torchrl.data import ReplayBuffer, LazyTensorStorage\n"
            "rb = ReplayBuffer(storage=LazyTensorStorage(4))\n"
            "rb.add(torch.zeros(2))\n"
            "try:\n"
            "    rb.add(torch.zeros(2, dtype=torch.long))\n"
            "except RuntimeError as err:\n"
            "    print('raised', 'check mode' in str(err))\n"
        )
        env = dict(os.environ, TORCHRL_CHECK_MODE="1")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        assert out.stdout.strip() == "raised True", out.stderr


@pytest.mark.parametrize("make", [lambda d: ListStorage(10), lambda d: LazyTensorStorage(10),
                                  lambda d: LazyMemmapStorage(10, scratch_dir=d)], ids=["list", "tensor", "memmap"])
def test_dropped_buffer_frees_its_storage_at_once(make, tmp_path):
    # the storage holds its buffers weakly: no reference cycle keeps a dropped buffer (and its memmaps) alive
    import gc
    import weakref

    gc.disable()
    try:
        rb = ReplayBuffer(storage=make(tmp_path))
        rb.extend(TensorDict({"a": torch.zeros(4)}, [4]))
        alive = weakref.ref(rb.storage)
        other = ReplayBuffer(storage=rb.storage)  # two buffers on one storage still hear each other's writes
        assert rb.storage._attached_entities == [rb, other]
        del rb, other
        assert alive() is None
    finally:
        gc.enable()


# ------------------------------------------------------------------------------- indexing the written rows
@pytest.mark.parametrize("cls", [LazyTensorStorage, LazyMemmapStorage])
def test_indexing_covers_the_written_rows_only(cls):
    # as TorchRL: storage[:] is what was written, negative indices count from its end, and indices past it raise
    rb = ReplayBuffer(storage=cls(10))
    rb.extend(TensorDict({"a": torch.arange(4)}, [4]))
    s = rb.storage
    assert s[:]["a"].tolist() == [0, 1, 2, 3] and s.get(slice(None)).shape == (4,)
    assert s[0:8].shape == (4,) and s[2:]["a"].tolist() == [2, 3] and s[::2]["a"].tolist() == [0, 2]
    assert s[-1]["a"].item() == 3 and s[-4]["a"].item() == 0
    assert s[torch.tensor([3, -1])]["a"].tolist() == [3, 3]
    for bad in (4, -5, [0, 4], torch.tensor([4])):
        with pytest.raises(IndexError):
            s[bad]


def test_full_storage_indexing_is_unchanged():
    rb = ReplayBuffer(storage=LazyTensorStorage(4))
    rb.extend(TensorDict({"a": torch.arange(6)}, [6]))
    assert rb.storage[:]["a"].tolist() == [4, 5, 2, 3] and rb.storage[-1]["a"].item() == 3


def test_two_dim_buffer_reads_the_written_rows():
    rb = ReplayBuffer(storage=LazyTensorStorage(10, ndim=2))
    rb.extend(TensorDict({"a": torch.arange(6).reshape(2, 3)}, [2, 3]))
    assert rb[:]["a"].tolist() == [[0, 1, 2], [3, 4, 5]] and len(rb) == 6


def test_entry_name_index_reads_the_written_rows():
    # as TorchRL: storage["key"] / storage[("nested", "key")] is that entry over the rows written so far
    storage = LazyTensorStorage(10)
    data = TensorDict(a=torch.arange(4.0), b=TensorDict(c=torch.ones(4, 2), batch_size=[4]), batch_size=[4])
    storage.set(torch.arange(4), data)
    assert storage["a"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert storage[("b", "c")].shape == (4, 2)
