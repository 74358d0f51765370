"""CatFrames: frame stacking in envs (rolling stack, partial resets) and offline (replay-buffer slices).

Expected values marked "TorchRL" were produced by TorchRL 0.14.1 on the same inputs.
"""
import functools

import pytest
import torch
from tensordict import TensorDict

from test.envs.transforms._pixel_env import PixelEnv
from test.envs.transforms.contract import TransformContract
from torchrl.data import (
    Bounded,
    Categorical,
    Composite,
    LazyTensorStorage,
    MultiOneHot,
    OneHot,
    ReplayBuffer,
    SliceSampler,
    TensorDictReplayBuffer,
)
from torchrl.envs import (
    CatFrames,
    Compose,
    GrayScale,
    ParallelEnv,
    Resize,
    SerialEnv,
    ToTensorImage,
    TransformedEnv,
    check_env_specs,
)
from torchrl.testing import CountingEnv, NestedCountingEnv


class _Pattern:
    """Plays ``pattern[row][t % len]`` in each row of a batched CountingEnv (rows end episodes at different steps)."""

    def __init__(self, pattern):
        self.pattern, self.t = pattern, 0

    def __call__(self, td):
        a = torch.tensor([p[self.t % len(p)] for p in self.pattern], dtype=torch.int8).reshape(*td.batch_size, 1)
        self.t += 1
        return td.set("action", a)


def _two_trajectories():
    """Trajectories [0, 1, 2, 3] and [10, 11, 12] (obs), with next obs = obs + 1."""
    obs = torch.tensor([0, 1, 2, 3, 10, 11, 12], dtype=torch.float32).unsqueeze(-1)
    done = torch.tensor([0, 0, 0, 1, 0, 0, 1], dtype=torch.bool).unsqueeze(-1)
    nxt = {"obs": obs + 1, "done": done, "terminated": done.clone(), "truncated": torch.zeros_like(done)}
    return TensorDict({"obs": obs, "next": nxt}, batch_size=[7])


