"""Replay buffers on any device: where indices, weights and samples live, and host syncs of extend/sample.

Without a GPU, a storage on the ``meta`` device stands for one: writes and gathers on meta tensors run
without data, and any host read of them raises, so a buffer that extends and samples from a meta storage
makes no host read of device data. ``count_host_syncs`` checks the CPU buffers. The ``cuda`` cases run every
sampler on a real GPU, with ``torch.cuda.set_sync_debug_mode("error")`` around the uniform buffers.
"""
from __future__ import annotations

import contextlib

import pytest
import torch
from tensordict import TensorDict

from torchrl.data.replay_buffers import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    PrioritizedSliceSampler,
    RandomSampler,
    ReplayBuffer,
    RoundRobinWriter,
    SamplerWithoutReplacement,
    SliceSampler,
    SliceSamplerWithoutReplacement,
    TensorDictMaxValueWriter,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
    TensorStorage,
)
from torchrl.data.replay_buffers._buffer_ops import pin_cpu_memory
from torchrl.data.replay_buffers._utils import random_on, to_device
from torchrl.data.replay_buffers.samplers._trajectories import TrajectoryTable
from torchrl.testing import get_available_devices
from torchrl.testing._host_syncs import count_host_syncs

META = torch.device("meta")
CPU = torch.device("cpu")
DEVICES = [pytest.param(d, marks=pytest.mark.cuda) if d.type == "cuda" else d for d in get_available_devices()]


def transitions(n: int, start: int = 0, episode_len: int = 5) -> TensorDict:
    step = torch.arange(start, start + n)
    return TensorDict(
        {
            "obs": step.float().unsqueeze(-1),
            "episode": step // episode_len,
            "next": TensorDict(
                {"done": (step % episode_len == episode_len - 1).unsqueeze(-1), "reward": torch.ones(n, 1)},
                batch_size=[n],
            ),
        },
        batch_size=[n],
    )


UNIFORM = {"random": RandomSampler, "without_replacement": SamplerWithoutReplacement}


# ---------------------------------------------------------------------------- helpers
class TestHelpers:
    def test_random_on_cpu_generator_draws_where_it_lives(self):
        drawn = random_on(torch.randint, 0, 100, (6,), generator=torch.Generator().manual_seed(3), device=META)
        assert drawn.device == META and drawn.shape == (6,) and drawn.dtype == torch.long
        # on the generator's device, the seeded stream is the user's
        same = random_on(torch.randint, 0, 100, (6,), generator=torch.Generator().manual_seed(3), device=CPU)
        assert same.tolist() == torch.randint(0, 100, (6,), generator=torch.Generator().manual_seed(3)).tolist()

    def test_random_on_without_generator_draws_on_device(self):
        assert random_on(torch.rand, (2, 3), generator=None, device=META).device == META
        assert random_on(torch.randperm, 5, generator=None, device=None).device == CPU

    def test_to_device(self):
        x = torch.arange(3)
        assert to_device(x, None) is x and to_device(x, CPU) is x
        assert to_device(x, META).device == META

    def test_pin_cpu_memory_leaves_device_data_alone(self, monkeypatch):
        pinned = []

        def fake_pin(tensor, *args, **kwargs):  # pinning needs CUDA: record the call instead
            pinned.append(tensor.device)
            return tensor

        monkeypatch.setattr(torch.Tensor, "pin_memory", fake_pin)
        meta = torch.zeros(3, device=META)
        assert pin_cpu_memory(meta) is meta and pinned == []
        meta_td = TensorDict(a=torch.zeros(2, device=META), batch_size=[2], device=META)
        assert pin_cpu_memory(meta_td) is meta_td and pinned == []
        mixed = TensorDict(a=torch.zeros(2), b=torch.zeros(2, device=META), batch_size=[2])
        pin_cpu_memory(mixed)
        assert pinned == [CPU]  # only the CPU leaf
        pin_cpu_memory((torch.zeros(1), meta))
        assert pinned == [CPU, CPU]


