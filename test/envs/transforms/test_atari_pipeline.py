"""End to end: the preprocessing stack of TorchRL's Atari DQN recipe on a rendered gymnasium env (CartPole-v1
with ``from_pixels=True``), through a collector, a replay buffer that stacks frames at sampling time, and a
DQN update."""
import os

import pytest
import torch
from torch import nn

gym = pytest.importorskip("gymnasium")
pytest.importorskip("pygame")  # CartPole renders with pygame (gymnasium[classic-control], a test dependency)

from torchrl.collectors import Collector  # noqa: E402
from torchrl.data import LazyTensorStorage, ReplayBuffer, TensorDictReplayBuffer  # noqa: E402
from torchrl.envs import (  # noqa: E402
    CatFrames,
    DoubleToFloat,
    GrayScale,
    GymEnv,
    NoopResetEnv,
    Resize,
    RewardClipping,
    RewardSum,
    StepCounter,
    ToTensorImage,
    TransformedEnv,
    check_env_specs,
)
from torchrl.modules import ConvNet, MLP, QValueActor  # noqa: E402
from torchrl.objectives import DQNLoss  # noqa: E402

os.environ.setdefault("XDG_RUNTIME_DIR", "/tmp")  # (SDL asks for it when pygame renders off-screen)


def make_env(max_steps=40):
    # the transforms TorchRL's Atari DQN recipe appends, in its order
    env = GymEnv("CartPole-v1", from_pixels=True, pixels_only=False, categorical_action_encoding=True)
    env = TransformedEnv(env)
    env.append_transform(NoopResetEnv(noops=3, random=True))
    env.append_transform(RewardClipping(-1, 1))
    env.append_transform(ToTensorImage())
    env.append_transform(GrayScale())
    env.append_transform(Resize(84, 84))
    env.append_transform(CatFrames(N=4, dim=-3))
    env.append_transform(RewardSum())
    env.append_transform(StepCounter(max_steps=max_steps))
    env.append_transform(DoubleToFloat())
    return env


@pytest.fixture(scope="module")
def env():
    e = make_env()
    yield e
    e.close()


def test_specs_and_stacks(env):
    assert env.observation_spec["pixels"].shape == (4, 84, 84)
    assert env.observation_spec["pixels"].dtype == torch.float32
    check_env_specs(env, seed=0)
    env.set_seed(0)
    data = env.rollout(8, break_when_any_done=False)
    pixels, nxt = data["pixels"], data["next", "pixels"]
    assert pixels.shape == (8, 4, 84, 84) and 0.0 <= pixels.min() and pixels.max() <= 1.0
    # "same" padding: the reset stack repeats the first frame; then each stack rolls by one frame
    torch.testing.assert_close(pixels[0, 0], pixels[0, 3])
    torch.testing.assert_close(nxt[:, :3], pixels[:, 1:])
    torch.testing.assert_close(pixels[1:], nxt[:-1])
    # the frames are CartPole's render, gray and resized: the cart sits on a white background
    assert pixels[0, -1].mean() > 0.8
    assert data["next", "step_count"].squeeze(-1).tolist()[-1] == 8
    assert data["next", "episode_reward"].squeeze(-1).tolist()[:3] == [1.0, 2.0, 3.0]


def test_collector_buffer_and_dqn_update():
    env = make_env(max_steps=12)
    n_actions = env.action_spec.space.n
    net = nn.Sequential(
        ConvNet(num_cells=[8, 8], kernel_sizes=[8, 4], strides=[4, 2]),
        MLP(out_features=n_actions, num_cells=[32]),
    )
    actor = QValueActor(net, in_keys=["pixels"], spec=env.action_spec)
    collector = Collector(env, actor, frames_per_batch=16, total_frames=32, init_random_frames=16)
    # frames are stored once: the buffer stacks 4 of them at sampling time (TorchRL's make_rb_transform_and_sampler)
    rb_transform, sampler = CatFrames(N=4, dim=-3, in_keys=["pixels"]).make_rb_transform_and_sampler(
        batch_size=4, traj_key=("collector", "traj_ids"), strict_length=True,
    )
    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(64), sampler=sampler, batch_size=4, transform=rb_transform)
    loss = DQNLoss(actor, action_space=env.action_spec, delay_value=False)
    optim = torch.optim.Adam(loss.parameters(), lr=1e-3)
    for batch in collector:
        # keep one gray frame per step (the newest of each stack), as a frame-stacking buffer stores them
        frames = batch.exclude("pixels", ("next", "pixels"))
        frames.set("pixels", batch["pixels"][..., -1:, :, :])
        frames.set(("next", "pixels"), batch["next", "pixels"][..., -1:, :, :])
        rb.extend(frames)
    collector.shutdown()
    assert rb.storage["pixels"].shape[1:] == (1, 84, 84)  # one frame per stored step, not four
    sample = rb.sample()
    assert sample["pixels"].shape == (4, 4, 84, 84)
    before = [p.detach().clone() for p in loss.parameters()]
    out = loss(sample)
    out["loss"].backward()
    optim.step()
    assert torch.isfinite(out["loss"])
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, loss.parameters()))


def test_plain_buffer_with_catframes_forward_on_slices():
    # TorchRL's other documented use: CatFrames as the transform of a buffer sampling trajectory slices
    env = make_env(max_steps=10)
    env.set_seed(0)
    data = env.rollout(10, break_when_any_done=False)
    env.close()
    frames = data.exclude("pixels", ("next", "pixels"))
    frames.set("pixels", data["pixels"][:, -1:])
    frames.set(("next", "pixels"), data["next", "pixels"][:, -1:])
    t = CatFrames(N=4, dim=-3, in_keys=["pixels", ("next", "pixels")])
    rb = ReplayBuffer(storage=LazyTensorStorage(10), transform=t, batch_size=10)
    rb.extend(frames.unsqueeze(0))  # one trajectory, time last
    restacked = rb.sample()[0]
    torch.testing.assert_close(restacked["pixels"], data["pixels"])  # the env's own stacks, rebuilt
