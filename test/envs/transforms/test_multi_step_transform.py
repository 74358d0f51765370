"""MultiStepTransform: n-step transitions written through ``ReplayBuffer.extend``; numbers from TorchRL 0.14.1."""
import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer
from torchrl.data.postprocs import MultiStep
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms import MultiStepTransform as Exported
from torchrl.envs.transforms import _multi_step_transform as module
from torchrl.envs.transforms._multi_step_transform import MultiStepTransform

from test.envs.transforms.contract import BufferOnlyContract

_REFUSED = "only an inverse transform and can be applied exclusively to replay buffers"


def _batch(shape, dones):
    """Transitions with obs = 0, 1, ... (row-major), next obs = obs + 1, reward = obs + 1."""
    done = torch.zeros(*shape, 1, dtype=torch.bool)
    for index in dones:
        done[index] = True
    obs = torch.arange(float(torch.Size(shape).numel())).view(*shape, 1)
    nxt = TensorDict(observation=obs + 1, reward=obs + 1, done=done.clone(), terminated=done.clone(),
                     truncated=torch.zeros_like(done), batch_size=shape)
    return TensorDict(observation=obs, action=obs * 10, next=nxt, batch_size=shape)


def _flat(td, key):
    return td.get(key).reshape(*td.shape, -1).squeeze(-1).tolist()


