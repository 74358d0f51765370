"""Checkpoints: atomic files, what they hold, and runs that resume exactly where they stopped."""
from __future__ import annotations

import os
import random

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from test.trainers._utils import ListCollector, Regression, make_collector, make_dqn, read_scalars, regression_batches
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.objectives import SoftUpdate
from torchrl.record.loggers import CSVLogger
from torchrl.testing import CountingEnv
from torchrl.trainers import (
    CountFramesLog,
    LogScalar,
    LRSchedulerHook,
    ReplayBufferTrainer,
    RewardNormalizer,
    SelectKeys,
    TargetNetUpdaterHook,
    Trainer,
)
from torchrl.trainers import _checkpoint

TOTAL = 80  # 8 batches of 10 frames


def dqn_run(log_dir, *, save_file=None, stop_at=None, exp="run"):
    """A DQN run on the test collector with stateful hooks everywhere (built identically each time)."""
    loss, policy, actor, greedy = make_dqn(seed=0)
    collector = make_collector(TOTAL, policy=policy, init_random_frames=10)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-2)
    trainer = Trainer(
        collector=collector, total_frames=TOTAL, optim_steps_per_batch=3, loss_module=loss, optimizer=optimizer,
        logger=CSVLogger(exp, log_dir=log_dir), log_interval=0, progress_bar=False, seed=1,
        save_trainer_file=save_file, save_trainer_interval=10**9,
    )
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1000), batch_size=8)
    # random-action batches lack the Q-values: keep what the loss reads
    SelectKeys(["observation", "action", ("next", "observation"), ("next", "reward"), ("next", "done"),
                ("next", "terminated")]).register(trainer)
    ReplayBufferTrainer(rb).register(trainer)
    RewardNormalizer(decay=0.9).register(trainer)
    TargetNetUpdaterHook(SoftUpdate(loss, eps=0.8)).register(trainer, "target_updater")
    LRSchedulerHook(torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)).register(trainer)
    LogScalar(("next", "reward"), "r_training").register(trainer)
    CountFramesLog().register(trainer)
    trainer.register_op("post_steps", greedy.step, frames=10)
    if stop_at is not None:
        trainer.register_op("post_steps", lambda: trainer.collected_frames >= stop_at and trainer.request_stop("test"))
    return trainer, loss, rb, optimizer


def assert_same_state(a: Trainer, b: Trainer):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa["trainer"]["collected_frames"] == sb["trainer"]["collected_frames"]
    assert sa["trainer"]["_optim_count"] == sb["trainer"]["_optim_count"]
    for key in ("loss_module", "count_frames_log", "lr_scheduler"):
        torch.testing.assert_close(sa[key], sb[key])
    torch.testing.assert_close(sa["optimizer"]["optimizer"]["state"], sb["optimizer"]["optimizer"]["state"])
    storage_a = sa["replay_buffer"]["replay_buffer"]["_storage"]
    storage_b = sb["replay_buffer"]["replay_buffer"]["_storage"]
    assert storage_a["_len"] == storage_b["_len"] == TOTAL
    assert (storage_a["_storage"] == storage_b["_storage"]).all()
    torch.testing.assert_close(sa["reward_normalizer"], sb["reward_normalizer"])
    torch.testing.assert_close(sa["collector"]["policy"], sb["collector"]["policy"])  # epsilon annealing