# ---------------------------------------------------------------------------- samplers on a "device" storage
class TestMetaStorage:
    @pytest.mark.parametrize("name", sorted(UNIFORM))
    @pytest.mark.parametrize("generator", [False, True])
    def test_uniform_indices_on_storage_device(self, name, generator):
        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(10, device=META), sampler=UNIFORM[name](), batch_size=4,
            generator=torch.Generator().manual_seed(0) if generator else None,
        )
        rb.extend(transitions(6))
        rb.extend(transitions(6, 6))  # wraps
        sample, info = rb.sample(return_info=True)
        assert info["index"].device == META
        assert sample.device == META and sample["index"].device == META and sample["obs"].shape == (4, 1)

    @pytest.mark.parametrize("name", sorted(UNIFORM))
    def test_uniform_indices_on_storage_device_ndim2(self, name):
        rb = ReplayBuffer(storage=LazyTensorStorage(12, device=META, ndim=2), sampler=UNIFORM[name](), batch_size=5)
        rb.extend(TensorDict(obs=torch.zeros(3, 4, 2), batch_size=[3, 4]))
        sample, info = rb.sample(return_info=True)
        assert isinstance(info["index"], tuple) and all(i.device == META for i in info["index"])
        assert sample.device == META and sample.shape == (5,)

    def test_prioritized_indices_and_weights_on_storage_device(self):
        rb = TensorDictPrioritizedReplayBuffer(
            alpha=0.7, beta=0.5, storage=LazyTensorStorage(10, device=META), batch_size=4
        )
        rb.extend(transitions(8))
        assert rb.sampler.device == CPU  # the trees stay on the CPU
        sample, info = rb.sample(return_info=True)
        assert info["index"].device == META and info["priority_weight"].device == META
        assert sample["priority_weight"].device == META and sample["priority_weight"].shape == (4,)
        # priorities from the host (here: the CPU) for indices drawn on the storage's device are accepted
        rb.update_priority(torch.arange(4), torch.tensor([1.0, 2.0, 3.0, 4.0]))

    def test_prioritized_ndim2(self):
        sampler = PrioritizedSampler(12, alpha=1.0, beta=1.0)
        rb = ReplayBuffer(storage=LazyTensorStorage(12, device=META, ndim=2), sampler=sampler, batch_size=5)
        rb.extend(TensorDict(obs=torch.zeros(3, 4, 2), batch_size=[3, 4]))
        _, info = rb.sample(return_info=True)
        assert all(i.device == META for i in info["index"]) and info["priority_weight"].device == META

    def test_cpu_batch_into_device_storage(self):
        storage = LazyTensorStorage(6, device=META)
        rb = ReplayBuffer(storage=storage, batch_size=2)
        assert rb.extend(torch.zeros(4, 3)).device == CPU  # the writer's cursor lives on the host
        rb.extend(torch.zeros(4, 3))  # wraps: two slice writes
        assert len(rb) == 6 and storage._storage.device == META
        assert storage._last_row() == 1  # the newest row, from the last of the two writes
        assert rb.sample().device == META

    def test_pytree_storage_on_device(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(6, device=META), batch_size=3)
        rb.extend((torch.zeros(4, 2), {"b": torch.ones(4)}))
        rb.extend((torch.zeros(4, 2), {"b": torch.ones(4)}))
        a, tree = rb.sample()
        assert a.device == META and tree["b"].device == META

    def test_user_cpu_indices_on_device_storage(self):
        storage = TensorStorage(torch.zeros(5, 2, device=META), device=META)
        storage.set(torch.tensor([0, 3]), torch.ones(2, 2))  # a CPU index and a CPU batch
        assert storage.get(torch.tensor([1, 2])).device == META
        assert storage.get((torch.tensor([1, 2]),)).device == META

    def test_max_value_writer_on_device_storage(self):
        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(3, device=META), writer=TensorDictMaxValueWriter(rank_key="r"), batch_size=2
        )
        index = rb.extend(TensorDict(r=torch.tensor([1.0, 5.0, 3.0, 0.0, 4.0]), batch_size=[5]))
        assert index.tolist() == [-1, 1, 2, 0, -1] or index.tolist() == [-1, 1, 2, -1, 0]
        assert len(rb) == 3 and rb.sample()["r"].device == META

    def test_generations_with_device_indices(self):
        rb = ReplayBuffer(
            storage=LazyTensorStorage(4, device=META), writer=RoundRobinWriter(track_generations=True), batch_size=3
        )
        rb.extend(torch.zeros(6))
        _, info = rb.sample(return_info=True)
        assert info["index"].device == META and info["index_generation"].device == META

    def test_memmap_storage_gathers_on_cpu_and_moves(self, tmp_path):
        rb = TensorDictReplayBuffer(
            storage=LazyMemmapStorage(10, scratch_dir=tmp_path, device=META), batch_size=4,
            sampler=SamplerWithoutReplacement(),
        )
        rb.extend(transitions(7))
        sample, info = rb.sample(return_info=True)
        assert info["index"].device == CPU  # the files are read on the CPU
        assert sample.device == META and sample["index"].device == META

    def test_prefetch_with_device_storage(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(10, device=META), prefetch=2, batch_size=3)
        rb.extend(torch.zeros(8, 2))
        assert all(rb.sample().device == META for _ in range(4))
        rb.shutdown()

    def test_sampler_without_replacement_restored_epoch_moves(self):
        sampler = SamplerWithoutReplacement(shuffle=False)
        rb = ReplayBuffer(storage=LazyTensorStorage(10), sampler=sampler, batch_size=3)
        rb.extend(torch.arange(10))
        rb.sample()
        state = sampler.state_dict()
        assert state["_sample_list"].tolist() == list(range(3, 10))
        device_rb = ReplayBuffer(storage=LazyTensorStorage(10, device=META), sampler=SamplerWithoutReplacement(),
                                 batch_size=3)
        device_rb.extend(torch.arange(10))
        device_rb.sampler.load_state_dict(state)
        _, info = device_rb.sample(return_info=True)
        assert info["index"].device == META and device_rb.sampler._order.device == META
        assert device_rb.sampler._position == 3 and device_rb.sampler._order.shape == (7,)  # the restored epoch