class TestMultiStepTransform(BufferOnlyContract):
    """A buffer-only transform: the env checks assert TorchRL's refusal instead."""

    refusal = (ValueError, _REFUSED)

    def make_transform(self):
        return MultiStepTransform(2, 0.9)

    # -- known answers (TorchRL 0.14.1 on the same data) ------------------------------------------------
    def test_exported(self):
        assert Exported is MultiStepTransform

    def test_env_builds_and_resets_but_refuses_steps(self):
        env = TransformedEnv(PendulumEnv(seed=0), MultiStepTransform(2, 0.9))  # as in TorchRL
        td = env.reset()
        with pytest.raises(ValueError, match=_REFUSED):
            env.step(td.set("action", torch.zeros(1)))

    def test_chunks_across_calls(self):
        td = _batch([8], [(4,)])
        t = MultiStepTransform(3, 0.5)
        out = t.inv(td[:5])
        assert out.shape == (2,)  # the last 3 frames wait for their future
        assert _flat(out, ("next", "reward")) == [2.75, 4.5]
        assert _flat(out, ("next", "observation")) == [3.0, 4.0]
        assert _flat(out, ("next", "original_reward")) == [1.0, 2.0]
        assert out["steps_to_next_obs"].tolist() == [3, 3] and out["gamma"].tolist() == [0.125, 0.125]
        assert out["nonterminal"].tolist() == [True, True]
        assert out["steps_to_next_obs"].dtype == torch.int64 and out["gamma"].dtype == torch.float32
        out = t.inv(td[5:])
        assert _flat(out, "observation") == [2.0, 3.0, 4.0]
        assert _flat(out, ("next", "reward")) == [6.25, 6.5, 5.0]  # the windows stop at the done of step 4
        assert _flat(out, ("next", "observation")) == [5.0, 5.0, 5.0]
        assert out["steps_to_next_obs"].tolist() == [3, 2, 1] and out["gamma"].tolist() == [0.125, 0.25, 0.5]
        assert out["nonterminal"].tolist() == [True, True, False]
        # deliberate difference: the flags of the window's last step (TorchRL: [False, False, True])
        assert _flat(out, ("next", "done")) == [True, True, True]
        assert _flat(out, ("next", "terminated")) == [True, True, True]

    def test_batched_time_last(self):
        td = _batch([2, 6], [(0, 2), (1, 4)])
        t = MultiStepTransform(2, 0.9)
        out = t.inv(td[:, :3])
        assert out.shape == (2, 1)
        torch.testing.assert_close(out["next", "reward"].flatten(), torch.tensor([2.8, 14.2]))
        out = t.inv(td[:, 3:])
        assert out.shape == (2, 3)
        expected = torch.tensor([[4.7, 3.0, 8.5], [16.1, 18.0, 19.9]])
        torch.testing.assert_close(out["next", "reward"].squeeze(-1), expected)
        assert _flat(out, ("next", "observation")) == [[3.0, 3.0, 5.0], [9.0, 10.0, 11.0]]
        assert _flat(out, "action") == [[10.0, 20.0, 30.0], [70.0, 80.0, 90.0]]
        assert out["steps_to_next_obs"].tolist() == [[2, 1, 2], [2, 2, 2]]
        assert out["nonterminal"].tolist() == [[True, False, True], [True, True, True]]

    def test_mask_only_clears_nonterminal(self):
        td = _batch([1, 7], [])
        td["mask"] = torch.tensor([[True, False, True, True, True, True, False]])
        out = MultiStepTransform(2, 0.5).inv(td)
        assert _flat(out, ("next", "reward")) == [[2.0, 3.5, 5.0, 6.5, 8.0]]
        assert out["nonterminal"].tolist() == [[True, False, True, True, True]]
        td = td.exclude("mask").set(("collector", "mask"), td["mask"])
        out = MultiStepTransform(2, 0.5, mask_key=("collector", "mask")).inv(td)
        assert out["nonterminal"].tolist() == [[True, False, True, True, True]]

    def test_reward_keys_and_done_key(self):
        done = torch.zeros(5, 1, dtype=torch.bool)
        done[1] = True
        nxt = TensorDict(obs=torch.arange(1.0, 6.0), a=TensorDict(r=torch.ones(5, 3, 1), batch_size=[5]),
                         reward=torch.ones(5, 1), d=done, batch_size=[5])
        td = TensorDict(obs=torch.arange(5.0), next=nxt, batch_size=[5])
        t = MultiStepTransform(2, 0.5, done_key="d", reward_keys=[("a", "r"), "reward"])
        out = t.inv(td)
        assert out["next", "a", "r"][:, :, 0].tolist() == [[1.5] * 3, [1.0] * 3, [1.5] * 3]
        assert _flat(out, ("next", "reward")) == [1.5, 1.0, 1.5]
        assert out["next", "obs"].tolist() == [2.0, 2.0, 4.0] and _flat(out, ("next", "d")) == [True, True, False]
        assert out["steps_to_next_obs"].tolist() == [2, 1, 2]
        # each reward keeps its own one-step value next to it (TorchRL writes ("next", "original_reward") once)
        assert (out["next", "a", "original_r"] == 1).all() and out["next", "original_reward"].shape == (3, 1)

    def test_attributes(self):
        t = MultiStepTransform(3, 0.9)
        assert t.n_steps == 3 and t.gamma == 0.9 and t.reward_keys == ["reward"]
        assert t.done_key == "done" and t.done_keys == ["done", "truncated", "terminated"] and t.mask_key == "mask"
        assert t.in_keys == [] and t.out_keys == [] and list(t.state_dict()) == []
        t = MultiStepTransform(2, 0.5, done_keys=["d"], reward_keys=[("a", "r")], mask_key="m")
        assert t.done_key == "done" and t.done_keys == ["d"] and t.reward_keys == [("a", "r")] and t.mask_key == "m"
        t.n_steps = 4
        assert t.n_steps == 4

    def test_matches_the_postproc_over_the_whole_trajectory(self):
        data = _batch([3, 12], [(0, 3), (1, 7), (2, 11), (0, 10)])
        t = MultiStepTransform(3, 0.8)
        parts = [t.inv(data[:, :5]), t.inv(data[:, 5:6]), t.inv(data[:, 6:])]
        written = torch.cat(parts, dim=1)
        assert written.shape == (3, 9)
        expected = MultiStep(gamma=0.8, n_steps=3)(data)[:, :9]
        for key in expected.keys(True, True):
            torch.testing.assert_close(written[key], expected[key], msg=lambda m, key=key: f"{key}: {m}")

    def test_replay_buffer_extend(self):
        data = _batch([10], [(5,)])
        rb = ReplayBuffer(storage=LazyTensorStorage(20), transform=MultiStepTransform(2, 0.5), batch_size=4)
        assert rb.extend(data[:6]).tolist() == [0, 1, 2, 3]
        assert rb.extend(data[6:]).tolist() == [4, 5, 6, 7]
        stored = rb[:8]
        assert _flat(stored, ("next", "reward")) == [2.0, 3.5, 5.0, 6.5, 8.0, 6.0, 11.0, 12.5]
        assert stored["steps_to_next_obs"].tolist() == [2, 2, 2, 2, 2, 1, 2, 2]
        sample = rb.sample()  # sampled data pass through unchanged
        assert sample.batch_size == (4,) and "steps_to_next_obs" in sample.keys()

    @pytest.mark.parametrize("cls", [ReplayBuffer, TensorDictReplayBuffer])
    def test_buffer_waits_for_a_full_window(self, cls):
        # 2 frames then 5, n_steps=3, gamma=0.9, rewards 1..7 (TorchRL 0.14.1 gives the same numbers):
        # the first extend writes nothing and returns an empty index; the second writes frames 0..3, each
        # R_t = r_t + 0.9 r_{t+1} + 0.81 r_{t+2}, e.g. R_0 = 1 + 1.8 + 2.43 = 5.23
        data = _batch([7], [])
        rb = cls(storage=LazyTensorStorage(10), transform=MultiStepTransform(n_steps=3, gamma=0.9))
        index = rb.extend(data[:2])
        assert index.shape == (0, 1) and index.dtype == torch.int64
        assert len(rb) == 0 and rb.write_count == 0
        assert rb.extend(data[2:]).tolist() == [0, 1, 2, 3]
        assert len(rb) == 4 and rb.write_count == 4
        stored = rb[:]
        torch.testing.assert_close(
            stored["next", "reward"].squeeze(-1), torch.tensor([5.23, 7.94, 10.65, 13.36]), rtol=0, atol=1e-5
        )
        assert _flat(stored, ("next", "original_reward")) == [1.0, 2.0, 3.0, 4.0]
        assert stored["steps_to_next_obs"].tolist() == [3, 3, 3, 3]
        assert _flat(stored, ("next", "observation")) == [3.0, 4.0, 5.0, 6.0]
        torch.testing.assert_close(stored["gamma"].squeeze(-1), torch.full((4,), 0.729), rtol=0, atol=1e-6)

    def test_buffer_window_stops_at_a_done(self):
        # frame 2 terminates: R_1 = 2 + 0.9 * 3 = 4.7 and R_2 = 3 (TorchRL 0.14.1: same numbers)
        data = _batch([7], [(2,)])
        rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=MultiStepTransform(n_steps=3, gamma=0.9))
        assert rb.extend(data[:2]).numel() == 0
        rb.extend(data[2:])
        stored = rb[:]
        torch.testing.assert_close(
            stored["next", "reward"].squeeze(-1), torch.tensor([5.23, 4.7, 3.0, 13.36]), rtol=0, atol=1e-5
        )
        assert stored["steps_to_next_obs"].tolist() == [3, 2, 1, 3]
        assert _flat(stored, ("next", "observation")) == [3.0, 3.0, 3.0, 6.0]

    def test_buffer_add_frame_by_frame(self):
        # ReplayBuffer.add hands the frame to the inverse with a time dim of 1 (as TorchRL): the first n_steps
        # adds write nothing, then each add writes the frame n_steps back: R = r_t + 0.5 r_{t+1}
        data = _batch([5], [])
        rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=MultiStepTransform(n_steps=2, gamma=0.5))
        written = [rb.add(data[i]) for i in range(5)]
        assert [w.shape for w in written[:2]] == [(0, 1), (0, 1)] and written[2:] == [0, 1, 2]
        assert _flat(rb[:], ("next", "reward")) == [2.0, 3.5, 5.0]

    def test_ndim2_storage_not_yet_written(self):
        # an ndim=2 storage that holds nothing yet: the empty write is skipped (no ZeroDivisionError)
        data = _batch([2, 7], [])
        rb = ReplayBuffer(storage=LazyTensorStorage(20, ndim=2), transform=MultiStepTransform(n_steps=3, gamma=0.9))
        assert rb.extend(data[:, :2]).shape == (0, 2) and len(rb) == 0
        rb.extend(data[:, 2:])
        assert len(rb) == 8
        torch.testing.assert_close(
            rb[:]["next", "reward"].squeeze(-1),
            torch.tensor([[5.23, 7.94, 10.65, 13.36], [24.2, 26.91, 29.62, 32.33]]), rtol=0, atol=1e-4,
        )

    def test_tensordict_replay_buffer_extend_rollouts(self):
        env = PendulumEnv(seed=0)
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(50), batch_size=5)
        rb.append_transform(MultiStepTransform(3, 0.99))
        both = env.rollout(12)
        rb.extend(both[:6])
        assert len(rb) == 3  # the last 3 frames wait for the next batch
        rb.extend(both[6:])
        assert len(rb) == 9
        stored = rb[:9]
        expected = both["next", "reward"][3:6] + 0.99 * both["next", "reward"][4:7] + 0.99**2 * both["next", "reward"][5:8]
        torch.testing.assert_close(stored["next", "reward"][3:6], expected)
        torch.testing.assert_close(stored["next", "th"], both["next", "th"][2:11])

    def test_collector_batches_into_a_buffer(self):
        collector = Collector(PendulumEnv(seed=0), None, frames_per_batch=6, total_frames=12,
                              postproc=MultiStepTransform(2, 0.5))  # as a postproc: identity, as in TorchRL
        rb = ReplayBuffer(storage=LazyTensorStorage(100), transform=MultiStepTransform(2, 0.5))
        sizes = []
        try:
            for batch in collector:
                assert batch.shape == (6,) and "steps_to_next_obs" not in batch.keys()
                rb.extend(batch)
                sizes.append(len(rb))
        finally:
            collector.shutdown()
        assert sizes == [4, 10]  # the windows span the batches: 2 frames wait each time
        assert (rb[:10]["steps_to_next_obs"] == 2).all()

    def test_forward_is_identity(self):
        td = _batch([4], [])
        t = MultiStepTransform(2, 0.5)
        assert t(td) is td and "steps_to_next_obs" not in td.keys()

    def test_n_steps_can_change(self):
        t = MultiStepTransform(2, 0.5)
        t.inv(_batch([4], []))
        t.n_steps = 1
        out = t.inv(_batch([4], []))
        assert out.shape == (5,)  # 2 held frames + 4 new ones, 1 held back
        assert out["steps_to_next_obs"].tolist() == [1] * 5

    def test_too_short_data_wait(self):
        t = MultiStepTransform(3, 0.5)
        out = t.inv(_batch([2], []))
        assert out.shape == (0,)
        assert t.inv(_batch([3], [])).shape == (2,)

    def test_errors(self):
        for bad in (0, -1, 2.5, True):
            with pytest.raises(ValueError, match="n_steps must be a strictly positive int"):
                MultiStepTransform(bad, 0.9)
        with pytest.raises(ValueError, match="needs a time dimension"):
            MultiStepTransform(2, 0.9).inv(_batch([3], [])[0])
        with pytest.raises(KeyError, match=r"done entry \('next', 'd'\) not found"):
            MultiStepTransform(1, 0.9, done_key="d").inv(_batch([3], []))
        with pytest.raises(KeyError, match=r"reward entry \('next', 'r'\) not found"):
            MultiStepTransform(1, 0.9, reward_keys=["r"]).inv(_batch([3], []))
        t = MultiStepTransform(2, 0.9)
        t.inv(_batch([2, 4], []))
        with pytest.raises(ValueError, match=r"batch shape \(3, 4\) but the frames kept from the previous call"):
            t.inv(_batch([3, 4], []))

    def test_docstring_examples(self):
        assert doctest.testmod(module, raise_on_error=True).attempted > 0
