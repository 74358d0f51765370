"""Reward2GoTransform: rewards-to-go written through ``ReplayBuffer.extend``; numbers from TorchRL 0.14.1."""
import doctest

import pytest
import torch
from tensordict import TensorDict

from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer
from torchrl.envs import Compose, PendulumEnv, StepCounter, TransformedEnv
from torchrl.envs.transforms import Reward2GoTransform as Exported
from torchrl.envs.transforms import _reward2go_transform as module
from torchrl.envs.transforms._reward2go_transform import Reward2GoTransform

from test.envs.transforms.contract import BufferOnlyContract

_REFUSED = "only an inverse transform and can only be applied to the replay buffer"


def _traj(dones, reward=None, T=6, done_key="done"):
    done = torch.zeros(T, 1, dtype=torch.bool)
    for i in dones:
        done[i] = True
    reward = torch.arange(1.0, T + 1).unsqueeze(-1) if reward is None else reward
    nxt = TensorDict({"reward": reward, done_key: done}, batch_size=[T])
    return TensorDict(obs=torch.arange(float(T)), next=nxt, batch_size=[T])


def _hand_reward_to_go(reward, done, gamma):
    out, acc = torch.zeros_like(reward), torch.zeros_like(reward[..., 0, :])
    for t in range(reward.shape[-2] - 1, -1, -1):
        acc = reward[..., t, :] + gamma * acc * (~done[..., t, :]).to(reward.dtype)
        out[..., t, :] = acc
    return out