class TestCatFrames(TransformContract):
    full_transitions = True

    def make_transform(self):
        return CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stacked"])

    # -- env path ---------------------------------------------------------------------------------------------
    @pytest.mark.parametrize(
        "padding,root,nxt",
        [
            (  # TorchRL
                "same",
                [[[0, 0, 0], [0, 0, 1], [0, 1, 2], [0, 0, 0], [0, 0, 1], [0, 1, 2], [0, 0, 0]],
                 [[0, 0, 0], [0, 0, 1], [0, 1, 1], [1, 1, 2], [1, 2, 2], [0, 0, 0], [0, 0, 0]]],
                [[[0, 0, 1], [0, 1, 2], [1, 2, 3], [0, 0, 1], [0, 1, 2], [1, 2, 3], [0, 0, 1]],
                 [[0, 0, 1], [0, 1, 1], [1, 1, 2], [1, 2, 2], [2, 2, 3], [0, 0, 0], [0, 0, 1]]],
            ),
            (  # TorchRL
                "constant",
                [[[-1, -1, 0], [-1, 0, 1], [0, 1, 2], [-1, -1, 0], [-1, 0, 1], [0, 1, 2], [-1, -1, 0]],
                 [[-1, -1, 0], [-1, 0, 1], [0, 1, 1], [1, 1, 2], [1, 2, 2], [-1, -1, 0], [-1, 0, 0]]],
                [[[-1, 0, 1], [0, 1, 2], [1, 2, 3], [-1, 0, 1], [0, 1, 2], [1, 2, 3], [-1, 0, 1]],
                 [[-1, 0, 1], [0, 1, 1], [1, 1, 2], [1, 2, 2], [2, 2, 3], [-1, 0, 0], [0, 0, 1]]],
            ),
        ],
    )
    def test_rollout_partial_resets(self, padding, root, nxt):
        # two rows ending their episodes at different steps: only the reset row restarts its stack
        t = CatFrames(N=3, dim=-1, in_keys=["observation"], out_keys=["stack"], padding=padding, padding_value=-1)
        env = TransformedEnv(CountingEnv(max_steps=2, batch_size=[2]), t)
        data = env.rollout(7, _Pattern([[1], [1, 0]]), break_when_any_done=False)
        assert data["next", "done"].squeeze(-1).tolist() == [
            [False, False, True, False, False, True, False], [False, False, False, False, True, False, False]
        ]
        assert data["stack"].tolist() == root
        assert data["next", "stack"].tolist() == nxt
        assert data["stack"].dtype == torch.int32
        assert data["observation"].shape == (2, 7, 1)  # the input entry stays

    def test_nested_keys_in_env(self):
        env = TransformedEnv(
            NestedCountingEnv(max_steps=2, nest_obs_action=True, nest_done=False, nested_dim=2, batch_size=[2]),
            CatFrames(N=3, dim=-1, in_keys=[("data", "states")], out_keys=[("data", "stack")]),
        )
        assert env.observation_spec["data", "stack"].shape == (2, 2, 3)
        td = env.reset()
        seen = []
        for _ in range(4):
            td["data", "action"] = torch.ones(2, 2, 1, dtype=env.full_action_spec["data", "action"].dtype)
            td, td_next = env.step_and_maybe_reset(td)
            seen.append(td["next", "data", "stack"][0, 0].tolist())
            td = td_next
        assert seen == [[0, 0, 1], [0, 1, 2], [1, 2, 3], [0, 0, 1]]  # TorchRL
        assert td["data", "stack"][0, 0].tolist() == [0, 0, 1]

    def test_pixel_pipeline_spec_and_values(self):
        env = TransformedEnv(
            PixelEnv(batch_size=[2], h=8, w=8),
            Compose(ToTensorImage(), Resize(4), GrayScale(), CatFrames(N=4, dim=-3, in_keys=["pixels"])),
        )
        spec = env.observation_spec["pixels"]
        assert spec.shape == (2, 4, 4, 4) and spec.dtype == torch.float32
        check_env_specs(env, seed=0)
        data = env.rollout(6)
        frames = torch.cat([data["pixels"][:, :1, -1:], data["next", "pixels"][:, :, -1:]], 1)  # (2, 7, 1, 4, 4)
        for t in range(6):
            idx = [max(i, 0) for i in range(t + 1 - 3, t + 2)]
            torch.testing.assert_close(data["next", "pixels"][:, t], frames[:, idx].flatten(1, 2))

    def test_bounded_spec_bounds_repeat(self):
        spec = Bounded(torch.tensor([0.0, -1.0]), torch.tensor([1.0, 2.0]), shape=(2,))
        out = CatFrames(N=3, dim=-1, in_keys=["x"]).transform_observation_spec(spec)
        assert out.shape == (6,)
        assert out.space.low.tolist() == [0.0, -1.0] * 3 and out.space.high.tolist() == [1.0, 2.0] * 3

    def test_discrete_specs(self):
        t = CatFrames(N=3, dim=-1, in_keys=["a", "b", "c"])
        spec = Composite(a=OneHot(4), b=Categorical(5, shape=(2,)), c=Bounded(0, 1, shape=(2, 2), dtype=torch.uint8))
        out = t.transform_observation_spec(spec)
        # three one-hot vectors side by side (TorchRL keeps a OneHot of n=4 with 12 values)
        assert isinstance(out["a"], MultiOneHot) and out["a"].nvec == [4, 4, 4]
        assert out["a"].is_in(torch.cat([OneHot(4).rand()] * 3))
        assert isinstance(out["b"], Categorical) and out["b"].shape == (6,) and out["b"].n == 5  # TorchRL
        assert out["c"].shape == (2, 6) and out["c"].dtype == torch.uint8  # TorchRL

    def test_serial_env_partial_reset(self):
        env = TransformedEnv(
            SerialEnv(2, [lambda: CountingEnv(max_steps=1), lambda: CountingEnv(max_steps=3)]),
            CatFrames(N=2, dim=-1, in_keys=["observation"], out_keys=["stack"]),
        )
        data = env.rollout(4, _Pattern([[1], [1]]), break_when_any_done=False)
        env.close()
        assert data["next", "stack"].tolist() == [  # TorchRL
            [[0, 1], [1, 2], [0, 1], [1, 2]], [[0, 1], [1, 2], [2, 3], [3, 4]]
        ]

    def test_parallel_env_partial_reset(self):
        env = TransformedEnv(
            ParallelEnv(2, [functools.partial(CountingEnv, max_steps=m) for m in (1, 3)], mp_start_method="fork"),
            CatFrames(N=2, dim=-1, in_keys=["observation"], out_keys=["stack"]),
        )
        try:
            data = env.rollout(4, _Pattern([[1], [1]]), break_when_any_done=False)
        finally:
            env.close(raise_if_closed=False)
        assert data["next", "stack"].tolist() == [  # TorchRL
            [[0, 1], [1, 2], [0, 1], [1, 2]], [[0, 1], [1, 2], [2, 3], [3, 4]]
        ]

    def test_env_rejects_as_inverse_and_future(self):
        for kwargs in ({"as_inverse": True}, {"future": True}):
            env = TransformedEnv(CountingEnv(), CatFrames(N=2, dim=-1, in_keys=["observation"], **kwargs))
            with pytest.raises(RuntimeError, match="CatFrames"):
                env.rollout(2)

    def test_keys_and_defaults(self):
        t = CatFrames(N=2, dim=-1)
        assert t.in_keys == ["pixels"] and t.out_keys == ["pixels"]
        assert t.done_key == "done" and t.reset_key == "_reset"
        t = CatFrames(N=2, dim=-1, in_keys=["a"], reset_key=("x", "_reset"), done_key=("x", "done"))
        assert t.reset_key == ("x", "_reset") and t.done_key == ("x", "done")
        env = TransformedEnv(CountingEnv(), CatFrames(N=2, dim=-1, in_keys=["observation"]))
        assert env.transform.reset_key == "_reset"

    @pytest.mark.parametrize(
        "kwargs,match",
        [
            ({"N": 0, "dim": -1}, "N must be a positive"),
            ({"N": 2, "dim": 0}, "dim must be negative"),
            ({"N": 2, "dim": -1, "padding": "zeros"}, "padding must be one of"),
        ],
    )
    def test_bad_arguments(self, kwargs, match):
        with pytest.raises(ValueError, match=match):
            CatFrames(in_keys=["obs"], **kwargs)

    def test_state_dict_round_trip_and_clone_after_use(self):
        env = TransformedEnv(CountingEnv(), CatFrames(N=2, dim=-1, in_keys=["observation"]))
        env.rollout(3)
        t = env.transform
        assert t.state_dict() == {}  # the stacks are per-episode state, not saved
        fresh = CatFrames(N=2, dim=-1, in_keys=["observation"])
        fresh.load_state_dict(t.state_dict())
        copy = t.clone()
        env2 = TransformedEnv(CountingEnv(), copy)
        assert env2.rollout(2)["observation"].shape == (2, 2)

    # -- offline path -----------------------------------------------------------------------------------------
    @pytest.mark.parametrize(
        "padding,root,nxt",
        [
            (  # TorchRL
                "same",
                [[0, 0, 0], [0, 0, 1], [0, 1, 2], [1, 2, 3], [10, 10, 10], [10, 10, 11], [10, 11, 12]],
                [[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [10, 10, 11], [10, 11, 12], [11, 12, 13]],
            ),
            (  # TorchRL
                "constant",
                [[-1, -1, 0], [-1, 0, 1], [0, 1, 2], [1, 2, 3], [-1, -1, 10], [-1, 10, 11], [10, 11, 12]],
                [[-1, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [-1, 10, 11], [10, 11, 12], [11, 12, 13]],
            ),
        ],
    )
    def test_unfolding_root_and_next(self, padding, root, nxt):
        t = CatFrames(N=3, dim=-1, in_keys=["obs", ("next", "obs")], padding=padding, padding_value=-1, mask_key="pad")
        out = t(_two_trajectories())
        assert out["obs"].tolist() == root and out["next", "obs"].tolist() == nxt
        assert out["pad"].int().tolist() == [[1, 1, 0], [1, 0, 0], [0, 0, 0], [0, 0, 0], [1, 1, 0], [1, 0, 0], [0, 0, 0]]
        # a batch of rows: each row is its own time line
        stacked = t(torch.stack([_two_trajectories(), _two_trajectories()]))
        assert stacked["obs"].shape == (2, 7, 3) and stacked["obs"][1].tolist() == root

    def test_unfolding_next_only_and_other_out_keys(self):
        t = CatFrames(N=3, dim=-1, in_keys=[("next", "obs")], out_keys=[("next", "s")])
        out = t(_two_trajectories())
        assert out["next", "s"].tolist() == [  # TorchRL
            [1, 1, 1], [1, 1, 2], [1, 2, 3], [2, 3, 4], [11, 11, 11], [11, 11, 12], [11, 12, 13]
        ]
        assert out["next", "obs"].shape == (7, 1)

    def test_unfolding_restarts_after_done(self):
        data = _two_trajectories()
        data["next", "done"][1] = True  # an early truncation
        out = CatFrames(N=3, dim=-1, in_keys=["obs"])(data)
        assert out["obs"][:4].tolist() == [[0, 0, 0], [0, 0, 1], [2, 2, 2], [2, 2, 3]]  # TorchRL
        data = _two_trajectories()
        data["next", "terminated"][1] = True  # only done delimits trajectories
        assert CatFrames(N=3, dim=-1, in_keys=["obs"])(data)["obs"][2].tolist() == [0, 1, 2]
        data = _two_trajectories().rename_key_(("next", "done"), ("next", "stop"))
        assert CatFrames(N=3, dim=-1, in_keys=["obs"], done_key="stop")(data)["obs"][4].tolist() == [10, 10, 10]

    @pytest.mark.parametrize("padding,expected", [
        ("same", [[0, 1, 2], [1, 2, 3], [2, 3, 3], [3, 3, 3], [10, 11, 12], [11, 12, 12], [12, 12, 12]]),
        ("constant", [[0, 1, 2], [1, 2, 3], [2, 3, -1], [3, -1, -1], [10, 11, 12], [11, 12, -1], [12, -1, -1]]),
    ])
    def test_future_windows(self, padding, expected):  # TorchRL
        t = CatFrames(N=3, dim=-1, in_keys=["obs"], padding=padding, padding_value=-1, future=True, mask_key="m")
        out = t(_two_trajectories())
        assert out["obs"].tolist() == expected
        assert out["m"].int().tolist() == [[0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 1, 1], [0, 0, 0], [0, 0, 1], [0, 1, 1]]
        # without a done entry, each row is one trajectory
        flat = _two_trajectories().exclude("next")
        assert t(flat)["obs"][2:4].tolist() == [[2, 3, 10], [3, 10, 11]]
        with pytest.raises(NotImplementedError, match="root entry"):
            CatFrames(N=3, dim=-1, in_keys=["obs", ("next", "obs")], future=True)(_two_trajectories())

    def test_unfolding_errors(self):
        with pytest.raises(KeyError, match=r"\('next', 'done'\)"):
            CatFrames(N=3, dim=-1, in_keys=["obs"])(_two_trajectories().exclude("next"))
        with pytest.raises(ValueError, match="time dim"):
            CatFrames(N=3, dim=-1, in_keys=["obs"])(_two_trajectories()[0])
        with pytest.raises(KeyError, match="missing.* not found"):
            CatFrames(N=3, dim=-1, in_keys=["missing"])(_two_trajectories())

    def test_unfolding_image_dim(self):
        # frames (C=1, H, W) stacked along the channel dim
        frames = torch.arange(5.0).view(5, 1, 1, 1).expand(5, 1, 2, 2)
        data = TensorDict({"px": frames, "next": {"done": torch.zeros(5, 1, dtype=torch.bool)}}, batch_size=[5])
        out = CatFrames(N=4, dim=-3, in_keys=["px"])(data.clone())["px"]
        assert out.shape == (5, 4, 2, 2)
        assert out[:, :, 0, 0].tolist() == [[0, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4]]
        # dim=-2 interleaves nothing: frames follow one another along H
        out = CatFrames(N=2, dim=-2, in_keys=["px"])(data.clone())["px"]
        assert out.shape == (5, 1, 4, 2) and out[3, 0, :, 0].tolist() == [2, 2, 3, 3]

    def test_as_inverse_stacks_on_write(self):
        t = CatFrames(N=3, dim=-1, in_keys=["obs", ("next", "obs")], as_inverse=True)
        assert t(_two_trajectories())["obs"].shape == (7, 1)  # forward leaves data alone
        rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10), transform=t, batch_size=2)
        rb.extend(_two_trajectories())
        assert rb[:7]["obs"].tolist() == [  # TorchRL
            [0, 0, 0], [0, 0, 1], [0, 1, 2], [1, 2, 3], [10, 10, 10], [10, 10, 11], [10, 11, 12]
        ]

    def test_slice_sampler_buffer(self):
        # TorchRL: the transform sees the flat sample (slices one after the other); the stored dones delimit
        # trajectories (values recorded on the same seed)
        lens = [5, 6, 5]
        obs = torch.cat([100 * i + torch.arange(n) for i, n in enumerate(lens)]).float().unsqueeze(-1)
        done = torch.cat([torch.arange(n) == n - 1 for n in lens]).unsqueeze(-1)
        nxt = {"obs": obs + 1, "done": done, "terminated": done.clone(), "truncated": torch.zeros_like(done)}
        rb = TensorDictReplayBuffer(
            storage=LazyTensorStorage(16), sampler=SliceSampler(slice_len=4), batch_size=8,
            transform=CatFrames(N=3, dim=-1, in_keys=["obs", ("next", "obs")], out_keys=["s", ("next", "s")],
                                padding="constant", padding_value=-1),
        )
        rb.extend(TensorDict({"obs": obs, "next": nxt}, batch_size=[16]))
        torch.manual_seed(1)
        out = rb.sample()
        assert out["obs"].squeeze(-1).tolist() == [101, 102, 103, 104, 201, 202, 203, 204]
        assert out["s"].tolist() == [
            [-1, -1, 101], [-1, 101, 102], [101, 102, 103], [102, 103, 104],
            [103, 104, 201], [104, 201, 202], [201, 202, 203], [202, 203, 204],
        ]
        assert out["next", "s"][0].tolist() == [-1, 101, 102]

    def test_make_rb_transform_and_sampler(self):
        t = CatFrames(N=3, dim=-1, in_keys=["obs"], out_keys=["stack"])
        transform, sampler = t.make_rb_transform_and_sampler(batch_size=4)
        assert isinstance(sampler, SliceSampler) and sampler.slice_len == 3
        rb = ReplayBuffer(storage=LazyTensorStorage(20), transform=transform, sampler=sampler, batch_size=4)
        data = _two_trajectories()
        data["stack"] = torch.zeros(7, 3)
        rb.extend(data)
        assert "stack" not in rb.storage[:7]  # stacks are not stored
        torch.manual_seed(0)
        out = rb.sample()
        assert out.batch_size == (4,)
        assert out["obs"].squeeze(-1).tolist() == [2, 12, 12, 3]  # TorchRL, same seed
        # each sample holds the window that ends at it, for root and next entries
        offsets = torch.tensor([-2.0, -1.0, 0.0])
        torch.testing.assert_close(out["stack"], out["obs"] + offsets)
        torch.testing.assert_close(out["next", "stack"], out["next", "obs"] + offsets)


