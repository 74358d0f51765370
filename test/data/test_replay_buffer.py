"""``ReplayBuffer`` and ``TensorDictReplayBuffer``: writes, reads, transforms, iteration, concurrency."""
from __future__ import annotations

import copy
import multiprocessing as mp
import pickle
import threading

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from torchrl.data import (
    LazyMemmapStorage,
    LazyStackStorage,
    LazyTensorStorage,
    ListStorage,
    ReplayBuffer,
    RoundRobinWriter,
    SamplerWithoutReplacement,
    Sequence,
    SliceSampler,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
    traj,
)
from torchrl.envs.transforms import Transform
from torchrl.data.replay_buffers import ConditionalUpdateResult, OfflineToOnlineReplayBuffer, prefill_replay_buffer


def steps(n: int, start: int = 0, done_every: int | None = None) -> TensorDict:
    obs = torch.arange(start, start + n, dtype=torch.float32).unsqueeze(-1)
    done = torch.zeros(n, 1, dtype=torch.bool)
    if done_every:
        done = ((torch.arange(start, start + n) + 1) % done_every == 0).unsqueeze(-1)
    return TensorDict(
        observation=obs,
        action=torch.arange(start, start + n),
        next=TensorDict(observation=obs + 1, reward=torch.ones(n, 1), done=done, batch_size=[n]),
        batch_size=[n],
    )


class TestBasics:
    def test_any_data_in_a_list_storage(self):
        rb = ReplayBuffer(batch_size=3)
        assert rb.add((1, "a")) == 0
        rb.extend([(2, "b"), (3, "c")])
        assert len(rb) == 3 and rb[1] == (2, "b")
        numbers, letters = rb.sample()
        assert numbers.shape == (3,) and len(letters) == 3
        rb[0] = (10, "z")
        assert rb[0] == (10, "z")

    def test_tensordict_buffer_writes_index_and_samples_match_storage(self):
        # as TorchRL: the slots are stored with the data ("index" in rb[:]) and the input is left as it was
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=16)
        data = steps(50)
        index = rb.extend(data)
        assert torch.equal(index, torch.arange(50)) and "index" not in data.keys()
        assert torch.equal(rb[:]["index"], torch.arange(50)) and torch.equal(rb[-3:]["index"], torch.arange(47, 50))
        assert rb[torch.tensor([4, 49])]["index"].tolist() == [4, 49] and rb[-1]["index"].item() == 49
        sample = rb.sample()
        assert sample.batch_size == (16,)
        assert torch.equal(sample["action"], sample["index"])
        assert torch.equal(sample["next", "observation"].squeeze(-1), sample["action"].float() + 1)

    def test_batch_size_at_call_and_errors(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend(torch.arange(10))
        assert rb.sample(4).shape == (4,)
        with pytest.raises(RuntimeError, match=r"no batch size; pass sample\(batch_size\)"):
            rb.sample()
        with pytest.raises(RuntimeError, match="Cannot iterate over ReplayBuffer: build it with batch_size"):
            next(iter(rb))
        with pytest.raises(IndexError, match="index 12 is out of range for 10 elements"):
            rb[12]

    def test_empty_keeps_memory_and_resets(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
        rb.extend(torch.arange(8))
        rb.empty()
        assert len(rb) == 0 and rb.write_count == 0
        with pytest.raises(RuntimeError, match="cannot sample from an empty replay buffer"):
            rb.sample()
        rb.extend(torch.arange(3))
        assert rb[torch.arange(3)].tolist() == [0, 1, 2]

    def test_extend_with_wrong_layout_leaves_buffer_untouched(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        rb.extend(steps(4))
        before = rb[torch.arange(4)].clone()
        bad = steps(3)
        bad["observation"] = torch.zeros(3, 2)
        with pytest.raises(RuntimeError, match=r"key 'observation' has per-element shape \(2,\)"):
            rb.extend(bad)
        with pytest.raises(KeyError, match=r"missing keys \('next', 'reward'\)"):
            rb.extend(steps(3).exclude(("next", "reward")))
        assert len(rb) == 4 and rb.write_count == 4 and rb.writer._cursor == 4
        assert (rb[torch.arange(4)] == before).all()

    def test_without_replacement_iteration_covers_the_data(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1000), sampler=SamplerWithoutReplacement(), batch_size=50)
        rb.extend(steps(1000))
        for _ in range(2):
            seen = torch.cat([batch["action"] for batch in rb])
            assert sorted(seen.tolist()) == list(range(1000))

    def test_dim_extend_and_ndim_2(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(40, ndim=2), dim_extend=1, batch_size=8)
        data = TensorDict(x=torch.arange(12).reshape(2, 6), batch_size=[2, 6])  # [env, time]
        rb.extend(data)
        assert rb.storage.shape == torch.Size([6, 2]) and len(rb) == 12
        sample = rb.sample()
        env, time = sample["index"][:, 1], sample["index"][:, 0]
        assert torch.equal(sample["x"], env * 6 + time)

    def test_lazy_stack_storage_and_collate(self):
        rb = ReplayBuffer(storage=LazyStackStorage(10), batch_size=2, collate_fn=lambda x: ("collated", x))
        rb.add(TensorDict(a=torch.zeros(3), batch_size=[3]))
        rb.add(TensorDict(a=torch.zeros(5), batch_size=[5]))
        tag, data = rb.sample()
        assert tag == "collated" and data.shape[0] == 2


class TestTransforms:
    def test_sample_transform_and_inverse_on_write(self):
        class AddOne(nn.Module):
            def forward(self, td):
                td["x"] = td["x"] + 1
                return td

            def inv(self, td):
                td = td.clone()
                td["x"] = td["x"] * 10
                return td

        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), transform=AddOne(), batch_size=4)
        rb.extend(TensorDict(x=torch.ones(4), batch_size=[4]))
        assert rb.storage.get(torch.arange(4))["x"].tolist() == [10.0] * 4
        assert rb.sample()["x"].tolist() == [11.0] * 4

    def test_append_insert_and_invert(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=2)
        rb.append_transform(lambda x: x * 2).insert_transform(0, lambda x: x + 1)
        rb.append_transform(lambda x: x + 100, invert=True)  # runs on writes
        rb.extend(torch.zeros(3))
        assert rb.storage.get(torch.arange(3)).tolist() == [100.0] * 3
        assert rb.sample().tolist() == [202.0, 202.0]
        assert len(rb.transform) == 3

    def test_multistep_as_a_sample_transform(self):
        from torchrl.data.postprocs import MultiStep

        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(20), sampler=SliceSampler(slice_len=5), transform=MultiStep(0.9, 3), batch_size=10
        )
        rb.extend(steps(20, done_every=10))
        sample = rb.sample().reshape(2, 5)
        assert (sample["steps_to_next_obs"] >= 1).all() and (sample["next", "reward"] > 1).any()


