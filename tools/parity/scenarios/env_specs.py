"""EnvBase spec views and done-entry completion."""
import torch
from tensordict import TensorDict

import parity
from torchrl.data import Categorical, Composite, Unbounded
from torchrl.envs import EnvBase


def _flag():
    return Categorical(2, (1,), dtype=torch.bool)


class Custom(EnvBase):
    def __init__(self, action=None, reward=None, done=None, out=None):
        super().__init__()
        self.observation_spec = Composite(o=Unbounded(1))
        self.action_spec = action if action is not None else Unbounded(1)
        self.reward_spec = reward if reward is not None else Unbounded(1)
        if done is not None:
            self.done_spec = done
        self.out = out or {}

    def _reset(self, td):
        return TensorDict({"o": torch.zeros(1)}, [])

    def _step(self, td):
        return TensorDict({"o": torch.zeros(1), "reward": torch.zeros(1), **self.out}, [])

    def _set_seed(self, seed):
        return seed


def _views(env):
    return [type(env.action_spec).__name__, type(env.reward_spec).__name__, type(env.done_spec).__name__,
            env.action_keys, env.reward_keys, sorted(map(str, env.done_keys)), env.reset_keys]


def scenario_views_default():
    return _views(Custom())


class NoRewardSpec(Custom):
    def __init__(self):
        EnvBase.__init__(self)
        self.observation_spec = Composite(o=Unbounded(1))
        self.action_spec = Unbounded(1)
        self.out = {}


def scenario_reward_spec_when_none_is_set():
    env = NoRewardSpec()
    td = env.reset()
    td["action"] = torch.zeros(1)
    return [env.reward_keys, env.step(td)["next", "reward"]]


def scenario_views_action_named_otherwise():
    return _views(Custom(action=Composite(act=Unbounded(2))))


def scenario_views_action_root_composite():
    return _views(Custom(action=Composite(action=Unbounded(2))))


def scenario_views_nested_action_and_reward():
    return _views(Custom(action=Composite(agents=Composite(action=Unbounded((2, 1)), shape=(2,))),
                         reward=Composite(agents=Composite(reward=Unbounded((2, 1)), shape=(2,)))))


def scenario_views_reward_named_otherwise():
    return _views(Custom(reward=Composite(r=Unbounded(1))))


def scenario_done_spec_terminated_only():
    return _views(Custom(done=Composite(terminated=_flag())))


def scenario_done_spec_custom_name():
    return _views(Custom(done=Composite(d=_flag())))


def scenario_done_spec_truncated_only():
    return _views(Custom(done=Composite(truncated=_flag())))


def scenario_done_spec_nested_custom():
    return _views(Custom(done=Composite(g=Composite(d=_flag()))))


def _next(done, out):
    env = Custom(done=done, out=out)
    td = env.reset()
    td["action"] = torch.zeros(1)
    return parity.attempt(lambda: env.step(td)["next"].exclude("o", "reward"))


T, F = torch.tensor([True]), torch.tensor([False])


def _full():
    return Composite(done=_flag(), terminated=_flag(), truncated=_flag())


def scenario_step_fills_missing_done_entries():
    return _next(_full(), {})


def scenario_step_terminated_only():
    return _next(_full(), {"terminated": T})


def scenario_step_done_only():
    return _next(_full(), {"done": T})


def scenario_step_done_and_truncated_raises():
    return _next(_full(), {"done": T, "truncated": T})


def scenario_step_terminated_false_truncated_true():
    return _next(_full(), {"terminated": F, "truncated": T})


def scenario_step_custom_name_filled():
    return _next(Composite(done=_flag(), terminated=_flag(), d=_flag()), {"done": T})


def scenario_step_truncated_only_true():
    return _next(_full(), {"truncated": T})