def test_rb_transform_reshapes_whole_slices_and_pads_slices_that_cross_an_episode_start():
    # the buffer transform of make_rb_transform_and_sampler: a slice with no episode start inside is its own
    # stack (a reshape); a slice crossing one takes the padded general path. Both agree with unfolding.
    t = CatFrames(N=3, dim=-1, in_keys=["obs"], out_keys=["stack"], padding="constant", padding_value=-1)
    transform, _ = t.make_rb_transform_and_sampler(batch_size=2)
    obs = torch.tensor([[1.0], [2.0], [3.0], [11.0], [12.0], [13.0]])
    done = torch.tensor([[False], [False], [False], [True], [False], [False]])  # slice 2 restarts at 12
    data = TensorDict({"obs": obs, ("next", "obs"): obs + 0.5, ("next", "done"): done}, batch_size=[6])
    out = transform(data.clone())
    assert out["stack"].tolist() == [[1.0, 2.0, 3.0], [-1.0, 12.0, 13.0]]
    # (the next stack of a restarted slice opens with the root frame of its first step, as the env's would)
    assert out["next", "stack"].tolist() == [[1.5, 2.5, 3.5], [12.0, 12.5, 13.5]]
    # whole slices only: the same answers as the general path on each slice
    for row in range(2):
        piece = data[3 * row : 3 * row + 3].clone()
        general = CatFrames(N=3, dim=-1, in_keys=["obs", ("next", "obs")], out_keys=["stack", ("next", "stack")],
                            padding="constant", padding_value=-1)._unfold(piece, last_only=True)
        assert general["stack"].tolist() == out["stack"][row].tolist()
