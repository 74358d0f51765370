"""Gymnasium wrappers sweep: GymEnv/GymWrapper spec conversion for every gymnasium space (custom envs below),
actions handed to the gym env, GymEnv options (frame_skip, num_envs, device, kwargs to ``make``), seeding,
reset options, info readers, TimeLimit truncation, errors, close.

Not repeated here: envs_api.py's Pendulum/CartPole specs, rollouts and set_seed, env_checks.py's bad actions.
The custom envs sample their observations from their own (seeded) observation space, so their values are
deterministic under both packages; seeded CartPole/Pendulum/MountainCar runs are compared value by value.
"""
import gymnasium
import numpy as np
import torch
from gymnasium import spaces

import parity
from torchrl.data import Composite, NonTensor, Unbounded
from torchrl.envs import GymEnv, GymWrapper, default_info_dict_reader

A = parity.attempt
S = parity.structure
F32 = np.float32


class SpacesEnv(gymnasium.Env):
    """Observations drawn from ``obs_space`` (seeded by ``reset(seed=...)``); reward = step count; terminated
    after ``horizon`` steps; ``info`` from ``info_fn(t)``; the last action it received is kept."""

    metadata = {"render_modes": []}

    def __init__(self, obs_space=None, act_space=None, horizon=4, info_fn=None, reward_fn=float):
        self.observation_space = obs_space if obs_space is not None else spaces.Box(-1, 1, (3,), F32)
        self.action_space = act_space if act_space is not None else spaces.Box(-1, 1, (1,), F32)
        self.observation_space.seed(0)
        self.action_space.seed(0)
        self.horizon = horizon
        self.info_fn = info_fn or (lambda t: {})
        self.reward_fn = reward_fn
        self.t = 0
        self.actions = []
        self.reset_calls = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self.reset_calls.append((seed, options))
        self.t = 0
        return self.observation_space.sample(), self.info_fn(0)

    def step(self, action):
        self.actions.append(action)
        self.t += 1
        return self.observation_space.sample(), self.reward_fn(self.t), self.t >= self.horizon, False, self.info_fn(self.t)


gymnasium.register("ParitySpaces-v0", entry_point=SpacesEnv, disable_env_checker=True)
gymnasium.register("ParitySpacesLimited-v0", entry_point=SpacesEnv, max_episode_steps=3, disable_env_checker=True)


def _np(x):
    """A numpy/python action as the gym env received it: type, dtype and values."""
    if isinstance(x, dict):
        return {k: _np(v) for k, v in x.items()}
    if isinstance(x, tuple):
        return ["tuple", [_np(v) for v in x]]
    if isinstance(x, np.ndarray):
        return ["ndarray", str(x.dtype), x.tolist()]
    if isinstance(x, torch.Tensor):
        return ["Tensor", str(x.dtype), x.tolist()]
    return [type(x).__name__, x if isinstance(x, (int, float, bool, str)) else repr(x)]


def _keys(td):
    return sorted(td.keys(True, True), key=str)


def _specs(env):
    return {"obs": env.observation_spec, "action": env.action_spec, "reward": env.reward_spec, "done": env.done_spec,
            "batch_size": env.batch_size}


def _wrap(obs=None, act=None, **kwargs):
    return GymWrapper(SpacesEnv(obs, act), **kwargs)


def _seeded(env, steps, action):
    """specs + a seeded rollout with a fixed action."""
    env.set_seed(0)
    return env.rollout(steps, lambda td: td.set("action", action.clone()), break_when_any_done=False)


# ---------------------------------------------------------------------------------------------- Box
def scenario_box_float32_bounded():
    env = _wrap(spaces.Box(-2.0, 3.0, (3,), F32), spaces.Box(-1.0, 1.0, (2,), F32))
    return [_specs(env), _seeded(env, 3, torch.tensor([0.5, -0.25]))]


def scenario_box_float64():
    env = _wrap(spaces.Box(-1.0, 1.0, (2,), np.float64), spaces.Box(-1.0, 1.0, (1,), np.float64))
    env2 = _wrap(spaces.Box(-1.0, 1.0, (2,), np.float64))
    return [_specs(env), _seeded(env, 2, torch.tensor([0.5], dtype=torch.float64)), _seeded(env2, 2, torch.tensor([0.5]))]