class _KeepBack(Transform):
    """An inverse that writes nothing: ``None`` (TorchRL's convention) or an empty batch (``td[:0]``)."""

    def __init__(self, result):
        super().__init__()
        self.result = result

    def _inv_call(self, td):
        return None if self.result == "none" else td[..., :0]


class TestInverseKeepsEverythingBack:
    """An inverse transform that leaves no element: no write, an empty ``(0, storage.ndim)`` index (TorchRL 0.14.1
    returns ``tensor([], size=(0, 1), dtype=torch.int64)`` and leaves ``len(rb) == write_count == 0``)."""

    @pytest.mark.parametrize("result", ["none", "empty"])
    @pytest.mark.parametrize("cls", [ReplayBuffer, TensorDictReplayBuffer, TensorDictPrioritizedReplayBuffer])
    @pytest.mark.parametrize("ndim", [1, 2])
    def test_extend_writes_nothing(self, cls, ndim, result):
        kwargs = {"alpha": 0.7, "beta": 0.5} if cls is TensorDictPrioritizedReplayBuffer else {}
        rb = cls(storage=LazyTensorStorage(10, ndim=ndim), transform=_KeepBack(result), **kwargs)
        data = steps(4) if ndim == 1 else torch.stack([steps(4), steps(4)], 1)
        data.set("td_error", torch.ones(data.shape))
        index = rb.extend(data)  # an ndim=2 storage not yet written: no ZeroDivisionError
        assert index.shape == (0, ndim) and index.dtype == torch.int64
        assert len(rb) == 0 and rb.write_count == 0

    @pytest.mark.parametrize("cls", [ReplayBuffer, TensorDictReplayBuffer])
    def test_add_writes_nothing(self, cls):
        rb = cls(storage=LazyTensorStorage(10), transform=_KeepBack("none"))
        index = rb.add(steps(1)[0])
        assert index.shape == (0, 1) and len(rb) == 0

    def test_list_storage_and_plain_tensors(self):
        rb = ReplayBuffer(storage=ListStorage(10), transform=_KeepBack("none"))
        assert rb.extend(steps(3)).shape == (0, 1) and len(rb) == 0
        rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=_KeepBack("empty"))
        assert rb.extend(torch.arange(5.0)).shape == (0, 1) and len(rb) == 0

    def test_plain_callable_returning_none_still_writes(self):
        # a plain callable's ``None`` means "changed in place": the data are written as they are
        class InPlace:
            def __call__(self, data):
                return data

            def inv(self, data):
                data.mul_(2)

        rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=InPlace())
        assert rb.extend(torch.ones(3)).tolist() == [0, 1, 2]
        assert rb[:].tolist() == [2.0, 2.0, 2.0]

    def test_empty_extend_without_transform_still_raises(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10))
        with pytest.raises(RuntimeError, match="expected at least one element"):
            rb.extend(steps(0))

    def test_replay_buffer_add_gives_the_inverse_a_time_dim(self):
        # as TorchRL: ReplayBuffer.add unsqueezes a TensorDict at -1 for the inverse, TensorDictReplayBuffer not
        seen = []

        class Record(Transform):
            def _inv_call(self, td):
                seen.append(td.batch_size)
                return td

        ReplayBuffer(storage=LazyTensorStorage(10), transform=Record()).add(steps(1)[0])
        TensorDictReplayBuffer(storage=LazyTensorStorage(10), transform=Record()).add(steps(1)[0])
        ReplayBuffer(storage=LazyTensorStorage(10, ndim=2), transform=Record()).add(steps(4))
        assert seen == [torch.Size([1]), torch.Size([]), torch.Size([4, 1])]


