"""Transforms against the same torch ops written by hand, in the same process (issue 20's speed targets).

Three figures, each a ratio of best-of-``REPEATS`` times:

- ``pixel_pipeline_vs_hand``: an env step through ``ToTensorImage -> Resize(84) -> GrayScale -> CatFrames(4)``
  on a batch of 8 uint8 210x160x3 frames, over the same base-env step followed by the same ops by hand
  (permute, scale, antialiased bilinear interpolate, luma weights, rolling 4-frame stack). Target: <= 1.2.
- ``catframes_rb_hand_vs_ours``: a replay buffer holding ``FRAMES`` 84x84 uint8 frames (stored once) samples
  256 stacks of 4 frames through ``CatFrames.make_rb_transform_and_sampler``; the hand-written reference draws
  256 valid slice starts and gathers ``storage[start + arange(4)]`` for the root and the ``("next", ...)``
  frames (the two stacks the buffer returns) and the last step's done flag. Ratio hand time / ours
  (target: >= 0.5).
  The storage's bytes per frame are reported (a stack of 4 stored per step would be 4x).
- ``vecnormv2_vs_hand`` / ``observationnorm_vs_hand``: a batch-256 env step with the normalisation
  transform over the base step plus the same update and normalisation by hand. Target: <= 1.2.

Run: ``python benchmarks/bench_transforms.py [--small]``. The last line printed is one JSON object.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from tensordict import TensorDict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import interleaved_best, report, single_thread  # noqa: E402

from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer  # noqa: E402
from torchrl.data.tensor_specs import Bounded, Composite, Unbounded  # noqa: E402
from torchrl.envs import EnvBase, TransformedEnv  # noqa: E402
from torchrl.envs.transforms import (  # noqa: E402
    CatFrames,
    Compose,
    GrayScale,
    ObservationNorm,
    Resize,
    ToTensorImage,
    VecNormV2,
)

REPEATS = 7
LUMA = (0.2989, 0.587, 0.114)


class FrameEnv(EnvBase):
    """Returns preallocated observations (uint8 frames at ``"pixels"`` or float vectors at ``"observation"``):
    the base step costs next to nothing, so the ratios measure the transforms."""

    def __init__(self, batch: int, *, pixels: tuple | None = None, obs_dim: int = 0) -> None:
        super().__init__(batch_size=(batch,))
        spec = {}
        if pixels is not None:
            self._pixels = torch.randint(0, 256, (batch, *pixels), dtype=torch.uint8)
            spec["pixels"] = Bounded(0, 255, shape=(batch, *pixels), dtype=torch.uint8)
        if obs_dim:
            self._obs = torch.randn(batch, obs_dim)
            spec["observation"] = Unbounded(shape=(batch, obs_dim))
        self.observation_spec = Composite(spec, shape=(batch,))
        self.action_spec = Bounded(-1.0, 1.0, shape=(batch, 1))
        self.reward_spec = Unbounded(shape=(batch, 1))
        self._done = torch.zeros(batch, 1, dtype=torch.bool)
        self._reward = torch.zeros(batch, 1)

    def _outputs(self) -> dict:
        out = {}
        if "pixels" in self.observation_spec.keys():
            out["pixels"] = self._pixels
        if "observation" in self.observation_spec.keys():
            out["observation"] = self._obs
        return out

    def _reset(self, tensordict=None, **kwargs):
        return TensorDict({**self._outputs(), "done": self._done, "terminated": self._done}, batch_size=self.batch_size)

    def _step(self, tensordict):
        return TensorDict(
            {**self._outputs(), "reward": self._reward, "done": self._done, "terminated": self._done},
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        pass


def _steps(env, n: int):
    td = env.reset()
    td.set("action", env.action_spec.zero())

    def run():
        for _ in range(n):
            env.step(td)

    return run


def bench_pixels(small: bool) -> dict:
    batch, steps = (2, 5) if small else (8, 50)
    transforms = Compose(ToTensorImage(), Resize(84, 84), GrayScale(), CatFrames(N=4, dim=-3))
    ours = TransformedEnv(FrameEnv(batch, pixels=(210, 160, 3)), transforms)
    base = FrameEnv(batch, pixels=(210, 160, 3))
    weights = torch.tensor(LUMA).view(3, 1, 1)
    stack = torch.zeros(batch, 4, 84, 84)

    def hand():
        nonlocal stack
        td = base.reset()
        td.set("action", base.action_spec.zero())
        for _ in range(steps):
            out = base.step(td)
            x = out.get(("next", "pixels")).permute(0, 3, 1, 2).float().div(255)
            x = F.interpolate(x, size=(84, 84), mode="bilinear", align_corners=False, antialias=True)  # (as Resize, TorchRL)
            gray = (x * weights).sum(-3, keepdim=True)
            stack = torch.cat([stack[:, 1:], gray], 1)
            out.set(("next", "pixels"), stack)

    best = interleaved_best({"ours": _steps(ours, steps), "hand": hand}, repeats=3 if small else REPEATS)
    shape = ours.observation_spec["pixels"].shape
    return {"pixel_pipeline_vs_hand": best["ours"] / best["hand"], "pixel_stack_shape": float(shape[-3])}


def bench_catframes_rb(small: bool) -> dict:
    frames, traj_len, batch = (4_000, 100, 16) if small else (1_000_000, 1_000, 256)
    n_traj = frames // traj_len
    transform, sampler = CatFrames(N=4, dim=-3, in_keys=["pixels"]).make_rb_transform_and_sampler(
        batch, traj_key="traj", strict_length=True,
    )
    storage = LazyTensorStorage(frames)
    rb = TensorDictReplayBuffer(storage=storage, sampler=sampler, batch_size=batch, transform=transform)
    chunk = traj_len * max(1, 100_000 // traj_len)  # written in chunks: the frames exist once in memory
    for start in range(0, frames, chunk):
        n = min(chunk, frames - start)
        pixels = torch.randint(0, 256, (n, 1, 84, 84), dtype=torch.uint8)  # (grayscale: one channel)
        step = torch.arange(start, start + n) % traj_len
        done = (step == traj_len - 1).unsqueeze(-1)
        nxt = torch.cat([pixels[1:], pixels[-1:]])  # the next frame (the last step's own frame at a chunk end)
        rb.extend(TensorDict(
            {"pixels": pixels, "traj": torch.arange(start, start + n) // traj_len, ("next", "pixels"): nxt,
             ("next", "done"): done, ("next", "terminated"): done, ("next", "truncated"): torch.zeros_like(done)},
            batch_size=[n],
        ))
        del pixels, nxt
    stored, stored_next = storage._storage.get("pixels"), storage._storage.get(("next", "pixels"))
    stored_done = storage._storage.get(("next", "done"))

    offsets = torch.arange(4)

    def hand():
        # starts whose 4 frames stay in one trajectory (the strict_length slices the sampler draws)
        t = torch.randint(0, n_traj, (batch,))
        s = torch.randint(0, traj_len - 3, (batch,))
        idx = (t * traj_len + s).unsqueeze(-1) + offsets
        flat = idx.reshape(-1)
        # what the buffer returns: the stacks at the slice's last step, root and next, and its done flag
        return (stored.index_select(0, flat).view(batch, 4, 84, 84), stored_next.index_select(0, flat).view(batch, 4, 84, 84),
                stored_done.index_select(0, idx[:, -1]))

    out = rb.sample()
    assert out.get("pixels").shape == (batch, 4, 84, 84), out.get("pixels").shape
    best = interleaved_best({"ours": lambda: rb.sample(), "hand": hand}, repeats=3 if small else REPEATS)
    pixel_bytes = sum(v.numel() * v.element_size() for k, v in storage._storage.items(True, True) if k in ("pixels", ("next", "pixels")))
    # stored: each frame at "pixels" and at the previous step's ("next", "pixels"); stacks are never stored
    return {"catframes_rb_hand_vs_ours": best["hand"] / best["ours"],
            "catframes_rb_pixel_bytes_per_step": pixel_bytes / frames, "catframes_rb_frame_bytes": 84.0 * 84.0,
            "catframes_rb_stacked_bytes_per_step_if_stored": 2 * 4 * 84.0 * 84.0}


def bench_norms(small: bool) -> dict:
    batch, dim, steps = (16, 8, 5) if small else (256, 17, 200)
    base = FrameEnv(batch, obs_dim=dim)
    vec = TransformedEnv(FrameEnv(batch, obs_dim=dim), VecNormV2(in_keys=["observation"], decay=0.99, eps=1e-4))
    loc, scale = torch.randn(dim), torch.rand(dim) + 0.5
    obs_norm = TransformedEnv(FrameEnv(batch, obs_dim=dim), ObservationNorm(loc=loc, scale=scale, in_keys=["observation"]))
    mean, var, count = torch.zeros(dim), torch.ones(dim), torch.zeros(())

    def hand_vec():
        nonlocal mean, var, count
        td = base.reset()
        td.set("action", base.action_spec.zero())
        for _ in range(steps):
            out = base.step(td)
            x = out.get(("next", "observation"))
            # the same EMA update and standardisation, one batch at a time
            weight = 1 - 0.99
            mean = mean.lerp(x.mean(0), weight)
            var = var.lerp(x.var(0, unbiased=False), weight)
            count = count + 1
            out.set(("next", "observation"), (x - mean) / (var.sqrt().clamp_min(1e-4)))

    def hand_norm():
        td = base.reset()
        td.set("action", base.action_spec.zero())
        for _ in range(steps):
            out = base.step(td)
            out.set(("next", "observation"), out.get(("next", "observation")) * scale + loc)

    repeats = 3 if small else REPEATS
    best = interleaved_best({"vec": _steps(vec, steps), "hand_vec": hand_vec,
                             "norm": _steps(obs_norm, steps), "hand_norm": hand_norm}, repeats=repeats)
    return {"vecnormv2_vs_hand": best["vec"] / best["hand_vec"], "observationnorm_vs_hand": best["norm"] / best["hand_norm"]}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", action="store_true", help="tiny sizes (CI smoke run)")
    parser.add_argument("--only", nargs="*", default=None, help="sections: pixels catframes norms")
    args = parser.parse_args(argv)
    single_thread()
    sections = {"pixels": bench_pixels, "catframes": bench_catframes_rb, "norms": bench_norms}
    figures = {}
    for name, fn in sections.items():
        if args.only is None or name in args.only:
            figures.update(fn(args.small))
    report(figures)
    return figures


if __name__ == "__main__":
    main()
