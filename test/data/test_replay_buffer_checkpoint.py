"""Checkpoints restore a buffer exactly (content, cursor, sampler state) and never corrupt the previous one."""
from __future__ import annotations

import os

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import (
    LazyMemmapStorage,
    LazyTensorStorage,
    ListStorage,
    PrioritizedSampler,
    ReplayBuffer,
    RoundRobinWriter,
    SamplerWithoutReplacement,
    SliceSamplerWithoutReplacement,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)


def steps(n: int, start: int = 0) -> TensorDict:
    obs = torch.arange(start, start + n, dtype=torch.float32).unsqueeze(-1)
    return TensorDict(
        observation=obs,
        episode=torch.arange(start, start + n) // 5,
        next=TensorDict(observation=obs + 1, done=((torch.arange(start, start + n) + 1) % 5 == 0).unsqueeze(-1),
                        batch_size=[n]),
        batch_size=[n],
    )


CONFIGS = {
    "list": lambda tmp: ReplayBuffer(storage=ListStorage(30), batch_size=4),
    "lazy_tensor": lambda tmp: TensorDictReplayBuffer(storage=LazyTensorStorage(30), batch_size=4),
    "memmap": lambda tmp: TensorDictReplayBuffer(
        storage=LazyMemmapStorage(30, scratch_dir=tmp / f"mm{len(os.listdir(tmp))}"), batch_size=4
    ),
    "without_replacement": lambda tmp: TensorDictReplayBuffer(
        storage=LazyTensorStorage(30), sampler=SamplerWithoutReplacement(), batch_size=4
    ),
    "prioritized": lambda tmp: TensorDictPrioritizedReplayBuffer(
        alpha=0.7, beta=0.5, storage=LazyTensorStorage(30), batch_size=4
    ),
    "slices": lambda tmp: TensorDictReplayBuffer(
        storage=LazyTensorStorage(30), sampler=SliceSamplerWithoutReplacement(slice_len=2, traj_key="episode"),
        batch_size=4,
    ),
    "generations": lambda tmp: TensorDictReplayBuffer(
        storage=LazyTensorStorage(30), writer=RoundRobinWriter(track_generations=True), batch_size=4
    ),
}


def fill_and_use(rb: ReplayBuffer) -> None:
    data = steps(40)  # wraps around the 30 slots
    if isinstance(rb.storage, ListStorage):
        rb.extend([data[i] for i in range(40)])
    else:
        rb.extend(data)
    batch, info = rb.sample(return_info=True)
    if isinstance(rb.sampler, PrioritizedSampler):
        rb.update_priority(info["index"], torch.arange(4.0) + 1)


def assert_same_state(a: ReplayBuffer, b: ReplayBuffer) -> None:
    assert len(a) == len(b) and a.write_count == b.write_count
    assert a.writer._cursor == b.writer._cursor
    for i in range(len(a)):
        assert (a.storage.get(i) == b.storage.get(i)).all()
    state_a, state_b = a.sampler.state_dict(), b.sampler.state_dict()
    assert state_a.keys() == state_b.keys()
    for key in state_a:
        if state_a[key] is None or state_b[key] is None:  # e.g. no epoch under way (without replacement)
            assert state_a[key] is state_b[key], key
            continue
        assert torch.equal(torch.as_tensor(state_a[key]), torch.as_tensor(state_b[key])), key
    if a.writer.tracks_generations:
        assert torch.equal(a.writer.generations_of(torch.arange(30)), b.writer.generations_of(torch.arange(30)))


def continue_identically(a: ReplayBuffer, b: ReplayBuffer) -> None:
    a.set_rng(torch.Generator().manual_seed(0))
    b.set_rng(torch.Generator().manual_seed(0))
    for _ in range(3):
        xa, xb = a.sample(), b.sample()
        assert (xa == xb).all()


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_dumps_loads_restores_exactly(name, tmp_path):
    rb = CONFIGS[name](tmp_path)
    fill_and_use(rb)
    rb.dumps(tmp_path / "ckpt")
    restored = CONFIGS[name](tmp_path)
    restored.loads(tmp_path / "ckpt")
    assert_same_state(rb, restored)
    continue_identically(rb, restored)
    extra = steps(3, start=100)
    for buffer in (rb, restored):
        buffer.extend(extra if not isinstance(buffer.storage, ListStorage) else [extra[i] for i in range(3)])
    assert_same_state(rb, restored)


