"""Pixel transforms on a multi-agent group: per-agent camera frames ``("agents", "pixels")`` with an agent dim.

``AgentPixelEnv`` (below) gives each of its 3 agents a uint8 ``(16, 16, 3)`` frame; the image transforms and
the pretrained encoders must treat the agent dim as a batch dim (one image / one embedding per agent).
``DecodeVideoTransform`` is checked on group data in a replay buffer (one encoded clip per agent).
"""
import functools
import io
import typing

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from test.envs.transforms.contract import GroupContract
from test.envs.transforms.test_backbones import (
    r3m_checkpoint,
    vc1_checkpoint,
    vip_checkpoint,
    weights_dir,
)
from test.envs.transforms.test_r3m import _expected_embedding as expected_r3m
from test.envs.transforms.test_vc1 import expected_vc1
from test.envs.transforms.test_vip import expected_vip
from torchrl._utils._optional import has_module
from torchrl.data import LazyMemmapStorage, ReplayBuffer
from torchrl.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl.envs import EnvBase, SerialEnv, TransformedEnv, check_env_specs
from torchrl.envs.transforms import (
    CenterCrop,
    Compose,
    Crop,
    DecodeVideoTransform,
    GrayScale,
    R3MTransform,
    Resize,
    ToTensorImage,
    VC1Transform,
    VIPRewardTransform,
    VIPTransform,
)

PIX, RAW, IMG = ("agents", "pixels"), ("agents", "raw"), ("agents", "image")
N_AGENTS, SIZE = 3, 16


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class AgentPixelEnv(EnvBase):
    """``n_agents`` cameras: ``("agents", "pixels")`` uint8 ``(*batch, n_agents, 16, 16, 3)``, random at reset;
    each step adds ``round(10 * action)`` (mod 256) to every pixel of the agent's frame. Per agent:
    ``("agents", "action")`` (1,) in [-1, 1] and ``("agents", "reward")`` (1,) = mean pixel / 255. At the root:
    ``"observation"`` (2,) and the done flags (done after ``max_steps`` steps). With ``goal=True``, a fixed
    per-agent ``"goal_image"`` (same shape as the frames) is part of every observation."""

    def __init__(self, batch_size=(), seed: int = 0, max_steps: int = 4, goal: bool = False) -> None:
        super().__init__(batch_size=batch_size)
        shape = self.batch_size
        group = (*shape, N_AGENTS)
        frames = Bounded(0, 255, shape=(*group, SIZE, SIZE, 3), dtype=torch.uint8)
        self.observation_spec = Composite(
            agents=Composite(pixels=frames, shape=group), observation=Unbounded(shape=(*shape, 2)), shape=shape
        )
        self.goal = None
        if goal:
            self.observation_spec["goal_image"] = frames.clone()
            gen = torch.Generator().manual_seed(7)
            self.goal = torch.randint(0, 256, frames.shape, dtype=torch.uint8, generator=gen)
        self.full_action_spec = Composite(
            agents=Composite(action=Bounded(-1.0, 1.0, shape=(*group, 1)), shape=group), shape=shape
        )
        self.full_reward_spec = Composite(agents=Composite(reward=Unbounded(shape=(*group, 1)), shape=group), shape=shape)
        self.max_steps = max_steps
        self._gen = torch.Generator().manual_seed(seed)
        self._img = torch.zeros(frames.shape, dtype=torch.int64)
        self._count = torch.zeros(*shape, 1, dtype=torch.int64)

    def _td(self, done: torch.Tensor) -> TensorDict:
        group = TensorDict(pixels=self._img.to(torch.uint8), batch_size=(*self.batch_size, N_AGENTS))
        out = TensorDict(
            agents=group,
            observation=self._img.float().mean((-4, -3, -2))[..., :2] / 255,
            done=done,
            terminated=done.clone(),
            batch_size=self.batch_size,
        )
        if self.goal is not None:
            out.set("goal_image", self.goal)
        return out

    def _reset(self, tensordict, **kwargs):
        self._img = torch.randint(0, 256, self._img.shape, generator=self._gen)
        self._count = torch.zeros_like(self._count)
        return self._td(torch.zeros_like(self._count, dtype=torch.bool))

    def _step(self, tensordict):
        delta = (tensordict.get(("agents", "action")) * 10).round().long()
        self._img = (self._img + delta[..., None, None]) % 256
        self._count = self._count + 1
        out = self._td(self._count >= self.max_steps)
        out.set(("agents", "reward"), self._img.float().mean((-3, -2, -1)).unsqueeze(-1) / 255)
        return out

    def _set_seed(self, seed):
        self._gen.manual_seed(0 if seed is None else int(seed))


