"""Every trainer hook: known answers, registration places, states, errors."""
from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from test.trainers._utils import ListCollector, Regression, make_collector, make_dqn, read_scalars, regression_batches
from torchrl import timeit
from torchrl._utils._exploration import ExplorationType, exploration_type
from torchrl.collectors import Collector
from torchrl.data import (
    LazyTensorStorage,
    PrioritizedSampler,
    SamplerWithoutReplacement,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from torchrl.objectives import HardUpdate, SoftUpdate
from torchrl.record.loggers import CSVLogger
from torchrl.testing import ContinuousActionVecMockEnv, MockSerialEnv
from torchrl.trainers import (
    BatchSubSampler,
    ClearCudaCache,
    CountFramesLog,
    DefaultOptimizationStepper,
    EarlyStopping,
    LogScalar,
    LogTiming,
    LogValidationReward,
    LRSchedulerHook,
    mask_batch,
    MixedPrecisionOptimizationStepper,
    OptimizationStepper,
    OptimizerHook,
    ReplayBufferTrainer,
    RewardNormalizer,
    SelectKeys,
    TargetNetUpdaterHook,
    Trainer,
    TrainerHookBase,
    UpdateWeights,
    UTDRHook,
    ValueEstimatorHook,
)

pytestmark = pytest.mark.filterwarnings("ignore:No target network updater")


def trainer_on(batches, *, loss=None, optim_steps=1, lr=0.1, optimizer=True, **kwargs):
    loss = Regression() if loss is None else loss
    kwargs.setdefault("progress_bar", False)
    kwargs.setdefault("total_frames", sum(b.numel() for b in batches))
    trainer = Trainer(collector=ListCollector(batches), optim_steps_per_batch=optim_steps, loss_module=loss,
                      optimizer=torch.optim.SGD(loss.parameters(), lr=lr) if optimizer else None, **kwargs)
    return trainer, loss


def test_hook_base_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        TrainerHookBase()


def test_mask_batch():
    td = TensorDict({"x": torch.arange(6).reshape(2, 3),
                     "collector": {"mask": torch.tensor([[True, False, True], [False, True, True]])}}, [2, 3])
    assert mask_batch(td)["x"].tolist() == [0, 2, 4, 5]
    plain = TensorDict(x=torch.arange(3), batch_size=[3])
    assert mask_batch(plain) is plain


# -------------------------------------------------------------------------------------------------- optimisation
class TestOptimizerHook:
    def test_selected_components_and_grad_norm(self):
        w = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
        hook = OptimizerHook(torch.optim.SGD([w], lr=0.1), ["loss_a"])
        losses = TensorDict(loss_a=(3 * w).sum(), loss_b=(100 * w).sum())
        out = hook(losses, clip_grad_norm=True, clip_norm=None, index=2)
        torch.testing.assert_close(w.detach(), torch.tensor([0.7, 1.7]))
        assert out["grad_norm_2"].item() == pytest.approx(math.sqrt(18))
        assert w.grad is None

    def test_default_components_start_with_loss(self):
        w = torch.nn.Parameter(torch.zeros(()))
        hook = OptimizerHook(torch.optim.SGD([w], lr=1.0))
        hook(TensorDict(loss=w * 1, loss_x=w * 2, other=w * 100), True, None, 0)
        assert w.item() == -3.0

    def test_clip_by_norm(self):
        w = torch.nn.Parameter(torch.zeros(2))
        hook = OptimizerHook(torch.optim.SGD([w], lr=1.0))
        out = hook(TensorDict(loss=(w * torch.tensor([3.0, 4.0])).sum()), True, 1.0, 0)
        torch.testing.assert_close(w.detach(), -torch.tensor([0.6, 0.8]), rtol=1e-5, atol=1e-5)
        assert out["grad_norm_0"].item() == pytest.approx(5.0)

    def test_clip_by_value(self):
        w = torch.nn.Parameter(torch.zeros(2))
        hook = OptimizerHook(torch.optim.SGD([w], lr=1.0))
        out = hook(TensorDict(loss=(w * torch.tensor([3.0, -0.5])).sum()), False, 1.0, 0)
        torch.testing.assert_close(w.detach(), torch.tensor([-1.0, 0.5]))
        assert out["grad_norm_0"].item() == pytest.approx(math.sqrt(9.25))

    def test_errors(self):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(()))], lr=1.0)
        with pytest.raises(ValueError, match="must name at least one loss entry"):
            OptimizerHook(opt, [])
        with pytest.raises(KeyError, match=r"no entry named 'loss\.\.\.'.*\['value'\]"):
            OptimizerHook(opt)(TensorDict(value=torch.zeros(())), True, None, 0)
        with pytest.raises(KeyError, match=r"loss components \['loss_q'\] not found.*\['loss_pi'\]"):
            OptimizerHook(opt, ["loss_q"])(TensorDict(loss_pi=torch.zeros(())), True, None, 0)

    def test_state_is_the_optimizer_state(self):
        w = torch.nn.Parameter(torch.ones(3))
        opt = torch.optim.Adam([w], lr=0.1)
        hook = OptimizerHook(opt)
        hook(TensorDict(loss=w.sum()), True, None, 0)
        w2 = torch.nn.Parameter(torch.ones(3))
        hook2 = OptimizerHook(torch.optim.Adam([w2], lr=0.1))
        hook2.load_state_dict(hook.state_dict())
        state = hook2.optimizer.state_dict()["state"][0]
        torch.testing.assert_close(state["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])

    def test_two_optimizers_in_a_trainer(self, tmp_path):
        class TwoHeads(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.a, self.b = torch.nn.Linear(2, 1), torch.nn.Linear(2, 1)

            def forward(self, td):
                return TensorDict(loss_a=(self.a(td["x"]) - td["y"]).pow(2).mean(),
                                  loss_b=(self.b(td["x"]) - td["y"]).pow(2).mean())

        loss = TwoHeads()
        trainer = Trainer(collector=ListCollector(regression_batches(2)), total_frames=16, optim_steps_per_batch=1,
                          loss_module=loss, progress_bar=False, logger=CSVLogger("e", log_dir=tmp_path),
                          log_interval=0)
        a0, b0 = loss.a.weight.detach().clone(), loss.b.weight.detach().clone()
        OptimizerHook(torch.optim.SGD(loss.a.parameters(), lr=0.1), ["loss_a"]).register(trainer, "opt_a")
        OptimizerHook(torch.optim.SGD(loss.b.parameters(), lr=0.0), ["loss_b"]).register(trainer, "opt_b")
        trainer.train()
        assert not torch.equal(loss.a.weight, a0)
        torch.testing.assert_close(loss.b.weight.detach(), b0)
        assert [s for s, _ in read_scalars(tmp_path, "e", "grad_norm_0")] == [8, 16]
        assert [s for s, _ in read_scalars(tmp_path, "e", "grad_norm_1")] == [8, 16]
        assert set(trainer.state_dict()) >= {"opt_a", "opt_b"}


class TestSteppers:
    def test_default_stepper_is_one_sgd_step(self):
        batches = regression_batches(1)
        loss = Regression()
        w0, b0 = loss.net.weight.detach().clone(), loss.net.bias.detach().clone()
        trainer = Trainer(collector=ListCollector(batches), total_frames=8, optim_steps_per_batch=1,
                          loss_module=loss, optimizer=torch.optim.SGD(loss.parameters(), lr=0.1),
                          optimization_stepper=DefaultOptimizationStepper(), progress_bar=False)
        hooked = []
        trainer.register_op("post_loss", lambda td: hooked.append("post_loss"))
        trainer.register_op("optimizer", lambda *a: hooked.append("optimizer op"))  # bypassed by the stepper
        trainer.train()
        w, b = w0.clone().requires_grad_(), b0.clone().requires_grad_()
        ((batches[0]["x"] @ w.T + b - batches[0]["y"]).pow(2).mean()).backward()
        torch.testing.assert_close(loss.net.weight.detach(), w0 - 0.1 * w.grad)
        assert hooked == ["post_loss"]
        assert isinstance(trainer._modules["optimization_stepper"], OptimizationStepper)

    def test_default_stepper_needs_an_optimizer(self):
        trainer, _ = trainer_on(regression_batches(1), optimizer=False)
        DefaultOptimizationStepper().register(trainer)
        with pytest.raises(RuntimeError, match="the trainer has no optimizer"):
            trainer.train()

    def test_gradient_accumulation(self):
        batches = regression_batches(2)
        loss = Regression()
        w0, b0 = loss.net.weight.detach().clone(), loss.net.bias.detach().clone()
        stepper = MixedPrecisionOptimizationStepper(torch.optim.SGD(loss.parameters(), lr=0.1),
                                                    gradient_accumulation_steps=2, clip_norm=None)
        trainer = Trainer(collector=ListCollector(batches), total_frames=16, optim_steps_per_batch=1,
                          loss_module=loss, progress_bar=False)
        stepper.register(trainer)
        weights = []
        trainer.register_op("post_optim", lambda: weights.append(loss.net.weight.detach().clone()))
        trainer.train()
        torch.testing.assert_close(weights[0], w0)  # first micro-batch: gradients accumulate, no update
        w = w0.clone().requires_grad_()
        for batch in batches:
            ((batch["x"] @ w.T + b0 - batch["y"]).pow(2).mean() / 2).backward()
        torch.testing.assert_close(weights[1], w0 - 0.1 * w.grad)
        assert stepper.optimizer_step_count == 1

    def test_mixed_precision_bfloat16_on_cpu(self):
        loss = Regression()
        w0 = loss.net.weight.detach().clone()
        stepper = MixedPrecisionOptimizationStepper(torch.optim.SGD(loss.parameters(), lr=0.1), mixed_precision=True)
        assert stepper.device_type == "cpu" and stepper.scaler is None
        trainer = Trainer(collector=[], total_frames=1, loss_module=loss)
        losses = stepper.step(trainer, regression_batches(1)[0])
        assert losses["pred_mean"].dtype == torch.bfloat16  # the forward ran under autocast
        assert loss.net.weight.dtype == torch.float32 and not torch.equal(loss.net.weight, w0)
        assert stepper.optimizer_step_count == 1 and "grad_norm" in losses.keys()

    def test_stepper_state_round_trip(self):
        w = torch.nn.Parameter(torch.ones(2))
        stepper = MixedPrecisionOptimizationStepper(torch.optim.Adam([w]), gradient_accumulation_steps=3)
        stepper._micro_steps, stepper._optimizer_steps = 7, 2
        other = MixedPrecisionOptimizationStepper(torch.optim.Adam([torch.nn.Parameter(torch.ones(2))]))
        other.load_state_dict(stepper.state_dict())
        assert (other._micro_steps, other.optimizer_step_count) == (7, 2)
        with pytest.raises(ValueError, match="gradient_accumulation_steps must be >= 1"):
            MixedPrecisionOptimizationStepper(torch.optim.Adam([w]), gradient_accumulation_steps=0)


class TestLRScheduler:
    def make(self, interval, n_batches=3, optim_steps=2, init_random_frames=0):
        loss = Regression()
        opt = torch.optim.SGD(loss.parameters(), lr=1.0)
        trainer = Trainer(collector=ListCollector(regression_batches(n_batches), init_random_frames=init_random_frames),
                          total_frames=8 * n_batches, optim_steps_per_batch=optim_steps, loss_module=loss,
                          optimizer=opt, progress_bar=False)
        scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        LRSchedulerHook(scheduler, interval=interval).register(trainer)
        return trainer, opt

    def test_per_batch(self):
        trainer, opt = self.make("batch")
        trainer.train()
        assert opt.param_groups[0]["lr"] == 0.5**3

    def test_per_optim_step(self):
        trainer, opt = self.make("optim")
        trainer.train()
        assert opt.param_groups[0]["lr"] == 0.5**6

    def test_no_decay_without_optimisation(self):
        trainer, opt = self.make("batch", n_batches=4, init_random_frames=16)
        trainer.train()
        assert trainer._optim_count == 4 and opt.param_groups[0]["lr"] == 0.5**2

    def test_invalid_interval_and_state(self):
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        with pytest.raises(ValueError, match="interval must be 'batch' or 'optim', got 'epoch'"):
            LRSchedulerHook(torch.optim.lr_scheduler.StepLR(opt, 1), interval="epoch")
        hook = LRSchedulerHook(torch.optim.lr_scheduler.StepLR(opt, 1, gamma=0.1))
        opt.step()
        hook()
        other_opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        other = LRSchedulerHook(torch.optim.lr_scheduler.StepLR(other_opt, 1, gamma=0.1))
        other.load_state_dict(hook.state_dict())
        assert other.scheduler.last_epoch == 1 and other.scheduler.get_last_lr() == pytest.approx([0.1])


class TestTargetNetUpdater:
    def test_hard_update_in_trainer(self):
        loss, policy, actor, _ = make_dqn()
        trainer = Trainer(collector=make_collector(20, policy=policy), total_frames=20, optim_steps_per_batch=2,
                          loss_module=loss, optimizer=torch.optim.Adam(loss.parameters(), lr=1e-2), progress_bar=False)
        ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=8)).register(trainer)
        updater = HardUpdate(loss, value_network_update_interval=4)
        TargetNetUpdaterHook(updater).register(trainer, "target")
        trainer.train()
        assert trainer._optim_count == 4 and updater._steps == 4
        params, targets = loss.value_network_params, loss.target_value_network_params
        for p, t in zip(params.values(True, True), targets.values(True, True)):
            torch.testing.assert_close(p, t)
        assert trainer.state_dict()["target"] == {"_steps": 4}

    def test_soft_update_moves_targets(self):
        loss, _, _, _ = make_dqn()
        target_before = loss.target_value_network_params.clone()
        with torch.no_grad():
            for p in loss.value_network_params.values(True, True):
                p.add_(1.0)
        TargetNetUpdaterHook(SoftUpdate(loss, eps=0.5))()
        for t, t0 in zip(loss.target_value_network_params.values(True, True), target_before.values(True, True)):
            torch.testing.assert_close(t, t0 + 0.5)

    def test_needs_a_step_method(self):
        with pytest.raises(TypeError, match="expected a TargetNetUpdater.*got int"):
            TargetNetUpdaterHook(3)


# -------------------------------------------------------------------------------------------------- data
class TestReplayBufferTrainer:
    def test_flatten_with_mask_and_sample(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100))
        hook = ReplayBufferTrainer(rb, batch_size=5, flatten_tensordicts=True)
        mask = torch.tensor([[True, True, False], [True, False, False]])
        td = TensorDict({"x": torch.arange(6.0).reshape(2, 3), "collector": {"mask": mask}}, [2, 3])
        assert hook.extend(td) is td
        assert len(rb) == 3
        assert sorted(rb[:3]["x"].tolist()) == [0.0, 1.0, 3.0]
        sample = hook.sample(None)
        assert sample.batch_size == torch.Size([5]) and set(sample["x"].tolist()) <= {0.0, 1.0, 3.0}

    def test_max_dims_padding(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        hook = ReplayBufferTrainer(rb, max_dims=[-1, 4])
        hook.extend(TensorDict(x=torch.ones(2, 3), batch_size=[2, 3]))
        assert rb[:2]["x"].tolist() == [[1.0, 1.0, 1.0, 0.0]] * 2
        with pytest.raises(ValueError, match=r"max_dims=\[-1, 4\] has 2 entries but the batch has 1 dimensions"):
            hook.extend(TensorDict(x=torch.ones(3), batch_size=[3]))

    def test_iterate_covers_the_buffer(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(8), sampler=SamplerWithoutReplacement(), batch_size=4)
        hook = ReplayBufferTrainer(rb, iterate=True)
        hook.extend(TensorDict(x=torch.arange(8.0), batch_size=[8]))
        first, second = hook.sample(None)["x"].tolist(), hook.sample(None)["x"].tolist()
        assert sorted(first + second) == list(range(8))
        assert hook.sample(None).batch_size == torch.Size([4])  # restarts when exhausted

    def test_priorities_are_updated(self):
        rb = TensorDictPrioritizedReplayBuffer(alpha=1.0, beta=1.0, storage=LazyTensorStorage(4), batch_size=4,
                                               priority_key="td_error")
        hook = ReplayBufferTrainer(rb)
        assert isinstance(rb.sampler, PrioritizedSampler)
        loss = Regression()
        trainer = Trainer(collector=[], total_frames=1, loss_module=loss)
        hook.register(trainer)
        assert trainer._ops["post_loss"] == [hook.update_priority]
        hook.extend(TensorDict(x=torch.arange(4.0), batch_size=[4]))
        sample = hook.sample(None)
        sample.set("td_error", sample["x"] * 0 + torch.where(sample["index"] == 2, 100.0, 1e-6))
        hook.update_priority(sample)
        counts = torch.bincount(torch.cat([hook.sample(None)["index"] for _ in range(20)]), minlength=4)
        assert counts[2] > 70

    def test_state_round_trip_and_registration(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
        hook = ReplayBufferTrainer(rb, batch_size=2)
        hook.extend(TensorDict(x=torch.arange(5.0), batch_size=[5]))
        other = ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(10)), batch_size=2)
        other.load_state_dict(hook.state_dict())
        assert other.replay_buffer[:5]["x"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        trainer, _ = trainer_on(regression_batches(1))
        hook.register(trainer)
        assert trainer._ops["batch_process"] == [hook.extend]
        assert trainer._ops["process_optim_batch"] == [hook.sample] and trainer._ops["post_loss"] == []
        assert trainer._modules["replay_buffer"] is hook


class TestBatchSubSampler:
    def test_windows_are_contiguous(self):
        td = TensorDict({"t": torch.arange(30).reshape(3, 10)}, [3, 10])
        out = BatchSubSampler(batch_size=20, sub_traj_len=5)(td)
        assert out.shape == torch.Size([4, 5])
        t = out["t"]
        assert (t.diff(dim=-1) == 1).all() and ((t[:, 0] % 10) <= 5).all()

    def test_full_length_and_batch_dims(self):
        td = TensorDict({"t": torch.arange(24).reshape(2, 3, 4)}, [2, 3, 4])
        out = BatchSubSampler(batch_size=8)(td)
        assert out.shape == torch.Size([2, 4]) and (out["t"] % 4 == torch.arange(4)).all()

    def test_only_valid_steps(self):
        mask = torch.tensor([[True] * 6 + [False] * 4, [True] * 2 + [False] * 8])
        td = TensorDict({"t": torch.arange(20).reshape(2, 10), "collector": {"mask": mask}}, [2, 10])
        torch.manual_seed(0)
        for _ in range(20):
            out = BatchSubSampler(batch_size=8, sub_traj_len=4)(td)
            assert out.shape == torch.Size([2, 4])
            assert (out["t"] < 6).all() and out["collector", "mask"].all()  # the short trajectory is excluded
        out = BatchSubSampler(batch_size=12, sub_traj_len=8, min_sub_traj_len=3)(td)
        assert out.shape == torch.Size([2, 6])  # the longest valid trajectory has 6 steps
        with pytest.raises(RuntimeError, match="longest valid trajectory of the batch has 6 steps, fewer than min"):
            BatchSubSampler(batch_size=12, sub_traj_len=8, min_sub_traj_len=7)(td)

    def test_transitions_and_errors(self):
        td = TensorDict({"t": torch.arange(10)}, [10])
        assert BatchSubSampler(batch_size=7)(td).shape == torch.Size([7])
        with pytest.raises(ValueError, match="batch_size=3 is smaller than the window length 5"):
            BatchSubSampler(batch_size=3, sub_traj_len=5)(TensorDict({"t": torch.zeros(2, 10)}, [2, 10]))
        with pytest.raises(ValueError, match="batch_size must be >= 1"):
            BatchSubSampler(batch_size=0)

    def test_in_trainer(self):
        batches = [TensorDict(x=torch.randn(2, 10, 2), y=torch.randn(2, 10, 1), batch_size=[2, 10])]
        trainer, loss = trainer_on(batches, optim_steps=3)
        BatchSubSampler(batch_size=6, sub_traj_len=3).register(trainer)
        trainer.train()
        assert [td.batch_size for td in loss.calls] == [torch.Size([2, 3])] * 3


class TestSelectKeys:
    def test_select_in_trainer(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
        trainer, _ = trainer_on(regression_batches(2))
        SelectKeys(["x", "y"]).register(trainer)
        ReplayBufferTrainer(rb).register(trainer)
        trainer.train()
        assert set(rb[:16].keys()) == {"x", "y", "index"}  # the selected keys, and the slots (as TorchRL)

    def test_missing_key(self):
        with pytest.raises(KeyError, match=r"SelectKeys: keys \['z'\] not found in the batch; available: \['a'\]"):
            SelectKeys(["a", "z"])(TensorDict(a=torch.zeros(2), batch_size=[2]))
        with pytest.raises(ValueError, match="at least one entry"):
            SelectKeys([])


class TestRewardNormalizer:
    def batch(self, rewards, mask=None):
        r = torch.tensor(rewards).unsqueeze(-1)
        td = TensorDict({"next": {"reward": r}}, [len(rewards)])
        if mask is not None:
            td.set(("collector", "mask"), torch.tensor(mask))
        return td

    def test_known_answers(self):
        norm = RewardNormalizer(decay=0.5, scale=2.0)
        norm.update_reward_stats(self.batch([1.0, 2.0, 3.0]))
        td = self.batch([1.0, 2.0, 3.0])
        out = norm.normalize_reward(td)
        std = math.sqrt(2 / 3)
        assert out["next", "reward"].squeeze(-1).tolist() == pytest.approx([-2 / std, 0.0, 2 / std], rel=1e-6)
        assert td["next", "reward"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]  # input untouched
        norm.update_reward_stats(self.batch([4.0]))
        # S = .5*6 + 4 = 7, Q = .5*14 + 16 = 23, N = .5*3 + 1 = 2.5 -> mean 2.8, var 9.2 - 7.84 = 1.36
        out = norm.normalize_reward(self.batch([2.8, 3.8]))
        assert out["next", "reward"].squeeze(-1).tolist() == pytest.approx([0.0, 2.0 / math.sqrt(1.36)], rel=1e-5)

    def test_mask_and_eps(self):
        norm = RewardNormalizer(eps=0.25)
        norm.update_reward_stats(self.batch([5.0, 5.0, 100.0], mask=[True, True, False]))
        out = norm.normalize_reward(self.batch([5.0, 6.0]))
        assert out["next", "reward"].squeeze(-1).tolist() == pytest.approx([0.0, 2.0])  # std = sqrt(eps) = 0.5

    def test_errors_and_state(self):
        with pytest.raises(RuntimeError, match="called before update_reward_stats"):
            RewardNormalizer().normalize_reward(self.batch([1.0]))
        with pytest.raises(ValueError, match=r"decay must be in \[0, 1\], got 1.5"):
            RewardNormalizer(decay=1.5)
        norm = RewardNormalizer(reward_key="r")
        norm.update_reward_stats(TensorDict(r=torch.tensor([0.0, 2.0]), batch_size=[2]))
        other = RewardNormalizer(reward_key="r")
        other.load_state_dict(norm.state_dict())
        out = other.normalize_reward(TensorDict(r=torch.tensor([3.0]), batch_size=[1]))
        assert out["r"].item() == pytest.approx(2.0)

    def test_in_trainer(self):
        batches = regression_batches(2)
        trainer, loss = trainer_on(batches)
        RewardNormalizer(decay=1.0).register(trainer)
        trainer.train()
        rewards = torch.cat([b["next", "reward"] for b in batches])
        expected = (batches[1]["next", "reward"] - rewards.mean()) / rewards.std(unbiased=False)
        torch.testing.assert_close(loss.calls[1]["next", "reward"], expected, rtol=1e-5, atol=1e-5)


class TestValueEstimatorHook:
    def test_runs_once_per_epoch_without_grad(self):
        calls = []

        def estimator(td):
            calls.append(torch.is_grad_enabled())
            td.set("advantage", td["next", "reward"] * 2)
            return td

        trainer, loss = trainer_on(regression_batches(1), optim_steps=2, num_epochs=3)
        ValueEstimatorHook(estimator).register(trainer)
        trainer.train()
        assert calls == [False] * 3 and all("advantage" in td.keys() for td in loss.calls)
        assert ValueEstimatorHook(estimator)(None) is None
        with pytest.raises(TypeError, match="value_estimator must be callable"):
            ValueEstimatorHook(3)


# -------------------------------------------------------------------------------------------------- logging
class TestLogScalar:
    def test_reductions(self):
        td = TensorDict({"v": torch.tensor([[1.0], [2.0], [6.0]])}, [3])
        assert LogScalar("v", "m")(td) == {"m": 3.0, "m_std": pytest.approx(2.6457513), "log_pbar": False}
        assert LogScalar("v", "s", reduction="sum", include_std=False)(td) == {"s": 9.0, "log_pbar": False}
        assert LogScalar("v", "lo", reduction="min", include_std=False, log_pbar=True)(td)["lo"] == 1.0
        assert LogScalar("v", "hi", reduction="max")(td)["hi"] == 6.0

    def test_mask_bool_values_and_default_name(self):
        td = TensorDict({"next": {"done": torch.tensor([[True], [False], [True]])},
                         "collector": {"mask": torch.tensor([True, True, False])}}, [3])
        assert LogScalar(("next", "done"))(td) == {"next_done": 0.5, "next_done_std": pytest.approx(0.7071068),
                                                   "log_pbar": False}

    def test_errors(self):
        with pytest.raises(ValueError, match="reduction must be one of"):
            LogScalar(reduction="median")
        with pytest.raises(KeyError, match=r"key \('next', 'reward'\) not found in the batch; available: \['x'\]"):
            LogScalar()(TensorDict(x=torch.zeros(2), batch_size=[2]))

    def test_logged_values_read_back(self, tmp_path):
        batches = regression_batches(3)
        trainer, _ = trainer_on(batches, logger=CSVLogger("e", log_dir=tmp_path), log_interval=0)
        LogScalar(("next", "reward"), "r_training").register(trainer)
        trainer.train()
        rows = read_scalars(tmp_path, "e", "r_training")
        assert [s for s, _ in rows] == [8, 16, 24]
        assert [v for _, v in rows] == pytest.approx([b["next", "reward"].mean().item() for b in batches])
        assert "log_r_training" in trainer._modules


class TestCountFramesLog:
    def test_counts(self, tmp_path):
        trainer, _ = trainer_on(regression_batches(3), logger=CSVLogger("e", log_dir=tmp_path), log_interval=0,
                                frame_skip=2, total_frames=48)
        hook = CountFramesLog(frame_skip=2)
        hook.register(trainer)
        trainer.train()
        assert read_scalars(tmp_path, "e", "n_frames") == [(16, 16.0), (32, 32.0), (48, 48.0)]
        assert trainer.state_dict()["count_frames_log"] == {"frame_count": 48}
        masked = TensorDict({"collector": {"mask": torch.tensor([True, False, True])}}, [3])
        assert CountFramesLog()(masked)["n_frames"] == 2
        with pytest.raises(ValueError, match="frame_skip must be a positive integer"):
            CountFramesLog(frame_skip=0)


class TestLogTiming:
    def test_registry(self):
        timeit._REG.clear()
        timeit._record("phase", 0.5)
        timeit._record("phase", 1.5)
        assert LogTiming(prefix="t")() == {"t/phase": 1.0, "log_pbar": False}
        assert LogTiming(percall=False, erase=True)() == {"time/phase": 2.0, "log_pbar": False}
        # erasing zeroes the entries and keeps their names (as TorchRL's timeit does)
        assert LogTiming()() == {"time/phase": 0.0, "log_pbar": False}


class TestLogValidationReward:
    def test_evaluation_values_and_interval(self, tmp_path):
        env = MockSerialEnv()
        modes = []

        class Policy(TensorDictModule):
            def forward(self, td):
                modes.append((self.training, exploration_type()))
                return super().forward(td)

        policy = Policy(torch.nn.Linear(1, 1), ["observation"], ["action"])
        trainer, _ = trainer_on(regression_batches(5), logger=CSVLogger("e", log_dir=tmp_path), log_interval=0)
        hook = LogValidationReward(record_interval=2, record_frames=4, frame_skip=2, policy_exploration=policy,
                                   environment=env, exploration_type=ExplorationType.DETERMINISTIC,
                                   log_keys=[("next", "reward"), "observation"], out_keys={"observation": "obs"})
        hook.register(trainer)
        trainer.train()
        # rewards of the three evaluations (calls 0, 2, 4): 1..4, 5..8, 9..12 (the env's counter never resets)
        rows = read_scalars(tmp_path, "e", "r_evaluation")
        assert rows == [(8, 2.5 / 2), (24, 6.5 / 2), (40, 10.5 / 2)]
        assert read_scalars(tmp_path, "e", "total_r_evaluation") == [(8, 10.0), (24, 26.0), (40, 42.0)]
        assert read_scalars(tmp_path, "e", "obs") == [(8, 1.5), (24, 5.5), (40, 9.5)]
        assert set(modes) == {(False, ExplorationType.DETERMINISTIC)} and policy.training
        assert hook.state_dict()["_count"] == 5

    def test_arguments(self, monkeypatch):
        monkeypatch.setattr("torchrl._utils._deprecation._WARNED", set())
        policy = TensorDictModule(torch.nn.Linear(1, 1), ["observation"], ["action"])
        with pytest.raises(TypeError, match="environment= .* is required"):
            LogValidationReward(record_interval=1, record_frames=1, policy_exploration=policy)
        with pytest.raises(ValueError, match="record_frames must be >= 1, got 0"):
            LogValidationReward(record_interval=1, record_frames=0, policy_exploration=policy,
                                environment=MockSerialEnv())
        with pytest.warns(DeprecationWarning, match=r"\(recorder=\.\.\.\) is deprecated; use environment="):
            hook = LogValidationReward(record_interval=1, record_frames=1, policy_exploration=policy,
                                       recorder=MockSerialEnv())
        assert hook.environment is hook.recorder


class TestUTDR:
    def test_ratio(self):
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(100), batch_size=4)
        trainer, _ = trainer_on(regression_batches(2), optim_steps=3)
        ReplayBufferTrainer(rb).register(trainer)
        hook = UTDRHook(trainer)
        hook.register(trainer)
        seen = []
        trainer.register_op("pre_steps_log", lambda b: seen.append(trainer._latest_logs["utd_ratio"]) or None)
        trainer.train()
        # write_count 8 then 16, optim steps 0 then 3 (the hook runs before the batch's optimisation)
        assert seen == [0.0, pytest.approx(4 * 3 / 16)]

    def test_without_buffer(self):
        trainer, _ = trainer_on(regression_batches(1))
        with pytest.raises(RuntimeError, match="no replay buffer found"):
            UTDRHook(trainer)()


# -------------------------------------------------------------------------------------------------- control
class TestUpdateWeights:
    def setup_collector(self):
        env = ContinuousActionVecMockEnv(max_steps=5)
        acting = TensorDictModule(torch.nn.Linear(7, 7), ["observation"], ["action"])
        return Collector(env, acting, frames_per_batch=10, total_frames=50), acting

    def test_weights_reach_the_collector_policy(self):
        collector, acting = self.setup_collector()
        trained = TensorDictModule(torch.nn.Linear(7, 7), ["observation"], ["action"])
        hook = UpdateWeights(collector, 2, policy_weights_getter=lambda: TensorDict.from_module(trained))
        hook()
        assert not torch.equal(acting.module.weight, trained.module.weight)
        hook()
        torch.testing.assert_close(acting.module.weight, trained.module.weight)
        assert hook.state_dict() == {"counter": 2}
        collector.shutdown()

    def test_weight_update_map_in_trainer(self):
        collector, acting = self.setup_collector()
        loss = Regression(n_in=7, n_out=7)
        loss.actor = TensorDictModule(loss.net, ["observation"], ["action"])
        trainer = Trainer(collector=collector, total_frames=50, optim_steps_per_batch=1, progress_bar=False,
                          loss_module=lambda td: TensorDict(loss=loss.net(td["observation"]).pow(2).mean()),
                          optimizer=torch.optim.SGD(loss.parameters(), lr=0.1))
        trainer.actor_owner = loss
        versions = []
        hook = UpdateWeights(collector, 1, weight_update_map={"policy": "actor_owner.actor"},
                             interval_unit="optim_steps")
        hook.register(trainer)
        trainer.register_op("post_optim", lambda: versions.append(collector.policy_version))
        trainer.train()
        assert versions == [1, 2, 3, 4, 5]
        torch.testing.assert_close(acting.module.weight, loss.net.weight)

    def test_sender_and_errors(self):
        sent = []

        class Sender:
            def send(self, weights=None, worker_ids=None):
                sent.append(weights)

        UpdateWeights(sender=Sender(), policy_weights_getter=lambda: "w")()
        assert sent == ["w"]
        with pytest.raises(TypeError, match="pass the collector to update"):
            UpdateWeights()
        with pytest.raises(ValueError, match="interval_unit must be 'batches' or 'optim_steps'"):
            UpdateWeights(sender=Sender(), interval_unit="frames")
        with pytest.raises(ValueError, match="update_weights_interval must be >= 1"):
            UpdateWeights(sender=Sender(), update_weights_interval=0)


class TestEarlyStopping:
    def constant_reward_trainer(self, n=20, value=1.0):
        batches = regression_batches(n)
        for b in batches:
            b.set(("next", "reward"), torch.full_like(b["next", "reward"], value))
        trainer, _ = trainer_on(batches)
        LogScalar(("next", "reward"), "r_training", include_std=False).register(trainer)
        return trainer

    def test_stops_after_patience(self):
        trainer = self.constant_reward_trainer()
        hook = EarlyStopping(monitor="r_training", patience=20, wait_for=40)
        hook.register(trainer)
        trainer.train()
        # best seen at 8 frames; 8 + 20 < 32, but checks only start at 40 frames
        assert trainer.collected_frames == 40 and "did not improve" in trainer._stop_reason
        assert hook.state_dict() == {"best": 1.0, "best_frame": 8}

    def test_improvement_resets_patience(self):
        batches = regression_batches(10)
        for i, b in enumerate(batches):
            b.set(("next", "reward"), torch.full_like(b["next", "reward"], float(min(i, 4))))
        trainer, _ = trainer_on(batches)
        LogScalar(("next", "reward"), "r", include_std=False).register(trainer)
        EarlyStopping(monitor="r", patience=16, wait_for=0, min_delta=0.5).register(trainer)
        trainer.train()
        assert trainer.collected_frames == 64  # last improvement at 40 frames (r=4); 64 - 40 > 16

    def test_min_mode_and_no_metric(self):
        trainer = self.constant_reward_trainer(5)
        EarlyStopping(monitor="missing", patience=0, wait_for=0).register(trainer)
        trainer.train()
        assert trainer.collected_frames == 40 and trainer._stop_reason is None
        trainer = self.constant_reward_trainer(5)
        EarlyStopping(monitor="r_training", mode="min", patience=0, wait_for=0).register(trainer)
        trainer.train()
        assert trainer.collected_frames == 16

    def test_non_finite(self):
        trainer = self.constant_reward_trainer(5, value=float("nan"))
        EarlyStopping(monitor="r_training").register(trainer)
        trainer.train()
        assert trainer.collected_frames == 8 and "is nan" in trainer._stop_reason

    def test_arguments(self):
        with pytest.raises(ValueError, match="mode must be 'min' or 'max', got 'up'"):
            EarlyStopping(mode="up")
        with pytest.raises(ValueError, match="patience must be >= 0"):
            EarlyStopping(patience=-1)
        with pytest.raises(RuntimeError, match="register the hook"):
            EarlyStopping()()


class TestClearCudaCache:
    def test_interval(self, monkeypatch):
        cleared = []
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "empty_cache", lambda: cleared.append(1))
        trainer, _ = trainer_on(regression_batches(5))
        hook = ClearCudaCache(2)
        hook.register(trainer)
        trainer.train()
        assert hook.count == 5 and len(cleared) == 2
        with pytest.raises(ValueError, match="interval must be >= 1"):
            ClearCudaCache(0)