class TestExactResume:
    def test_stopped_and_resumed_run_equals_uninterrupted_run(self, tmp_path):
        full, full_loss, _, _ = dqn_run(tmp_path, exp="full")
        full.train()

        ckpt = tmp_path / "ckpt.pt"
        first, _, _, _ = dqn_run(tmp_path, save_file=ckpt, stop_at=40, exp="first")
        first.train()
        assert first.collected_frames == 40 and first._stop_reason == "test"

        resumed, resumed_loss, _, _ = dqn_run(tmp_path, save_file=ckpt, exp="second")
        resumed.load_from_file(ckpt)
        assert resumed.collected_frames == 40 and resumed.collector.frames == 40
        resumed.train()

        assert resumed.collected_frames == full.collected_frames == TOTAL
        assert_same_state(full, resumed)
        for key in ("r_training", "loss", "n_frames"):
            whole = read_scalars(tmp_path, "full", key)
            pieces = read_scalars(tmp_path, "first", key) + read_scalars(tmp_path, "second", key)
            assert [s for s, _ in pieces] == [s for s, _ in whole]
            assert [v for _, v in pieces] == pytest.approx([v for _, v in whole], rel=1e-5)
        # the resumed run's final checkpoint is the uninterrupted run's state
        final = torch.load(ckpt, weights_only=False)
        assert final["trainer"]["collected_frames"] == TOTAL
        torch.testing.assert_close(final["loss_module"], full_loss.state_dict())

    def test_real_collector_resume(self, tmp_path):
        """The same with a real Collector (episodes restart at each batch: the env's in-flight step is not
        part of the collector's state)."""

        def run(save_file=None, stop_at=None):
            torch.manual_seed(0)
            env = CountingEnv(max_steps=100)
            collector = Collector(env, None, frames_per_batch=10, total_frames=60, reset_at_each_iter=True)
            loss = Regression()

            def loss_module(td):
                x = torch.cat([td["observation"].float(), td["action"].float()], -1)
                return TensorDict(loss=(loss.net(x) - td["next", "observation"].float()).pow(2).mean())

            trainer = Trainer(collector=collector, total_frames=60, optim_steps_per_batch=2,
                              loss_module=loss_module, optimizer=torch.optim.Adam(loss.parameters(), lr=0.1),
                              progress_bar=False, seed=3, save_trainer_file=save_file)
            trainer.register_module("net", loss)
            ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=6)).register(trainer)
            if stop_at is not None:
                trainer.register_op("post_steps",
                                    lambda: trainer.collected_frames >= stop_at and trainer.request_stop())
            return trainer, loss

        full, full_loss = run()
        full.train()
        run(tmp_path / "c.pt", stop_at=30)[0].train()
        resumed, resumed_loss = run(tmp_path / "c.pt")
        resumed.load_from_file(tmp_path / "c.pt")
        assert resumed.collector._frames == 30
        resumed.train()
        assert resumed.collected_frames == 60 and resumed._optim_count == full._optim_count == 12
        torch.testing.assert_close(resumed_loss.state_dict(), full_loss.state_dict())
        rb_full = full.state_dict()["replay_buffer"]["replay_buffer"]["_storage"]["_storage"]
        rb_resumed = resumed.state_dict()["replay_buffer"]["replay_buffer"]["_storage"]["_storage"]
        assert (rb_full == rb_resumed).all()

    def test_rng_states_are_restored(self, tmp_path):
        trainer = Trainer(collector=ListCollector([]), total_frames=1, loss_module=Regression(),
                          save_trainer_file=tmp_path / "c.pt")
        torch.manual_seed(7)
        np.random.seed(7)
        random.seed(7)
        trainer.save_trainer(force_save=True)
        expected = (torch.rand(3), np.random.rand(), random.random())
        torch.manual_seed(99)
        np.random.seed(99)
        random.seed(99)
        trainer.load_from_file(tmp_path / "c.pt")
        got = (torch.rand(3), np.random.rand(), random.random())
        assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]