class PixelGroupContract(GroupContract):
    """``GroupContract`` on ``AgentPixelEnv`` (the base contract builds ``AgentsEnv``)."""

    steps = 4
    env_kwargs: typing.ClassVar[dict] = {}

    def make_group_env(self, batch_size=()):
        return AgentPixelEnv(batch_size=batch_size, **self.env_kwargs)

    @pytest.mark.parametrize("batch_size", [(), (2,)])
    def test_group_env(self, batch_size):
        env = TransformedEnv(self.make_group_env(batch_size), self.make_group_transform())
        check_env_specs(env, seed=0)
        data = env.rollout(self.steps, break_when_any_done=False)
        assert data.batch_size == (*batch_size, self.steps)
        assert data.get("agents").batch_size == (*batch_size, self.steps, N_AGENTS)  # the agent dim survives
        self.check_group(data)
        self.check_specs(env, batch_size)

    def test_group_serial_env(self):
        env = TransformedEnv(SerialEnv(2, self.make_group_env), self.make_group_transform())
        try:
            check_env_specs(env, seed=0)
            self.check_group(env.rollout(self.steps, break_when_any_done=False))
        finally:
            env.close(raise_if_closed=False)

    def check_specs(self, env, batch_size) -> None:
        """Assertions on the transformed env's specs (none by default)."""


def chw(pixels: torch.Tensor) -> torch.Tensor:
    """uint8 ``(..., H, W, 3)`` -> float ``(..., 3, H, W)`` in [0, 1], written out."""
    return pixels.permute(*range(pixels.ndim - 3), -1, -3, -2).float() / 255


class TestToTensorImageGroup(PixelGroupContract):
    def make_group_transform(self):
        return ToTensorImage(in_keys=[PIX], out_keys=[IMG])

    def check_group(self, data):
        for td in (data, data["next"]):
            assert td[IMG].shape[-4:] == (N_AGENTS, 3, SIZE, SIZE)
            torch.testing.assert_close(td[IMG], chw(td[PIX]))

    def check_specs(self, env, batch_size):
        spec = env.observation_spec[IMG]
        assert isinstance(spec, Bounded) and spec.dtype == torch.float32
        assert spec.shape == (*batch_size, N_AGENTS, 3, SIZE, SIZE)
        assert env.observation_spec["agents"].shape == (*batch_size, N_AGENTS)

    def test_in_place_on_the_group_key(self):
        env = TransformedEnv(AgentPixelEnv(batch_size=(2,)), ToTensorImage(in_keys=[PIX]))
        assert env.observation_spec[PIX].shape == (2, N_AGENTS, 3, SIZE, SIZE)
        data = env.rollout(2, break_when_any_done=False)
        assert data[("next", *PIX)].shape == (2, 2, N_AGENTS, 3, SIZE, SIZE) and data[("next", *PIX)].max() <= 1


class TestResizeGroup(PixelGroupContract):
    def make_group_transform(self):
        return Compose(ToTensorImage(in_keys=[PIX], out_keys=[IMG]), Resize(8, 4, in_keys=[IMG], out_keys=[("agents", "small")]))

    def check_group(self, data):
        small = data["next", "agents", "small"]
        assert small.shape[-4:] == (N_AGENTS, 3, 8, 4)
        x = chw(data[("next", *PIX)])
        expected = F.interpolate(x.reshape(-1, 3, SIZE, SIZE), size=(8, 4), mode="bilinear", antialias=True, align_corners=False)
        torch.testing.assert_close(small, expected.reshape(small.shape))

    def check_specs(self, env, batch_size):
        assert env.observation_spec["agents", "small"].shape == (*batch_size, N_AGENTS, 3, 8, 4)