class TestCompactObservations:
    def test_next_observation_rebuilt_and_memory_halved(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(30), compact_obs=True, batch_size=200)
        rb.extend(steps(20, done_every=5))
        assert ("next", "observation") not in rb.storage._storage.keys(True)
        sample = rb.sample()
        step = sample["action"]
        ends = (step + 1) % 5 == 0
        assert torch.equal(sample["next", "observation"][~ends].squeeze(-1), step[~ends].float() + 1)
        assert sample["next", "observation"][ends].isnan().all()

    def test_circular_storage(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), compact_obs=["observation"], batch_size=100)
        rb.extend(steps(12))  # steps 4..11 survive; the newest (11) has no stored successor
        sample = rb.sample()
        newest = sample["action"] == 11
        assert sample["next", "observation"][newest].isnan().all()
        assert torch.equal(sample["next", "observation"][~newest].squeeze(-1), sample["action"][~newest].float() + 1)


class TestConcurrency:
    def test_threads_extend_and_sample(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10_000), batch_size=32)
        rb.extend(steps(100))
        errors = []

        def writer(k):
            try:
                for i in range(50):
                    rb.extend(steps(20, start=1000 * k + 20 * i))
            except Exception as err:  # noqa: BLE001
                errors.append(err)

        def reader():
            try:
                for _ in range(100):
                    s = rb.sample()
                    assert torch.equal(s["next", "observation"], s["observation"] + 1)
            except Exception as err:  # noqa: BLE001
                errors.append(err)

        threads = [threading.Thread(target=writer, args=(k,)) for k in range(2)] + [threading.Thread(target=reader)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and len(rb) == 100 + 2 * 50 * 20

    def test_prefetch(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), prefetch=3, batch_size=8)
        rb.extend(steps(100))
        batches = [rb.sample() for _ in range(10)]
        assert all(b.shape == (8,) for b in batches) and len(rb._background.queue) == 3
        rb.shutdown()
        assert not rb.is_alive
        with pytest.raises(RuntimeError, match="was shut down"):
            rb.sample()
        rb.start()
        assert rb.sample().shape == (8,)

    def test_shared_buffer_written_by_a_child_process(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), shared=True, batch_size=4)
        rb.extend(steps(10))
        ctx = mp.get_context("fork")
        proc = ctx.Process(target=_child_extend, args=(rb,))
        proc.start()
        proc.join(60)
        assert proc.exitcode == 0
        assert len(rb) == 30 and rb.write_count == 30
        assert rb[torch.arange(10, 30)]["action"].tolist() == list(range(100, 120))

    def test_shared_requires_initialized_storage(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10), shared=True)
        with pytest.raises(RuntimeError, match="must be written to once before it is sent to another process"):
            rb.__getstate__()