def scenario_box_unbounded_and_half_bounded():
    obs = spaces.Dict({"free": spaces.Box(-np.inf, np.inf, (2,), F32), "low": spaces.Box(0.0, np.inf, (2,), F32),
                       "high": spaces.Box(-np.inf, 1.0, (2,), F32),
                       "mixed": spaces.Box(np.array([-1.0, -np.inf], F32), np.array([1.0, 2.0], F32))})
    env = _wrap(obs, spaces.Box(-np.inf, np.inf, (1,), F32))
    return [_specs(env), S(_seeded(env, 2, torch.zeros(1)))]


def scenario_box_per_element_bounds():
    env = _wrap(spaces.Box(np.array([-1.0, 0.0, 2.0], F32), np.array([1.0, 5.0, 3.0], F32)),
                spaces.Box(np.array([-1.0, -2.0], F32), np.array([1.0, 2.0], F32)))
    return [_specs(env), _seeded(env, 2, torch.tensor([0.0, 1.5]))]


def scenario_box_int_dtypes():
    obs = spaces.Dict({"img": spaces.Box(0, 255, (4, 4, 3), np.uint8), "i64": spaces.Box(-5, 5, (2,), np.int64),
                       "i32": spaces.Box(0, 10, (3,), np.int32)})
    env = _wrap(obs, spaces.Box(-3, 3, (2,), np.int64))
    return [_specs(env), _seeded(env, 2, torch.tensor([1, -2]))]


def scenario_box_shapes():
    obs = spaces.Dict({"scalar": spaces.Box(-1.0, 1.0, (), F32), "matrix": spaces.Box(-1.0, 1.0, (2, 3), F32),
                       "cube": spaces.Box(-1.0, 1.0, (2, 1, 2), F32)})
    env = _wrap(obs, spaces.Box(-1.0, 1.0, (2, 2), F32))
    return [_specs(env), _seeded(env, 2, torch.full((2, 2), 0.5))]


def scenario_box_action_received():
    inner = SpacesEnv(act_space=spaces.Box(-1.0, 1.0, (2,), F32))
    env = GymWrapper(inner)
    _seeded(env, 2, torch.tensor([0.5, -0.5]))
    return [_np(a) for a in inner.actions]


# ---------------------------------------------------------------------------------------------- Discrete & co
def _discrete_env(act, categorical, obs=None):
    inner = SpacesEnv(obs or spaces.Discrete(5), act)
    return inner, GymWrapper(inner, categorical_action_encoding=categorical)


def scenario_discrete_start_obs():
    out = {}
    for categorical in (False, True):
        inner, env = _discrete_env(spaces.Discrete(3), categorical, obs=spaces.Discrete(5, start=-2))
        out[str(categorical)] = [env.observation_spec, A(lambda: _seeded(env, 3, torch.tensor(0) if categorical else
                                                                         torch.tensor([True, False, False])))]
    return out


def scenario_discrete_onehot():
    inner, env = _discrete_env(spaces.Discrete(3), False)
    r = _seeded(env, 3, torch.tensor([False, True, False]))
    return [_specs(env), r, [_np(a) for a in inner.actions]]


def scenario_discrete_categorical():
    inner, env = _discrete_env(spaces.Discrete(3), True)
    r = _seeded(env, 3, torch.tensor(2))
    return [_specs(env), r, [_np(a) for a in inner.actions]]


def scenario_discrete_start_action():
    out = {}
    for categorical in (False, True):
        inner, env = _discrete_env(spaces.Discrete(4, start=3), categorical)
        action = torch.tensor(1) if categorical else torch.tensor([False, True, False, False])
        out[str(categorical)] = [env.action_spec, A(lambda: S(_seeded(env, 2, action))), [_np(a) for a in inner.actions]]
    return out


def scenario_multi_discrete():
    out = {}
    for categorical in (False, True):
        inner = SpacesEnv(spaces.MultiDiscrete([3, 4]), spaces.MultiDiscrete([2, 3]))
        env = GymWrapper(inner, categorical_action_encoding=categorical)
        action = torch.tensor([1, 2]) if categorical else torch.tensor([False, True, False, False, True])
        out[str(categorical)] = [_specs(env), A(lambda: _seeded(env, 2, action)), [_np(a) for a in inner.actions]]
    return out