class TestCenterCropGroup(PixelGroupContract):
    def make_group_transform(self):
        return Compose(ToTensorImage(in_keys=[PIX], out_keys=[IMG]), CenterCrop(8, 6, in_keys=[IMG], out_keys=[("agents", "crop")]))

    def check_group(self, data):
        # (16, 16) -> 8 rows from round(8 / 2) = 4, 6 columns from round(10 / 2) = 5
        torch.testing.assert_close(data["next", "agents", "crop"], chw(data[("next", *PIX)])[..., 4:12, 5:11])

    def check_specs(self, env, batch_size):
        assert env.observation_spec["agents", "crop"].shape == (*batch_size, N_AGENTS, 3, 8, 6)


class TestCropGroup(PixelGroupContract):
    def make_group_transform(self):
        return Compose(ToTensorImage(in_keys=[PIX], out_keys=[IMG]), Crop(8, 6, top=2, left=3, in_keys=[IMG], out_keys=[("agents", "crop")]))

    def check_group(self, data):
        torch.testing.assert_close(data["next", "agents", "crop"], chw(data[("next", *PIX)])[..., 2:10, 3:9])

    def check_specs(self, env, batch_size):
        assert env.observation_spec["agents", "crop"].shape == (*batch_size, N_AGENTS, 3, 8, 6)


class TestGrayScaleGroup(PixelGroupContract):
    def make_group_transform(self):
        return Compose(ToTensorImage(in_keys=[PIX], out_keys=[IMG]), GrayScale(in_keys=[IMG], out_keys=[("agents", "gray")]))

    def check_group(self, data):
        x = chw(data[("next", *PIX)])
        expected = 0.2989 * x[..., 0:1, :, :] + 0.587 * x[..., 1:2, :, :] + 0.114 * x[..., 2:3, :, :]
        torch.testing.assert_close(data["next", "agents", "gray"], expected)

    def check_specs(self, env, batch_size):
        assert env.observation_spec["agents", "gray"].shape == (*batch_size, N_AGENTS, 1, SIZE, SIZE)


# --- pretrained encoders: one embedding per agent frame -------------------------------------------------


def _assert_embeds(data, key, expected_fn, dim):
    for td in (data, data["next"]):
        emb = td[key]
        assert emb.shape == (*td.batch_size, N_AGENTS, dim)
        torch.testing.assert_close(emb, expected_fn(td[RAW]), rtol=1e-4, atol=1e-4)
    # agents see different frames: their embeddings differ
    assert not torch.allclose(data[("next", *key)][..., 0, :], data[("next", *key)][..., 1, :])


class TestR3MGroup(PixelGroupContract):
    steps = 2

    def make_group_transform(self):
        r3m_checkpoint("resnet18")
        return R3MTransform("resnet18", size=SIZE, download_path=weights_dir(), in_keys=[PIX],
                            out_keys=[("agents", "r3m_vec")], tensor_pixels_keys=[RAW])

    def check_group(self, data):
        _assert_embeds(data, ("agents", "r3m_vec"), expected_r3m, 512)
        assert PIX not in data.keys(True)  # the frames are replaced by their embeddings (raw copy kept)

    def check_specs(self, env, batch_size):
        spec = env.observation_spec["agents", "r3m_vec"]
        assert isinstance(spec, Unbounded) and spec.shape == (*batch_size, N_AGENTS, 512)


@functools.cache
def _loaded(cls):
    vip_checkpoint()
    return cls("resnet50", size=SIZE, download_path=weights_dir(), in_keys=[PIX], out_keys=[("agents", "vip_vec")],
               tensor_pixels_keys=[RAW])


