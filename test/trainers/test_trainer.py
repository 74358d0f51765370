"""The training loop: frame accounting, hook order and call conventions, logging, progress bar."""
from __future__ import annotations

import sys
import types

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from test.trainers._utils import (
    ListCollector,
    Regression,
    make_collector,
    make_dqn,
    read_scalars,
    regression_batches,
)
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl.record.loggers import CSVLogger
from torchrl.testing import ContinuousActionVecMockEnv
from torchrl.trainers import CountFramesLog, LogScalar, ReplayBufferTrainer, Trainer
from torchrl.trainers._trainer import DESTINATIONS

pytestmark = pytest.mark.filterwarnings("ignore:No target network updater")


def regression_trainer(n_batches=3, *, size=8, optim_steps=2, lr=0.1, **kwargs):
    loss = Regression()
    collector = ListCollector(regression_batches(n_batches, size))
    kwargs.setdefault("progress_bar", False)
    trainer = Trainer(
        collector=collector, total_frames=kwargs.pop("total_frames", n_batches * size),
        optim_steps_per_batch=optim_steps, loss_module=loss,
        optimizer=torch.optim.SGD(loss.parameters(), lr=lr), **kwargs,
    )
    return trainer, loss, collector


class TestLoop:
    def test_frames_optim_steps_and_shutdown(self):
        trainer, loss, collector = regression_trainer(3, optim_steps=2, num_epochs=3)
        trainer.train()
        assert trainer.collected_frames == 24
        assert trainer._optim_count == 3 * 2 * 3
        assert len(loss.calls) == 18
        assert collector.shutdown_calls == 1

    def test_stops_at_total_frames(self):
        trainer, _, collector = regression_trainer(5, total_frames=17)
        trainer.train()
        assert trainer.collected_frames == 24  # three batches of 8: the first count >= 17
        assert collector.position == 3

    def test_frame_skip_multiplies_frames(self):
        trainer, _, _ = regression_trainer(4, frame_skip=3, total_frames=1000)
        trainer.train()
        assert trainer.collected_frames == 4 * 8 * 3

    def test_masked_frames_are_not_counted(self):
        batches = regression_batches(2, size=6)
        batches = [b.reshape(2, 3) for b in batches]
        for b in batches:
            b.set(("collector", "mask"), torch.tensor([[True, True, False], [True, False, False]]))
        loss = Regression()
        trainer = Trainer(collector=ListCollector(batches), total_frames=100, optim_steps_per_batch=1,
                          loss_module=loss, progress_bar=False)
        trainer.train()
        assert trainer.collected_frames == 6

    def test_optimizer_changes_parameters_like_sgd(self):
        trainer, loss, collector = regression_trainer(1, optim_steps=1, lr=0.1)
        before = loss.net.weight.detach().clone()
        batch = collector.batches[0]
        w = before.clone().requires_grad_(True)
        b = loss.net.bias.detach().clone().requires_grad_(True)
        ((batch["x"] @ w.T + b - batch["y"]).pow(2).mean()).backward()
        trainer.train()
        torch.testing.assert_close(loss.net.weight.detach(), before - 0.1 * w.grad)

    def test_dqn_parameters_change(self):
        loss, policy, actor, _ = make_dqn()
        collector = make_collector(40, policy=policy)
        before = [p.detach().clone() for p in actor.parameters()]
        trainer = Trainer(collector=collector, total_frames=40, optim_steps_per_batch=2, loss_module=loss,
                          optimizer=torch.optim.Adam(loss.parameters(), lr=1e-2), progress_bar=False)
        ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8)).register(trainer)
        trainer.train()
        assert trainer.collected_frames == 40 and trainer._optim_count == 8
        assert all(not torch.equal(a, p) for a, p in zip(before, actor.parameters()))

    def test_init_random_frames_skip_optimisation(self):
        batches = regression_batches(4)
        loss = Regression()
        trainer = Trainer(collector=ListCollector(batches, init_random_frames=16), total_frames=32,
                          optim_steps_per_batch=1, loss_module=loss, progress_bar=False)
        trainer.train()
        assert trainer._optim_count == 2  # frames 24 and 32 are > 16

    def test_optim_steps_default_to_collector_workers(self):
        loss = Regression()
        trainer = Trainer(collector=ListCollector([], num_workers=3), total_frames=1, loss_module=loss)
        assert trainer.optim_steps_per_batch == 3
        trainer = Trainer(collector=ListCollector([]), total_frames=1, loss_module=loss)
        assert trainer.optim_steps_per_batch == 1

    @pytest.mark.parametrize(
        "kwargs,match",
        [({"total_frames": 0}, "total_frames must be an integer >= 1"),
         ({"frame_skip": 0}, "frame_skip must be an integer >= 1"),
         ({"num_epochs": 0}, "num_epochs must be an integer >= 1"),
         ({"optim_steps_per_batch": -1}, "optim_steps_per_batch must be an integer >= 0")],
    )
    def test_invalid_arguments(self, kwargs, match):
        base = {"collector": [], "total_frames": 1, "loss_module": Regression()}
        base.update(kwargs)
        with pytest.raises(ValueError, match=match):
            Trainer(**base)

    def test_compute_loss_method(self):
        class Twice(Regression):
            def doubled(self, td):
                return TensorDict(loss_mse=2 * self(td)["loss_mse"])

        loss = Twice()
        trainer = Trainer(collector=[], total_frames=1, loss_module=loss)
        batch = regression_batches(1)[0]
        torch.testing.assert_close(trainer.compute_loss(batch, method="doubled")["loss_mse"],
                                   2 * trainer.compute_loss(batch)["loss_mse"])

    def test_same_seed_same_training(self):
        params = []
        for _ in range(2):
            loss, policy, actor, _ = make_dqn(seed=0)
            trainer = Trainer(collector=make_collector(30, policy=policy), total_frames=30, optim_steps_per_batch=2,
                              loss_module=loss, optimizer=torch.optim.Adam(loss.parameters(), lr=1e-2),
                              progress_bar=False, seed=5)
            ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8)).register(trainer)
            trainer.train()
            params.append([p.detach().clone() for p in actor.parameters()])
            assert trainer.collector.seeds == [5]
        for a, b in zip(*params):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


