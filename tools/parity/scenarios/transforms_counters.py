"""Transforms that keep per-episode state: StepCounter, RewardSum, InitTracker, TrajCounter, FrameSkipTransform,
NoopResetEnv, AutoResetTransform/AutoResetEnv (deterministic envs from ``../_transform_envs.py``)."""
import torch
from tensordict import TensorDict

import parity
from _transform_envs import CountEnv, const_policy, ramp_policy, report, specs
from torchrl.data import Composite, Unbounded
from torchrl.envs.utils import step_mdp
from torchrl.envs import (
    AutoResetEnv,
    AutoResetTransform,
    Compose,
    EnvBase,
    FrameSkipTransform,
    GymEnv,
    InitTracker,
    NoopResetEnv,
    RewardSum,
    SerialEnv,
    StepCounter,
    TrajCounter,
    TransformedEnv,
)


def _keys(t):
    return {"in_keys": t.in_keys, "out_keys": t.out_keys, "in_keys_inv": t.in_keys_inv, "out_keys_inv": t.out_keys_inv}


def _partial_reset(transform, steps=3, mask=(True, False)):
    """Steps a [2]-batched env, then resets the rows in ``mask`` only."""
    env = TransformedEnv(CountEnv(max_count=10, batch_size=[2]), transform)
    td = env.reset()
    policy = ramp_policy()
    for _ in range(steps):
        td = env.step(policy(td))
        td = step_mdp(td)
    before = td.clone()
    td["_reset"] = torch.tensor(mask).reshape(2, 1)
    after = env.reset(td)
    return {"before": before, "after": after}


# -- StepCounter -----------------------------------------------------------------------------------------------
def scenario_step_counter_defaults():
    t = StepCounter()
    return {"max_steps": t.max_steps, "truncated_key": t.truncated_key, "step_count_key": t.step_count_key,
            "update_done": t.update_done, **_keys(t)}


def scenario_step_counter_count_only():
    return report(TransformedEnv(CountEnv(), StepCounter()), steps=6)


def scenario_step_counter_truncates():
    return report(TransformedEnv(CountEnv(max_count=10), StepCounter(3)), steps=7)


def scenario_step_counter_truncates_break():
    env = TransformedEnv(CountEnv(max_count=10), StepCounter(3))
    return env.rollout(7, ramp_policy(), break_when_any_done=True)


def scenario_step_counter_env_done_first():
    return report(TransformedEnv(CountEnv(max_count=2), StepCounter(3)), steps=6)


def scenario_step_counter_no_update_done():
    return report(TransformedEnv(CountEnv(max_count=10), StepCounter(2, update_done=False)), steps=5)


def scenario_step_counter_custom_keys():
    return report(TransformedEnv(CountEnv(max_count=10), StepCounter(2, truncated_key="trunc", step_count_key="n")), steps=4)


def scenario_step_counter_truncated_key_none():
    return parity.attempt(lambda: report(TransformedEnv(CountEnv(max_count=10), StepCounter(2, truncated_key=None)), steps=4))


def scenario_step_counter_bad_max_steps():
    return {"zero": parity.attempt(lambda: StepCounter(0).max_steps), "negative": parity.attempt(lambda: StepCounter(-1)),
            "float": parity.attempt(lambda: StepCounter(2.5).max_steps)}


def scenario_step_counter_attributes_in_env():
    t = StepCounter(4)
    env = TransformedEnv(CountEnv(), t)
    return {"step_count_keys": t.step_count_keys, "truncated_keys": t.truncated_keys, "done_keys": t.done_keys,
            "reset_keys": t.reset_keys, "full_done_spec": t.full_done_spec, "env_done_keys": env.done_keys,
            "env_reset_keys": env.reset_keys}


def scenario_step_counter_partial_reset():
    return _partial_reset(StepCounter(10))


def scenario_step_counter_batched_rollout():
    return report(TransformedEnv(CountEnv(max_count=2, batch_size=[3]), StepCounter(3)), steps=7)


def scenario_step_counter_call_directly():
    t = StepCounter(3)
    td = TensorDict(done=torch.zeros(1, dtype=torch.bool), step_count=torch.tensor([2]))
    return {"call": parity.attempt(lambda: t(td.clone()))}


def scenario_step_counter_serial_outside():
    env = TransformedEnv(SerialEnv(2, lambda: CountEnv(max_count=10)), StepCounter(3))
    try:
        return env.rollout(5, ramp_policy(), break_when_any_done=False).select("step_count", ("next", "step_count"), ("next", "truncated"), ("next", "done"))
    finally:
        env.close()


def _gym(name, transform, action, steps=6, **kw):
    env = TransformedEnv(GymEnv(name, **kw), transform)
    env.set_seed(0)
    data = env.rollout(steps, lambda td: td.set("action", action.clone()), break_when_any_done=False)
    out = {"structure": parity.structure(data), "specs": parity.structure(specs(env))}
    for key in [("next", "step_count"), ("next", "truncated"), "step_count", ("next", "episode_reward"), "is_init"]:
        if key in data.keys(True):
            out["/".join(key) if isinstance(key, tuple) else key] = data[key]
    return out