class TestVIPGroup(PixelGroupContract):
    steps = 1  # ResNet-50: keep it short

    def make_group_transform(self):
        return _loaded(VIPTransform).clone()  # loading a ResNet-50 checkpoint costs more than copying it

    def check_group(self, data):
        _assert_embeds(data, ("agents", "vip_vec"), expected_vip, 1024)

    def check_specs(self, env, batch_size):
        spec = env.observation_spec["agents", "vip_vec"]
        assert isinstance(spec, Unbounded) and spec.shape == (*batch_size, N_AGENTS, 1024)


class TestVIPRewardGroup(PixelGroupContract):
    """The goal image is per agent (root ``"goal_image"`` of shape ``(*batch, 3, 16, 16, 3)``): the goal
    embedding keeps the agent dim and each agent's reward is its own progress towards its own goal, written
    under the env's reward key ``("agents", "reward")``."""

    steps = 1  # ResNet-50: keep it short
    env_kwargs: typing.ClassVar[dict] = {"goal": True}

    def make_group_transform(self):
        return _loaded(VIPRewardTransform).clone()

    def check_group(self, data):
        goal = expected_vip(data["goal_image"])
        torch.testing.assert_close(data["next", "goal_embedding"], goal, rtol=1e-4, atol=1e-4)
        before, after = expected_vip(data[RAW]), expected_vip(data[("next", *RAW)])
        reward = (before - goal).norm(dim=-1) - (after - goal).norm(dim=-1)
        torch.testing.assert_close(data["next", "agents", "reward"], reward.unsqueeze(-1), rtol=1e-3, atol=1e-3)

    def check_specs(self, env, batch_size):
        assert env.observation_spec["goal_embedding"].shape == (*batch_size, N_AGENTS, 1024)
        assert env.full_reward_spec["agents", "reward"].shape == (*batch_size, N_AGENTS, 1)

    def test_one_goal_image_for_every_agent(self):
        # a goal given at reset with the env's batch shape only: each agent's reward is measured against it
        env = TransformedEnv(AgentPixelEnv(), self.make_group_transform())
        goal_image = torch.randint(0, 256, (SIZE, SIZE, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(3))
        td = env.reset(TensorDict(goal_image=goal_image))
        goal = expected_vip(goal_image)
        torch.testing.assert_close(td["goal_embedding"], goal, rtol=1e-4, atol=1e-4)
        out = env.step(td.set(("agents", "action"), torch.full((N_AGENTS, 1), 0.5)))
        before, after = expected_vip(td[RAW]), expected_vip(out[("next", *RAW)])
        reward = (before - goal).norm(dim=-1) - (after - goal).norm(dim=-1)
        assert out["next", "agents", "reward"].shape == (N_AGENTS, 1)
        torch.testing.assert_close(out["next", "agents", "reward"], reward.unsqueeze(-1), rtol=1e-3, atol=1e-3)


class TestVC1Group(PixelGroupContract):
    steps = 2

    def make_group_transform(self):
        return VC1Transform([PIX], [("agents", "VC1_vec")], vc1_checkpoint(), del_keys=False)

    def check_group(self, data):
        for td in (data, data["next"]):
            emb = td["agents", "VC1_vec"]
            assert emb.shape == (*td.batch_size, N_AGENTS, 16)
            torch.testing.assert_close(emb, expected_vc1(td[PIX]), rtol=1e-4, atol=1e-4)

    def check_specs(self, env, batch_size):
        assert env.observation_spec["agents", "VC1_vec"].shape == (*batch_size, N_AGENTS, 16)
        assert env.observation_spec[PIX].shape == (*batch_size, N_AGENTS, SIZE, SIZE, 3)  # del_keys=False

    def test_frames_replaced_by_default(self):
        env = TransformedEnv(AgentPixelEnv(), VC1Transform([PIX], [("agents", "VC1_vec")], vc1_checkpoint()))
        assert set(env.observation_spec["agents"].keys()) == {"VC1_vec"}
        assert env.observation_spec["agents"].shape == (N_AGENTS,)
        data = env.rollout(1)
        assert set(data["next", "agents"].keys()) == {"VC1_vec", "reward"}
        assert data["next", "agents", "VC1_vec"].shape == (1, N_AGENTS, 16)


# --- DecodeVideoTransform: one encoded clip per agent, decoded on sampling ------------------------------


def _encode(frames: np.ndarray) -> bytes:
    import av

    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="nut") as container:
        stream = container.add_stream("rawvideo", rate=10)
        stream.height, stream.width = frames.shape[1:3]
        stream.pix_fmt = "rgb24"
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return buffer.getvalue()