class TestSliceDevices:
    """Slices are drawn where the trajectory table lives; a table on a meta "device" with a CPU generator."""

    def meta_table(self) -> TrajectoryTable:
        return TrajectoryTable(
            start=torch.zeros(4, dtype=torch.long, device=META), length=torch.zeros(4, dtype=torch.long, device=META),
            column=torch.zeros(4, dtype=torch.long, device=META), rows=20, wrap=False, inner_shape=(),
            stored_end=torch.zeros(20, 1, dtype=torch.bool, device=META),
        )

    @pytest.mark.parametrize("cls", [SliceSampler, SliceSamplerWithoutReplacement])
    def test_slices_drawn_on_table_device(self, cls):
        sampler = cls(slice_len=5, traj_key="episode")
        sampler._rng = torch.Generator().manual_seed(0)
        table = self.meta_table()
        sampler._valid_cache = (table, 5, torch.arange(4, device=META))  # (boundaries need data: nonzero)
        traj = sampler._choose_trajectories(table, 2, 5)
        offset = sampler._choose_offsets(table.length[traj], 5)
        index, info = sampler._slices(table, traj, table.length[traj], offset, 5, extra={})
        assert traj.device == META and offset.device == META and index[0].device == META
        assert all(v.device == META for v in info.values())

    def test_slices_of_memmap_storage_index_its_cpu_files(self, tmp_path):
        # the boundaries come from the files (CPU): indices stay there, the slices go to the storage's device
        rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(20, scratch_dir=tmp_path, device=META), batch_size=10,
                                    sampler=SliceSampler(slice_len=5, traj_key="episode"))
        rb.extend(transitions(20))
        sample, info = rb.sample(return_info=True)
        assert info["index"][0].device == CPU and sample.device == META
        assert sample["next", "truncated"].device == META and sample["next", "truncated"].shape == (10, 1)


