"""``GymWrapper`` / ``GymEnv`` on single gymnasium envs (vector envs: ``test_gym_vec.py``)."""
from __future__ import annotations

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import gymnasium
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from torchrl.data.tensor_specs import BoundedContinuous, Categorical, OneHot, Unbounded
from torchrl.envs import Compose, StepCounter, TransformedEnv, check_env_specs
from torchrl.envs.gym_like import GymLikeEnv, default_info_dict_reader
from torchrl.envs.libs.gym import GymEnv, GymWrapper, gym_backend, set_gym_backend

from test.envs.libs._gym_envs import CountEnv, DictEnv, SpaceEnv

S = gymnasium.spaces


def _replay(raw_env, rollout: TensorDict, seed: int, categorical: bool = False) -> None:
    """Replays ``rollout``'s actions in a raw gymnasium env seeded alike and compares every step.

    ``env.set_seed(seed)`` resets the gym env with that seed at once (as TorchRL does), so the rollout's first
    reset is the raw env's second one."""
    raw_env.reset(seed=seed)
    obs, _ = raw_env.reset()
    for t in range(rollout.shape[0]):
        step = rollout[t]
        np.testing.assert_array_equal(step["observation"].numpy(), obs)
        action = step["action"]
        action = action.numpy() if action.is_floating_point() else int(action if categorical else action.argmax())
        obs, reward, terminated, truncated, _ = raw_env.step(action)
        np.testing.assert_array_equal(step["next", "observation"].numpy(), obs)
        assert step["next", "reward"].item() == pytest.approx(reward)
        assert step["next", "terminated"].item() == terminated
        assert step["next", "truncated"].item() == truncated
        assert step["next", "done"].item() == (terminated or truncated)
        if terminated or truncated:
            obs, _ = raw_env.reset()


# ----------------------------------------------------------------------------------------------- seed examples
def test_quick_start_example():
    env = GymEnv("CartPole-v1")
    assert env.observation_spec["observation"].shape[-1] == 4
    assert isinstance(env.action_spec, OneHot) and env.action_spec.n == 2
    weights = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, -1.0, -1.0]])

    def policy(td):
        values = weights @ td["observation"]
        td["action"] = env.action_spec.encode(int(values.argmin()))
        return td

    rollout = env.rollout(max_steps=200, policy=policy)
    assert rollout["next", "reward"].sum().item() == rollout.shape[0]
    assert rollout[-1]["next", "done"].item() or rollout.shape[0] == 200


def test_transformed_pendulum_example():
    env = TransformedEnv(GymEnv("Pendulum-v1"), Compose(StepCounter(max_steps=200)))
    assert "GymEnv(env=Pendulum-v1" in repr(env)
    rollout = env.rollout(250)
    assert rollout.shape == torch.Size([200])
    assert rollout["next", "step_count"][-1].item() == 200
    assert rollout["next", "truncated"][-1].item() and not rollout["next", "terminated"][-1].item()


# ----------------------------------------------------------------------------------------------- specs and data
def test_cartpole_specs_and_outputs():
    env = GymEnv("CartPole-v1")
    assert env.batch_size == torch.Size([])
    assert isinstance(env.observation_spec["observation"], BoundedContinuous)
    assert env.action_spec.dtype == torch.int64
    assert isinstance(env.reward_spec, Unbounded) and env.reward_spec.shape == torch.Size([1])
    assert sorted(env.full_done_spec.keys()) == ["done", "terminated", "truncated"]
    td = env.reset()
    assert sorted(td.keys()) == ["done", "observation", "terminated", "truncated"]
    assert not td["done"].any() and td["done"].shape == torch.Size([1])
    td = env.rand_step(td)
    assert td["next", "reward"].dtype == torch.float32 and td["next", "reward"].shape == torch.Size([1])
    check_env_specs(env, seed=0)


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1", "MountainCarContinuous-v0", "Acrobot-v1"])
def test_matches_raw_gymnasium(name):
    env = GymEnv(name)
    env.set_seed(3)
    torch.manual_seed(0)
    rollout = env.rollout(120, break_when_any_done=False)
    _replay(gymnasium.make(name), rollout, seed=3)


