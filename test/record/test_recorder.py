"""Recorder transforms: VideoRecorder, TensorDictRecorder, PixelRenderTransform."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from torchrl.data.tensor_specs import Bounded, Categorical, Composite, Unbounded
from torchrl.envs import EnvBase, TransformedEnv
from torchrl.envs.transforms import Compose, StepCounter
from torchrl.record import CSVLogger, PixelRenderTransform, TensorDictRecorder, VideoRecorder
from torchrl.record.loggers._video import has_mp4_backend

H, W = 4, 6


class PixelEnv(EnvBase):
    """Emits ``"pixels"`` (uint8, ``(*batch, H, W, 3)``) filled with ``10 * t`` at step ``t`` of the episode.

    Sub-env ``b`` of a batched env adds ``b`` to its pixels. Episodes end after ``max_steps`` steps.
    ``render()`` returns the current frame (channels-last numpy), ``render(td)`` reads ``td["t"]``.
    """

    def __init__(self, max_steps: int = 100, channels_first: bool = False, **kwargs):
        super().__init__(**kwargs)
        batch = self.batch_size
        self.max_steps = max_steps
        self.channels_first = channels_first
        shape = (*batch, 3, H, W) if channels_first else (*batch, H, W, 3)
        self.observation_spec = Composite(
            pixels=Bounded(0, 255, shape=shape, dtype=torch.uint8), t=Unbounded((*batch, 1), dtype=torch.int64),
            shape=batch,
        )
        self.action_spec = Categorical(2, (*batch, 1))
        self.reward_spec = Unbounded((*batch, 1))
        self.t = torch.zeros((*batch, 1), dtype=torch.int64)

    def _frame(self) -> torch.Tensor:
        offset = torch.arange(self.batch_size.numel()).reshape(*self.batch_size, 1) if self.batch_size else 0
        value = (self.t * 10 + offset).to(torch.uint8)
        shape = (3, H, W) if self.channels_first else (H, W, 3)
        return value.reshape(*value.shape[:-1], 1, 1, 1).expand(*self.batch_size, *shape).clone()

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        self.t.zero_()
        return TensorDict({"pixels": self._frame(), "t": self.t.clone()}, batch_size=self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.t += 1
        done = self.t >= self.max_steps
        return TensorDict(
            {"pixels": self._frame(), "t": self.t.clone(), "reward": torch.zeros(self.t.shape), "done": done,
             "terminated": done.clone()},
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass

    def render(self, tensordict=None):
        t = int(self.t.reshape(-1)[0]) if tensordict is None else int(tensordict["t"].reshape(-1)[0])
        return np.full((2, 3, 3), t, dtype=np.uint8)


class ListLogger:
    """Keeps what it is asked to log."""

    def __init__(self):
        self.videos = []

    def log_video(self, name, video, **kwargs):
        self.videos.append((name, video, kwargs))


def _values(video: torch.Tensor) -> list[int]:
    """First pixel of each frame of a ``(N, T, C, H, W)`` video (first video)."""
    return video[0, :, 0, 0, 0].tolist()


# -- VideoRecorder --------------------------------------------------------------------------------------------------
class TestVideoRecorder:
    def test_single_env_defaults_skip_two(self):
        logger = ListLogger()
        env = TransformedEnv(PixelEnv(), VideoRecorder(logger, tag="run"))
        recorder = env.transform
        assert recorder.skip == 2 and recorder.make_grid is True
        env.rollout(5)
        recorder.dump()
        (name, video, kwargs), = logger.videos
        # calls: reset (t=0), steps t=1..5; every second call is kept -> t = 1, 3, 5
        assert name == "run" and kwargs == {}
        assert video.shape == (1, 3, 3, H, W) and video.dtype == torch.uint8
        assert _values(video) == [10, 30, 50]
        recorder.dump()  # frames were cleared: nothing more is logged
        assert len(logger.videos) == 1

    def test_channels_first_and_skip_one(self):
        logger = ListLogger()
        env = TransformedEnv(PixelEnv(channels_first=True), VideoRecorder(logger, tag="run", skip=1, fps=7))
        env.rollout(3)
        env.transform.dump(suffix="eval", step=12)
        (name, video, kwargs), = logger.videos
        assert name == "run_eval" and kwargs == {"fps": 7, "step": 12}
        assert _values(video) == [0, 10, 20, 30]

    def test_batched_env_grid(self):
        logger = ListLogger()
        env = TransformedEnv(PixelEnv(batch_size=[3]), VideoRecorder(logger, tag="vec"))
        assert env.transform.skip == 1
        env.rollout(2)
        env.transform.dump()
        (_, video, _), = logger.videos
        assert video.shape == (1, 3, 3, 2 * H, 2 * W)  # 3 sub-envs tiled in a 2x2 grid
        frame = video[0, 2, 0]
        assert [int(frame[0, 0]), int(frame[0, W]), int(frame[H, 0]), int(frame[H, W])] == [20, 21, 22, 0]

    def test_batched_env_without_grid_gives_n_videos(self):
        logger = ListLogger()
        env = TransformedEnv(PixelEnv(batch_size=[2]), VideoRecorder(logger, tag="vec", make_grid=False))
        env.rollout(2)
        env.transform.dump()
        (_, video, _), = logger.videos
        assert video.shape == (2, 3, 3, H, W)
        assert video[:, :, 0, 0, 0].tolist() == [[0, 10, 20], [1, 11, 21]]

    def test_center_crop_float_and_max_frames(self):
        logger = ListLogger()
        recorder = VideoRecorder(logger, tag="t", center_crop=2, max_frames=2)
        data = TensorDict(pixels=torch.linspace(0, 1, 4).reshape(4, 1, 1, 1).expand(4, 3, 5, 5), batch_size=[4])
        recorder(data)
        recorder.dump()
        (_, video, _), = logger.videos
        assert video.shape == (1, 2, 3, 2, 2)  # the two most recent frames, cropped
        assert _values(video) == [170, 255]

    def test_standalone_reads_leading_dim_as_time(self):
        logger = ListLogger()
        recorder = VideoRecorder(logger, tag="t")
        assert recorder.skip == 1 and recorder.make_grid is False
        recorder(TensorDict(pixels=torch.arange(3, dtype=torch.uint8).reshape(3, 1, 1, 1).expand(3, H, W, 1),
                            batch_size=[3]))
        recorder.dump()
        assert logger.videos[0][1].shape == (1, 3, 1, H, W)

    def test_dump_on_done(self):
        logger = ListLogger()
        env = TransformedEnv(PixelEnv(max_steps=3), VideoRecorder(logger, tag="ep", skip=1, dump_on_done=True))
        env.rollout(10, break_when_any_done=True)
        (_, video, _), = logger.videos
        assert _values(video) == [0, 10, 20, 30]

    def test_out_keys_copy_and_spec(self):
        env = TransformedEnv(PixelEnv(), VideoRecorder(None, tag="x", in_keys=["pixels"], out_keys=["frames"]))
        assert "frames" in env.observation_spec.keys()
        data = env.rollout(2)
        torch.testing.assert_close(data["next", "frames"], data["next", "pixels"])

    def test_errors(self):
        with pytest.raises(ValueError, match=r"skip must be >= 1, got 0"):
            VideoRecorder(None, tag="x", skip=0)
        recorder = VideoRecorder(None, tag="x")
        with pytest.raises(KeyError, match=r"key 'pixels' not found; available keys: \['obs'\]"):
            recorder(TensorDict(obs=torch.zeros(2), batch_size=[]))
        with pytest.raises(ValueError, match=r"with 1, 3 or 4 channels"):
            recorder(TensorDict(pixels=torch.zeros(5, 6, 7), batch_size=[]))
        with pytest.raises(ValueError, match=r"center_crop=9 is larger than the 4x6 images"):
            VideoRecorder(None, tag="x", center_crop=9)(TensorDict(pixels=torch.zeros(4, 6, 3), batch_size=[]))

    def test_before_a_transform_that_reads_its_parent(self, tmp_path):
        # StepCounter builds its parent env, which clones the VideoRecorder: the clone shares the logger
        logger = CSVLogger("exp", log_dir=tmp_path)
        env = TransformedEnv(PixelEnv(), Compose(VideoRecorder(logger, tag="v", skip=1), StepCounter(5)))
        assert env.rollout(3)["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]
        assert env.transform[0].clone().logger is logger
        env.transform[0].dump()
        assert torch.load(tmp_path / "exp" / "videos" / "v_0.pt").shape == (1, 4, 3, H, W)

    def test_csv_round_trip(self, tmp_path):
        logger = CSVLogger("exp", log_dir=tmp_path)
        env = TransformedEnv(PixelEnv(), VideoRecorder(logger, tag="rollout", skip=1))
        env.rollout(4)
        env.transform.dump()
        video = torch.load(tmp_path / "exp" / "videos" / "rollout_0.pt")
        assert video.shape == (1, 5, 3, H, W) and _values(video) == [0, 10, 20, 30, 40]

    @pytest.mark.skipif(not has_mp4_backend(), reason="mp4 needs PyAV (pip install av)")
    def test_gym_pixels_to_mp4(self, tmp_path, monkeypatch):
        pytest.importorskip("gymnasium")
        av = pytest.importorskip("av")
        from torchrl.envs.libs.gym import GymEnv

        monkeypatch.setenv("SDL_VIDEODRIVER", "dummy")
        logger = CSVLogger("gym", log_dir=tmp_path, video_format="mp4", video_fps=10)
        env = TransformedEnv(GymEnv("CartPole-v1", from_pixels=True), VideoRecorder(logger, tag="cartpole", skip=1))
        env.set_seed(0)
        env.rollout(3)
        env.transform.dump()
        with av.open(str(tmp_path / "gym" / "videos" / "cartpole_0.mp4")) as container:
            frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
        assert len(frames) == 4 and frames[0].shape == (400, 600, 3)

    def test_to_animation(self):
        pytest.importorskip("matplotlib")
        recorder = VideoRecorder(None, tag="x")
        with pytest.raises(RuntimeError, match="no frame recorded yet"):
            recorder.to_animation()
        recorder(TensorDict(pixels=torch.zeros(3, H, W, 3, dtype=torch.uint8), batch_size=[3]))
        anim = recorder.to_animation(title="demo", interval=20, clear=True)
        assert type(anim).__name__ == "FuncAnimation" and anim._interval == 20
        assert recorder.frames["pixels"] == []

    def test_service_owner_is_replaced_by_its_client(self, tmp_path):
        class Owner(ListLogger):
            def client(self):
                return self.restricted

        owner = Owner()
        owner.restricted = ListLogger()
        assert VideoRecorder(owner, tag="x").logger is owner.restricted


# -- TensorDictRecorder ---------------------------------------------------------------------------------------------
class TestTensorDictRecorder:
    def test_records_every_skip_and_dumps(self, tmp_path):
        base = str(tmp_path / "data")
        env = TransformedEnv(PixelEnv(), TensorDictRecorder(base, skip=2, in_keys=["t"]))
        env.rollout(6)
        recorder = env.transform
        recorder.dump()
        saved = torch.load(base + "_0.pt", weights_only=False)
        assert list(saved.keys()) == ["t"] and saved["t"].squeeze(-1).tolist() == [2, 4, 6]
        env.rollout(2)
        recorder.dump(suffix="late")
        assert torch.load(base + "_late_1.pt", weights_only=False)["t"].squeeze(-1).tolist() == [2]
        recorder.dump()  # nothing recorded since: no file
        assert sorted(os.listdir(tmp_path)) == ["data_0.pt", "data_late_1.pt"]

    def test_keeps_reset_when_asked(self, tmp_path):
        base = str(tmp_path / "data")
        env = TransformedEnv(PixelEnv(), TensorDictRecorder(base, skip_reset=False, skip=1, in_keys=["t"]))
        env.rollout(2)
        env.transform.dump()
        assert torch.load(base + "_0.pt", weights_only=False)["t"].squeeze(-1).tolist() == [0, 1, 2]

    def test_all_keys_and_errors(self, tmp_path):
        with pytest.raises(ValueError, match="skip must be >= 1"):
            TensorDictRecorder(str(tmp_path / "x"), skip=0)
        recorder = TensorDictRecorder(str(tmp_path / "x"), skip=1)
        recorder(TensorDict(a=torch.ones(2), b=torch.zeros(1), batch_size=[]))
        recorder.dump()
        assert sorted(torch.load(str(tmp_path / "x_0.pt"), weights_only=False).keys()) == ["a", "b"]


# -- PixelRenderTransform -------------------------------------------------------------------------------------------
class TestPixelRenderTransform:
    def test_renders_after_reset_and_steps(self):
        env = TransformedEnv(PixelEnv(), PixelRenderTransform(out_keys=["img"]))
        spec = env.observation_spec["img"]
        assert spec.shape == (2, 3, 3) and spec.dtype == torch.uint8
        data = env.rollout(3)
        assert data["img"][:, 0, 0, 0].tolist() == [0, 1, 2] and data["next", "img"][:, 0, 0, 0].tolist() == [1, 2, 3]

    def test_preproc_kwargs_pass_tensordict(self):
        class KwEnv(PixelEnv):
            def draw(self, tensordict, scale=1):
                return self.render(tensordict) * scale

        env = TransformedEnv(
            KwEnv(), PixelRenderTransform(render_method="draw", pass_tensordict=True, preproc=lambda x: x[0], scale=2)
        )
        data = env.rollout(2)
        assert data["next", "pixels"].shape == (2, 3, 3)
        assert data["next", "pixels"][:, 0, 0].tolist() == [2, 4]

    def test_switch_and_non_tensor(self):
        transform = PixelRenderTransform(out_keys=["img"], as_non_tensor=True)
        env = TransformedEnv(PixelEnv(), transform)
        assert transform.enabled
        data = env.rollout(2)
        assert isinstance(data[0]["next", "img"], np.ndarray) and int(data[1]["next", "img"][0, 0, 0]) == 2
        transform.switch()
        assert not transform.enabled
        assert "img" not in env.rollout(2)["next"].keys()
        transform.switch("on")
        assert transform.enabled
        with pytest.raises(ValueError, match="mode must be 'on', 'off'"):
            transform.switch("maybe")

    def test_feeds_video_recorder(self):
        logger = ListLogger()
        env = TransformedEnv(PixelEnv(), Compose(PixelRenderTransform(out_keys=["img"]),
                                                 VideoRecorder(logger, tag="r", in_keys=["img"], skip=1)))
        env.rollout(2)
        env.transform[-1].dump()
        assert logger.videos[0][1].shape == (1, 3, 3, 2, 3)

    def test_missing_render_method(self):
        with pytest.raises(AttributeError, match=r"has no 'snapshot' method"):
            TransformedEnv(PixelEnv(), PixelRenderTransform(render_method="snapshot"))