def scenario_multi_discrete_nested_and_start():
    out = {}
    for categorical in (False, True):
        obs = spaces.Dict({"grid": spaces.MultiDiscrete([[2, 3], [4, 5]]),
                           "shifted": spaces.MultiDiscrete([3, 3], start=[1, -1])})
        env = GymWrapper(SpacesEnv(obs), categorical_action_encoding=categorical)
        out[str(categorical)] = [env.observation_spec, A(lambda: _seeded(env, 2, torch.zeros(1)))]
    return out


def scenario_multi_binary_grid():
    return A(lambda: _seeded(_wrap(spaces.MultiBinary([2, 3])), 2, torch.zeros(1)))


def scenario_multi_binary():
    obs = spaces.Dict({"flat": spaces.MultiBinary(4), "other": spaces.MultiBinary(2)})
    inner = SpacesEnv(obs, spaces.MultiBinary(3))
    env = GymWrapper(inner)
    r = _seeded(env, 2, torch.tensor([1, 0, 1], dtype=torch.int8))
    return [_specs(env), r, [_np(a) for a in inner.actions]]


# ---------------------------------------------------------------------------------------------- Dict / Tuple / Text
def scenario_dict_nested():
    obs = spaces.Dict({"pos": spaces.Box(-1.0, 1.0, (2,), F32),
                       "inner": spaces.Dict({"n": spaces.Discrete(3), "v": spaces.Box(0.0, 1.0, (1,), np.float64)})})
    env = _wrap(obs)
    return [_specs(env), _seeded(env, 2, torch.zeros(1))]


def scenario_dict_state_key():
    obs = spaces.Dict({"state": spaces.Box(-1.0, 1.0, (2,), F32), "other": spaces.Discrete(2)})
    env = _wrap(obs)
    return [env.observation_spec, _seeded(env, 1, torch.zeros(1))]


def scenario_dict_action():
    act = spaces.Dict({"move": spaces.Box(-1.0, 1.0, (2,), F32), "pick": spaces.Discrete(3)})
    out = {}
    for categorical in (False, True):
        inner = SpacesEnv(act_space=act)
        env = GymWrapper(inner, categorical_action_encoding=categorical)
        spec = env.full_action_spec
        env.set_seed(0)
        td = env.reset()
        td["move"] = torch.tensor([0.5, -0.25])
        td["pick"] = torch.tensor(2) if categorical else torch.tensor([False, False, True])
        step = A(lambda: env.step(td))
        received = [{"move": a["move"].tolist(), "pick": int(a["pick"])} for a in inner.actions]
        out[str(categorical)] = [spec, env.action_keys, step, received]
    return out


def _tuple_obs(obs):
    env = A(lambda: _wrap(obs))
    if isinstance(env, Exception):
        return env
    return [env.observation_spec, A(lambda: _seeded(env, 2, torch.zeros(1)))]


def scenario_tuple_obs_same():
    return _tuple_obs(spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), F32), spaces.Box(-1.0, 1.0, (2,), F32))))


def scenario_tuple_obs_mixed():
    return _tuple_obs(spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), F32), spaces.Discrete(3))))


def scenario_text_obs():
    env = A(lambda: _wrap(spaces.Dict({"text": spaces.Text(max_length=5, min_length=2, charset="abc"),
                                       "x": spaces.Box(-1.0, 1.0, (1,), F32)})))
    if isinstance(env, Exception):
        return env
    spec = env.observation_spec["text"]
    r = A(lambda: _seeded(env, 2, torch.zeros(1)))
    text = r if isinstance(r, Exception) else [type(r["next", "text"]).__name__, r["next", "x"]]
    return [isinstance(spec, NonTensor), spec.shape, text]


def scenario_text_spec_class():
    return type(_wrap(spaces.Text(max_length=5, charset="abc")).observation_spec["observation"]).__name__


# ---------------------------------------------------------------------------------------------- rewards, done
def scenario_reward_dtypes():
    out = {}
    for name, fn in {"int": int, "np_float64": np.float64, "np_float32": np.float32, "bool": lambda t: t % 2 == 0}.items():
        env = GymWrapper(SpacesEnv(reward_fn=fn))
        r = _seeded(env, 2, torch.zeros(1))
        out[name] = [env.reward_spec, r["next", "reward"]]
    return out