def test_categorical_action_encoding():
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert isinstance(env.action_spec, Categorical) and env.action_spec.shape == torch.Size([])
    env.set_seed(1)
    torch.manual_seed(1)
    rollout = env.rollout(60, break_when_any_done=False)
    assert rollout["action"].shape == torch.Size([60])
    _replay(gymnasium.make("CartPole-v1"), rollout, seed=1, categorical=True)


@pytest.mark.parametrize("categorical", [True, False])
def test_tuple_observation_blackjack(categorical):
    env = GymEnv("Blackjack-v1", categorical_action_encoding=categorical)
    env.set_seed(2)
    torch.manual_seed(2)
    rollout = env.rollout(30, break_when_any_done=False)
    raw = gymnasium.make("Blackjack-v1")
    raw.reset(seed=2)  # set_seed resets with the seed at once (TorchRL)
    obs, _ = raw.reset()
    for t in range(30):
        step = rollout[t]
        if categorical:  # a stacked (3,) tensor of indices
            assert step["observation"].tolist() == list(obs)
        else:  # heterogeneous one-hots: one entry per tuple element
            assert [step["observation", str(i)].argmax().item() for i in range(3)] == list(obs)
        action = step["action"].item() if categorical else step["action"].argmax().item()
        obs, reward, terminated, truncated, _ = raw.step(action)
        assert step["next", "reward"].item() == reward
        if terminated or truncated:
            obs, _ = raw.reset()
    check_env_specs(env)


