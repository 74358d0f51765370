"""Core env API: reset/step/rollout options, step_and_maybe_reset, random actions, spec views, seeding, batch
sizes, batched envs, step_mdp, terminated_or_truncated, make_composite_from_td, check_env_specs.

A deterministic counting env (``Counter``) is compared value by value; the gym envs are seeded (same
gymnasium on both sides), so their values are compared too; draws of random actions are compared by
structure. Our PendulumEnv's extra "observation" entry is a known deliberate difference: the Pendulum
scenarios leave it out.
"""
import torch
from tensordict import TensorDict

import parity
from torchrl.data import Bounded, Categorical, Composite, OneHot, Unbounded
from torchrl.envs import (
    EnvBase,
    GymEnv,
    ParallelEnv,
    PendulumEnv,
    SerialEnv,
    check_env_specs,
    make_composite_from_td,
    step_mdp,
    terminated_or_truncated,
)

A = parity.attempt
S = parity.structure


class Counter(EnvBase):
    """observation counts the steps since the last reset; reward is the action; done after ``max_count``
    steps (terminated, or truncated with ``truncate=True``). Partial resets follow ``"_reset"``."""

    def __init__(self, max_count=3, batch_size=(), truncate=False, seed_offset=0, **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        bs = self.batch_size
        self.observation_spec = Composite(observation=Unbounded((*bs, 1)), shape=bs)
        self.action_spec = Bounded(-1.0, 1.0, (*bs, 1))
        self.reward_spec = Unbounded((*bs, 1))
        self.max_count = max_count
        self.truncate = truncate
        self.seed_offset = seed_offset
        self.count = torch.zeros(*bs, 1)

    def _reset(self, td):
        if td is not None and "_reset" in td.keys():
            self.count = torch.where(td["_reset"], torch.zeros_like(self.count), self.count)
        else:
            self.count = torch.zeros(*self.batch_size, 1)
        return TensorDict({"observation": self.count.clone()}, self.batch_size)

    def _step(self, td):
        self.count = self.count + 1
        done = self.count >= self.max_count
        out = {"observation": self.count.clone(), "reward": td["action"].clone()}
        if self.truncate:
            out.update(done=done, terminated=torch.zeros_like(done), truncated=done.clone())
        else:
            out.update(done=done, terminated=done.clone())
        return TensorDict(out, self.batch_size)

    def _set_seed(self, seed):
        return None if self.seed_offset is None else seed + self.seed_offset


def _half(td):
    return td.set("action", torch.full((*td.batch_size, 1), 0.5))


def _counter_rollout(**kwargs):
    env = Counter(kwargs.pop("max_count", 3), kwargs.pop("batch_size", ()))
    return A(lambda: env.rollout(policy=_half, **kwargs))


# ---------------------------------------------------------------------------------------------- reset / step
def scenario_counter_reset():
    env = Counter()
    return [env.reset(), env.reset(TensorDict({}, [])), A(lambda: env.reset(TensorDict({"other": torch.ones(2)}, [])))]


def scenario_counter_reset_keeps_input_entries():
    env = Counter()
    return env.reset(TensorDict({"other": torch.ones(2), "observation": torch.full((1,), 7.0)}, []))


def scenario_counter_step():
    env = Counter()
    td = env.reset()
    td["action"] = torch.full((1,), 0.25)
    out = env.step(td)
    return [out, out is td]


def scenario_counter_step_without_action():
    env = Counter()
    return A(lambda: env.step(env.reset()))


def scenario_counter_step_keeps_other_entries():
    env = Counter()
    td = env.reset()
    td["action"] = torch.zeros(1)
    td["extra"] = torch.ones(3)
    return env.step(td)


def scenario_counter_step_twice_without_step_mdp():
    env = Counter()
    td = env.reset()
    td["action"] = torch.zeros(1)
    env.step(td)
    return env.step(td)


def scenario_counter_step_after_done():
    env = Counter(max_count=1)
    td = env.reset()
    td["action"] = torch.zeros(1)
    td = env.step(td)
    return A(lambda: env.step(step_mdp(td)))


def scenario_counter_batched_reset_step():
    env = Counter(batch_size=(3,))
    td = env.reset()
    td["action"] = torch.full((3, 1), 0.5)
    return [td.clone(), env.step(td)]


def scenario_counter_batched_partial_reset():
    env = Counter(max_count=2, batch_size=(3,))
    td = env.reset()
    td["action"] = torch.zeros(3, 1)
    td = step_mdp(env.step(td))
    td = step_mdp(env.step(td))
    reset = env.reset(TensorDict({"_reset": torch.tensor([[True], [False], [True]])}, [3]))
    return [td, reset]


def scenario_counter_batched_reset_wrong_shape():
    env = Counter(batch_size=(3,))
    return [A(lambda: env.reset(TensorDict({}, [2]))), A(lambda: env.reset(TensorDict({}, [])))]


def scenario_counter_step_wrong_batch():
    env = Counter(batch_size=(3,))
    env.reset()
    return A(lambda: env.step(TensorDict({"action": torch.zeros(2, 1)}, [2])))


# ---------------------------------------------------------------------------------------------- rollout options
def scenario_rollout_default():
    return _counter_rollout(max_steps=5)


def scenario_rollout_no_break():
    return _counter_rollout(max_steps=5, break_when_any_done=False)


def scenario_rollout_break_when_all_done():
    return _counter_rollout(max_steps=5, break_when_all_done=True)


def scenario_rollout_both_breaks():
    return _counter_rollout(max_steps=5, break_when_any_done=True, break_when_all_done=True)


def scenario_rollout_no_break_short():
    return _counter_rollout(max_steps=2, break_when_any_done=False)


def scenario_rollout_zero_steps():
    return _counter_rollout(max_steps=0)


def scenario_rollout_one_step():
    return _counter_rollout(max_steps=1)


def scenario_rollout_auto_reset_false_without_td():
    return _counter_rollout(max_steps=3, auto_reset=False)


def scenario_rollout_auto_reset_false_with_td():
    env = Counter()
    td = env.reset()
    return A(lambda: env.rollout(3, _half, auto_reset=False, tensordict=td))


def scenario_rollout_tensordict_without_auto_reset_flag():
    env = Counter()
    td = env.reset()
    return A(lambda: env.rollout(2, _half, tensordict=td))


def scenario_rollout_tensordict_midway():
    env = Counter(max_count=5)
    td = env.reset()
    td["action"] = torch.zeros(1)
    td = step_mdp(env.step(td))
    return A(lambda: env.rollout(3, _half, auto_reset=False, tensordict=td, break_when_any_done=False))


def scenario_rollout_return_contiguous_false():
    r = _counter_rollout(max_steps=3, return_contiguous=False)
    return [type(r).__name__, r]


def scenario_rollout_return_contiguous_true():
    r = _counter_rollout(max_steps=3, return_contiguous=True)
    return [type(r).__name__, r]


def scenario_rollout_return_contiguous_none():
    r = _counter_rollout(max_steps=3, return_contiguous=None)
    return [type(r).__name__, r]


def scenario_rollout_set_truncated():
    return _counter_rollout(max_count=10, max_steps=3, set_truncated=True)


def scenario_rollout_set_truncated_batched():
    return _counter_rollout(max_count=10, max_steps=3, set_truncated=True, batch_size=(2,))


def scenario_rollout_set_truncated_done_before():
    return _counter_rollout(max_count=2, max_steps=3, set_truncated=True)


def scenario_rollout_set_truncated_no_break():
    return _counter_rollout(max_count=2, max_steps=3, set_truncated=True, break_when_any_done=False)


def scenario_rollout_set_truncated_without_truncated_key():
    env = Counter(max_count=10)
    return A(lambda: env.rollout(3, _half, set_truncated=True))


def scenario_rollout_truncating_env():
    env = Counter(max_count=2, truncate=True)
    return A(lambda: env.rollout(4, _half, break_when_any_done=False))


def scenario_rollout_batched_no_break():
    return _counter_rollout(max_count=2, max_steps=4, batch_size=(2,), break_when_any_done=False)


def scenario_rollout_batched_break_any():
    return _counter_rollout(max_count=2, max_steps=4, batch_size=(2,))


def scenario_rollout_batched_break_all():
    return _counter_rollout(max_count=2, max_steps=4, batch_size=(2,), break_when_all_done=True)


def scenario_rollout_batched_2d():
    return _counter_rollout(max_count=2, max_steps=3, batch_size=(2, 2), break_when_any_done=False)


def scenario_rollout_random_policy():
    env = Counter(max_count=10)
    r = env.rollout(4)
    return [S(r), bool((r["action"].abs() <= 1).all())]


def scenario_rollout_callback():
    env = Counter(max_count=10)
    seen = []
    r = env.rollout(3, _half, callback=lambda e, td: seen.append(td["observation"].clone()))
    return [r.batch_size, seen]


def scenario_rollout_out_argument():
    env = Counter(max_count=10)
    return A(lambda: env.rollout(2, _half, out=None))


def scenario_rollout_actions_argument():
    env = Counter(max_count=10)
    return A(lambda: env.rollout(3, actions=[torch.full((1,), 0.1), torch.full((1,), 0.2), torch.full((1,), 0.3)]))


def scenario_rollout_policy_and_actions():
    env = Counter(max_count=10)
    return A(lambda: env.rollout(2, _half, actions=[torch.zeros(1), torch.zeros(1)]))


def scenario_rollout_trust_policy():
    env = Counter(max_count=10)
    return A(lambda: env.rollout(2, _half, trust_policy=True))


def scenario_rollout_policy_writing_extra_keys():
    env = Counter(max_count=10)

    def policy(td):
        td["action"] = torch.full((1,), 0.5)
        td["logits"] = torch.ones(2)
        return td

    return A(lambda: env.rollout(2, policy))


def scenario_rollout_policy_returning_new_td():
    env = Counter(max_count=10)
    return A(lambda: env.rollout(2, lambda td: TensorDict({"action": torch.full((1,), 0.5)}, [])))


def scenario_rollout_bad_max_steps():
    env = Counter()
    return [A(lambda: env.rollout(-1, _half)), A(lambda: env.rollout(2.5, _half))]


def scenario_rollout_storing_device():
    env = Counter(max_count=10)
    return A(lambda: env.rollout(2, _half, storing_device="cpu"))


# ---------------------------------------------------------------------------------------------- step_and_maybe_reset
def scenario_step_and_maybe_reset():
    env = Counter(max_count=2)
    td = env.reset()
    outs = []
    for _ in range(3):
        _half(td)
        data, td = env.step_and_maybe_reset(td)
        outs.append([data, td])
    return outs


def scenario_step_and_maybe_reset_batched():
    env = Counter(max_count=2, batch_size=(2,))
    td = env.reset()
    outs = []
    for _ in range(3):
        _half(td)
        data, td = env.step_and_maybe_reset(td)
        outs.append([data, td])
    return outs


def scenario_maybe_reset():
    env = Counter(max_count=1, batch_size=(2,))
    td = env.reset()
    _half(td)
    nxt = step_mdp(env.step(td))
    return [A(lambda: env.maybe_reset(nxt)), A(lambda: bool(env.any_done(nxt))), nxt]


def scenario_bool_return_types():
    env = Counter(max_count=1)
    td = env.reset()
    _half(td)
    nxt = step_mdp(env.step(td))
    return [type(env.any_done(nxt)).__name__, type(terminated_or_truncated(_done_data())).__name__]


# ---------------------------------------------------------------------------------------------- random actions
def scenario_rand_action():
    env = Counter()
    td = env.reset()
    out = env.rand_action(td)
    return [S(out), out is td, bool(env.action_spec.is_in(out["action"])), S(env.rand_action())]


def scenario_rand_action_batched():
    env = Counter(batch_size=(3,))
    return [S(env.rand_action()), S(env.rand_action(env.reset()))]


def scenario_rand_step():
    env = Counter()
    td = env.reset()
    out = env.rand_step(td)
    return [S(out), out["next", "observation"], out["next", "done"]]


def scenario_rand_step_without_td():
    env = Counter()
    env.reset()
    return A(lambda: S(env.rand_step()))


# ---------------------------------------------------------------------------------------------- fake_tensordict / specs
def scenario_fake_tensordict():
    return Counter().fake_tensordict()


def scenario_fake_tensordict_batched():
    return Counter(batch_size=(2,)).fake_tensordict()


def _spec_views(env):
    return {
        "full_observation_spec": env.full_observation_spec, "full_action_spec": env.full_action_spec,
        "full_reward_spec": env.full_reward_spec, "full_done_spec": env.full_done_spec,
        "full_state_spec": env.full_state_spec, "observation_spec": env.observation_spec,
        "action_spec": env.action_spec, "reward_spec": env.reward_spec, "done_spec": env.done_spec,
        "state_spec": env.state_spec,
    }


def _keys(env):
    return {
        "action_keys": env.action_keys, "reward_keys": env.reward_keys, "done_keys": env.done_keys,
        "observation_keys": env.observation_keys, "state_keys": env.state_keys, "reset_keys": env.reset_keys,
        "action_key": env.action_key, "reward_key": env.reward_key, "done_key": A(lambda: env.done_key),
        "done_keys_groups": env.done_keys_groups,
    }


def scenario_counter_spec_views():
    return _spec_views(Counter())


def scenario_counter_keys():
    return _keys(Counter())


def scenario_counter_batched_spec_views():
    return _spec_views(Counter(batch_size=(2,)))


def scenario_counter_input_output_specs():
    env = Counter()
    return [env.input_spec, env.output_spec, sorted(env.input_spec.keys()), sorted(env.output_spec.keys())]


def scenario_counter_unbatched_specs():
    env = Counter(batch_size=(2,))
    return [A(lambda: env.full_action_spec_unbatched), A(lambda: env.observation_spec_unbatched),
            A(lambda: env.full_done_spec_unbatched), A(lambda: env.reward_spec_unbatched)]


def scenario_counter_attributes():
    env = Counter(batch_size=(2, 3))
    return [env.batch_size, env.batch_dims, env.ndim, env.ndimension(), env.numel(), env.shape, env.device,
            env.batch_locked, env.run_type_checks, A(lambda: env.is_spec_locked)]


def scenario_counter_specs_property():
    return A(lambda: Counter().specs)


def scenario_spec_setters_wrong_shape():
    env = Counter(batch_size=(2,))
    return [A(lambda: setattr(env, "action_spec", Bounded(-1.0, 1.0, (3, 1)))),
            A(lambda: setattr(env, "observation_spec", Composite(o=Unbounded((3, 1)), shape=(3,)))),
            A(lambda: setattr(env, "observation_spec", Unbounded((2, 1)))),
            A(lambda: setattr(env, "reward_spec", Unbounded((2, 1)))),
            A(lambda: setattr(env, "done_spec", Categorical(2, (2, 1), dtype=torch.bool)))]


def scenario_spec_setters_leaf_wrapping():
    env = Counter()
    env.action_spec = OneHot(4)
    env.reward_spec = Unbounded((2,))
    env.done_spec = Categorical(2, (1,), dtype=torch.bool)
    return [_keys(env), env.full_action_spec, env.full_reward_spec, env.full_done_spec]


def scenario_spec_setter_composite_action():
    env = Counter()
    env.action_spec = Composite(act=Bounded(-1.0, 1.0, (2,)), other=Unbounded(1))
    return [_keys(env), A(lambda: env.action_spec)]


def scenario_state_spec_setter():
    env = Counter()
    env.state_spec = Composite(hidden=Unbounded(4))
    return [env.state_keys, env.full_state_spec, env.input_spec, env.fake_tensordict()]


def scenario_batch_size_setter():
    env = Counter()
    out = [A(lambda: setattr(env, "batch_size", (2,)))]
    out.append(env.batch_size)
    return out


# ---------------------------------------------------------------------------------------------- seeding
def scenario_set_seed_returns():
    env = Counter()
    return [env.set_seed(0), env.set_seed(5), env.set_seed(None) is None or isinstance(env.set_seed(None), int),
            A(lambda: env.set_seed(3, static_seed=True))]


def scenario_set_seed_returns_none_from_env():
    env = Counter(seed_offset=None)
    return [A(lambda: env.set_seed(0)), A(lambda: env.set_seed(7, static_seed=True))]


def scenario_pendulum_set_seed():
    env = PendulumEnv()
    s = env.set_seed(0)
    a = env.reset().exclude("observation")
    env.set_seed(0)
    b = env.reset().exclude("observation")
    return [type(s).__name__, bool((a == b).all()), S(a)]


def scenario_gym_pendulum_set_seed():
    env = GymEnv("Pendulum-v1")
    s = env.set_seed(0)
    return [type(s).__name__, env.reset(), env.reset()]


def scenario_gym_cartpole_set_seed():
    env = GymEnv("CartPole-v1")
    s = env.set_seed(1)
    return [type(s).__name__, env.reset()]


# ---------------------------------------------------------------------------------------------- PendulumEnv
def _no_obs(td):
    return td.exclude("observation", ("next", "observation"))


def scenario_pendulum_specs():
    env = PendulumEnv()
    obs = {k: v for k, v in env.full_observation_spec.items() if k != "observation"}
    return [obs, env.full_action_spec, env.full_reward_spec, env.full_done_spec, env.full_state_spec,
            env.batch_size, env.action_keys, env.done_keys, env.reward_keys]


def scenario_pendulum_rollout():
    env = PendulumEnv()
    env.set_seed(0)
    r = env.rollout(5, lambda td: td.set("action", torch.full((1,), 0.5)))
    return S(_no_obs(r))


def scenario_pendulum_deterministic_step():
    env = PendulumEnv()
    td = env.reset()
    td["th"] = torch.tensor(1.0)
    td["thdot"] = torch.tensor(0.5)
    td["action"] = torch.full((1,), 0.3)
    return _no_obs(env.step(td))


def scenario_pendulum_rollout_no_break_batch_locked():
    env = PendulumEnv()
    return [env.batch_locked, A(lambda: S(_no_obs(env.rollout(3, break_when_any_done=False))))]


def scenario_pendulum_rand_step():
    env = PendulumEnv()
    return S(_no_obs(env.rand_step(env.reset())))


def scenario_pendulum_fake_tensordict():
    return S(_no_obs(PendulumEnv().fake_tensordict()))


# ---------------------------------------------------------------------------------------------- gym envs
def _pendulum_policy(td):
    return td.set("action", torch.full((*td.batch_size, 1), 0.5))


def scenario_gym_pendulum_specs():
    env = GymEnv("Pendulum-v1")
    return [_spec_views(env), _keys(env), env.batch_size]


def scenario_gym_pendulum_rollout():
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    return env.rollout(4, _pendulum_policy)


def scenario_gym_pendulum_rollout_max_episode():
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    r = env.rollout(205, _pendulum_policy)
    return [r.batch_size, r["next", "truncated"][-3:], r["next", "done"][-3:], r["next", "terminated"].any()]


def scenario_gym_pendulum_rollout_set_truncated():
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    r = env.rollout(3, _pendulum_policy, set_truncated=True)
    return [r["next", "truncated"], r["next", "done"]]


def scenario_gym_pendulum_step_and_maybe_reset():
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    td = env.reset()
    _pendulum_policy(td)
    data, nxt = env.step_and_maybe_reset(td)
    return [data, nxt]


def scenario_gym_pendulum_rand_step():
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    return S(env.rand_step(env.reset()))


def scenario_gym_cartpole_specs():
    env = GymEnv("CartPole-v1")
    return [_spec_views(env), _keys(env)]


def _left(td):
    a = torch.zeros((*td.batch_size, 2), dtype=torch.bool)
    a[..., 0] = True
    return td.set("action", a)


def scenario_gym_cartpole_rollout():
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    return env.rollout(20, _left)


def scenario_gym_cartpole_rollout_no_break():
    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    r = env.rollout(15, _left, break_when_any_done=False)
    return [r.batch_size, r["next", "done"].squeeze(-1), r["next", "terminated"].squeeze(-1), r["next", "reward"].sum()]


def scenario_gym_cartpole_categorical():
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    env.set_seed(0)
    return [env.action_spec, env.rollout(3, lambda td: td.set("action", torch.tensor(1)))]


def scenario_gym_cartpole_rand_action():
    env = GymEnv("CartPole-v1")
    td = env.rand_action(env.reset())
    return [S(td), bool(env.action_spec.is_in(td["action"]))]


def scenario_gym_cartpole_fake_tensordict():
    return GymEnv("CartPole-v1").fake_tensordict()


def scenario_gym_batch_size():
    return [A(lambda: GymEnv("Pendulum-v1", batch_size=[2])), A(lambda: GymEnv("Pendulum-v1", batch_size=[]).batch_size)]


def scenario_gym_check_env_specs():
    return [A(lambda: check_env_specs(GymEnv("Pendulum-v1"))), A(lambda: check_env_specs(GymEnv("CartPole-v1")))]


# ---------------------------------------------------------------------------------------------- batched envs
def _counter_factory():
    return Counter(max_count=2)


def scenario_serial_env_basics():
    env = SerialEnv(2, _counter_factory)
    out = [env.batch_size, env.num_workers, _spec_views(env), _keys(env), env.reset()]
    env.close()
    return out


def scenario_serial_env_rollout():
    env = SerialEnv(2, _counter_factory)
    r = env.rollout(3, _half, break_when_any_done=False)
    env.close()
    return r


def scenario_serial_env_rollout_break():
    env = SerialEnv(2, _counter_factory)
    r = env.rollout(5, _half)
    env.close()
    return r


def scenario_serial_env_step_and_maybe_reset():
    env = SerialEnv(2, _counter_factory)
    td = env.reset()
    outs = []
    for _ in range(3):
        _half(td)
        data, td = env.step_and_maybe_reset(td)
        outs.append([data["next", "observation"], td["observation"]])
    env.close()
    return outs


def scenario_serial_env_partial_reset():
    env = SerialEnv(2, _counter_factory)
    td = env.reset()
    _half(td)
    td = step_mdp(env.step(td))
    out = env.reset(TensorDict({"_reset": torch.tensor([[True], [False]])}, [2]))
    env.close()
    return [td["observation"], out]


def scenario_serial_env_kwargs_list():
    env = SerialEnv(2, Counter, create_env_kwargs=[{"max_count": 1}, {"max_count": 3}])
    r = env.rollout(3, _half, break_when_any_done=False)
    env.close()
    return r["next", "done"]


def scenario_serial_env_errors():
    return [A(lambda: SerialEnv(0, _counter_factory)), A(lambda: SerialEnv(2, Counter, create_env_kwargs=[{}])),
            A(lambda: SerialEnv(2, [_counter_factory]))]


def scenario_serial_env_set_seed():
    env = SerialEnv(2, _counter_factory)
    out = [env.set_seed(3)]
    env.close()
    return out


def scenario_serial_env_closed():
    env = SerialEnv(2, _counter_factory)
    env.reset()
    env.close()
    return [env.is_closed, A(lambda: env.close()), A(lambda: env.close(raise_if_closed=False))]


def scenario_serial_env_rand_step_and_fake():
    env = SerialEnv(2, _counter_factory)
    out = [S(env.rand_step(env.reset())), env.fake_tensordict()]
    env.close()
    return out


def scenario_serial_gym_pendulum():
    env = SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
    env.set_seed(0)
    r = env.rollout(3, _pendulum_policy)
    env.close()
    return r


def scenario_parallel_env_rollout():
    env = ParallelEnv(2, _counter_factory)
    r = env.rollout(3, _half, break_when_any_done=False)
    info = [env.batch_size, _keys(env), env.full_done_spec]
    env.close()
    return [r, info]


def scenario_parallel_env_step_and_maybe_reset():
    env = ParallelEnv(2, _counter_factory)
    td = env.reset()
    outs = []
    for _ in range(3):
        _half(td)
        data, td = env.step_and_maybe_reset(td)
        outs.append([data["next", "observation"], td["observation"]])
    env.close()
    return outs


def scenario_parallel_env_errors():
    return [A(lambda: ParallelEnv(0, _counter_factory)), A(lambda: ParallelEnv(2, Counter, create_env_kwargs=[{}]))]


# ---------------------------------------------------------------------------------------------- step_mdp
def _step_data():
    return TensorDict({
        "observation": torch.zeros(2), "action": torch.ones(1), "hidden": torch.full((1,), 3.0),
        "next": {"observation": torch.ones(2), "reward": torch.ones(1), "done": torch.tensor([True]),
                 "terminated": torch.tensor([True]), "truncated": torch.tensor([False]), "extra": torch.ones(1)},
    }, [])


STEP_MDP_OPTIONS = {
    "default": {},
    "keep_other_false": {"keep_other": False},
    "exclude_reward_false": {"exclude_reward": False},
    "exclude_done_true": {"exclude_done": True},
    "exclude_action_false": {"exclude_action": False},
    "everything_kept": {"exclude_reward": False, "exclude_done": False, "exclude_action": False},
    "everything_excluded": {"keep_other": False, "exclude_reward": True, "exclude_done": True, "exclude_action": True},
    "reward_keys_other": {"reward_keys": "extra"},
    "reward_keys_list": {"reward_keys": ["reward", "extra"]},
    "done_keys_done_only": {"done_keys": "done", "exclude_done": True},
    "done_keys_list": {"done_keys": ["done", "terminated"], "exclude_done": True},
    "action_keys_other": {"action_keys": "hidden"},
    "action_keys_missing": {"action_keys": "missing", "exclude_action": True},
    "keep_other_false_keep_action": {"keep_other": False, "exclude_action": False},
}


def _make_step_mdp(name, kwargs):
    def scenario():
        return A(lambda: step_mdp(_step_data(), **kwargs))

    return scenario


for _name, _kwargs in STEP_MDP_OPTIONS.items():
    globals()[f"scenario_step_mdp_{_name}"] = _make_step_mdp(_name, _kwargs)


def scenario_step_mdp_next_tensordict_argument():
    td = _step_data()
    nxt = td["next"].clone()
    nxt["observation"] = torch.full((2,), 9.0)
    return [A(lambda: step_mdp(td, nxt)), A(lambda: step_mdp(td, next_tensordict=nxt, keep_other=False))]


def scenario_step_mdp_nested_keys():
    td = TensorDict({
        "agents": {"obs": torch.zeros(2, 3), "action": torch.ones(2, 1)},
        "next": {"agents": {"obs": torch.ones(2, 3), "reward": torch.ones(2, 1), "done": torch.zeros(2, 1, dtype=torch.bool)}},
    }, [])
    return [A(lambda: step_mdp(td)), A(lambda: step_mdp(td, reward_keys=("agents", "reward"), action_keys=("agents", "action"))),
            A(lambda: step_mdp(td, done_keys=("agents", "done"), exclude_done=True, reward_keys=("agents", "reward")))]


def scenario_step_mdp_batched():
    td = _step_data().expand(3).clone()
    return step_mdp(td)


def scenario_step_mdp_without_next():
    return A(lambda: step_mdp(TensorDict({"observation": torch.zeros(2)}, [])))


def scenario_step_mdp_lazy_stack():
    td = torch.stack([_step_data(), _step_data()], 0)
    out = step_mdp(td)
    return [type(out).__name__, out]


def scenario_env_step_mdp_method():
    env = Counter()
    td = env.reset()
    _half(td)
    td = env.step(td)
    return A(lambda: env.step_mdp(td))


def scenario_step_mdp_does_not_modify_input():
    td = _step_data()
    step_mdp(td)
    return td


# ---------------------------------------------------------------------------------------------- terminated_or_truncated
def _done_data(done=(False, True, False), terminated=(False, True, False), truncated=None):
    d = {"done": torch.tensor(done).unsqueeze(-1), "terminated": torch.tensor(terminated).unsqueeze(-1)}
    if truncated is not None:
        d["truncated"] = torch.tensor(truncated).unsqueeze(-1)
    return TensorDict(d, [3])


def scenario_terminated_or_truncated_basic():
    td = _done_data()
    return [bool(terminated_or_truncated(td)), td]


def scenario_terminated_or_truncated_none_done():
    td = _done_data((False, False, False), (False, False, False))
    return [bool(terminated_or_truncated(td)), td]


def scenario_terminated_or_truncated_write_full_false():
    td = _done_data((False, False, False), (False, False, False))
    return [bool(terminated_or_truncated(td, write_full_false=True)), td]


def scenario_terminated_or_truncated_key():
    td = _done_data(truncated=(True, False, False))
    return [bool(terminated_or_truncated(td, key="_done")), td]


def scenario_terminated_or_truncated_key_none():
    td = _done_data()
    return [bool(terminated_or_truncated(td, key=None)), td]


def scenario_terminated_or_truncated_with_spec():
    spec = Composite(done=Categorical(2, (3, 1), dtype=torch.bool), terminated=Categorical(2, (3, 1), dtype=torch.bool),
                     shape=(3,))
    td = _done_data()
    return [A(lambda: bool(terminated_or_truncated(td, full_done_spec=spec))), td]


def scenario_terminated_or_truncated_nested():
    td = TensorDict({"agents": {"done": torch.tensor([[True], [False]]), "terminated": torch.tensor([[True], [False]])},
                     "done": torch.tensor([False])}, [])
    return [A(lambda: bool(terminated_or_truncated(td))), td]


def scenario_terminated_or_truncated_no_done():
    td = TensorDict({"observation": torch.zeros(3)}, [])
    return [A(lambda: bool(terminated_or_truncated(td))), td]


# ---------------------------------------------------------------------------------------------- make_composite_from_td
def _td_for_spec():
    return TensorDict({
        "obs": torch.zeros(2, 3), "action": torch.zeros(2, 1, dtype=torch.int64), "flag": torch.zeros(2, dtype=torch.bool),
        "scalar": torch.zeros(2), "nested": {"x": torch.zeros(2, 4, dtype=torch.float64)},
    }, [2])


def scenario_make_composite_from_td_default():
    return make_composite_from_td(_td_for_spec())


def scenario_make_composite_from_td_no_unsqueeze():
    return make_composite_from_td(_td_for_spec(), unsqueeze_null_shapes=False)


def scenario_make_composite_from_td_dynamic():
    return A(lambda: make_composite_from_td(_td_for_spec(), dynamic_shape=True))


def scenario_make_composite_from_td_dynamic_feature_dims():
    td = TensorDict({"obs": torch.zeros(2, 3), "img": torch.zeros(2, 4, 5), "n": {"x": torch.zeros(2, 1)}}, [2])
    return A(lambda: make_composite_from_td(td, dynamic_shape=True))


def scenario_make_composite_from_td_unbatched():
    spec = make_composite_from_td(TensorDict({"a": torch.ones(3), "b": torch.tensor(1)}, []))
    return [spec, spec.is_in(TensorDict({"a": torch.ones(3), "b": torch.tensor(1)}, []))]


def scenario_make_composite_from_td_lazy_stack():
    td = torch.stack([TensorDict({"a": torch.zeros(3)}, []), TensorDict({"a": torch.zeros(4)}, [])], 0)
    return A(lambda: make_composite_from_td(td))


# ---------------------------------------------------------------------------------------------- check_env_specs
class BadObsEnv(Counter):
    def _step(self, td):
        out = super()._step(td)
        out["observation"] = out["observation"].double()
        return out


class ExtraKeyEnv(Counter):
    def _step(self, td):
        out = super()._step(td)
        out["undeclared"] = torch.zeros(1)
        return out


class WrongShapeEnv(Counter):
    def _reset(self, td):
        super()._reset(td)
        return TensorDict({"observation": torch.zeros(2)}, [])


def scenario_check_env_specs_ok():
    return [A(lambda: check_env_specs(Counter())), A(lambda: check_env_specs(Counter(batch_size=(2,)))),
            A(lambda: check_env_specs(Counter(truncate=True)))]


def scenario_check_env_specs_options():
    env = Counter()
    return [A(lambda: check_env_specs(env, return_contiguous=False)), A(lambda: check_env_specs(env, check_dtype=False)),
            A(lambda: check_env_specs(env, seed=0)), A(lambda: check_env_specs(env, break_when_any_done=True)),
            A(lambda: check_env_specs(env, break_when_any_done="both")),
            A(lambda: check_env_specs(env, tensordict=env.reset()))]


def scenario_check_env_specs_bad_dtype():
    return [A(lambda: check_env_specs(BadObsEnv())), A(lambda: check_env_specs(BadObsEnv(), check_dtype=False))]


def scenario_check_env_specs_extra_key():
    return A(lambda: check_env_specs(ExtraKeyEnv()))


def scenario_check_env_specs_wrong_shape():
    return A(lambda: check_env_specs(WrongShapeEnv()))


def scenario_check_env_specs_method():
    return A(lambda: Counter().check_env_specs())


def scenario_check_env_specs_pendulum():
    return A(lambda: check_env_specs(PendulumEnv()))


def scenario_check_env_specs_serial():
    env = SerialEnv(2, _counter_factory)
    out = A(lambda: check_env_specs(env))
    env.close()
    return out


# ---------------------------------------------------------------------------------------------- misc EnvBase
def scenario_env_to_device():
    env = Counter()
    return [A(lambda: env.to("cpu") is env), env.device, A(lambda: Counter(device="cpu").device)]


def scenario_env_device_outputs():
    env = Counter(device="cpu")
    td = env.reset()
    return [td.device, env.rollout(2, _half).device, env.full_observation_spec.device]


def scenario_env_all_actions_and_cardinality():
    env = Counter()
    env.action_spec = Categorical(3, (1,))
    return [A(lambda: env.all_actions()), A(lambda: env.cardinality())]


def scenario_env_add_truncated_keys():
    env = Counter()
    out = A(lambda: env.add_truncated_keys())
    return [type(out).__name__, env.done_keys, env.full_done_spec]


def scenario_env_forward():
    env = Counter()
    return A(lambda: env(env.reset()))


def scenario_env_repr():
    return A(lambda: repr(Counter()))


def scenario_env_spec_lock():
    env = Counter()
    return [A(lambda: env.is_spec_locked), A(lambda: env.set_spec_lock_(False) is env), A(lambda: env.is_spec_locked),
            A(lambda: env.output_spec.is_locked)]


def scenario_env_close():
    env = Counter()
    return [A(lambda: env.close()), A(lambda: env.is_closed)]


def scenario_env_without_specs():
    class Empty(EnvBase):
        def _reset(self, td):
            return TensorDict({}, [])

        def _step(self, td):
            return TensorDict({}, [])

        def _set_seed(self, seed):
            return seed

    env = Empty()
    return [_keys(env), A(lambda: env.reset()), A(lambda: env.full_action_spec), A(lambda: env.rollout(2))]


def scenario_env_reset_returning_wrong_batch():
    class Wrong(Counter):
        def _reset(self, td):
            return TensorDict({"observation": torch.zeros(3, 1)}, [3])

    return A(lambda: Wrong().reset())


def scenario_env_step_returning_done_only():
    class DoneOnly(Counter):
        def _step(self, td):
            out = super()._step(td)
            del out["terminated"]
            return out

    env = DoneOnly(max_count=1)
    return A(lambda: env.rollout(2, _half))


def scenario_env_reset_with_done():
    class ResetDone(Counter):
        def _reset(self, td):
            out = super()._reset(td)
            out["done"] = torch.ones(1, dtype=torch.bool)
            return out

    return [A(lambda: ResetDone().reset()), A(lambda: ResetDone(allow_done_after_reset=True).reset())]


class StateEnv(Counter):
    """``hidden`` is a state entry only (not observed): the env writes its next value into ``"next"``."""

    def __init__(self):
        super().__init__(max_count=10)
        self.state_spec = Composite(hidden=Unbounded(2))

    def _reset(self, td):
        out = super()._reset(td)
        out["hidden"] = torch.zeros(2)
        return out

    def _step(self, td):
        out = super()._step(td)
        out["hidden"] = td["hidden"] + 1
        return out


def scenario_state_only_entry_not_carried():
    env = StateEnv()
    td = env.reset()
    _half(td)
    out = env.step(td)
    return [env.step_mdp(out), env.rollout(3, _half)]


def scenario_undeclared_next_entries_not_carried():
    class Extra(Counter):
        def _step(self, td):
            out = super()._step(td)
            out["undeclared"] = torch.ones(2)
            return out

    env = Extra(max_count=10)
    td = env.reset()
    _half(td)
    td["policy_out"] = torch.ones(3)
    out = env.step(td)
    return [env.step_mdp(out), env.step_and_maybe_reset(td)[1], env.rollout(3, _half)]