def scenario_step_counter_gym_pendulum():
    return _gym("Pendulum-v1", Compose(StepCounter(4), InitTracker()), torch.tensor([0.5]), steps=7)


def scenario_step_counter_gym_cartpole():
    return _gym("CartPole-v1", Compose(StepCounter(3), InitTracker()), torch.tensor([0, 1]), steps=5)


# -- RewardSum ---------------------------------------------------------------------------------------------------
def scenario_reward_sum_defaults():
    t = RewardSum()
    return {**_keys(t), "reset_keys": parity.attempt(lambda: t.reset_keys)}


def scenario_reward_sum_rollout():
    return report(TransformedEnv(CountEnv(), RewardSum()), steps=7)


def scenario_reward_sum_reward_spec():
    return report(TransformedEnv(CountEnv(), RewardSum(reward_spec=True)), steps=3)


def scenario_reward_sum_custom_keys():
    return report(TransformedEnv(CountEnv(), RewardSum(in_keys=["reward"], out_keys=["total"])), steps=3)


def scenario_reward_sum_with_step_counter():
    return report(TransformedEnv(CountEnv(max_count=10), Compose(StepCounter(2), RewardSum())), steps=5)


def scenario_reward_sum_two_keys():
    env = TransformedEnv(CountEnv(), Compose(RewardSum(in_keys=["reward"], out_keys=["r1"]),
                                             RewardSum(in_keys=["r1"], out_keys=["r2"])))
    return parity.attempt(lambda: report(env, steps=3))


def scenario_reward_sum_mismatched_keys():
    return {"construct": parity.attempt(lambda: _keys(RewardSum(in_keys=["reward"], out_keys=["a", "b"]))),
            "env": parity.attempt(lambda: TransformedEnv(CountEnv(), RewardSum(in_keys=["reward"], out_keys=["a", "b"])).reset())}


def scenario_reward_sum_missing_key():
    env = TransformedEnv(CountEnv(), RewardSum(in_keys=["nope"]))
    return {"specs": parity.attempt(lambda: specs(env)), "rollout": parity.attempt(lambda: env.rollout(2, ramp_policy()))}


def scenario_reward_sum_partial_reset():
    return _partial_reset(RewardSum())


def scenario_reward_sum_batched_rollout():
    return report(TransformedEnv(CountEnv(max_count=2, batch_size=[3]), RewardSum()), steps=5)


def scenario_reward_sum_call_without_time_dim():
    t = RewardSum()
    td = TensorDict(reward=torch.ones(1), episode_reward=torch.full((1,), 2.0), done=torch.zeros(1, dtype=torch.bool))
    return parity.attempt(lambda: t(td.clone()))


def scenario_reward_sum_call_on_trajectory():
    # offline: the running return of a stored trajectory (deliberate: TorchRL sums along the wrong dim)
    td = TensorDict(reward=torch.arange(1.0, 6.0).unsqueeze(-1), done=torch.tensor([0, 0, 1, 0, 0], dtype=torch.bool).unsqueeze(-1),
                    batch_size=[5], names=["time"])
    return parity.attempt(lambda: RewardSum()(td)["episode_reward"])


def scenario_reward_sum_reset_keys_given():
    env = TransformedEnv(CountEnv(max_count=3), RewardSum(reset_keys=["_reset"]))
    return report(env, steps=5)


# -- InitTracker -----------------------------------------------------------------------------------------------
def scenario_init_tracker_defaults():
    t = InitTracker()
    out = {"init_key": t.init_key, "in_keys": t.in_keys, "out_keys": parity.attempt(lambda: t.out_keys)}
    env = TransformedEnv(CountEnv(), t)
    out["in_env"] = _keys(t)
    return out


def scenario_init_tracker_rollout():
    return report(TransformedEnv(CountEnv(max_count=3), InitTracker()), steps=6)


def scenario_init_tracker_custom_key():
    return report(TransformedEnv(CountEnv(max_count=3), InitTracker(init_key="first")), steps=4)


def scenario_init_tracker_nested_key():
    return parity.attempt(lambda: InitTracker(init_key=("a", "b")).init_key)


def scenario_init_tracker_partial_reset():
    return _partial_reset(InitTracker())


def scenario_init_tracker_batched_rollout():
    return report(TransformedEnv(CountEnv(max_count=2, batch_size=[3]), InitTracker()), steps=5)


# -- TrajCounter -------------------------------------------------------------------------------------------------
def scenario_traj_counter_defaults():
    t = TrajCounter()
    return {"repeats": t.repeats, **_keys(t)}


def scenario_traj_counter_rollout():
    env = TransformedEnv(CountEnv(max_count=10), Compose(StepCounter(3), TrajCounter()))
    return report(env, steps=8)


def scenario_traj_counter_custom_key():
    env = TransformedEnv(CountEnv(max_count=2), TrajCounter(out_key="tc"))
    return report(env, steps=5)


def scenario_traj_counter_batched():
    env = TransformedEnv(CountEnv(max_count=2, batch_size=[2]), TrajCounter())
    return report(env, steps=6)