class TestHooks:
    def test_call_order_and_arguments(self):
        events = []
        loss = Regression()
        trainer = Trainer(collector=ListCollector(regression_batches(1)), total_frames=8, optim_steps_per_batch=2,
                          num_epochs=2, loss_module=loss, optimizer=torch.optim.SGD(loss.parameters(), lr=0.1),
                          progress_bar=False)

        def record(dest):
            def op(*args):
                kinds = tuple(type(a).__name__ for a in args)
                events.append((dest, kinds))
            return op

        for dest in DESTINATIONS:
            trainer.register_op(dest, record(dest))
        trainer.train()
        td = "TensorDict"
        step = [("process_optim_batch", (td,)), ("post_loss", (td,)), ("process_loss", (td,)),
                ("optimizer", (td, "bool", "NoneType", "int")), ("post_optim", ()), ("post_optim_log", (td,))]
        epoch = [("pre_epoch", (td,)), ("pre_epoch_log", (td,)), *step, *step, ("post_epoch", ()),
                 ("post_epoch_log", (td,))]
        expected = [("setup", ()), ("batch_process", (td,)), ("pre_steps_log", (td,)), ("pre_optim_steps", ()),
                    *epoch, *epoch, ("post_optim_complete_log", (td,)), ("post_steps", ()), ("post_steps_log", (td,)),
                    ("shutdown", ())]
        assert events == expected

    def test_transform_hooks_replace_data(self):
        loss = Regression()
        trainer = Trainer(collector=ListCollector(regression_batches(1)), total_frames=8, optim_steps_per_batch=1,
                          loss_module=loss, progress_bar=False)
        trainer.register_op("batch_process", lambda td: td.set("x", torch.zeros_like(td["x"])))
        trainer.register_op("process_optim_batch", lambda td: td[:3])
        trainer.register_op("process_optim_batch", lambda td: None)  # None keeps the data
        trainer.train()
        (seen,) = loss.calls
        assert seen.batch_size == torch.Size([3]) and not seen["x"].any()

    def test_kwargs_are_bound(self):
        calls = []
        trainer, _, _ = regression_trainer(2)
        trainer.register_op("post_steps", lambda factor: calls.append(factor), factor=7)
        trainer.train()
        assert calls == [7, 7]

    def test_register_errors(self):
        trainer, _, _ = regression_trainer(1)
        with pytest.raises(RuntimeError, match="unknown destination 'post_everything'"):
            trainer.register_op("post_everything", print)
        with pytest.raises(TypeError, match="op must be callable, got int"):
            trainer.register_op("post_steps", 3)
        with pytest.raises(RuntimeError, match="'optimizer' is already registered"):
            trainer.register_module("optimizer", object())
        with pytest.raises(RuntimeError, match="'collector' is already registered"):
            trainer.register_module("collector", object())

    def test_register_hook_is_register_op(self):
        calls = []
        trainer, _, _ = regression_trainer(2)
        trainer.register_hook("pre_optim_steps", lambda: calls.append(1))
        trainer.train()
        assert calls == [1, 1]

    def test_request_stop(self, tmp_path):
        trainer, _, collector = regression_trainer(5, save_trainer_file=tmp_path / "ckpt.pt",
                                                   save_trainer_interval=10**6)
        trainer.register_op("post_steps", lambda: trainer.collected_frames >= 16 and trainer.request_stop("enough"))
        trainer.train()
        assert trainer.collected_frames == 16 and collector.position == 2
        assert trainer._stop_reason == "enough"
        state = torch.load(tmp_path / "ckpt.pt", weights_only=False)
        assert state["trainer"]["collected_frames"] == 16

    def test_optimizer_hooks_receive_their_index(self):
        loss = Regression()
        trainer = Trainer(collector=ListCollector(regression_batches(1)), total_frames=8, optim_steps_per_batch=1,
                          loss_module=loss, optimizer=torch.optim.SGD(loss.parameters(), lr=0.1), progress_bar=False)
        seen = []
        trainer.register_op("optimizer", lambda losses, cgn, cn, index: seen.append((sorted(losses.keys()), index)))
        trainer.train()
        assert seen == [(["grad_norm_0", "loss_mse", "pred_mean"], 1)]


