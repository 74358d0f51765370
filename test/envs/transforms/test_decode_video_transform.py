import doctest
import io
import sys
from unittest import mock

import numpy as np
import pytest
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

from test.envs.transforms.contract import TransformContract
from torchrl._utils._optional import has_module
from torchrl.data import (
    LazyStackStorage,
    LazyTensorStorage,
    ReplayBuffer,
    TensorDictReplayBuffer,
)
from torchrl.envs import PendulumEnv, TransformedEnv
from torchrl.envs.transforms import DecodeVideoTransform
from torchrl.envs.transforms import _decode_video_transform as module

HAS_AV = has_module("av")
if HAS_AV:
    import av


def clip_frames(n=3, h=2, w=4, offset=0):
    """``n`` RGB frames (H, W, 3): frame i is filled with (offset + 10 i, 50, 200), pixel (0, 0) of frame 0 is (1, 2, 3)."""
    frames = np.zeros((n, h, w, 3), dtype=np.uint8)
    for i in range(n):
        frames[i] = [offset + 10 * i, 50, 200]
    frames[0, 0, 0] = [1, 2, 3]
    return frames


def encode(frames, fmt="nut", codec="rawvideo", pix_fmt="rgb24"):
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format=fmt) as container:
        stream = container.add_stream(codec, rate=10)
        stream.height, stream.width = frames.shape[1:3]
        stream.pix_fmt = pix_fmt
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())
    return buffer.getvalue()


def as_chw(frames):
    return torch.from_numpy(frames).permute(0, 3, 1, 2)