def scenario_traj_counter_serial():
    env = TransformedEnv(SerialEnv(2, lambda: CountEnv(max_count=2)), TrajCounter())
    try:
        return env.rollout(6, ramp_policy(), break_when_any_done=False).select("traj_count", ("next", "traj_count"))
    finally:
        env.close()


# -- FrameSkipTransform ------------------------------------------------------------------------------------------------
def scenario_frame_skip_defaults():
    t = FrameSkipTransform()
    return {"frame_skip": t.frame_skip, **_keys(t)}


def scenario_frame_skip_rollout():
    return report(TransformedEnv(CountEnv(max_count=20), FrameSkipTransform(3)), steps=4)


def scenario_frame_skip_done_inside():
    return report(TransformedEnv(CountEnv(max_count=5), FrameSkipTransform(3)), steps=4)


def scenario_frame_skip_with_step_counter():
    return report(TransformedEnv(CountEnv(max_count=20), Compose(FrameSkipTransform(2), StepCounter(), RewardSum())), steps=4)


def scenario_frame_skip_bad():
    return {"zero": parity.attempt(lambda: FrameSkipTransform(0).frame_skip),
            "negative": parity.attempt(lambda: FrameSkipTransform(-2).frame_skip)}


# -- NoopResetEnv ------------------------------------------------------------------------------------------------------
def scenario_noop_reset_defaults():
    t = NoopResetEnv()
    return {"noops": t.noops, "random": t.random, **_keys(t)}


def scenario_noop_reset_fixed():
    env = TransformedEnv(CountEnv(max_count=10), NoopResetEnv(noops=3, random=False))
    return report(env, steps=3, policy=const_policy(0.0))


def scenario_noop_reset_random():
    env = TransformedEnv(CountEnv(max_count=10), NoopResetEnv(noops=3, random=True))
    td = env.reset()
    return {"structure": parity.structure(td), "count_in_range": bool(1 <= int(td["count"]) <= 3)}


def scenario_noop_reset_done_during_noops():
    env = TransformedEnv(CountEnv(max_count=2), NoopResetEnv(noops=4, random=False))
    return parity.attempt(lambda: env.reset())


def scenario_noop_reset_with_step_counter():
    env = TransformedEnv(CountEnv(max_count=10), Compose(NoopResetEnv(noops=2, random=False), StepCounter()))
    return report(env, steps=2, policy=const_policy(0.0))


# -- AutoResetTransform -----------------------------------------------------------------------------------------------------
class Countdown(EnvBase):
    """Resets itself: done every 3 steps; the done step returns the next episode's first observation."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.observation_spec = Composite(obs=Unbounded((1,)), ind=Unbounded((1,), dtype=torch.int64))
        self.action_spec = Unbounded((1,))
        self.reward_spec = Unbounded((1,))
        self.t = 0
        self.episodes = 0

    def _reset(self, td=None, **kwargs):
        self.t = 0
        return TensorDict(obs=torch.zeros(1), ind=torch.zeros(1, dtype=torch.int64), done=torch.zeros(1, dtype=torch.bool),
                          terminated=torch.zeros(1, dtype=torch.bool))

    def _step(self, td):
        self.t += 1
        done = self.t == 3
        if done:
            self.t = 0
            self.episodes += 1
        return TensorDict(obs=torch.full((1,), float(self.t) + 10 * self.episodes), ind=torch.full((1,), self.t),
                          reward=td["action"].clone(), done=torch.tensor([done]), terminated=torch.tensor([done]))

    def _set_seed(self, seed):
        return seed


def scenario_auto_reset_defaults():
    t = AutoResetTransform()
    return {"fill_float": parity.attempt(lambda: t.fill_float), "fill_int": t.fill_int, "fill_bool": t.fill_bool,
            **_keys(t)}


def scenario_auto_reset_env_rollout():
    env = AutoResetEnv(Countdown(), AutoResetTransform())
    return report(env, steps=7, policy=const_policy(1.0))


def scenario_auto_reset_no_replace():
    env = AutoResetEnv(Countdown(), AutoResetTransform(replace=False))
    return env.rollout(7, const_policy(1.0), break_when_any_done=False)


def scenario_auto_reset_fill_values():
    env = AutoResetEnv(Countdown(), AutoResetTransform(fill_float=-5.0, fill_int=-7))
    return env.rollout(4, const_policy(1.0), break_when_any_done=False)


def scenario_auto_reset_kwarg():
    env = Countdown(auto_reset=True)
    return {"type": type(env).__name__, "transform": type(env.transform).__name__,
            "rollout": env.rollout(7, const_policy(1.0), break_when_any_done=False)}


def scenario_auto_reset_with_step_counter():
    env = AutoResetEnv(Countdown(), Compose(AutoResetTransform(), StepCounter(), RewardSum()))
    return env.rollout(7, const_policy(1.0), break_when_any_done=False)


def scenario_auto_reset_in_plain_transformed_env():
    return parity.attempt(lambda: TransformedEnv(Countdown(), AutoResetTransform()).rollout(5, const_policy(1.0), break_when_any_done=False))