class TestReward2GoTransform(BufferOnlyContract):
    """A buffer-only transform, refused as soon as it is placed in an env (as in TorchRL)."""

    refusal = (ValueError, _REFUSED)

    def make_transform(self):
        return Reward2GoTransform(gamma=0.9)

    def replay_buffer_data(self):
        data = super().replay_buffer_data()
        data["next", "done"][-1] = True  # Pendulum never ends; the transform needs an episode end
        return data

    # -- known answers (TorchRL 0.14.1 on the same data) ------------------------------------------------
    def test_exported(self):
        assert Exported is Reward2GoTransform

    def test_in_place_by_default(self):
        out = Reward2GoTransform(gamma=0.5).inv(_traj([2, 5]))
        assert out["next", "reward"].squeeze(-1).tolist() == [2.75, 3.5, 3.0, 8.0, 8.0, 6.0]
        assert out["obs"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]

    def test_out_keys_keep_the_reward(self):
        data = _traj([2, 5])
        out = Reward2GoTransform(gamma=0.5, out_keys=["r2g"]).inv(data)
        assert out["r2g"].squeeze(-1).tolist() == [2.75, 3.5, 3.0, 8.0, 8.0, 6.0]
        assert out["next", "reward"].squeeze(-1).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
        assert "r2g" not in data.keys()  # inv works on a copy
        out = Reward2GoTransform(gamma=0.5, in_keys=[("next", "reward")], out_keys=[("next", "r2g")]).inv(data)
        assert out["next", "r2g"].squeeze(-1).tolist() == [2.75, 3.5, 3.0, 8.0, 8.0, 6.0]

    def test_trajectory_cut_by_the_batch_end(self):
        out = Reward2GoTransform(gamma=0.5).inv(_traj([2]))
        assert out["next", "reward"].squeeze(-1).tolist() == [2.75, 3.5, 3.0, 8.0, 8.0, 6.0]

    def test_batched_time_last(self):
        data = torch.stack([_traj([2, 5]), _traj([1], reward=torch.ones(6, 1))], 0)
        out = Reward2GoTransform(gamma=0.5).inv(data)
        assert out["next", "reward"].squeeze(-1).tolist() == [
            [2.75, 3.5, 3.0, 8.0, 8.0, 6.0],
            [1.5, 1.0, 1.875, 1.75, 1.5, 1.0],
        ]

    def test_matches_a_hand_loop(self):
        torch.manual_seed(0)
        reward = torch.randn(3, 50, 2)
        done = torch.rand(3, 50, 1) < 0.1
        done[:, -1] = True
        data = TensorDict(next=TensorDict(reward=reward, done=done, batch_size=[3, 50]), batch_size=[3, 50])
        out = Reward2GoTransform(gamma=0.97).inv(data)
        torch.testing.assert_close(out["next", "reward"], _hand_reward_to_go(reward, done, 0.97))

    def test_gamma_is_a_buffer(self):
        t = Reward2GoTransform(gamma=0.5)
        assert isinstance(t.gamma, torch.Tensor) and list(t.state_dict()) == ["gamma"]
        t.load_state_dict({"gamma": torch.tensor(0.25)})
        out = t.inv(_traj([1], reward=torch.ones(4, 1), T=4))
        assert out["next", "reward"].squeeze(-1).tolist() == [1.25, 1.0, 1.25, 1.0]
        assert Reward2GoTransform(gamma=torch.tensor(0.9)).gamma.item() == pytest.approx(0.9)

    def test_done_key_and_dtype(self):
        out = Reward2GoTransform(gamma=0.5, done_key="d").inv(_traj([1], torch.ones(4, 1), T=4, done_key="d"))
        assert out["next", "reward"].squeeze(-1).tolist() == [1.5, 1.0, 1.5, 1.0]
        out = Reward2GoTransform(gamma=0.5).inv(_traj([1], torch.ones(4, 1, dtype=torch.float64), T=4))
        assert out["next", "reward"].dtype == torch.float64

    def test_one_done_flag_for_a_wider_reward(self):
        # deliberate difference: TorchRL raises "reward and done must share the same shape"
        out = Reward2GoTransform(gamma=0.5).inv(_traj([2], reward=torch.ones(6, 2)))
        assert out["next", "reward"][:, 0].tolist() == [1.75, 1.5, 1.0, 1.75, 1.5, 1.0]
        assert (out["next", "reward"][:, 0] == out["next", "reward"][:, 1]).all()

    def test_keys(self):
        t = Reward2GoTransform()
        assert t.in_keys == [("next", "reward")] and t.out_keys == []
        assert t.in_keys_inv == [("next", "reward")] and t.out_keys_inv == [("next", "reward")]
        assert t.done_key == "done" and t.gamma.item() == 1.0
        t = Reward2GoTransform(gamma=0.5, out_keys=["r2g"])
        assert t.out_keys == [] and t.out_keys_inv == ["r2g"]

    def test_replay_buffers(self):
        rb = ReplayBuffer(storage=LazyTensorStorage(20), transform=Reward2GoTransform(gamma=0.5), batch_size=3)
        rb.extend(_traj([2, 5]))
        assert rb[:6]["next", "reward"].squeeze(-1).tolist() == [2.75, 3.5, 3.0, 8.0, 8.0, 6.0]
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(20), batch_size=3)
        rb.append_transform(Reward2GoTransform(gamma=0.5, out_keys=[("next", "r2g")]))
        rb.extend(_traj([2, 5]))
        assert rb[:6]["next", "r2g"].squeeze(-1).tolist() == [2.75, 3.5, 3.0, 8.0, 8.0, 6.0]
        sample = rb.sample()  # sampled data pass through unchanged
        assert sample.batch_size == (3,) and ("next", "r2g") in sample.keys(True)

    def test_forward_is_identity(self):
        data = _traj([2])
        assert Reward2GoTransform(gamma=0.5)(data) is data
        assert data["next", "reward"].squeeze(-1).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]

    def test_refused_in_envs(self):
        with pytest.raises(ValueError, match=_REFUSED):
            TransformedEnv(PendulumEnv(), Reward2GoTransform())
        c = Compose(StepCounter(), Reward2GoTransform())  # a standalone Compose may hold it
        with pytest.raises(ValueError, match=_REFUSED):
            TransformedEnv(PendulumEnv(), c)
        env = TransformedEnv(PendulumEnv())
        with pytest.raises(ValueError, match=_REFUSED):
            env.append_transform(Reward2GoTransform())

    def test_errors(self):
        with pytest.raises(RuntimeError, match="no episode end found"):
            Reward2GoTransform().inv(_traj([]))
        with pytest.raises(KeyError, match=r"done entry \('next', 'done'\) not found"):
            Reward2GoTransform().inv(_traj([2]).exclude(("next", "done")))
        with pytest.raises(AttributeError):  # TorchRL's type
            Reward2GoTransform().inv(_traj([2]).exclude(("next", "done")))
        with pytest.raises(KeyError, match=r"reward \('next', 'r'\) not found"):
            Reward2GoTransform(in_keys=[("next", "r")]).inv(_traj([2]))
        with pytest.raises(IndexError, match=r"has shape \(6,\); it needs a time dim and a trailing feature dim"):
            Reward2GoTransform().inv(_traj([2], reward=torch.ones(6)))
        with pytest.raises(RuntimeError, match="gamma must be a number or a tensor, got NoneType"):
            Reward2GoTransform(gamma=None)
        with pytest.raises(ValueError, match=r"in_keys \['a', 'b'\] and out_keys \['c'\] differ in length"):
            Reward2GoTransform(in_keys=["a", "b"], out_keys=["c"])
        with pytest.raises(ValueError, match=r"done flags of shape \(6, 3\) do not broadcast"):
            data = _traj([2], reward=torch.ones(6, 2))
            data["next", "done"] = torch.ones(6, 3, dtype=torch.bool)
            Reward2GoTransform().inv(data)

    def test_docstring_examples(self):
        assert doctest.testmod(module, raise_on_error=True).attempted > 0