def scenario_time_limit_truncation():
    env = GymEnv("ParitySpacesLimited-v0", horizon=10)
    r = _seeded(env, 5, torch.zeros(1))
    env2 = GymEnv("ParitySpacesLimited-v0", horizon=3)  # terminated and truncated on the same step
    r2 = _seeded(env2, 3, torch.zeros(1))
    keys = ("done", "terminated", "truncated")
    return [{k: r["next", k].squeeze(-1) for k in keys}, {k: r2["next", k].squeeze(-1) for k in keys}, env.done_spec]


def scenario_mountaincar_time_limit():
    env = GymEnv("MountainCar-v0", max_episode_steps=4, categorical_action_encoding=True)
    r = _seeded(env, 6, torch.tensor(2))
    return [_specs(env), r]


def scenario_mountaincar_onehot_rollout():
    env = GymEnv("MountainCar-v0")
    r = _seeded(env, 5, torch.tensor([False, False, True]))
    return [_keys(r), r]


# ---------------------------------------------------------------------------------------------- options
def scenario_frame_skip_pendulum():
    env = GymEnv("Pendulum-v1", frame_skip=3)
    ref = GymEnv("Pendulum-v1")
    a = _seeded(env, 2, torch.tensor([0.5]))
    b = _seeded(ref, 6, torch.tensor([0.5]))
    return [a, b["next", "observation"][[2, 5]], b["next", "reward"].view(2, 3).sum(-1)]


def scenario_frame_skip_cartpole_done_inside():
    env = GymEnv("CartPole-v1", frame_skip=4)
    r = _seeded(env, 5, torch.tensor([True, False]))
    return [r["next", "reward"].squeeze(-1), r["next", "done"].squeeze(-1), r["next", "observation"]]


def scenario_frame_skip_invalid():
    return [A(lambda: GymEnv("Pendulum-v1", frame_skip=0)), A(lambda: GymEnv("Pendulum-v1", frame_skip=-1))]


def scenario_device_cpu():
    env = GymEnv("Pendulum-v1", device="cpu")
    r = _seeded(env, 2, torch.tensor([0.1]))
    return [str(env.device), str(r.device), str(env.observation_spec.device), r]


def scenario_kwargs_to_make():
    env = GymEnv("Pendulum-v1", g=2.0)
    return [_seeded(env, 3, torch.tensor([0.3])), env.env_name]


def scenario_num_envs_specs():
    env = GymEnv("CartPole-v1", num_envs=2)
    return [_specs(env), env.reset().batch_size]


def scenario_num_envs_rollout():
    env = GymEnv("CartPole-v1", num_envs=2)
    env.set_seed(0)
    r = env.rollout(12, lambda td: td.set("action", torch.tensor([[True, False], [False, True]])),
                    break_when_any_done=False)
    return [r.batch_size, r["next", "done"].squeeze(-1), r["next", "reward"].squeeze(-1), r["next", "observation"]]


def scenario_num_envs_rollout_until_done():
    env = GymEnv("CartPole-v1", num_envs=2)
    env.set_seed(0)
    return env.rollout(12, lambda td: td.set("action", torch.tensor([[True, False], [False, True]])))


def scenario_num_envs_batch_size_arg():
    return A(lambda: GymEnv("CartPole-v1", num_envs=2, batch_size=[2]).batch_size)


def scenario_num_envs_batch_size_mismatch():
    return A(lambda: GymEnv("CartPole-v1", num_envs=2, batch_size=[3]))


def scenario_num_envs_pendulum_values():
    env = GymEnv("Pendulum-v1", num_envs=3)
    r = _seeded(env, 2, torch.full((3, 1), 0.5))
    return [r.batch_size, S(r)]


def scenario_from_pixels_false():
    env = GymEnv("CartPole-v1", from_pixels=False, pixels_only=False)
    return [sorted(env.observation_spec.keys()), _seeded(env, 2, torch.tensor([False, True]))]


# ---------------------------------------------------------------------------------------------- seeding & reset
def scenario_set_seed_return_and_repro():
    a, b = GymEnv("CartPole-v1"), GymEnv("CartPole-v1")
    sa, sb = a.set_seed(7), b.set_seed(7)
    ra = a.rollout(5, lambda td: td.set("action", torch.tensor([False, True])))
    rb = b.rollout(5, lambda td: td.set("action", torch.tensor([False, True])))
    return [type(sa).__name__, sa, sb, bool((ra == rb).all()), ra]