@pytest.mark.parametrize("name", ["lazy_tensor", "prioritized", "without_replacement"])
def test_state_dict_round_trip(name, tmp_path):
    rb = CONFIGS[name](tmp_path)
    fill_and_use(rb)
    restored = CONFIGS[name](tmp_path)
    restored.load_state_dict(rb.state_dict())
    assert_same_state(rb, restored)
    continue_identically(rb, restored)


def test_interrupted_dump_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(30), batch_size=4)
    rb.extend(steps(10))
    rb.dumps(tmp_path / "ckpt")
    rb.extend(steps(10, start=10))

    def crash(path):
        raise OSError("disk full")

    monkeypatch.setattr(rb.sampler, "dumps", crash)
    with pytest.raises(OSError, match="disk full"):
        rb.dumps(tmp_path / "ckpt")
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]  # the temporary directory was removed
    restored = TensorDictReplayBuffer(storage=LazyTensorStorage(30), batch_size=4)
    restored.loads(tmp_path / "ckpt")
    assert len(restored) == 10 and restored.write_count == 10


def test_crash_between_the_two_renames_is_recovered(tmp_path):
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(5))
    rb.dumps(tmp_path / "ckpt")
    os.replace(tmp_path / "ckpt", tmp_path / ".ckpt.previous")  # the old checkpoint moved aside, new one missing
    restored = ReplayBuffer(storage=LazyTensorStorage(10))
    restored.loads(tmp_path / "ckpt")
    assert restored[torch.arange(5)].tolist() == [0, 1, 2, 3, 4]
    with pytest.raises(FileNotFoundError, match="No replay-buffer checkpoint found"):
        restored.loads(tmp_path / "nothing")


def test_dump_overwrites_previous_checkpoint(tmp_path):
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(3))
    rb.dumps(tmp_path / "ckpt")
    rb.extend(torch.arange(3, 6))
    rb.dumps(tmp_path / "ckpt")
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    restored = ReplayBuffer(storage=LazyTensorStorage(10))
    restored.loads(tmp_path / "ckpt")
    assert len(restored) == 6


DUMP_CHILD = """
import torch
from torchrl.data import LazyTensorStorage, ReplayBuffer, RoundRobinWriter
rb = ReplayBuffer(storage=LazyTensorStorage(1000))
rb.extend(torch.ones(1000, 8000))  # 32 MB of content
block_after(RoundRobinWriter, "dumps")  # the storage is written, then the process hangs inside dumps()
rb.dumps({path!r})
"""


def test_dump_killed_midway_is_cleaned_up_by_the_next_load_and_dump(tmp_path):
    from test._kill_helpers import kill_mid_save, size_of, temporaries

    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(5))
    rb.dumps(tmp_path / "ckpt")
    pid = kill_mid_save(DUMP_CHILD.format(path=str(tmp_path / "ckpt")), tmp_path)
    (left,) = temporaries(tmp_path, "ckpt")
    assert f"-{pid}-" in left.name and size_of(left) > 30e6
    restored = ReplayBuffer(storage=LazyTensorStorage(10))
    restored.loads(tmp_path / "ckpt")  # the previous checkpoint loads, and the dead writer's temporary is gone
    assert restored[torch.arange(5)].tolist() == [0, 1, 2, 3, 4]
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    kill_mid_save(DUMP_CHILD.format(path=str(tmp_path / "ckpt")), tmp_path)
    rb.extend(torch.arange(5, 7))
    rb.dumps(tmp_path / "ckpt")
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    restored.loads(tmp_path / "ckpt")
    assert len(restored) == 7


def test_dump_without_space_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    import errno

    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(30), batch_size=4)
    rb.extend(steps(10))
    rb.dumps(tmp_path / "ckpt")
    rb.extend(steps(10, start=10))

    def disk_full(path):
        path.mkdir(parents=True, exist_ok=True)
        (path / "partial.pt").write_bytes(b"\0" * 4096)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(rb.writer, "dumps", disk_full)
    with pytest.raises(OSError, match=r"No space left on device.*previous checkpoint at '.*ckpt' is intact") as info:
        rb.dumps(tmp_path / "ckpt")
    assert info.value.errno == errno.ENOSPC
    assert sorted(os.listdir(tmp_path)) == ["ckpt"]
    restored = TensorDictReplayBuffer(storage=LazyTensorStorage(30), batch_size=4)
    restored.loads(tmp_path / "ckpt")
    assert len(restored) == 10