class TestCheckpointFiles:
    def test_interval_and_contents(self, tmp_path, monkeypatch):
        saves = []
        real_save = _checkpoint.atomic_save
        monkeypatch.setattr("torchrl.trainers._trainer.atomic_save",
                            lambda obj, path: (saves.append(obj["trainer"]["collected_frames"]), real_save(obj, path)))
        loss = Regression()
        trainer = Trainer(collector=ListCollector(regression_batches(6)), total_frames=48, optim_steps_per_batch=1,
                          loss_module=loss, optimizer=torch.optim.SGD(loss.parameters(), lr=0.1), progress_bar=False,
                          save_trainer_file=tmp_path / "sub" / "c.pt", save_trainer_interval=15, logger=CSVLogger(
                              "e", log_dir=tmp_path), log_interval=0)
        trainer.train()
        assert saves == [16, 32, 48]  # every > 15 frames, and at the end
        state = torch.load(tmp_path / "sub" / "c.pt", weights_only=False)
        assert set(state) == {"trainer", "loss_module", "collector", "logger", "optimizer"}
        assert state["trainer"]["_last_save"] == 48 and state["trainer"]["_optim_count"] == 6
        assert state["collector"] == {"position": 6}
        assert state["logger"]["scalar_counts"]["loss_mse"] == 6
        assert set(state["trainer"]["rng"]) >= {"torch", "numpy", "python"}
        assert os.listdir(tmp_path / "sub") == ["c.pt"]  # no temporary file left behind

    def test_failed_save_keeps_previous_checkpoint(self, tmp_path):
        path = tmp_path / "c.pt"
        _checkpoint.atomic_save({"v": 1}, path)

        class Unpicklable:
            def __reduce__(self):
                raise RuntimeError("cannot pickle")

        with pytest.raises(RuntimeError, match="cannot pickle"):
            _checkpoint.atomic_save({"v": Unpicklable()}, path)
        assert torch.load(path, weights_only=False) == {"v": 1}
        assert os.listdir(tmp_path) == ["c.pt"]

    def test_no_file_no_save(self, monkeypatch):
        saves = []
        monkeypatch.setattr("torchrl.trainers._trainer.atomic_save", lambda obj, path: saves.append(path))
        trainer = Trainer(collector=ListCollector(regression_batches(2)), total_frames=16, loss_module=Regression(),
                          progress_bar=False, save_trainer_interval=0)
        trainer.train()
        trainer.save_trainer(force_save=True)
        assert saves == []

    def test_load_errors(self, tmp_path):
        trainer = Trainer(collector=[], total_frames=1, loss_module=Regression())
        with pytest.raises(FileNotFoundError, match="no checkpoint at"):
            trainer.load_from_file(tmp_path / "missing.pt")
        with pytest.raises(KeyError, match="not a trainer state"):
            trainer.load_state_dict({"loss_module": {}})
        state = trainer.state_dict()
        CountFramesLog().register(trainer)
        with pytest.raises(KeyError, match=r"no state for the registered modules \['count_frames_log'\]"):
            trainer.load_state_dict(state)

    def test_state_dict_round_trip_in_memory(self):
        loss = Regression()
        trainer = Trainer(collector=ListCollector(regression_batches(3)), total_frames=24, optim_steps_per_batch=2,
                          loss_module=loss, optimizer=torch.optim.Adam(loss.parameters()), progress_bar=False)
        trainer.train()
        state = trainer.state_dict()
        loss2 = Regression(seed=1)
        other = Trainer(collector=ListCollector(regression_batches(3)), total_frames=24, optim_steps_per_batch=2,
                        loss_module=loss2, optimizer=torch.optim.Adam(loss2.parameters()), progress_bar=False)
        other.load_state_dict(state)
        assert (other.collected_frames, other._optim_count, other.collector.position) == (24, 6, 3)
        torch.testing.assert_close(loss2.state_dict(), loss.state_dict())
        assert other.optimizer.state_dict()["state"][0]["step"] == 6
        assert "state" in other.app_state


class TestInterruptedSaves:
    """A save SIGKILLed mid-way leaves its temporary; the next load or save removes it (real child processes)."""

    CHILD = """
import torch
from torchrl.trainers import _checkpoint
block_after(torch, "save")  # the whole checkpoint is written to the temporary, then the process hangs
_checkpoint.atomic_save({{"big": torch.ones(8_000_000)}}, {path!r})
"""

    def test_killed_save_is_cleaned_up_by_the_next_load_and_save(self, tmp_path):
        from test._kill_helpers import kill_mid_save, size_of, temporaries

        path = tmp_path / "c.pt"
        _checkpoint.atomic_save({"v": 1}, path)
        pid = kill_mid_save(self.CHILD.format(path=str(path)), tmp_path)
        (left,) = temporaries(tmp_path, "c.pt")
        assert f"-{pid}-" in left.name and size_of(left) > 30e6
        assert _checkpoint.load_checkpoint(path) == {"v": 1}  # the previous checkpoint loads ...
        assert temporaries(tmp_path, "c.pt") == []  # ... and the load removed the dead writer's temporary
        kill_mid_save(self.CHILD.format(path=str(path)), tmp_path)
        assert len(temporaries(tmp_path, "c.pt")) == 1
        _checkpoint.atomic_save({"v": 2}, path)
        assert os.listdir(tmp_path) == ["c.pt"] and _checkpoint.load_checkpoint(path) == {"v": 2}

    def test_no_space_left_keeps_the_previous_checkpoint(self, tmp_path, monkeypatch):
        import errno

        path = tmp_path / "c.pt"
        _checkpoint.atomic_save({"v": 1}, path)

        def disk_full(obj, handle):
            handle.write(b"\0" * 4096)  # a partial checkpoint, then the device is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(torch, "save", disk_full)
        with pytest.raises(OSError, match=r"No space left on device.*previous checkpoint at '.*c\.pt' is intact") as info:
            _checkpoint.atomic_save({"v": 2}, path)
        assert info.value.errno == errno.ENOSPC
        monkeypatch.undo()
        assert os.listdir(tmp_path) == ["c.pt"] and _checkpoint.load_checkpoint(path) == {"v": 1}