def scenario_set_seed_static():
    env = GymEnv("Pendulum-v1")
    out = env.set_seed(3, static_seed=True)
    return [type(out).__name__, out, env.reset()]


def scenario_set_seed_reseeds_spaces():
    a, b = GymEnv("Pendulum-v1"), GymEnv("Pendulum-v1")
    a.set_seed(0)
    b.set_seed(0)
    ra, rb = a.rollout(3), b.rollout(3)  # random actions from the specs (torch), not from the gym spaces
    return [bool((ra["observation"][0] == rb["observation"][0]).all()), S(ra)]


def scenario_reset_seed_kwarg():
    inner = SpacesEnv()
    env = GymWrapper(inner)
    td = A(lambda: env.reset(seed=5))
    return [td, inner.reset_calls[1:]]


def scenario_reset_options_kwarg():
    inner = SpacesEnv()
    env = GymWrapper(inner)
    td = A(lambda: S(env.reset(options={"level": 2})))
    return [td, [(s, o) for s, o in inner.reset_calls[1:]]]


def scenario_set_seed_inner_calls():
    inner = SpacesEnv()
    env = GymWrapper(inner)
    n0 = len(inner.reset_calls)
    out = env.set_seed(11)
    td = env.reset()
    return [out, n0, inner.reset_calls[n0:], td]


# ---------------------------------------------------------------------------------------------- info readers
def _info(t):
    return {"count": np.int64(t), "vec": np.arange(3, dtype=F32) * t, "flag": np.bool_(t % 2 == 1),
            "_private": np.float64(1.0)}


def _info_nested(t):
    return {**_info(t), "nested": {"x": np.float64(t)}}


def _info_python(t):
    return {"count": t, "ratio": t / 2}


def _info_env(info_fn=_info):
    return GymWrapper(SpacesEnv(info_fn=info_fn))


def scenario_info_default_keys():
    env = _info_env()
    r = _seeded(env, 2, torch.zeros(1))
    return [_keys(r), _keys(env.observation_spec)]


def scenario_info_reader_selected_keys():
    env = _info_env()
    env.set_info_dict_reader(default_info_dict_reader(["count", "vec"]))
    r = _seeded(env, 2, torch.zeros(1))
    return [_keys(r), r.select("count", "vec", ("next", "count"), ("next", "vec"), strict=False),
            _keys(env.observation_spec)]


def scenario_info_reader_inferred_specs():
    env = _info_env()
    env.set_info_dict_reader(default_info_dict_reader(["count", "vec"]))
    return [env.observation_spec["count"], env.observation_spec["vec"]]


def scenario_info_python_numbers():
    env = _info_env(_info_python)
    env.set_info_dict_reader(default_info_dict_reader(["count", "ratio"]))
    return A(lambda: _seeded(env, 2, torch.zeros(1)))


def scenario_info_auto_nested():
    env = _info_env(_info_nested)
    out = A(lambda: env.set_info_dict_reader())
    r = A(lambda: _seeded(env, 2, torch.zeros(1)))
    return [S(out), r]


def scenario_info_reader_with_spec():
    env = _info_env()
    spec = Composite(count=Unbounded((), dtype=torch.int64), flag=Unbounded((), dtype=torch.bool))
    env.set_info_dict_reader(default_info_dict_reader(["count", "flag"], spec=spec))
    r = _seeded(env, 3, torch.zeros(1))
    return [env.observation_spec["count"], env.observation_spec["flag"], r["next", "count"], r["next", "flag"]]


def scenario_info_reader_auto():
    env = _info_env()
    out = env.set_info_dict_reader()
    r = A(lambda: _seeded(env, 2, torch.zeros(1)))
    return [out is env, S(r) if isinstance(r, Exception) else _keys(r),
            _keys(env.observation_spec)]


def scenario_info_auto_register():
    env = _info_env()
    out = A(lambda: env.auto_register_info_dict())
    r = A(lambda: _seeded(env, 2, torch.zeros(1)))
    return [type(out).__name__, r if isinstance(r, Exception) else _keys(r),
            _keys(env.observation_spec)]


def scenario_info_reader_missing_key():
    env = _info_env()
    env.set_info_dict_reader(default_info_dict_reader(["count", "absent"]))
    r = A(lambda: _seeded(env, 2, torch.zeros(1)))
    return [S(r), _keys(env.observation_spec)]