def _child_extend(rb):
    rb.extend(steps(20, start=100))


class TestOrderedAndQueries:
    def test_read_all_in_order_after_wrap(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(5))
        rb.extend(torch.arange(8))
        assert rb.read_all_in_order().tolist() == [3, 4, 5, 6, 7]
        assert rb.read_all_in_order(end=2).tolist() == [3, 4]
        rb.write_all(torch.arange(10, 13))
        assert len(rb) == 3 and rb.read_all_in_order().tolist() == [10, 11, 12]

    def test_query_trajectories(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(50))
        rb.extend(steps(12, done_every=4))
        rb.extend(steps(3, start=12))
        trajectories = rb.query(traj.length >= 4)
        assert [t.length for t in trajectories] == [4, 4, 4]
        assert [t.total_reward for t in rb.query()] == [4.0, 4.0, 4.0, 3.0]

    def test_update_if_present(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(4), writer=RoundRobinWriter(track_generations=True))
        rb.extend(TensorDict(x=torch.zeros(4), version=torch.zeros(4, dtype=torch.long), batch_size=[4]))
        sample, info = rb.sample(4, return_info=True)
        index, generation = info["index"], info["index_generation"]
        rb.extend(TensorDict(x=torch.full((1,), -1.0), version=torch.zeros(1, dtype=torch.long), batch_size=[1]))
        result = rb.update_if_present(index=index, generation=generation, patch={"x": torch.ones(4)})
        assert isinstance(result, ConditionalUpdateResult)
        stale = index == 0
        assert torch.equal(result.updated, ~stale) and result.stale_count == int(stale.sum())
        assert rb.storage.get(torch.tensor([0]))["x"].item() == -1.0
        assert (rb.storage.get(index[~stale])["x"] == 1).all()
        versions = rb.submit_update_if_present(
            index=torch.tensor([1, 2]), generation=rb.writer.generations_of(torch.tensor([1, 2])),
            patch={"x": torch.tensor([5.0, 5.0])}, version_key="version", version=torch.tensor([0, 3]),
            require_newer=True,
        ).result()
        assert versions.updated.tolist() == [False, True] and versions.version_rejected.tolist() == [True, False]
        assert rb.storage.get(2)["version"].item() == 3
        with pytest.raises(RuntimeError, match="track_generations=True"):
            TensorDictReplayBuffer(storage=LazyTensorStorage(2)).update_if_present(
                index=torch.tensor([0]), generation=torch.tensor([1]), patch={}
            )