def test_dtype_preserved_float64():
    env = GymWrapper(CountEnv())
    assert env.observation_spec["observation"].dtype == torch.float64
    rollout = env.rollout(3, actions=[torch.tensor([1, 0])] * 3)
    assert rollout["observation"].dtype == torch.float64
    assert rollout["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
    assert rollout["observation"].squeeze(-1).tolist() == [0.0, 1.0, 2.0]


def test_reused_observation_buffer_is_copied():
    env = GymWrapper(CountEnv(end=10, reuse_buffer=True))
    rollout = env.rollout(4, actions=[torch.tensor([1, 0])] * 4)
    assert rollout["next", "observation"].squeeze(-1).tolist() == [1.0, 2.0, 3.0, 4.0]


def test_continuity_within_episodes():
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    torch.manual_seed(0)
    rollout = env.rollout(300, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)
    assert done.sum() >= 3
    same = (rollout["next", "observation"][:-1] == rollout["observation"][1:]).all(-1)
    assert torch.equal(same, ~done[:-1])
    # after each end, a fresh episode: CartPole starts within [-0.05, 0.05]
    assert (rollout["observation"][1:][done[:-1]].abs() <= 0.05).all()


# ----------------------------------------------------------------------------------------------- end of episodes
def test_cartpole_terminates():
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    torch.manual_seed(0)
    rollout = env.rollout(500)
    last = rollout[-1]["next"]
    assert last["terminated"].item() and not last["truncated"].item() and last["done"].item()
    assert not rollout["next", "done"][:-1].any()


def test_time_limit_truncates():
    env = GymEnv("CartPole-v1", max_episode_steps=5)
    env.set_seed(0)
    rollout = env.rollout(10, actions=[torch.tensor([1, 0]), torch.tensor([0, 1])] * 5)
    assert rollout.shape == torch.Size([5])
    assert rollout["next", "truncated"].squeeze(-1).tolist() == [False] * 4 + [True]
    assert not rollout["next", "terminated"].any()
    wrapped = GymWrapper(gymnasium.wrappers.TimeLimit(CountEnv(end=100), max_episode_steps=3))
    rollout = wrapped.rollout(10)
    assert rollout.shape == torch.Size([3]) and rollout["next", "truncated"][-1].item()


# ----------------------------------------------------------------------------------------------- info readers
def test_info_reader_with_keys():
    env = GymWrapper(CountEnv(end=10))
    assert env.set_info_dict_reader(default_info_dict_reader(["count"])) is env
    assert env.observation_spec["count"].dtype == torch.int64
    rollout = env.rollout(3, actions=[torch.tensor([0, 1])] * 3)
    assert rollout["count"].tolist() == [0, 2, 4]  # the reset info is read too
    assert rollout["next", "count"].tolist() == [2, 4, 6]
    assert "even" not in rollout["next"].keys()
    check_env_specs(env)


def test_info_reader_auto_registration():
    env = GymWrapper(CountEnv(end=10))
    env.set_info_dict_reader()
    spec = env.observation_spec
    assert spec["even"].dtype == torch.bool and spec["count"].dtype == torch.int64
    assert "label" in spec.keys()
    rollout = env.rollout(3, actions=[torch.tensor([1, 0])] * 3)
    assert rollout["next", "even"].tolist() == [False, True, False]
    assert rollout["even"].tolist() == [False, False, True]  # missing from the reset info: zero-filled
    assert rollout[2]["next", "label"] == "c3"
    assert len(env.info_dict_reader) == 1


def test_info_probe_keeps_the_seeded_sequence():
    def after_seed(s):  # set_seed(s) consumes the seeded reset (TorchRL): the next reset is the raw env's second
        raw = gymnasium.make("Taxi-v4")
        raw.reset(seed=s)
        return raw.reset()[0]

    expected = [after_seed(s) for s in (5, 6)]
    assert expected[0] != expected[1]  # the start state depends on the seed
    env = GymEnv("Taxi-v4")
    env.set_seed(5)
    env.set_info_dict_reader(default_info_dict_reader(["prob", "action_mask"]))
    assert env.observation_spec["action_mask"].dtype == torch.int8
    assert env.observation_spec["action_mask"].shape == torch.Size([6])
    assert env.reset()["observation"].argmax().item() == expected[0]


def test_info_reader_explicit_spec_and_errors():
    reader = default_info_dict_reader(["count"], spec=[Unbounded(shape=(), dtype=torch.float64)])
    env = GymWrapper(CountEnv(end=10)).set_info_dict_reader(reader)
    assert env.rollout(2)["next", "count"].dtype == torch.float64
    with pytest.raises(ValueError, match="match `keys` one to one"):
        default_info_dict_reader(["a", "b"], spec=[Unbounded(shape=())])

    class Clash(default_info_dict_reader):
        pass

    with pytest.raises(KeyError, match="already an observation key"):
        GymWrapper(CountEnv()).set_info_dict_reader(Clash(["observation"], spec={"observation": Unbounded(shape=())}))
    with pytest.raises(TypeError, match="callable reader"):
        GymWrapper(CountEnv()).set_info_dict_reader(3)


def test_mujoco_info_reader(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its warning log to the working directory
    env = GymEnv("HalfCheetah-v5").set_info_dict_reader(default_info_dict_reader(["x_position"]))
    rollout = env.rollout(4)
    assert rollout["next", "x_position"].dtype == torch.float64
    assert rollout["next", "x_position"].shape == torch.Size([4])


# ----------------------------------------------------------------------------------------------- pixels
def test_from_pixels_cartpole():
    env = GymEnv("CartPole-v1", from_pixels=True)
    assert env._env.render_mode == "rgb_array"
    assert env.observation_spec["pixels"].shape == torch.Size([400, 600, 3])
    env.set_seed(0)
    rollout = env.rollout(3)
    assert rollout["pixels"].dtype == torch.uint8
    assert rollout["next", "pixels"].shape == torch.Size([3, 400, 600, 3])
    assert "observation" in rollout.keys()
    raw = gymnasium.make("CartPole-v1", render_mode="rgb_array")
    raw.reset(seed=0)  # set_seed resets with the seed at once (TorchRL): the rollout starts at the next reset
    raw.reset()
    np.testing.assert_array_equal(rollout[0]["pixels"].numpy(), raw.render())
    check_env_specs(env)


def test_pixels_follow_each_step_and_pixels_only():
    env = GymWrapper(CountEnv(end=10, render_mode="rgb_array"), from_pixels=True, pixels_only=True)
    assert sorted(env.observation_spec.keys()) == ["pixels"]
    rollout = env.rollout(3, actions=[torch.tensor([1, 0])] * 3)
    assert rollout["next", "pixels"][:, 0, 0, 0].tolist() == [1, 2, 3]
    assert rollout["pixels"][:, 0, 0, 0].tolist() == [0, 1, 2]


def test_from_pixels_needs_rgb_array():
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        GymWrapper(gymnasium.make("CartPole-v1"), from_pixels=True)
    with pytest.raises(ValueError, match="pixels_only=True needs from_pixels=True"):
        GymEnv("CartPole-v1", pixels_only=True)


# ----------------------------------------------------------------------------------------------- frame skip, seeds
def test_frame_skip_sums_rewards_and_stops_at_end():
    env = GymWrapper(CountEnv(end=5), frame_skip=3)
    rollout = env.rollout(5, actions=[torch.tensor([1, 0])] * 5)
    assert rollout.shape == torch.Size([2])
    assert rollout["next", "reward"].squeeze(-1).tolist() == [3.0, 2.0]
    assert rollout["next", "observation"].squeeze(-1).tolist() == [3.0, 5.0]
    assert rollout["next", "terminated"][-1].item()
    with pytest.raises(ValueError, match="frame_skip must be an integer >= 1"):
        GymEnv("CartPole-v1", frame_skip=0)


def test_seeding_reproducible():
    env = GymEnv("CartPole-v1")
    assert env.set_seed(0) != 0
    obs = env.reset()["observation"]
    raw = gymnasium.make("CartPole-v1")
    raw.reset(seed=0)  # TorchRL's set_seed resets with the seed at once: the first reset() is the second state
    np.testing.assert_array_equal(obs.numpy(), raw.reset()[0])
    runs = []
    for _ in range(2):
        env.set_seed(7)
        torch.manual_seed(7)
        runs.append(env.rollout(50, break_when_any_done=False))
    assert torch.equal(runs[0]["next", "observation"], runs[1]["next", "observation"])
    env.set_seed(8)
    torch.manual_seed(7)
    assert not torch.equal(env.rollout(50, break_when_any_done=False)["observation"], runs[0]["observation"])


def test_reset_kwargs_passthrough():
    env = GymWrapper(CountEnv(end=10))
    td = env.reset(options={"start": 4})
    assert td["observation"].item() == 4.0
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        env.reset(bogus=1)


# ----------------------------------------------------------------------------------------------- construction
def test_make_kwargs_and_render_mode_passthrough():
    assert GymEnv("CartPole-v1", render_mode="rgb_array")._env.render_mode == "rgb_array"
    assert GymEnv("Pendulum-v1", g=2.5)._env.unwrapped.g == 2.5
    env = GymEnv("Pendulum-v1")
    assert env.env_name == "Pendulum-v1" and env.lib is gymnasium
    assert GymWrapper.get_library_name(env._env) == "gymnasium"


def test_available_envs():
    envs = GymEnv.available_envs
    assert "CartPole-v1" in envs and "Pendulum-v1" in envs
    assert GymWrapper.available_envs == envs


def test_dict_spaces_end_to_end():
    raw = DictEnv()
    env = GymWrapper(raw)
    assert sorted(env.observation_spec.keys()) == ["flags", "mode", "observation"]
    # as TorchRL: a Dict action space's entries are the env's action keys, at the root
    assert sorted(env.full_action_spec.keys()) == ["gear", "steer"]
    assert sorted(env.action_keys) == ["gear", "steer"]
    env.set_seed(0)
    torch.manual_seed(0)
    rollout = env.rollout(4)
    assert rollout.shape == torch.Size([4])
    assert rollout["next", "truncated"][-1].item()
    last = raw.actions[-1]
    assert raw.action_space.contains(last)
    assert last["gear"] == int(rollout[-1]["gear"].argmax())
    assert rollout[-1]["next", "reward"].item() == float(last["gear"])
    np.testing.assert_array_equal(rollout[-1]["next", "observation"].numpy(), raw.last["state"])
    assert rollout[-1]["next", "mode"].argmax().item() == raw.last["mode"]
    check_env_specs(env)


def test_convert_actions_to_numpy_false():
    raw = CountEnv(end=10)
    env = GymWrapper(raw, categorical_action_encoding=True, convert_actions_to_numpy=False)
    env.rollout(2, actions=[torch.tensor(1), torch.tensor(0)])
    assert all(isinstance(a, torch.Tensor) for a in raw.actions)
    raw2 = CountEnv(end=10)
    GymWrapper(raw2).rollout(1, actions=[torch.tensor([0, 1])])
    assert type(raw2.actions[0]) is int and raw2.actions[0] == 1  # a Python int, as TorchRL passes


def test_scalar_box_is_a_one_element_entry():
    # as TorchRL: a scalar Box gives a (1,) spec; the action reaches the env with the space's own shape ()
    raw = SpaceEnv(S.Box(-1.0, 1.0, (), np.float32), S.Box(-2.0, 2.0, (), np.float32))
    env = GymWrapper(raw)
    assert env.observation_spec["observation"].shape == torch.Size([1])
    assert env.action_spec.shape == torch.Size([1])
    env.set_seed(0)
    td = env.rollout(2, actions=[torch.tensor([0.5]), torch.tensor([-1.5])])
    assert td["next", "observation"].shape == torch.Size([2, 1])
    assert [a.shape for a in raw.actions] == [(), ()]
    assert [float(a) for a in raw.actions] == [0.5, -1.5]
    assert all(raw.action_space.contains(a) for a in raw.actions)


def test_discrete_actions_are_python_ints_with_start():
    raw = SpaceEnv(S.Box(-1.0, 1.0, (2,), np.float32), S.Discrete(4, start=3))
    env = GymWrapper(raw)
    env.rollout(2, actions=[torch.tensor([0, 1, 0, 0]), torch.tensor([0, 0, 0, 1])])
    raw_cat = SpaceEnv(S.Box(-1.0, 1.0, (2,), np.float32), S.Discrete(4, start=3))
    GymWrapper(raw_cat, categorical_action_encoding=True).rollout(2, actions=[torch.tensor(1), torch.tensor(3)])
    for acts in (raw.actions, raw_cat.actions):
        assert [type(a) for a in acts] == [int, int]
        assert acts == [4, 6]  # index + start


def test_dict_action_keys_at_root():
    raw = SpaceEnv(S.Box(-1.0, 1.0, (2,), np.float32), S.Dict({"move": S.Box(-1.0, 1.0, (2,), np.float32), "pick": S.Discrete(3)}))
    env = GymWrapper(raw, categorical_action_encoding=True)
    assert sorted(env.action_keys) == ["move", "pick"]
    assert "action" not in env.full_action_spec.keys()
    td = env.reset()
    td["move"] = torch.tensor([0.5, -0.5])
    td["pick"] = torch.tensor(2)
    out = env.step(td)
    assert out["next", "reward"].item() == 1.0
    np.testing.assert_array_equal(raw.actions[-1]["move"], np.array([0.5, -0.5], np.float32))
    assert raw.actions[-1]["pick"] == 2
    with pytest.raises(KeyError, match="pick"):
        env.step(td.exclude("pick"))


def test_rebuild_with_kwargs():
    env = GymEnv("CartPole-v1")
    assert "pixels" not in env.observation_spec.keys()
    assert env.rebuild_with_kwargs(from_pixels=True) is None  # in place, as TorchRL
    assert "pixels" in env.observation_spec.keys()
    assert env.rollout(2)["next", "pixels"].shape == torch.Size([2, 400, 600, 3])


def test_gym_like_hooks():
    env = GymWrapper(CountEnv())
    assert isinstance(env, GymLikeEnv)
    assert env.read_done(terminated=True, truncated=False) == (True, False, True, True)
    assert env.read_done(done=True, truncated=True) == (False, True, True, True)
    terminated, truncated, done, stop = env.read_done(terminated=np.array([True, False]), truncated=np.array([False, False]))
    assert done.tolist() == [True, False] and stop
    with pytest.raises(ValueError, match="at least one of"):
        env.read_done()
    obs, reward, terminated, truncated, done, info = GymLikeEnv._output_transform(env, (1, 2.0, True, {"TimeLimit.truncated": True}))
    assert terminated is None and truncated and done
    assert env.fast_encoding() is env and env.validated


def test_run_type_checks_option():
    env = GymEnv("CartPole-v1", run_type_checks=True)
    assert env.run_type_checks
    env.rollout(5)


def test_construction_errors():
    with pytest.raises(TypeError, match="expected a gymnasium or gym environment"):
        GymWrapper(object())
    with pytest.raises(TypeError, match="unexpected keyword argument"):
        GymWrapper(CountEnv(), from_pixel=True)
    with pytest.raises(TypeError, match="env_name must be a registered environment id"):
        GymEnv(3)
    with pytest.raises(ValueError, match="given for a single"):
        GymWrapper(CountEnv(), batch_size=[2])
    with pytest.raises(gymnasium.error.Error) as info:
        GymEnv("CartPol-v1")
    assert any("CartPole-v1" in note for note in getattr(info.value, "__notes__", []))


def test_wrong_observation_shape_message():
    class Liar(CountEnv):
        def step(self, action):
            obs, *rest = super().step(action)
            return np.zeros(3), *rest

    env = GymWrapper(Liar())
    with pytest.raises(ValueError, match=r"observation of shape \(3,\)"):
        env.rand_step(env.reset())


# ----------------------------------------------------------------------------------------------- backends
def test_set_gym_backend():
    with set_gym_backend("gymnasium"):
        assert gym_backend() is gymnasium
        assert gym_backend("spaces") is gymnasium.spaces
    with set_gym_backend(gymnasium):
        assert GymEnv("Pendulum-v1").lib is gymnasium

    @set_gym_backend("gymnasium")
    def name():
        return gym_backend().__name__

    assert name() == "gymnasium"
    setter = set_gym_backend(gymnasium)
    assert setter.backend is gymnasium and setter.clone().backend is gymnasium
    setter.set()
    assert gym_backend() is gymnasium
    with pytest.raises(ValueError, match="unknown backend"):
        set_gym_backend("pygame")
    with pytest.raises(TypeError, match="expected a module"):
        set_gym_backend(3)
    with pytest.raises(ValueError, match="expected the gymnasium or gym module"):
        set_gym_backend(np)


# ----------------------------------------------------------------------------------------------- MuJoCo
def test_half_cheetah(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    monkeypatch.chdir(tmp_path)
    env = GymEnv("HalfCheetah-v5")
    assert env.observation_spec["observation"].dtype == torch.float64
    assert env.observation_spec["observation"].shape == torch.Size([17])
    assert env.action_spec.shape == torch.Size([6]) and env.action_spec.dtype == torch.float32
    env.set_seed(0)
    torch.manual_seed(0)
    rollout = env.rollout(20)
    _replay(gymnasium.make("HalfCheetah-v5"), rollout, seed=0)
    check_env_specs(env)


# ----------------------------------------------------------------------------------------- availability
def test_has_flags_match_installed_libraries():
    import importlib.util

    from torchrl.envs.libs import _gym_utils, gym as gym_module

    def installed(name):
        return importlib.util.find_spec(name) is not None

    assert gym_module._has_gym is (installed("gymnasium") or installed("gym"))
    assert _gym_utils._has_gymnasium is installed("gymnasium") and _gym_utils._has_gym is installed("gym")
    for flag, lib in [("_has_mo", "mo_gymnasium"), ("_has_sb3", "stable_baselines3"), ("_has_minigrid", "minigrid"),
                      ("_has_isaaclab", "isaaclab")]:
        assert getattr(gym_module, flag) is installed(lib), flag


@pytest.mark.parametrize("index", [torch.tensor(1), torch.tensor([1])], ids=["scalar", "trailing-1"])
def test_integer_index_action_for_one_hot_spec(index):
    # an argmax policy writes integer indices where the spec is one-hot: the index is the action taken (TorchRL
    # accepts the tensor too, but turns every index into the first action; see docs/COMPATIBILITY.md)
    def run(action):
        env = GymEnv("CartPole-v1")
        env.set_seed(0)
        return env.rollout(5, lambda td: td.set("action", action.clone()), break_when_any_done=False)

    by_index, one_hot = run(index), run(torch.tensor([0, 1]))
    assert torch.equal(by_index["next", "observation"], one_hot["next", "observation"])
    assert by_index["action"].shape == (5, *index.shape)  # stored as the policy wrote it
    with pytest.raises(ValueError, match=r"action 'action' has shape \(3,\), expected \(2,\)"):
        env = GymEnv("CartPole-v1")
        env.step(env.reset().set("action", torch.tensor([0, 1, 0])))


def test_integer_index_actions_in_a_vector_env():
    env = GymEnv("CartPole-v1", num_envs=2, vectorization_mode="sync")
    env.set_seed(0)
    td = env.step(env.reset().set("action", torch.tensor([1, 0])))
    env2 = GymEnv("CartPole-v1", num_envs=2, vectorization_mode="sync")
    env2.set_seed(0)
    ref = env2.step(env2.reset().set("action", torch.tensor([[0, 1], [1, 0]])))
    assert torch.equal(td["next", "observation"], ref["next", "observation"])