# ---------------------------------------------------------------------------- host syncs (CPU buffers)
class TestHostSyncs:
    @pytest.mark.parametrize("name", sorted(UNIFORM))
    @pytest.mark.parametrize("td", [True, False])
    def test_uniform_extend_and_sample_make_no_sync(self, name, td):
        cls = TensorDictReplayBuffer if td else ReplayBuffer
        rb = cls(storage=LazyTensorStorage(10), sampler=UNIFORM[name](), batch_size=4)
        rb.extend(transitions(6))
        with count_host_syncs() as syncs:
            rb.extend(transitions(6, 6))  # wraps around the end
            rb.extend(transitions(13, 12))  # more than the capacity
            for _ in range(3):
                rb.sample()
        assert syncs.count == 0, syncs.report()

    def test_uniform_ndim2_and_tensor_storage_make_no_sync(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(12, ndim=2), batch_size=5)
        rb.extend(torch.zeros(2, 4))
        with count_host_syncs() as syncs:
            rb.extend(torch.zeros(3, 4))
            rb.sample()
        assert syncs.count == 0, syncs.report()

    def test_memmap_sample_makes_no_sync(self, tmp_path):
        rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(10, scratch_dir=tmp_path), batch_size=4)
        rb.extend(transitions(6))
        with count_host_syncs() as syncs:
            rb.extend(transitions(6))
            rb.sample()
        assert syncs.count == 0, syncs.report()

    @pytest.mark.parametrize("cls", [SliceSampler, SliceSamplerWithoutReplacement])
    def test_slice_sample_syncs_only_after_writes(self, cls):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(40), sampler=cls(slice_len=5, traj_key="episode"),
                                    batch_size=10)
        rb.extend(transitions(40))
        with count_host_syncs() as syncs:
            rb.sample()  # boundaries of the new content: data-dependent sizes
        assert syncs.count > 0
        with count_host_syncs() as syncs:
            rb.sample()
            rb.sample()
        assert syncs.count == 0, syncs.report()

    def test_prioritized_costs_only_host_reads_of_its_cpu_trees(self):
        # on a "device" storage, extend and sample succeed: nothing stored on the device is read on the host
        rb = TensorDictPrioritizedReplayBuffer(alpha=0.7, beta=0.5, storage=LazyTensorStorage(64, device=META),
                                               batch_size=8)
        rb.extend(transitions(32))
        rb.sample()
        with count_host_syncs() as syncs:
            rb.extend(transitions(32))
            rb.sample()
        # what is counted are numpy views of the CPU indices the writer returns (no device is involved)
        assert syncs.count == 1 and syncs.events[0].op == "Tensor.numpy", syncs.report()

    def test_prioritized_slice_on_device_storage_draws_on_cpu_trees(self):
        sampler = PrioritizedSliceSampler(40, alpha=1.0, beta=1.0, slice_len=5, traj_key="episode")
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(40), sampler=sampler, batch_size=10)
        rb.extend(transitions(40))
        sample, info = rb.sample(return_info=True)
        assert sampler._lookup(sampler._table)[0].device == CPU
        assert info["priority_weight"].shape == (10,) and sample["episode"].reshape(2, 5).unique(dim=1).shape[1] == 1


# ---------------------------------------------------------------------------- real devices
def _sync_guard(device: torch.device):
    """Raises on any synchronising CUDA call inside the block (nothing to check on the CPU)."""
    if device.type != "cuda":
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def guard():
        torch.cuda.set_sync_debug_mode("error")
        try:
            yield
        finally:
            torch.cuda.set_sync_debug_mode("default")

    return guard()


def _all_samplers():
    return {
        "random": lambda: RandomSampler(),
        "without_replacement": lambda: SamplerWithoutReplacement(),
        "prioritized": lambda: PrioritizedSampler(40, alpha=0.7, beta=0.5),
        "slice": lambda: SliceSampler(slice_len=5, traj_key="episode"),
        "slice_without_replacement": lambda: SliceSamplerWithoutReplacement(slice_len=5, traj_key="episode"),
        "prioritized_slice": lambda: PrioritizedSliceSampler(40, alpha=0.7, beta=0.5, slice_len=5,
                                                             traj_key="episode"),
    }