class TestSampleUnits:
    def test_sequence_windows_with_burn_in(self):
        unit = Sequence(3, burn_in=1, bootstrap=1)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), sample_unit=unit, batch_size=50)
        rb.extend(steps(20, done_every=10))
        sample = rb.sample()
        assert sample.shape == (250,)
        windows = sample.reshape(50, 5)
        anchors = windows["action"][:, 1]
        episode = anchors // 10
        offsets = torch.arange(-1, 4)
        expected = (anchors.unsqueeze(-1) + offsets).clamp(episode.unsqueeze(-1) * 10, episode.unsqueeze(-1) * 10 + 9)
        assert torch.equal(windows["action"], expected)
        inside = (anchors.unsqueeze(-1) + offsets >= episode.unsqueeze(-1) * 10) & (
            anchors.unsqueeze(-1) + offsets < episode.unsqueeze(-1) * 10 + 10
        )
        assert torch.equal(windows["sequence_mask"], inside)
        assert torch.equal(windows["learning_mask"], inside & torch.tensor([False, True, True, True, False]))

    def test_include_reset_and_stop(self):
        data = steps(10, done_every=5)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), sample_unit=Sequence(3, episode_boundary="include_reset"))
        rb.extend(data)
        rb.sampler.sample = lambda storage, batch_size: (torch.tensor([3, 8]), {})
        sample = rb.sample(2)
        assert sample["action"].tolist() == [3, 4, 5, 8, 9, 9]
        assert sample["sequence_mask"].tolist() == [True, True, True, True, True, False]
        stop = TensorDictReplayBuffer(storage=LazyTensorStorage(10), sample_unit=Sequence(3, episode_boundary="stop"))
        stop.extend(data)
        stop.sampler.sample = lambda storage, batch_size: (torch.tensor([3]), {})
        sample = stop.sample(1)
        assert sample["action"].tolist() == [3, 4, 4] and sample["next", "done"].squeeze(-1).tolist() == [False, True, False]


def test_offline_to_online():
    offline = TensorDict(x=torch.zeros(50), batch_size=[50])
    rb = OfflineToOnlineReplayBuffer(offline, online_capacity=20, offline_fraction=0.5, batch_size=10)
    assert rb.sample()["is_offline"].all()  # nothing online yet
    rb.extend(TensorDict(x=torch.ones(5), batch_size=[5]))
    sample = rb.sample()
    assert sample["is_offline"].sum() == 5 and torch.equal(sample["x"], (~sample["is_offline"]).float())
    rb.anneal(10, 10)
    assert rb.offline_fraction == 0.0 and not rb.sample()["is_offline"].any()


def test_prefill_replay_buffer():
    source = TensorDictReplayBuffer(storage=LazyTensorStorage(6))
    source.extend(steps(9))
    target = prefill_replay_buffer(TensorDictReplayBuffer(storage=LazyTensorStorage(10)), source, chunk_size=4)
    assert target.read_all_in_order()["action"].tolist() == [3, 4, 5, 6, 7, 8]


def test_memmap_buffer(tmp_path):
    rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, scratch_dir=tmp_path), batch_size=16)
    rb.extend(steps(40))
    sample = rb.sample()
    assert torch.equal(sample["next", "observation"], sample["observation"] + 1)


def test_seed_documents_run():
    # from the project's user documents (README / tutorials)
    buffer = ReplayBuffer(storage=LazyTensorStorage(max_size=10000))
    buffer.extend(TensorDict(obs=torch.randn(100, 4), action=torch.randn(100, 2), batch_size=[100]))
    assert buffer.sample(32).batch_size == torch.Size([32])
    from torchrl.data import PrioritizedReplayBuffer

    buffer = PrioritizedReplayBuffer(alpha=0.6, beta=0.4, storage=LazyTensorStorage(max_size=10000))
    buffer.extend(TensorDict(obs=torch.randn(100, 4), batch_size=[100]))
    sample, info = buffer.sample(32, return_info=True)
    assert info["index"][:5].shape == (5,)
    from torchrl.data.replay_buffers import LazyTensorStorage as LTS, SamplerWithoutReplacement as SWR, TensorDictReplayBuffer as TDRB

    buffer = TDRB(storage=LTS(1000), sampler=SWR(), batch_size=50)
    buffer.extend(steps(1000))
    assert sum(s.shape[0] for s in buffer) == 1000