class TestLogging:
    def test_losses_are_averaged_and_logged(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        trainer, loss, _ = regression_trainer(3, optim_steps=2, logger=logger, log_interval=0)
        seen = []
        trainer.register_op("process_loss", lambda losses: seen.append(losses["loss_mse"].item()))
        trainer.train()
        rows = read_scalars(tmp_path, "exp", "loss_mse")
        assert [step for step, _ in rows] == [8, 16, 24]
        expected = [(seen[2 * i] + seen[2 * i + 1]) / 2 for i in range(3)]
        assert [value for _, value in rows] == pytest.approx(expected, rel=1e-6)
        assert [step for step, _ in read_scalars(tmp_path, "exp", "grad_norm_0")] == [8, 16, 24]

    def test_log_interval(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        trainer, _, _ = regression_trainer(6, logger=logger, log_interval=20)
        trainer.train()
        assert [step for step, _ in read_scalars(tmp_path, "exp", "loss_mse")] == [24, 48]

    def test_auto_log_can_be_disabled(self, tmp_path):
        trainer, _, _ = regression_trainer(2, logger=CSVLogger("exp", log_dir=tmp_path), log_interval=0,
                                           auto_log_optim_steps=False)
        trainer.train()
        assert not (tmp_path / "exp" / "scalars" / "loss_mse.csv").exists()

    def test_log_hooks_dicts_are_logged(self, tmp_path):
        trainer, _, _ = regression_trainer(2, logger=CSVLogger("exp", log_dir=tmp_path), log_interval=0)
        trainer.register_op("pre_steps_log", lambda batch: {"batch_x": batch["x"].sum().item(), "log_pbar": True})
        trainer.train()
        batches = regression_batches(2)
        rows = read_scalars(tmp_path, "exp", "batch_x")
        expected = [(8, pytest.approx(batches[0]["x"].sum().item())), (16, pytest.approx(batches[1]["x"].sum().item()))]
        assert rows == expected
        assert trainer._pbar_str["batch_x"] == pytest.approx(batches[1]["x"].sum().item())

    def test_log_timings(self, tmp_path):
        trainer, _, _ = regression_trainer(2, logger=CSVLogger("exp", log_dir=tmp_path), log_interval=0,
                                           log_timings=True)
        trainer.train()
        for name in ("time/collect", "time/optim"):
            rows = read_scalars(tmp_path, "exp", name)
            assert [step for step, _ in rows] == [8, 16] and all(value > 0 for _, value in rows)


class TestProgressBar:
    def test_fake_tqdm_receives_frames_and_description(self, monkeypatch):
        bars = []

        class FakeBar:
            def __init__(self, total, initial):
                self.total, self.initial, self.updates, self.descriptions, self.closed = total, initial, [], [], False
                bars.append(self)

            def update(self, n):
                self.updates.append(n)

            def set_description(self, text):
                self.descriptions.append(text)

            def close(self):
                self.closed = True

        monkeypatch.setitem(sys.modules, "tqdm", types.SimpleNamespace(tqdm=FakeBar))
        trainer, _, _ = regression_trainer(3, progress_bar=True)
        trainer.register_op("pre_steps_log", lambda batch: {"r": 1.5, "log_pbar": True})
        trainer.train()
        (bar,) = bars
        assert (bar.total, bar.initial, bar.updates, bar.closed) == (24, 0, [8, 8, 8], True)
        assert bar.descriptions[-1] == "r:  1.5000"

    def test_real_tqdm(self, capsys):
        pytest.importorskip("tqdm")
        trainer, _, _ = regression_trainer(3, progress_bar=True)
        trainer.train()
        assert "24/24" in capsys.readouterr().err

    def test_without_tqdm_warns_and_trains(self, monkeypatch):
        monkeypatch.setitem(sys.modules, "tqdm", None)  # makes `import tqdm` raise ImportError
        monkeypatch.setattr("torchrl._utils._deprecation._WARNED", set())
        trainer, _, _ = regression_trainer(2, progress_bar=True)
        with pytest.warns(UserWarning, match="tqdm is not installed"):
            trainer.train()
        assert trainer.collected_frames == 16


class TestCollectors:
    def test_real_collector(self):
        torch.manual_seed(0)
        env = ContinuousActionVecMockEnv(max_steps=5)
        policy = torch.nn.Sequential(torch.nn.Linear(7, 7), torch.nn.Tanh())
        actor = TensorDictModule(policy, ["observation"], ["action"])
        collector = Collector(env, actor, frames_per_batch=10, total_frames=30)
        seen = []

        def loss_module(td):
            seen.append(td.batch_size)
            return TensorDict(loss_action=(actor(td.clone())["action"] - 0.5).pow(2).mean())

        before = [p.detach().clone() for p in actor.parameters()]
        trainer = Trainer(collector=collector, total_frames=30, optim_steps_per_batch=1, loss_module=loss_module,
                          optimizer=torch.optim.SGD(actor.parameters(), lr=0.1), progress_bar=False)
        trainer.train()
        assert trainer.collected_frames == 30 and seen == [torch.Size([10])] * 3
        assert all(not torch.equal(a, p) for a, p in zip(before, actor.parameters()))

    def test_async_collection(self):
        torch.manual_seed(0)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(1000), batch_size=8)
        env = ContinuousActionVecMockEnv(max_steps=5)
        collector = Collector(env, None, frames_per_batch=10, total_frames=50, replay_buffer=rb)
        loss = Regression(n_in=7, n_out=7)

        def loss_module(td):
            return TensorDict(loss_mse=(loss.net(td["observation"]) - td["next", "observation"]).pow(2).mean())

        trainer = Trainer(collector=collector, total_frames=50, optim_steps_per_batch=1, loss_module=loss_module,
                          optimizer=torch.optim.SGD(loss.parameters(), lr=0.01), progress_bar=False,
                          async_collection=True)
        ReplayBufferTrainer(rb).register(trainer)
        trainer.train()
        assert trainer.collected_frames == 50 and len(rb) == 50
        assert trainer._optim_count >= 1
        assert not collector.is_running()

    def test_collector_writing_into_a_buffer(self):
        torch.manual_seed(0)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
        collector = Collector(ContinuousActionVecMockEnv(max_steps=5), None, frames_per_batch=10, total_frames=30,
                              replay_buffer=rb)
        seen = []

        def loss_module(td):
            seen.append(td.batch_size)
            return TensorDict(loss=td["observation"].sum() * 0)

        trainer = Trainer(collector=collector, total_frames=30, optim_steps_per_batch=1, loss_module=loss_module,
                          progress_bar=False)
        ReplayBufferTrainer(rb).register(trainer)
        LogScalar().register(trainer)
        CountFramesLog().register(trainer)
        trainer.train()
        assert trainer.collected_frames == 30 and len(rb) == 30 and seen == [torch.Size([4])] * 3

    def test_async_collection_needs_a_buffer(self):
        with pytest.raises(ValueError, match="must write into a replay buffer"):
            Trainer(collector=ListCollector([]), total_frames=1, loss_module=Regression(), async_collection=True)