@pytest.mark.parametrize("device", DEVICES)
class TestOnDevice:
    @pytest.mark.parametrize("name", sorted(_all_samplers()))
    @pytest.mark.parametrize("generator", [False, True])
    def test_every_sampler(self, device, name, generator):
        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(40, device=device), sampler=_all_samplers()[name](), batch_size=10,
            generator=torch.Generator().manual_seed(0) if generator else None,
        )
        rb.extend(transitions(25))
        rb.extend(transitions(25, 25))  # wraps
        for _ in range(3):
            sample, info = rb.sample(return_info=True)
            index = info["index"][0] if isinstance(info["index"], tuple) else info["index"]
            assert index.device == sample.device == device
            # the stored step at every sampled slot is the one written there
            assert (sample["obs"].squeeze(-1).long() % 40 == index).all()
            if "priority_weight" in info:
                assert info["priority_weight"].device == device
                sample.set("td_error", torch.rand(sample.shape, device=device))
                rb.update_tensordict_priority(sample)

    @pytest.mark.parametrize("name", sorted(UNIFORM))
    def test_uniform_no_sync(self, device, name):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1000, device=device), sampler=UNIFORM[name](),
                                    batch_size=64)
        data = transitions(600).to(device)
        rb.extend(data)
        with _sync_guard(device):
            rb.extend(data)  # wraps
            for _ in range(5):
                sample = rb.sample()
        assert sample.device == device and sample["obs"].shape == (64, 1)

    def test_cpu_batch_into_device_storage_and_back(self, device):
        rb = ReplayBuffer(storage=LazyTensorStorage(10, device=device), batch_size=4)
        rb.extend(torch.arange(12.0))
        assert sorted(rb[:].cpu().tolist()) == [float(x) for x in range(2, 12)]
        cpu_rb = ReplayBuffer(storage=LazyTensorStorage(10), batch_size=4)
        cpu_rb.extend(torch.arange(12.0, device=device))
        assert cpu_rb.sample().device == CPU

    def test_memmap_pin_memory_prefetch(self, device, tmp_path):
        rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, scratch_dir=tmp_path / "cpu"), batch_size=8,
                                    prefetch=2, pin_memory=device.type == "cuda")
        rb.extend(transitions(50))
        sample = rb.sample()
        assert sample.device == CPU and (device.type != "cuda" or sample["obs"].is_pinned())
        moved = sample.to(device, non_blocking=True)
        assert (moved["obs"].squeeze(-1).long() == moved["index"]).all()
        rb.shutdown()
        to_device_rb = TensorDictReplayBuffer(storage=LazyMemmapStorage(100, scratch_dir=tmp_path / "dev",
                                                                        device=device), batch_size=8, prefetch=2)
        to_device_rb.extend(transitions(50))
        sample = to_device_rb.sample()
        assert sample.device == device and (sample["obs"].squeeze(-1).long() == sample["index"]).all()
        to_device_rb.shutdown()

    def test_prioritized_update_from_any_device(self, device):
        rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(10, device=device),
                                               batch_size=20)
        rb.extend(transitions(4))
        rb.update_priority(torch.arange(4, device=device), torch.tensor([0.0, 0.0, 1.0, 0.0], device=device))
        sample = rb.sample()
        assert (sample["index"] == 2).all() and sample["priority_weight"].device == device

    def test_list_storage(self, device):
        rb = ReplayBuffer(storage=ListStorage(5, device=device), batch_size=3)
        rb.extend([torch.ones(2) * i for i in range(7)])
        assert rb.sample().device == device


def test_compact_obs_on_device_storages(tmp_path):
    data = transitions(8)
    data["next", "obs"] = data["obs"] + 1
    for storage in (LazyTensorStorage(10, device=META), LazyMemmapStorage(10, scratch_dir=tmp_path, device=META)):
        rb = TensorDictReplayBuffer(storage=storage, compact_obs=["obs"], batch_size=4)
        rb.extend(data)
        sample = rb.sample()
        assert sample["next", "obs"].device == META and sample["next", "obs"].shape == (4, 1)