class TestServiceSurface:
    def test_direct_backend_and_ray_refusal(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(4), batch_size=2)
        assert rb.service_backend == "direct" and rb.client() is rb and rb.start() is rb
        with pytest.raises(ValueError, match="service_backend='ray' runs the buffer inside a Ray actor"):
            ReplayBuffer(storage=LazyTensorStorage(4), service_backend="ray")
        with pytest.raises(ValueError, match="unknown service_backend 'grpc'"):
            ReplayBuffer(storage=LazyTensorStorage(4), service_backend="grpc")
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            with pytest.raises(ImportError, match="requires the 'ray' package"):
                ReplayBuffer.as_remote()
        else:  # with ray installed, as_remote gives a Ray actor class (built lazily, no cluster started)
            assert hasattr(ReplayBuffer.as_remote(), "remote")

    def test_stats_and_can_sample(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(4), sampler=SamplerWithoutReplacement(drop_last=True), batch_size=3)
        assert not rb.can_sample()
        rb.extend(torch.arange(2))
        assert not rb.can_sample() and rb.can_sample(2)
        stats = rb.stats()
        assert (stats["size"], stats["capacity"], stats["write_count"], stats["batch_size"]) == (2, 4, 2, 3)

    def test_deprecated_aliases_warn_once(self, tmp_path):
        rb = ReplayBuffer(storage=LazyTensorStorage(4))
        rb.extend(torch.arange(2))
        with pytest.warns(DeprecationWarning, match="save is deprecated; use dumps instead"):
            rb.save(tmp_path / "a")
        other = ReplayBuffer(storage=LazyTensorStorage(4))
        other.loads(tmp_path / "a")
        assert len(other) == 2

    def test_set_and_update_stored_entries(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(5))
        rb.extend(TensorDict(x=torch.zeros(3), batch_size=[3]))
        rb.set_("x", torch.ones(3))
        rb.set_at_("x", torch.tensor([7.0]), torch.tensor([1]))
        assert rb.storage.get(torch.arange(3))["x"].tolist() == [1.0, 7.0, 1.0]
        rb.update_(TensorDict(x=torch.full((3,), 2.0), batch_size=[3]))
        assert rb.storage.get(torch.arange(3))["x"].tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize(
    "make",
    [
        lambda: TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=4),
        lambda: TensorDictReplayBuffer(storage=LazyTensorStorage(20), sampler=SliceSampler(slice_len=2), batch_size=4),
        lambda: TensorDictReplayBuffer(storage=LazyMemmapStorage(20), batch_size=4, prefetch=2),
    ],
)
def test_pickle_and_deepcopy_are_independent_buffers(make):
    rb = make()
    rb.extend(steps(10, done_every=5))
    rb.sample()
    clone = copy.deepcopy(rb)
    clone.extend(steps(5))
    assert (len(rb), len(clone)) == (10, 15)
    restored = pickle.loads(pickle.dumps(rb))
    assert len(restored) == 10 and restored.sample().shape == (4,)


class TestEnvTransformsInBuffers:
    def test_transform_is_a_compose_and_runs_torchrl_transforms(self):
        from torchrl.envs import Compose, RewardScaling

        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        rb.append_transform(RewardScaling(loc=0.0, scale=2.0, in_keys=["reward"]))
        assert isinstance(rb.transform, Compose)
        rb.extend(TensorDict(reward=torch.ones(6, 1), batch_size=[6]))
        assert rb.storage.get(torch.arange(6))["reward"].eq(1).all()  # stored raw
        assert rb.sample()["reward"].eq(2).all()  # scaled when sampled

    def test_inverse_transform_runs_on_writes(self):
        from torchrl.envs import DoubleToFloat

        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), batch_size=3)
        rb.append_transform(DoubleToFloat(in_keys=["obs"], in_keys_inv=["action"]))
        rb.extend(TensorDict(obs=torch.zeros(5, 2, dtype=torch.float64), action=torch.zeros(5, 1), batch_size=[5]))
        stored = rb.storage.get(torch.arange(5))
        assert stored["action"].dtype == torch.float64  # inverse cast on write
        sample = rb.sample()
        assert sample["obs"].dtype == torch.float32


@pytest.mark.parametrize("storage", ["LazyTensorStorage", "LazyMemmapStorage", "ListStorage"])
def test_slices_cover_the_stored_elements_only(storage):
    # TorchRL: rb[:] is what was written, not the storage's capacity
    import torchrl.data as data

    rb = data.ReplayBuffer(storage=getattr(data, storage)(100))
    rb.extend(TensorDict({"a": torch.arange(12)}, [12]))
    assert rb[:]["a"].tolist() == list(range(12))
    assert rb[2:5]["a"].tolist() == [2, 3, 4] and rb[-2:]["a"].tolist() == [10, 11]