@pytest.mark.skipif(not HAS_AV, reason="PyAV (av) is not installed: test_without_av checks the error")
class TestDecodeVideoTransform(TransformContract):
    def make_transform(self):
        return DecodeVideoTransform(in_keys=["clip"], out_keys=["pixels"])

    def replay_buffer_data(self):
        # each step carries a short encoded clip (same byte size: raw frames in a NUT container) as uint8 bytes
        data = super().replay_buffer_data()
        clips = [torch.frombuffer(bytearray(encode(clip_frames(offset=i))), dtype=torch.uint8) for i in range(data.numel())]
        data.set("clip", torch.stack(clips).reshape(data.shape + (-1,)))
        return data

    def test_contract_replay_buffer(self):
        super().test_contract_replay_buffer()
        data = self.replay_buffer_data()
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(data.numel()), batch_size=3)
        rb.append_transform(self.make_transform())
        rb.extend(data)
        sample = rb.sample()
        assert sample["pixels"].shape == (3, 3, 3, 2, 4) and sample["pixels"].dtype == torch.uint8
        offsets = sample["pixels"][:, 1, 0, 0, 0] - 10  # frame 1 is filled with offset + 10
        for i, offset in enumerate(offsets.tolist()):
            assert torch.equal(sample["pixels"][i], as_chw(clip_frames(offset=offset)))

    def test_lossless_round_trip(self):
        frames = clip_frames(n=4, h=6, w=8)
        for fmt, codec, pix_fmt in [("nut", "rawvideo", "rgb24"), ("matroska", "ffv1", "bgr0")]:
            data = TensorDict(clip=NonTensorData(encode(frames, fmt, codec, pix_fmt)))
            out = DecodeVideoTransform(in_keys=["clip"], out_keys=["pixels"])(data)["pixels"]
            assert out.shape == (4, 3, 6, 8) and out.dtype == torch.uint8
            assert torch.equal(out, as_chw(frames))
            assert out[0, :, 0, 0].tolist() == [1, 2, 3] and out[2, :, 1, 1].tolist() == [20, 50, 200]

    def test_lossy_codec_is_close(self):
        frames = clip_frames(n=3, h=16, w=16)
        frames[0, 0, 0] = frames[0, 0, 1]
        data = TensorDict(clip=NonTensorData(encode(frames, "mp4", "mpeg4", "yuv420p")))
        out = DecodeVideoTransform(in_keys=["clip"])(data)["clip"]  # in place by default
        assert out.shape == (3, 3, 16, 16)
        assert (out.int() - as_chw(frames).int()).abs().float().mean() < 8

    def test_batch_of_clips_and_sources(self, tmp_path):
        a, b = clip_frames(offset=0), clip_frames(offset=5)
        td = TensorDict(clip=NonTensorStack(encode(a), encode(b)), batch_size=[2])
        out = DecodeVideoTransform(in_keys=["clip"], out_keys=["pixels"])(td)["pixels"]
        assert out.shape == (2, 3, 3, 2, 4) and torch.equal(out[1], as_chw(b))
        path = tmp_path / "clip.nut"
        path.write_bytes(encode(a))
        td = TensorDict(clip=NonTensorData(str(path)))
        assert torch.equal(DecodeVideoTransform(in_keys=["clip"])(td)["clip"], as_chw(a))
        raw = torch.frombuffer(bytearray(encode(a)), dtype=torch.uint8)
        td = TensorDict(clip=raw)
        assert torch.equal(DecodeVideoTransform(in_keys=["clip"])(td)["clip"], as_chw(a))
        nested = TensorDict(obs=TensorDict(clip=NonTensorData(encode(b))))
        out = DecodeVideoTransform(in_keys=[("obs", "clip")], out_keys=[("obs", "pixels")])(nested)
        assert torch.equal(out["obs", "pixels"], as_chw(b))

    def test_dtype_and_device(self):
        td = TensorDict(clip=NonTensorData(encode(clip_frames())))
        out = DecodeVideoTransform(in_keys=["clip"], out_keys=["pixels"], dtype=torch.float32, device="cpu")(td)["pixels"]
        assert out.dtype == torch.float32 and out.device.type == "cpu" and out[1, 0, 0, 0].item() == 10.0

    def test_clip_reference_decode_is_delegated(self):
        class Ref:
            def __init__(self):
                self.calls = []

            def decode(self, *, device=None, dtype=None):
                self.calls.append((device, dtype))
                return torch.zeros(2, 3, 1, 1, dtype=torch.uint8)

        ref = Ref()
        t = DecodeVideoTransform(in_keys=["ref"], out_keys=["pixels"], dtype=torch.uint8)
        td = TensorDict(batch_size=[])
        with mock.patch.object(td, "get", return_value=ref):
            t._call(td)
        assert ref.calls == [(None, torch.uint8)] and td["pixels"].shape == (2, 3, 1, 1)

    def test_replay_buffer_of_encoded_bytes(self):
        rb = ReplayBuffer(storage=LazyStackStorage(10), batch_size=2, transform=DecodeVideoTransform(in_keys=["clip"], out_keys=["pixels"]))
        rb.extend(TensorDict(clip=NonTensorStack(*[encode(clip_frames(offset=i)) for i in range(4)]), batch_size=[4]))
        sample = rb.sample()
        assert sample["pixels"].shape == (2, 3, 3, 2, 4)

    def test_env_skips_missing_entries(self):
        env = TransformedEnv(PendulumEnv(seed=0), self.make_transform())
        assert "pixels" not in env.rollout(2).keys()  # noqa: SIM118 - TensorDict.__contains__ refuses keys

    def test_errors(self):
        t = DecodeVideoTransform(in_keys=["clip"])
        with pytest.raises(KeyError, match="key 'clip' not found"):
            t(TensorDict(obs=torch.zeros(1)))
        with pytest.raises(ValueError, match="'clip' could not be decoded as a video"):
            t(TensorDict(clip=NonTensorData(b"not a video")))
        with pytest.raises(TypeError, match="1-D uint8 tensor"):
            t(TensorDict(clip=torch.zeros(3)))
        with pytest.raises(TypeError, match="cannot decode entry 'clip' of type int"):
            t(TensorDict(clip=NonTensorData(3)))
        td = TensorDict(clip=NonTensorStack(encode(clip_frames(n=2)), encode(clip_frames(n=3))), batch_size=[2])
        with pytest.raises(ValueError, match="decode to different shapes"):
            t(td)
        with pytest.raises(ValueError, match="differ in length"):
            DecodeVideoTransform(in_keys=["a", "b"], out_keys=["c"])
        with pytest.raises(TypeError, match="in_keys"):
            DecodeVideoTransform()
        assert not t._has_inverse and t.out_keys == ["clip"] and t.in_keys_inv == []

    def test_repr(self):
        t = DecodeVideoTransform(in_keys=["clip"], out_keys=["pixels"])
        assert repr(t) == "DecodeVideoTransform(in_keys=['clip'], out_keys=['pixels'], device=None, dtype=None)"


def test_without_av():
    with mock.patch.object(module, "has_module", return_value=False), pytest.raises(ModuleNotFoundError, match="needs PyAV"):
        DecodeVideoTransform(in_keys=["clip"])
    with mock.patch.dict(sys.modules, {"av": None}), pytest.raises(ImportError):
        module._decode_one(b"", "clip")


@pytest.mark.skipif(not HAS_AV, reason="the example encodes a clip with PyAV")
def test_doctests():
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
