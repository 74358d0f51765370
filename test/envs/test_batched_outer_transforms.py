"""Transforms outside a ``SerialEnv``/``ParallelEnv`` that replace an entry in place with another shape
(``CatFrames``, ``ToTensorImage``, ``Resize``): partial resets (sub-envs ending at different steps) must give
the single-env answers, the batched env reading only its own entries from the reset's input."""
from __future__ import annotations

import pytest
import torch

from torchrl.envs import CatFrames, Compose, Resize, StepCounter, ToTensorImage, TransformedEnv
from torchrl.envs.batched_envs import ParallelEnv, SerialEnv
from torchrl.testing import CountingEnv

from test.envs.transforms._pixel_env import PixelEnv

BATCHED = [SerialEnv, ParallelEnv]


def make_counter(max_steps):
    return CountingEnv(max_steps=max_steps)


def make_pixels(max_steps, seed):
    return TransformedEnv(PixelEnv(seed=seed), StepCounter(max_steps=max_steps))


def ones(td):
    return td.set("action", torch.ones(*td.batch_size, 1, dtype=torch.int8))


@pytest.fixture(params=BATCHED, ids=["serial", "parallel"])
def batched(request):
    made = []

    def make(*args, **kwargs):
        env = request.param(*args, **kwargs)
        made.append(env)
        return env

    yield make
    for env in made:
        env.close(raise_if_closed=False)


# TorchRL 0.14.1, SerialEnv and ParallelEnv alike: CountingEnv max_steps 2 and 4, CatFrames(N=3) outside, action 1
EXPECTED_OBS = [
    [[0, 0, 0], [0, 0, 1], [0, 1, 2], [0, 0, 0], [0, 0, 1], [0, 1, 2], [0, 0, 0], [0, 0, 1], [0, 1, 2], [0, 0, 0]],
    [[0, 0, 0], [0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [0, 0, 0], [0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4]],
]
EXPECTED_NEXT_OBS = [
    [[0, 0, 1], [0, 1, 2], [1, 2, 3], [0, 0, 1], [0, 1, 2], [1, 2, 3], [0, 0, 1], [0, 1, 2], [1, 2, 3], [0, 0, 1]],
    [[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5], [0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]],
]


class TestCatFramesOutside:
    def test_partial_resets_match_torchrl_and_single_envs(self, batched):
        env = TransformedEnv(
            batched(2, make_counter, create_env_kwargs=[{"max_steps": 2}, {"max_steps": 4}]),
            CatFrames(N=3, dim=-1, in_keys=["observation"]),
        )
        data = env.rollout(10, ones, break_when_any_done=False)
        assert data["observation"].shape == (2, 10, 3)
        assert data["observation"].tolist() == EXPECTED_OBS
        assert data["next", "observation"].tolist() == EXPECTED_NEXT_OBS
        for i, max_steps in enumerate((2, 4)):
            single = TransformedEnv(make_counter(max_steps), CatFrames(N=3, dim=-1, in_keys=["observation"]))
            alone = single.rollout(10, ones, break_when_any_done=False)
            torch.testing.assert_close(data["observation"][i], alone["observation"])
            torch.testing.assert_close(data["next", "observation"][i], alone["next", "observation"])
            torch.testing.assert_close(data["next", "done"][i], alone["next", "done"])

    def test_reset_of_the_batched_env_keeps_its_own_values(self, batched):
        # the input holds CatFrames' (2, 3) stacks under "observation": the rows not reset take the batched
        # env's own latest values (its last step's outputs), in its own shape
        base = batched(2, make_counter, create_env_kwargs=[{"max_steps": 10}, {"max_steps": 10}])
        td = base.reset()
        for _ in range(3):
            td = base.step_mdp(base.step(ones(td)))
        td_in = td.clone()
        td_in["observation"] = torch.full((2, 3), 7, dtype=torch.int32)
        td_in["_reset"] = torch.tensor([[True], [False]])
        out = base.reset(td_in)
        assert out["observation"].shape == (2, 1)
        assert out["observation"].tolist() == [[0], [3]]
        # after that reset, its outputs are the latest values
        td_in = out.clone()
        td_in["observation"] = torch.full((2, 3), 7, dtype=torch.int32)
        td_in["_reset"] = torch.tensor([[False], [True]])
        assert base.reset(td_in)["observation"].tolist() == [[0], [0]]

    def test_matching_input_entries_are_still_read(self, batched):
        base = batched(2, make_counter, create_env_kwargs=[{"max_steps": 10}, {"max_steps": 10}])
        td = base.reset()
        td["observation"] = torch.tensor([[5], [6]], dtype=torch.int32)
        td["_reset"] = torch.tensor([[True], [False]])
        assert base.reset(td)["observation"].tolist() == [[0], [6]]


class TestPixelTransformsOutside:
    def test_to_tensor_image_and_resize_in_place(self, batched):
        kwargs = [{"max_steps": 2, "seed": 0}, {"max_steps": 3, "seed": 1}]

        def pixels_transform():
            return Compose(ToTensorImage(), Resize(4, 4))

        env = TransformedEnv(batched(2, make_pixels, create_env_kwargs=kwargs), pixels_transform())
        actions = torch.linspace(-1, 1, 7)

        def policy(td):
            step = int(policy.t)
            policy.t += 1
            return td.set("action", actions[step].expand(*td.batch_size, 1).clone())

        policy.t = 0
        data = env.rollout(7, policy, break_when_any_done=False)
        assert data["pixels"].shape == (2, 7, 3, 4, 4)
        assert data["pixels"].dtype == torch.float32
        assert data["next", "truncated"].squeeze(-1).tolist() == [
            [False, True, False, True, False, True, False],
            [False, False, True, False, False, True, False],
        ]
        for i, kw in enumerate(kwargs):
            single = TransformedEnv(make_pixels(**kw), pixels_transform())
            policy.t = 0
            alone = single.rollout(7, policy, break_when_any_done=False)
            torch.testing.assert_close(data["pixels"][i], alone["pixels"])
            torch.testing.assert_close(data["next", "pixels"][i], alone["next", "pixels"])
            torch.testing.assert_close(data["step_count"][i], alone["step_count"])