def _clip(value: int) -> np.ndarray:
    """2 frames (2, 4) RGB: frame i filled with (value, 10 i, 200)."""
    frames = np.zeros((2, 2, 4, 3), dtype=np.uint8)
    for i in range(2):
        frames[i] = [value, 10 * i, 200]
    return frames


@pytest.mark.skipif(not has_module("av"), reason="PyAV (av) is not installed: test_decode_video_transform checks the error")
def test_decode_video_per_agent_clips_in_a_buffer():
    # 4 steps x 3 agents; the clip of (step t, agent a) is filled with 10 t + a in its red channel
    clips = [torch.frombuffer(bytearray(_encode(_clip(10 * t + a))), dtype=torch.uint8) for t in range(4) for a in range(3)]
    data = TensorDict(
        agents=TensorDict(clip=torch.stack(clips).reshape(4, 3, -1), batch_size=(4, 3)),
        step=torch.arange(4),
        batch_size=(4,),
    )
    transform = DecodeVideoTransform(in_keys=[("agents", "clip")], out_keys=[("agents", "frames")])
    # LazyTensorStorage drops the nested batch dims of "agents" (reported); a memmap storage keeps them
    rb = ReplayBuffer(storage=LazyMemmapStorage(4), batch_size=4, transform=transform)
    rb.extend(data)
    sample = rb.sample()
    frames = sample["agents", "frames"]
    assert frames.shape == (4, 3, 2, 3, 2, 4) and frames.dtype == torch.uint8  # (B, agents, T, C, H, W)
    for i, t in enumerate(sample["step"].tolist()):
        for a in range(3):
            expected = torch.from_numpy(_clip(10 * t + a)).permute(0, 3, 1, 2)
            assert torch.equal(frames[i, a], expected)


def test_image_pipeline_on_stored_group_frames():
    # the image transforms on sampled group data (a replay buffer's transform): the agent dim is a batch dim
    env = AgentPixelEnv(batch_size=(2,))
    env.set_seed(0)
    data = env.rollout(3, break_when_any_done=False).reshape(-1)  # 6 transitions x 3 agents
    pipeline = Compose(
        ToTensorImage(in_keys=[PIX], out_keys=[IMG]),
        CenterCrop(8, in_keys=[IMG], out_keys=[("agents", "crop")]),
        Resize(4, 4, in_keys=[("agents", "crop")], out_keys=[("agents", "small")]),
        GrayScale(in_keys=[("agents", "small")], out_keys=[("agents", "gray")]),
    )
    rb = ReplayBuffer(storage=LazyMemmapStorage(6), transform=pipeline, batch_size=4)
    rb.extend(data)
    out = rb.sample()
    assert out["agents"].batch_size == (4, N_AGENTS)
    x = chw(out[PIX])[..., 4:12, 4:12]
    torch.testing.assert_close(out["agents", "crop"], x)
    small = F.interpolate(x.reshape(-1, 3, 8, 8), size=(4, 4), mode="bilinear", antialias=True, align_corners=False)
    small = small.reshape(4, N_AGENTS, 3, 4, 4)
    torch.testing.assert_close(out["agents", "small"], small)
    gray = (small * torch.tensor([0.2989, 0.587, 0.114]).view(3, 1, 1)).sum(-3, keepdim=True)
    torch.testing.assert_close(out["agents", "gray"], gray)