def scenario_info_reader_list_property():
    env = _info_env()
    before = list(env.info_dict_reader)
    env.set_info_dict_reader(default_info_dict_reader(["count"]))
    return [len(before), [type(r).__name__ for r in env.info_dict_reader]]


# ---------------------------------------------------------------------------------------------- wrapper, misc
def scenario_wrapper_of_made_env():
    env = GymWrapper(gymnasium.make("CartPole-v1"))
    ref = GymEnv("CartPole-v1")
    act = torch.tensor([True, False])
    a, b = _seeded(env, 6, act), _seeded(ref, 6, act)
    return [_specs(env), bool((a == b).all()), a, type(env).__name__, type(env.lib).__name__, env.lib.__name__]


def scenario_wrapper_of_vector_env_same_step():
    out = {}
    for mode in ("SAME_STEP", "DISABLED"):
        vec = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync",
                                 vector_kwargs={"autoreset_mode": getattr(gymnasium.vector.AutoresetMode, mode)})
        env = A(lambda v=vec: GymWrapper(v))
        if isinstance(env, Exception):
            out[mode] = env
            continue
        r = _seeded(env, 12, torch.tensor([[True, False], [False, True]]))
        out[mode] = [env.batch_size, r["next", "done"].squeeze(-1), r["next", "reward"].squeeze(-1), r["next", "observation"],
                     r["observation"]]
    return out


def scenario_wrapper_of_vector_env():
    vec = gymnasium.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync")
    env = A(lambda: GymWrapper(vec))
    if isinstance(env, Exception):
        return env
    return [env.batch_size, env.action_spec, S(_seeded(env, 3, torch.tensor([[True, False]] * 2)))]


def scenario_wrapper_bad_env():
    return [A(lambda: GymWrapper(3)), A(lambda: GymWrapper(object()))]


def scenario_wrapper_no_env():
    return A(lambda: GymWrapper(env=None))


def scenario_unknown_env_ids():
    return [A(lambda: GymEnv("NotAnEnvAtAll-v0")), A(lambda: GymEnv("CartPole-v99")), A(lambda: GymEnv("CartPole"))]


def scenario_unknown_kwarg():
    return [A(lambda: GymEnv("Pendulum-v1", not_an_option=3)), A(lambda: GymWrapper(SpacesEnv(), bogus=1))]


def scenario_available_envs():
    envs = GymEnv.available_envs
    envs = list(envs)
    return [all(isinstance(e, str) for e in envs), "CartPole-v1" in envs, "Pendulum-v1" in envs,
            "ParitySpaces-v0" in envs, GymWrapper(SpacesEnv()).available_envs == GymEnv.available_envs]


def scenario_library_name():
    made = gymnasium.make("CartPole-v1")
    return [GymWrapper.get_library_name(made), GymEnv("CartPole-v1").lib.__name__, GymEnv("CartPole-v1").env_name]


def scenario_close_then_step():
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    td = env.reset()
    env.close()
    td["action"] = torch.tensor([True, False])
    out = A(lambda: S(env.step(td)))
    again = A(lambda: S(env.reset()))
    return [out, again, env.is_closed]


def scenario_step_after_done():
    env = GymWrapper(SpacesEnv(horizon=1))
    env.set_seed(0)
    td = env.reset()
    td["action"] = torch.zeros(1)
    first = env.step(td)
    second = A(lambda: S(env.step(td)))
    return [first["next", "done"], second]


def scenario_step_and_maybe_reset_across_done():
    env = GymWrapper(SpacesEnv(horizon=2))
    env.set_seed(0)
    td = env.reset()
    outs = []
    for _ in range(4):
        td["action"] = torch.zeros(1)
        data, td = env.step_and_maybe_reset(td)
        outs.append([data["next", "done"], data["next", "reward"], td["observation"]])
    return outs


def scenario_rebuild_with_kwargs():
    env = GymEnv("Pendulum-v1")
    out = A(lambda: env.rebuild_with_kwargs(g=3.0))
    if isinstance(out, Exception):
        return out
    return [out, _seeded(env, 2, torch.tensor([0.2]))]


def scenario_repr_names():
    return [type(GymEnv("CartPole-v1")).__name__, GymEnv("CartPole-v1").env_name,
            isinstance(GymEnv("CartPole-v1"), GymWrapper)]
